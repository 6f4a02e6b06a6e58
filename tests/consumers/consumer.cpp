// The consumer check of every consumer project (add_subdirectory, fetchcontent, find_package):
// the umbrella header compiles and links from outside the tree, a config is built (from JSON when
// the JSON adapter is linked) and an epoch and a packed epoch are planned. Built twice where
// vbucket::compiled exists: header-only, and with the library (the plans and the JSON loading then
// come from it as extern instantiations).
#include <vbucket/vbucket.hpp>
#if VBUCKET_CONSUMER_JSON
#include <vbucket/json/bucket_config.hpp>
#endif
#if VBUCKET_CONSUMER_RUN
#include <vbucket/run.hpp>
#endif

#include <cstdint>  // std::int32_t
#include <cstdio>   // std::printf, std::puts
#include <vector>   // std::vector

int main() {
  try {
#if VBUCKET_CONSUMER_RUN
    // vbucket::run: a run spec read and checked by the compiled field table.
    const vbucket::run_spec spec = vbucket::run_spec::from_map({{"world", "8"}, {"rank", "3"}});
    if (spec.world != 8 || spec.rank != 3 || spec.to_map().at("world") != "8") {
      std::puts("consumer: the run spec did not read back");
      return 1;
    }
    std::puts("consumer: vbucket::run linked (run spec read)");
#endif
#if VBUCKET_CONSUMER_JSON
    const auto config = vbucket::json::parse_bucket_config(
        R"({"360p": {"1": [1.0, 8], "51": [1.0, 2]}})", vbucket::opensora_v2_tables{}, "inline");
#else
    const std::vector<vbucket::bucket_spec> specs = {{"360p", 1, 1.0, {}, 8},
                                                     {"360p", 51, 1.0, {}, 2}};
    const vbucket::bucket_config config(specs, vbucket::opensora_v2_tables{});
#endif
    std::vector<vbucket::bucket_id> ids(100);
    for (std::size_t i = 0; i < ids.size(); ++i)
      ids[i] = static_cast<vbucket::bucket_id>(i % config.num_buckets());
    const auto plan = vbucket::make_epoch_plan(ids, config, {.seed = 1});
    vbucket::packed_options packed;
    packed.token_budget = vbucket::largest_batch_cost(config);
    const auto packing = vbucket::make_packed_plan(ids, config, packed);
    if (plan.num_batches() == 0 || packing.num_batches() == 0) {
      std::puts("consumer: empty plan");
      return 1;
    }
    std::printf("consumer ok: %llu batches, %llu packed\n",
                static_cast<unsigned long long>(plan.num_batches()),
                static_cast<unsigned long long>(packing.num_batches()));
    throw vbucket::error("consumer ok");
  } catch (const vbucket::error& e) {
    std::puts(e.what());
    return 0;
  }
  return 1;
}
