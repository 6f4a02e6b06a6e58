#pragma once
/// The flags that bound a file's time, network included, shared by `scan` and `decode`: the run
/// spec's media fields `timeout` (the deadline of one file), `io_timeout` (a stalled connect or
/// read) and `retries` (further attempts after a failure that may pass) as --timeout,
/// --io-timeout and --retries, and --run RUN.json (a run file, whose media fields apply; the
/// flags override them). Their help, defaults and checks are the field table's; they fill
/// `ffmpeg::limits` (`ffmpeg::limits_of`).

#include <deque>        // std::deque (stable text for the flags)
#include <string>       // std::string
#include <string_view>  // std::string_view

#include "../cli.hpp"
#include "vbucket/ffmpeg/limits.hpp"
#include "vbucket/json/run_spec.hpp"  // apply_run_spec
#include "vbucket/run/run_spec.hpp"

namespace vbucket::cli {

/// The flag of run spec field `name`, with the table's value name and help (and default).
inline flag media_field_flag(std::string_view name) {
  static std::deque<std::string> text;  // the flags view it; built once, at start-up
  const run_field& f = *run_spec::find(name);
  const std::string& dashed =
      text.emplace_back(field_naming{field_naming::style::flag, {}}(name).substr(2));
  const std::string& help = text.emplace_back(field_help(f));
  return {dashed, f.value_name, false, help};
}

inline const flag timeout_flag = media_field_flag("timeout");
inline const flag io_timeout_flag = media_field_flag("io_timeout");
inline const flag retries_flag = media_field_flag("retries");
inline constexpr flag media_run_flag{
    "run", "RUN.json", false,
    "a run file (as plan --run reads): its timeout, io_timeout and retries apply (the flags "
    "given here override them); its other fields are the plan's"};

/// The limits of --run's media fields, then --timeout, --io-timeout and --retries over them,
/// on `base`; a bad flag value is a usage error naming the flag, a bad run file bad data naming
/// the file and the key.
inline ffmpeg::limits read_network_flags(const args& a, ffmpeg::limits base = {}) {
  run_spec spec;
  if (a.has("run")) json::apply_run_spec(spec, a.value("run"));
  const field_naming as_flag{field_naming::style::flag, {}};
  for (const std::string_view name : {"timeout", "io_timeout", "retries"}) {
    const std::string dashed = as_flag(name).substr(2);
    if (!a.has(dashed)) continue;
    try {
      spec.set(name, a.value(dashed), as_flag);
    } catch (const vbucket::error& e) {
      throw usage_error(e.what());
    }
  }
  return ffmpeg::limits_of(spec, base);
}

}  // namespace vbucket::cli
