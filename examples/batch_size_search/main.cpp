/// Batch-size search and rescaling with a synthetic training step.
///
/// A stand-in for a real training step ("probe") on an 80 GB GPU: memory and step time
/// follow known costs (plus a term the model does not have, and measurement noise), and a
/// step that needs more than 80 GiB runs out of memory. The example
///   1. finds each bucket's largest batch of Open-Sora's 360p example config by Open-Sora
///      v1.2's binary search and by vbucket's model-assisted search, counting probes;
///   2. rescales the config from the probes to an 80 GB and a 24 GB GPU (5 % margin), as
///      `vbucket fit-bs` would from a PROFILE.csv, and prints both tables and configs.
///
///     example_batch_size_search [CONFIG.json]

#include <cmath>    // std::log
#include <cstdint>  // std::int64_t, std::uint64_t
#include <cstdio>   // std::printf
#include <string>   // std::string
#include <vector>   // std::vector

#include <nlohmann/json.hpp>

#include "vbucket/bucket/batch_size.hpp"
#include "vbucket/eigen/cost_model.hpp"
#include "vbucket/json/bucket_config.hpp"

#ifndef VBUCKET_EXAMPLE_CONFIG
#define VBUCKET_EXAMPLE_CONFIG "tests/data/config_360p_example.json"
#endif

namespace {

/// The stand-in for a training step of a ~1B-parameter video DiT with activation
/// checkpointing on an 80 GB GPU.
class synthetic_training_step {
 public:
  vbucket::eigen::probe_result operator()(const vbucket::batch_bucket& bucket,
                                          std::int64_t batch_size) {
    ++probes_;
    const auto t = static_cast<double>(bucket.tokens);
    const auto b = static_cast<double>(batch_size);
    // Weights, optimizer state and gradients; activations per token; attention per token²;
    // and a little per-sample overhead that grows with log(tokens), outside the model.
    const double memory = 3.0 + b * (1.0e-4 * t + 1.0e-10 * t * t + 2.0e-4 * std::log(t));
    if (memory > capacity_gib_) return vbucket::eigen::probe_result::out_of_memory();
    const double seconds = 0.30 + b * (4.0e-6 * t + 2.0e-11 * t * t);
    return {false, memory + 0.02 * noise(), seconds * (1.0 + 2.0e-4 * noise())};
  }
  [[nodiscard]] std::int64_t probes() const noexcept { return probes_; }

 private:
  double noise() {  // uniform in [-1, 1), splitmix64
    std::uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    z ^= z >> 31;
    return static_cast<double>(z >> 11) * 0x1.0p-52 - 1.0;
  }

  double capacity_gib_ = 80.0;
  std::uint64_t state_ = 2024;
  std::int64_t probes_ = 0;
};

void print_fit(const char* name, const vbucket::eigen::cost_fit& f, const char* unit) {
  std::printf(
      "  %-6s %.4g + bs·(%.4g·tokens + %.4g·tokens²) %s; rms residual %.3g %s (max %.3g, "
      "%zu points)\n",
      name, f.model.fixed, f.model.linear, f.model.quadratic, unit, f.rms_residual, unit,
      f.max_abs_residual, f.points);
}

/// The config with every enabled bucket's batch size replaced, keys in their order.
std::string rescaled_json(nlohmann::ordered_json config,
                          const std::vector<vbucket::batch_bucket>& buckets,
                          const vbucket::eigen::rescale_result& r) {
  for (auto& [res, frames] : config.items())
    for (auto& [key, entry] : frames.items()) {
      const auto i = vbucket::find_batch_bucket(buckets, res, std::stoll(key));
      if (i < buckets.size() && buckets[i].enabled()) entry[1] = r.buckets[i].new_batch_size;
    }
  return config.dump();
}

}  // namespace

int main(int argc, char** argv) {
  const std::string path = argc > 1 ? argv[1] : VBUCKET_EXAMPLE_CONFIG;
  try {
    // Open-Sora's 360p example uses v1.2's frame counts and tables.
    const auto text = vbucket::json::read_file(path);
    const auto config_json = vbucket::json::parse_json(text, path);
    const vbucket::bucket_config config(vbucket::json::bucket_specs(config_json, path),
                                        vbucket::opensora_v12_tables{});
    const auto buckets = vbucket::batch_buckets(config);  // VAE 4× in time, 16× in space

    // 1. Search on the 80 GB GPU: binary (Open-Sora v1.2) vs model-assisted.
    vbucket::eigen::search_options options;
    options.budget = {80.0, 0.0};
    options.max_batch = 1024;
    options.mode = vbucket::eigen::search_mode::binary;
    synthetic_training_step binary_gpu;
    const auto binary = vbucket::eigen::search_batch_sizes(buckets, binary_gpu, options);
    options.mode = vbucket::eigen::search_mode::model_assisted;
    synthetic_training_step assisted_gpu;
    const auto assisted = vbucket::eigen::search_batch_sizes(buckets, assisted_gpu, options);

    std::printf("Search for the largest batch per bucket on an 80 GB GPU (%s)\n\n", path.c_str());
    std::printf("  %-9s %7s %7s %7s %7s %7s\n", "bucket", "tokens", "config", "binary", "probes",
                "model");
    for (std::size_t i = 0; i < buckets.size(); ++i)
      std::printf("  %-9s %7lld %7lld %7lld %7lld %7lld  (%lld probe%s)\n",
                  buckets[i].name().c_str(), static_cast<long long>(buckets[i].tokens),
                  static_cast<long long>(buckets[i].batch_size),
                  static_cast<long long>(binary.buckets[i].batch_size),
                  static_cast<long long>(binary.buckets[i].probes),
                  static_cast<long long>(assisted.buckets[i].batch_size),
                  static_cast<long long>(assisted.buckets[i].probes),
                  assisted.buckets[i].probes == 1 ? "" : "s");
    std::printf("\n  probes: binary %lld, model-assisted %lld (%.0f %%)\n",
                static_cast<long long>(binary.probes), static_cast<long long>(assisted.probes),
                100.0 * static_cast<double>(assisted.probes) / static_cast<double>(binary.probes));
    if (assisted.memory_fit) print_fit("memory", *assisted.memory_fit, "GiB");
    if (assisted.time_fit) print_fit("time", *assisted.time_fit, "s");

    // 2. Rescale the config from the model-assisted search's probes.
    for (const double gib : {80.0, 24.0}) {
      vbucket::eigen::rescale_options rescale;
      rescale.budget = {gib, 0.05};
      const auto r = vbucket::eigen::rescale_batch_sizes(buckets, assisted.profile, rescale);
      std::printf("\nRescaled to a %.0f GB GPU (limit %.1f GiB)\n\n", gib, r.limit_gib);
      std::printf("  %-9s %7s %7s %7s %11s %8s\n", "bucket", "tokens", "old bs", "new bs",
                  "memory GiB", "step s");
      for (const auto& b : r.buckets)
        std::printf(
            "  %-9s %7lld %7lld %7lld %11.2f %8.3f\n", b.bucket.name().c_str(),
            static_cast<long long>(b.bucket.tokens), static_cast<long long>(b.bucket.batch_size),
            static_cast<long long>(b.new_batch_size), b.predicted_memory_gib, b.predicted_seconds);
      std::printf("\n  %s\n", rescaled_json(config_json, buckets, r).c_str());
    }
  } catch (const vbucket::error& e) {
    std::fprintf(stderr, "example_batch_size_search: %s\n", e.what());
    return 1;
  }
  return 0;
}
