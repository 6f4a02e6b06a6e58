/// Mistake: a decoder whose decode() returns bool (the loader needs the error message of a clip
/// that fails, to name it and to substitute another); the loader must refuse it at compile time.
#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "vbucket/load/loader.hpp"

struct my_decoder {
#ifdef VBUCKET_COMPILE_FAIL
  bool decode(const vbucket::clip_task&, std::span<std::uint8_t>) { return true; }
#else
  std::optional<std::string> decode(const vbucket::clip_task&, std::span<std::uint8_t>) {
    return std::nullopt;
  }
#endif
};

void make(const vbucket::epoch_schedule& schedule, my_decoder& decoder,
          vbucket::staging_ring<vbucket::host_backend>& ring) {
  vbucket::loader loader(schedule, 0, decoder, ring);
  (void)loader.steps();
}
