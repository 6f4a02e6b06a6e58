// vbucket::compiled: the cold non-template functions of the core (defined here only, see
// vbucket/detail/compiled.hpp) and the common instantiations: the epoch and packed planners
// with the default cost.
#define VBUCKET_COMPILED_SOURCE 1
#define VBUCKET_COMPILED_CORE_SOURCE 1
#include "vbucket/vbucket.hpp"

namespace vbucket {
template epoch_plan make_epoch_plan<latent_tokens_cost>(const bucket_groups&, const bucket_config&,
                                                        const plan_options&,
                                                        const latent_tokens_cost&);
template epoch_plan make_epoch_plan<latent_tokens_cost>(std::span<const bucket_id>,
                                                        const bucket_config&, const plan_options&,
                                                        const latent_tokens_cost&);
template packed_plan make_packed_plan<latent_tokens_cost>(const bucket_groups&,
                                                          const bucket_config&,
                                                          const packed_options&,
                                                          const latent_tokens_cost&);
template packed_plan make_packed_plan<latent_tokens_cost>(std::span<const bucket_id>,
                                                          const bucket_config&,
                                                          const packed_options&,
                                                          const latent_tokens_cost&);
}  // namespace vbucket
