// libtorch_trainer: the loader yielding torch::Tensor. A four-line tensor_traits specialisation
// wraps each batch's staging slot with torch::from_blob (no copy). The batch is already the
// model's input, float32 CTHW in [-1, 1]: the loader's workers normalise each clip as it is
// decoded, so the training thread does no conversion; the stand-in step checks shape and range.
//
//   libtorch_trainer DIR [--world W] [--rank R]
#include <torch/torch.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

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

// The customization point: a vbucket::tensor_view as a torch::Tensor aliasing its memory.
template <>
struct vbucket::tensor_traits<torch::Tensor> {
  static torch::Tensor wrap(const vbucket::tensor_view& v) {
    const auto dtype = v.type == vbucket::element_type::u8    ? torch::kUInt8
                       : v.type == vbucket::element_type::f32 ? torch::kFloat32
                                                              : torch::kBFloat16;
    const auto device =
        v.device == vbucket::device_type::cpu
            ? torch::Device(torch::kCPU)
            : torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(v.device_index));
    return torch::from_blob(v.data, {v.shape[0], v.shape[1], v.shape[2], v.shape[3], v.shape[4]},
                            torch::TensorOptions().dtype(dtype).device(device));
  }
};
static_assert(vbucket::tensor_adapter<torch::Tensor>);

int main(int argc, char** argv) try {
  if (argc < 2) throw vbucket::error("usage: libtorch_trainer DIR [--world W] [--rank R]");
  std::uint32_t world = 1, rank = 0;
  for (int i = 2; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    if (k == "--world")
      world = static_cast<std::uint32_t>(std::stoul(argv[i + 1]));
    else if (k == "--rank")
      rank = static_cast<std::uint32_t>(std::stoul(argv[i + 1]));
    else
      throw vbucket::error("unknown argument " + k);
  }
  vbucket::ffmpeg::quiet_logs();
  const auto files = vbucket::ffmpeg::list_media(argv[1]);
  const auto probed = vbucket::ffmpeg::probe_all(files, 0);
  std::vector<clip> clips;  // the trainer's own records
  for (std::size_t i = 0; i < files.size(); ++i)
    if (probed[i])
      clips.push_back(
          {probed[i]->num_frames, probed[i]->height, probed[i]->width, probed[i]->fps, files[i]});
  const vbucket::bucket_config config(
      std::vector<vbucket::bucket_spec>{{"256px", 1, 1.0, {}, 4}, {"256px", 5, 1.0, {}, 2}},
      vbucket::opensora_v2_tables{});
  vbucket::batch_sampler sampler(clips, config, vbucket::opensora_v2_rule{},
                                 {.seed = 3, .world = world, .rank = rank});
  sampler.set_epoch(0);

  const vbucket::ffmpeg::file_decoder decoder(clips);
  vbucket::host_backend backend;
  vbucket::staging_ring<vbucket::host_backend> ring(backend, {.slots = 4});
  // float32 B×C×T×H×W, (x / 255 − 0.5) / 0.5 per channel: Open-Sora's input, made on the workers.
  const vbucket::loader_options options{.workers = 2,
                                        .layout = vbucket::clip_layout::cthw,
                                        .element = vbucket::element_type::f32,
                                        .normalize = {{0.5f, 0.5f, 0.5f}, {0.5f, 0.5f, 0.5f}}};
  ring.reserve_for(config, 3 * vbucket::element_size(options.element));
  vbucket::loader<const vbucket::ffmpeg::file_decoder, vbucket::host_backend, torch::Tensor> loader(
      sampler, decoder, ring, options);
  std::int64_t samples = 0;
  for (const auto& batch : loader) {
    const torch::Tensor& x = batch.tensor;  // aliases the staging slot
    const std::vector<std::int64_t> want = {config.batch_size(batch.info.bucket), 3,
                                            batch.info.frames, batch.info.height, batch.info.width};
    if (x.sizes().vec() != want || x.scalar_type() != torch::kFloat32)
      throw vbucket::error("a batch has the wrong shape");
    if (x.min().item<float>() < -1.0f || x.max().item<float>() > 1.0f)
      throw vbucket::error("a batch is out of range");
    samples += x.size(0);
  }
  std::printf("rank %u of %u: %lld samples\n%s", rank, world, static_cast<long long>(samples),
              vbucket::format_loader_stats(loader.stats()).c_str());
  return samples > 0 ? 0 : 1;
} catch (const std::exception& e) {
  std::fprintf(stderr, "libtorch_trainer: error: %s\n", e.what());
  return 1;
}
