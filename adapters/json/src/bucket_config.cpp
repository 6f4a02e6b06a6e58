// vbucket::compiled: the JSON adapter's parsing and loading, compiled once (with nlohmann_json).
#define VBUCKET_COMPILED_SOURCE 1
#include "vbucket/json/bucket_config.hpp"

namespace vbucket::json {
template bucket_config parse_bucket_config<opensora_v2_tables>(std::string_view,
                                                               const opensora_v2_tables&,
                                                               const std::string&);
template bucket_config parse_bucket_config<opensora_v12_tables>(std::string_view,
                                                                const opensora_v12_tables&,
                                                                const std::string&);
template bucket_config load_bucket_config<opensora_v2_tables>(const std::string&,
                                                              const opensora_v2_tables&);
template bucket_config load_bucket_config<opensora_v12_tables>(const std::string&,
                                                               const opensora_v12_tables&);
}  // namespace vbucket::json
