#pragma once
/// What the parts of `vbucket._vbucket` share (vbucket_ext.cpp, media_bindings.cpp,
/// memory_bindings.cpp): the config, metadata and sampler objects Python holds, and the small
/// conversions (fingerprints as "0x…" text, vectors as numpy arrays). In a named namespace, so
/// every translation unit sees one type (nanobind finds a bound class by its type).

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <cstddef>      // std::size_t
#include <cstdint>      // std::uint64_t, std::uint32_t
#include <memory>       // std::shared_ptr, std::unique_ptr
#include <mutex>        // std::mutex: one sampler call at a time while the GIL is released
#include <string>       // std::string
#include <string_view>  // std::string_view
#include <utility>      // std::move
#include <vector>       // std::vector

#include "vbucket/base/error.hpp"
#include "vbucket/base/rule_kind.hpp"
#include "vbucket/bucket/bucket_config.hpp"
#include "vbucket/bucket/csv.hpp"
#include "vbucket/plan/plan_state.hpp"
#include "vbucket/run/run_spec.hpp"
#include "vbucket/sample/any_sampler.hpp"
#include "vbucket/sample/opensora_sampler.hpp"

namespace vbucket_py {

namespace nb = nanobind;

/// The length of the UTF-8 sequence at `s[i]` (1 to 4), or 0 when the bytes there are not one
/// (a stray continuation byte, an overlong form, a surrogate, past U+10FFFF, cut short).
inline std::size_t utf8_length_at(std::string_view s, std::size_t i) noexcept {
  const auto c = static_cast<unsigned char>(s[i]);
  if (c < 0x80) return 1;
  std::size_t n = 0;
  std::uint32_t cp = 0;
  if (c >= 0xC2 && c <= 0xDF) {
    n = 1;
    cp = c & 0x1Fu;
  } else if (c >= 0xE0 && c <= 0xEF) {
    n = 2;
    cp = c & 0x0Fu;
  } else if (c >= 0xF0 && c <= 0xF4) {
    n = 3;
    cp = c & 0x07u;
  } else {
    return 0;
  }
  if (s.size() - i <= n) return 0;
  for (std::size_t k = 1; k <= n; ++k) {
    const auto d = static_cast<unsigned char>(s[i + k]);
    if ((d & 0xC0u) != 0x80u) return 0;
    cp = (cp << 6) | (d & 0x3Fu);
  }
  if ((n == 2 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) ||
      (n == 3 && (cp < 0x10000 || cp > 0x10FFFF)))
    return 0;
  return n + 1;
}

/// Whether `s` is UTF-8 text.
inline bool is_utf8(std::string_view s) noexcept {
  for (std::size_t i = 0; i < s.size();) {
    const std::size_t n = utf8_length_at(s, i);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

/// `s` as UTF-8 text: each byte that is not part of a UTF-8 sequence written as \xNN, so that a
/// message quoting a file's bytes reaches Python readable (a str must be UTF-8).
inline std::string readable_text(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size();) {
    const std::size_t n = utf8_length_at(s, i);
    if (n == 0) {
      constexpr char digits[] = "0123456789abcdef";
      const auto c = static_cast<unsigned char>(s[i]);
      out += "\\x";
      out += digits[c >> 4];
      out += digits[c & 15];
      ++i;
    } else {
      out.append(s.substr(i, n));
      i += n;
    }
  }
  return out;
}

using vbucket::bucket_config;
using vbucket::meta_table;
using vbucket::plan_state;
using vbucket::rule_kind;
using vbucket::run_spec;

/// A fingerprint as Python shows it: "0x" and the library's 16 hex digits.
inline std::string hex64(std::uint64_t v) { return "0x" + plan_state::hex(v); }

inline std::uint64_t parse_hex64(std::string_view s) { return plan_state::parse_hex(s); }

/// A validated config for one rule's resolution tables (Open-Sora 2.0's or v1.2's).
struct py_config {
  std::shared_ptr<const bucket_config> config;
  rule_kind rule = rule_kind::opensora_v2;
};

/// Metadata owned by the module (shared with the samplers made from it, so a sampler outlives
/// the Python objects it came from).
struct py_meta {
  std::shared_ptr<const meta_table> table;
};

/// A metadata CSV that a sampler reads in chunks each time it plans an epoch
/// (`vbucket::streamed_meta_csv`): the table is never held, only the epoch's bucket ids.
struct py_streamed_meta {
  std::shared_ptr<const vbucket::streamed_meta_csv> csv;
};

/// A vector as a numpy array that owns it (no copy).
template <class T>
nb::ndarray<nb::numpy, T, nb::ndim<1>> to_numpy(std::vector<T> v) {
  auto* owner = new std::vector<T>(std::move(v));
  nb::capsule free(owner, [](void* p) noexcept { delete static_cast<std::vector<T>*>(p); });
  return nb::ndarray<nb::numpy, T, nb::ndim<1>>(owner->data(), {owner->size()}, free);
}

/// A sampler of one rank (the library's `opensora_sampler` over `make_any_sampler` of the run
/// spec), and the lock that keeps its calls one at a time.
class py_sampler {
 public:
  py_sampler(const py_meta& meta, const py_config& cfg, const run_spec& spec)
      : config_(cfg), meta_(meta.table), spec_(spec), os_(make(meta.table, cfg, spec)) {}
  /// Over a streamed CSV: no table is held (`meta()` is null).
  py_sampler(const py_streamed_meta& meta, const py_config& cfg, const run_spec& spec)
      : config_(cfg), spec_(spec), os_(make(meta.csv, cfg, spec)) {}

  /// `f(any_sampler&)` with the GIL released and the lock held.
  template <class F>
  auto locked(F&& f) const {
    nb::gil_scoped_release release;
    std::lock_guard lock(mutex_);
    return f(os_->sampler());
  }
  /// `f(opensora_sampler&)` (Open-Sora's lifecycle) with the GIL released and the lock held.
  template <class F>
  auto locked_os(F&& f) const {
    nb::gil_scoped_release release;
    std::lock_guard lock(mutex_);
    return f(*os_);
  }

  const py_config& config() const noexcept { return config_; }
  /// The table, or null for a sampler over a streamed CSV.
  const std::shared_ptr<const meta_table>& meta() const noexcept { return meta_; }
  const run_spec& spec() const noexcept { return spec_; }

  /// One step done (a batch handed out), without releasing the GIL: cheap, once per batch.
  void advance_one() {
    std::lock_guard lock(mutex_);
    os_->sampler().advance(1);
  }
  /// An iteration ran to its end (`opensora_sampler::finish`).
  void finish() {
    std::lock_guard lock(mutex_);
    os_->finish();
  }

 private:
  template <class Samples>
  static std::unique_ptr<vbucket::opensora_sampler> make(std::shared_ptr<const Samples> samples,
                                                         const py_config& cfg,
                                                         const run_spec& spec) {
    if (spec.rule != cfg.rule)
      throw vbucket::error("the config was loaded for rule " +
                           std::string(vbucket::rule_name(cfg.rule)) + ", the sampler's rule is " +
                           std::string(vbucket::rule_name(spec.rule)));
    return std::make_unique<vbucket::opensora_sampler>(
        vbucket::make_any_sampler(std::move(samples), cfg.config, spec));
  }

  py_config config_;
  std::shared_ptr<const meta_table> meta_;
  run_spec spec_;
  std::unique_ptr<vbucket::opensora_sampler> os_;
  mutable std::mutex mutex_;
};

using sampler_ref = vbucket::any_sampler&;
using os_ref = vbucket::opensora_sampler&;

}  // namespace vbucket_py
