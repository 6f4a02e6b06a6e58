#pragma once
/// Loads a bucket config from JSON that mirrors Open-Sora's Python dict:
/// `{"360p": {"1": [0.2, 141], "102": [[0.15, 0.33], 4], "408": [0.0, null]}}`.
/// Every error names the file and the key and says what is wrong, in one line.

#include <cstdint>       // std::int64_t
#include <exception>     // std::exception (read failures)
#include <filesystem>    // std::filesystem::is_directory (read_file)
#include <fstream>       // std::ifstream
#include <iterator>      // std::istreambuf_iterator
#include <optional>      // std::optional
#include <set>           // std::set (duplicate keys)
#include <string>        // std::string
#include <string_view>   // std::string_view
#include <system_error>  // std::error_code (read_file)
#include <vector>        // std::vector

#include "vbucket/base/error.hpp"
#include "vbucket/bucket/bucket_config.hpp"
#include "vbucket/detail/compiled.hpp"

// With vbucket::compiled (which then defines VBUCKET_COMPILED_JSON) the functions that parse
// JSON are compiled in the library and declared here, so this header needs only nlohmann's
// declarations: include <nlohmann/json.hpp> yourself to work on the `ordered_json` values.
#if VBUCKET_EXTERN_TEMPLATES && defined(VBUCKET_COMPILED_JSON)
#define VBUCKET_JSON_EXTERN 1
#include <nlohmann/json_fwd.hpp>
#else
#define VBUCKET_JSON_EXTERN 0
#include <nlohmann/json.hpp>
#endif

// `inline` in header-only use; nothing in the library's source, which defines them once.
#ifdef VBUCKET_COMPILED_SOURCE
#define VBUCKET_JSON_FUNCTION
#else
#define VBUCKET_JSON_FUNCTION inline
#endif

