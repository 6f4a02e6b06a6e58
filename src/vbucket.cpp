// vbucket::compiled: the cold non-template functions of the core (defined here only, see
// vbucket/detail/compiled.hpp) and the common instantiations: the epoch and packed planners
// with the default cost (over bucket groups, bucket ids and compact ids), the built-in rules
// over the built-in sources on a meta_table and on blocks of a user's records (assign_range),
// assign_epoch of both rules.
#define VBUCKET_COMPILED_SOURCE 1
#define VBUCKET_COMPILED_CORE_SOURCE 1
#include "vbucket/vbucket.hpp"

namespace vbucket {
template struct detail::schedule_data<epoch_plan>;
template struct detail::schedule_data<packed_plan>;
template epoch_plan make_epoch_plan<latent_tokens_cost>(const bucket_groups&, const bucket_config&,
                                                        const plan_options&,
                                                        const latent_tokens_cost&);
template epoch_plan make_epoch_plan<latent_tokens_cost>(std::span<const bucket_id>,
                                                        const bucket_config&, const plan_options&,
                                                        const latent_tokens_cost&);
template packed_plan make_packed_plan<latent_tokens_cost>(const bucket_groups&,
                                                          const bucket_config&, const plan_options&,
                                                          const latent_tokens_cost&);
template epoch_plan make_epoch_plan<latent_tokens_cost>(std::span<const compact_bucket_id>,
                                                        const bucket_config&, const plan_options&,
                                                        const latent_tokens_cost&);
template epoch_plan make_epoch_plan<latent_tokens_cost>(const bucket_groups&, const bucket_config&,
                                                        const plan_options&,
                                                        const latent_tokens_cost&,
                                                        std::span<const double>);
template epoch_plan make_epoch_plan<latent_tokens_cost>(std::span<const bucket_id>,
                                                        const bucket_config&, const plan_options&,
                                                        const latent_tokens_cost&,
                                                        std::span<const double>);
template epoch_plan make_epoch_plan<latent_tokens_cost>(std::span<const compact_bucket_id>,
                                                        const bucket_config&, const plan_options&,
                                                        const latent_tokens_cost&,
                                                        std::span<const double>);
template packed_plan make_packed_plan<latent_tokens_cost>(std::span<const compact_bucket_id>,
                                                          const bucket_config&, const plan_options&,
                                                          const latent_tokens_cost&);
template packed_plan make_packed_plan<latent_tokens_cost>(std::span<const bucket_id>,
                                                          const bucket_config&, const plan_options&,
                                                          const latent_tokens_cost&);
template void assign_into<opensora_v2_rule, fast_source>(std::span<bucket_id>, const bucket_config&,
                                                         const meta_table&, const opensora_v2_rule&,
                                                         const fast_source&, unsigned);
template std::vector<bucket_id> assign_all<opensora_v2_rule, fast_source>(
    const bucket_config&, const meta_table&, const opensora_v2_rule&, const fast_source&, unsigned);
template void assign_into<opensora_v2_rule, numpy_source>(std::span<bucket_id>,
                                                          const bucket_config&, const meta_table&,
                                                          const opensora_v2_rule&,
                                                          const numpy_source&, unsigned);
template std::vector<bucket_id> assign_all<opensora_v2_rule, numpy_source>(const bucket_config&,
                                                                           const meta_table&,
                                                                           const opensora_v2_rule&,
                                                                           const numpy_source&,
                                                                           unsigned);
template void assign_into<opensora_v12_rule, fast_source>(std::span<bucket_id>,
                                                          const bucket_config&, const meta_table&,
                                                          const opensora_v12_rule&,
                                                          const fast_source&, unsigned);
template std::vector<bucket_id> assign_all<opensora_v12_rule, fast_source>(const bucket_config&,
                                                                           const meta_table&,
                                                                           const opensora_v12_rule&,
                                                                           const fast_source&,
                                                                           unsigned);
template void assign_into<opensora_v12_rule, numpy_source>(std::span<bucket_id>,
                                                           const bucket_config&, const meta_table&,
                                                           const opensora_v12_rule&,
                                                           const numpy_source&, unsigned);
template std::vector<bucket_id> assign_all<opensora_v12_rule, numpy_source>(
    const bucket_config&, const meta_table&, const opensora_v12_rule&, const numpy_source&,
    unsigned);
template void assign_into<compiled_v2_rule, fast_source>(std::span<bucket_id>, const bucket_config&,
                                                         const meta_table&, const compiled_v2_rule&,
                                                         const fast_source&, unsigned);
template std::vector<bucket_id> assign_all<compiled_v2_rule, fast_source>(
    const bucket_config&, const meta_table&, const compiled_v2_rule&, const fast_source&, unsigned);
template void assign_rows_into<opensora_v2_rule, fast_source>(
    std::span<bucket_id>, std::span<const std::uint32_t>, const bucket_config&, const meta_table&,
    const opensora_v2_rule&, const fast_source&, unsigned);
template void assign_rows_into<opensora_v12_rule, fast_source>(
    std::span<bucket_id>, std::span<const std::uint32_t>, const bucket_config&, const meta_table&,
    const opensora_v12_rule&, const fast_source&, unsigned);
template void assign_rows_into<compiled_v2_rule, fast_source>(
    std::span<bucket_id>, std::span<const std::uint32_t>, const bucket_config&, const meta_table&,
    const compiled_v2_rule&, const fast_source&, unsigned);
template std::vector<bucket_id> assign_epoch<opensora_v2_rule>(const bucket_config&,
                                                               const meta_table&,
                                                               const opensora_v2_rule&, rng_mode,
                                                               const big_seed&, std::uint64_t,
                                                               unsigned);
template std::vector<bucket_id> assign_epoch<opensora_v12_rule>(const bucket_config&,
                                                                const meta_table&,
                                                                const opensora_v12_rule&, rng_mode,
                                                                const big_seed&, std::uint64_t,
                                                                unsigned);
// The built-in rules over the built-in sources on a user's records (assign_range).
template void detail::assign_metas<opensora_v2_rule, fast_source>(
    std::span<bucket_id>, const bucket_config&, std::span<const sample_meta>, std::uint64_t,
    const opensora_v2_rule&, const fast_source&);
template void detail::assign_metas<opensora_v2_rule, numpy_source>(
    std::span<bucket_id>, const bucket_config&, std::span<const sample_meta>, std::uint64_t,
    const opensora_v2_rule&, const numpy_source&);
template void detail::assign_metas<opensora_v12_rule, fast_source>(
    std::span<bucket_id>, const bucket_config&, std::span<const sample_meta>, std::uint64_t,
    const opensora_v12_rule&, const fast_source&);
template void detail::assign_metas<opensora_v12_rule, numpy_source>(
    std::span<bucket_id>, const bucket_config&, std::span<const sample_meta>, std::uint64_t,
    const opensora_v12_rule&, const numpy_source&);
template void detail::assign_metas<compiled_v2_rule, fast_source>(
    std::span<bucket_id>, const bucket_config&, std::span<const sample_meta>, std::uint64_t,
    const compiled_v2_rule&, const fast_source&);
#if VBUCKET_AVX2_DISPATCH
// compiled_v2_rule's vector path (its one instantiation; header-only code compiles it where used).
template void compiled_v2_rule::assign_rows_avx2<fast_source>(const bucket_config&,
                                                              const meta_table&, std::size_t,
                                                              std::size_t, std::span<bucket_id>,
                                                              const fast_source&, std::uint64_t,
                                                              const std::uint32_t*) const;
#endif
}  // namespace vbucket
