// eigen_tensor: the loader yielding Eigen tensors. Every batch arrives as an
// Eigen::TensorMap<Eigen::Tensor<uint8_t, 5, RowMajor>> (B×T×H×W×C) over the staging slot, no
// copy; the "training step" here computes each clip's mean intensity with Eigen reductions.
//
//   eigen_tensor DIR
#include <array>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include <vbucket/eigen/tensor.hpp>
#include <vbucket/ffmpeg/ffmpeg.hpp>
#include <vbucket/ffmpeg/file_decoder.hpp>
#include <vbucket/vbucket.hpp>

namespace {
/// A trainer's record: vbucket reads num_frames, height, width, fps and path.
struct clip {
  std::int64_t num_frames, height, width;
  double fps;
  std::string path;
};
}  // namespace

int main(int argc, char** argv) try {
  if (argc != 2) throw vbucket::error("usage: eigen_tensor DIR");
  vbucket::ffmpeg::quiet_logs();
  const auto files = vbucket::ffmpeg::list_media(argv[1]);
  const auto probed = vbucket::ffmpeg::probe_all(files, 0);
  std::vector<clip> clips;  // the trainer's own records
  for (std::size_t i = 0; i < files.size(); ++i)
    if (probed[i])
      clips.push_back(
          {probed[i]->num_frames, probed[i]->height, probed[i]->width, probed[i]->fps, files[i]});
  const vbucket::bucket_config config(
      std::vector<vbucket::bucket_spec>{{"256px", 1, 1.0, {}, 4}, {"256px", 9, 1.0, {}, 2}},
      vbucket::opensora_v2_tables{});
  vbucket::batch_sampler sampler(clips, config, vbucket::opensora_v2_rule{}, {.seed = 7});
  sampler.set_epoch(0);

  const vbucket::ffmpeg::file_decoder decoder(clips);
  vbucket::host_backend backend;
  vbucket::staging_ring<vbucket::host_backend> ring(backend, {.slots = 3});
  vbucket::loader<const vbucket::ffmpeg::file_decoder, vbucket::host_backend,
                  vbucket::eigen::batch_map>
      loader(sampler, decoder, ring);
  int batches = 0;
  for (const auto& b : loader) {
    const vbucket::eigen::batch_map& x = b.tensor;  // B × T × H × W × C
    const Eigen::Tensor<double, 1, Eigen::RowMajor> mean =
        x.cast<double>().mean(Eigen::array<Eigen::Index, 4>{1, 2, 3, 4});
    std::printf("batch %d: bucket %d, %ldx%ldx%ldx%ldx%ld, clip means", batches, b.info.bucket,
                static_cast<long>(x.dimension(0)), static_cast<long>(x.dimension(1)),
                static_cast<long>(x.dimension(2)), static_cast<long>(x.dimension(3)),
                static_cast<long>(x.dimension(4)));
    for (Eigen::Index c = 0; c < mean.dimension(0); ++c) {
      if (!(mean(c) > 0.0 && mean(c) < 255.0)) throw vbucket::error("a clip decoded to nothing");
      std::printf(" %.1f", mean(c));
    }
    std::printf("\n");
    ++batches;
  }
  return batches > 0 ? 0 : 1;
} catch (const std::exception& e) {
  std::fprintf(stderr, "eigen_tensor: error: %s\n", e.what());
  return 1;
}