namespace vbucket::json {

/// The deepest nesting `parse_json` accepts. vbucket's files nest 4 levels; the limit keeps
/// recursive code (nlohmann's `dump`, used in messages) from overflowing the stack on a hostile
/// file such as a megabyte of '['.
inline constexpr int max_json_depth = 64;

#if VBUCKET_JSON_EXTERN
nlohmann::ordered_json parse_json(std::string_view text, const std::string& where);
std::string read_file(const std::string& path);
std::vector<bucket_spec> bucket_specs(const nlohmann::ordered_json& j, const std::string& where);
namespace detail {
std::vector<bucket_spec> bucket_specs_of_text(std::string_view text, const std::string& where);
}  // namespace detail
#else

/// Parses JSON text, rejecting duplicate keys (which JSON parsers silently merge) and nesting
/// deeper than `max_json_depth`. `where` names the source in messages (usually the file name).
VBUCKET_JSON_FUNCTION nlohmann::ordered_json parse_json(std::string_view text,
                                                        const std::string& where) {
  std::vector<std::set<std::string>> keys;
  std::string duplicate;
  auto on_event = [&](int depth, nlohmann::ordered_json::parse_event_t ev,
                      nlohmann::ordered_json& parsed) {
    using ev_t = nlohmann::ordered_json::parse_event_t;
    if ((ev == ev_t::object_start || ev == ev_t::array_start) && depth >= max_json_depth)
      throw error(where + ": malformed JSON: nested deeper than " + std::to_string(max_json_depth) +
                  " levels");
    if (ev == ev_t::object_start) {
      keys.emplace_back();
    } else if (ev == ev_t::object_end) {
      if (!keys.empty()) keys.pop_back();
    } else if (ev == ev_t::key && !keys.empty() && duplicate.empty()) {
      auto k = parsed.get<std::string>();
      if (!keys.back().insert(k).second) duplicate = k;
    }
    return true;
  };
  nlohmann::ordered_json j;
  try {
    j = nlohmann::ordered_json::parse(text.begin(), text.end(), on_event);
  } catch (const nlohmann::ordered_json::exception& e) {
    // nlohmann's message: "[json.exception.parse_error.101] parse error at line L, column C: ..."
    const std::string msg = e.what();
    const auto p = msg.find("] ");
    throw error(where + ": malformed JSON: " + (p == std::string::npos ? msg : msg.substr(p + 2)));
  }
  if (!duplicate.empty()) throw error(where + ": duplicate key \"" + duplicate + "\"");
  return j;
}

/// Reads a whole file; throws naming it when it cannot be read.
VBUCKET_JSON_FUNCTION std::string read_file(const std::string& path) {
  // An ifstream opens a directory, and its first read fails with libstdc++'s own words
  // ("basic_filebuf::underflow error reading the file: Is a directory"): say it plainly.
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw error(path + ": is a directory, not a file (give the file's path)");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw error(path + ": cannot open file for reading");
  std::string text;
  try {
    text.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  } catch (const std::exception& e) {
    // libstdc++'s filebuf throws std::ios_base::failure from a failed read(2), e.g. EISDIR.
    throw error(path + ": read error: " + e.what());
  }
  if (in.bad()) throw error(path + ": read error");
  return text;
}

namespace detail {
/// A JSON value as it appears in a message: compact, and cut short so that a huge value cannot
/// make a huge message.
VBUCKET_JSON_FUNCTION std::string excerpt(const nlohmann::ordered_json& v) {
  constexpr std::size_t max_chars = 60;
  std::string text = v.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
  if (text.size() > max_chars) text = text.substr(0, max_chars - 3) + "...";
  return text;
}

VBUCKET_JSON_FUNCTION double probability(const nlohmann::ordered_json& v, const std::string& where,
                                         const char* what) {
  if (!v.is_number())
    throw error(where + ": " + what + " must be a number, got " + detail::excerpt(v));
  return v.get<double>();
}
}  // namespace detail

/// The specs of a config object. `where` prefixes every message.
VBUCKET_JSON_FUNCTION std::vector<bucket_spec> bucket_specs(const nlohmann::ordered_json& j,
                                                            const std::string& where) {
  if (!j.is_object())
    throw error(where + ": the bucket config must be a JSON object of resolutions");
  std::vector<bucket_spec> specs;
  for (const auto& [res, frames] : j.items()) {
    const std::string rwhere = where + ": \"" + res + "\"";
    if (!frames.is_object())
      throw error(rwhere + ": must be an object of frames keys, got " + detail::excerpt(frames));
    if (frames.empty()) throw error(rwhere + ": has no frames keys");
    for (const auto& [fkey, entry] : frames.items()) {
      const std::string w = rwhere + " -> \"" + fkey + "\"";
      std::int64_t nframes = 0;
      bool ok = !fkey.empty() && fkey.size() <= 10;
      for (char c : fkey) ok = ok && c >= '0' && c <= '9';
      if (ok) nframes = std::stoll(fkey);
      if (!ok || nframes < 1 || nframes > bucket_config::max_frames)
        throw error(w + ": frames key must be a positive integer");
      if (!entry.is_array() || entry.size() != 2)
        throw error(
            w +
            ": must be [probability, batch_size] or [[p_resolution, p_frames], batch_size], got " +
            detail::excerpt(entry));
      bucket_spec s;
      s.resolution = res;
      s.frames = nframes;
      const auto& p = entry[0];
      if (p.is_array()) {
        if (p.size() != 2)
          throw error(w + ": a probability pair must have 2 numbers, got " + detail::excerpt(p));
        s.p_resolution = detail::probability(p[0], w, "p_resolution");
        s.p_frames = detail::probability(p[1], w, "p_frames");
      } else {
        s.p_resolution = detail::probability(p, w, "probability");
      }
      const auto& bs = entry[1];
      if (bs.is_null()) {
        s.batch_size = std::nullopt;
      } else if (bs.is_number_unsigned()) {
        if (bs.get<std::uint64_t>() > static_cast<std::uint64_t>(bucket_config::max_batch))
          throw error(w + ": batch size " + detail::excerpt(bs) + " is too large");
        s.batch_size = bs.get<std::int64_t>();
      } else if (bs.is_number_integer()) {
        s.batch_size = bs.get<std::int64_t>();  // negative: the validator names it
      } else {
        throw error(w + ": batch size must be a positive integer or null, got " +
                    detail::excerpt(bs));
      }
      specs.push_back(std::move(s));
    }
  }
  return specs;
}

namespace detail {
/// The specs of a config in JSON text (`parse_json`, then `bucket_specs`).
VBUCKET_JSON_FUNCTION std::vector<bucket_spec> bucket_specs_of_text(std::string_view text,
                                                                    const std::string& where) {
  return bucket_specs(parse_json(text, where), where);
}
}  // namespace detail
#endif  // VBUCKET_JSON_EXTERN

/// Builds a validated config from JSON text; messages start with `where`.
template <resolution_source Tables>
bucket_config parse_bucket_config(std::string_view text, const Tables& tables,
                                  const std::string& where) {
  const auto specs = detail::bucket_specs_of_text(text, where);
  try {
    return bucket_config(specs, tables);
  } catch (const error& e) {
    throw error(where + ": " + e.what());
  }
}

/// Loads and validates a config file.
template <resolution_source Tables>
bucket_config load_bucket_config(const std::string& path, const Tables& tables) {
  return parse_bucket_config(read_file(path), tables, path);
}

}  // namespace vbucket::json

#if VBUCKET_JSON_EXTERN
namespace vbucket::json {
// Compiled once in the vbucket::compiled library (adapters/json/src/bucket_config.cpp).
extern template bucket_config parse_bucket_config<opensora_v2_tables>(std::string_view,
                                                                      const opensora_v2_tables&,
                                                                      const std::string&);
extern template bucket_config parse_bucket_config<opensora_v12_tables>(std::string_view,
                                                                       const opensora_v12_tables&,
                                                                       const std::string&);
extern template bucket_config load_bucket_config<opensora_v2_tables>(const std::string&,
                                                                     const opensora_v2_tables&);
extern template bucket_config load_bucket_config<opensora_v12_tables>(const std::string&,
                                                                      const opensora_v12_tables&);
}  // namespace vbucket::json
#endif
