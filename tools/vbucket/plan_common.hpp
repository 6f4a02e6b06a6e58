#pragma once
/// What `vbucket plan`, `stats` and `assign` share: their flags are the run spec's fields
/// (`vbucket::run_spec`: a flag is a field's name with '-' for '_', its value name, help and
/// default from the field table), read after an optional run file (`--run RUN.json`, which the
/// flags override), the one sampler the spec defines (`make_sampler`, in run.cpp), and the pad
/// warning (--pad-warn, the CLI's own).

#include <cstddef>           // std::size_t
#include <cstdint>           // std::uint64_t, std::uint32_t
#include <cstdio>            // std::snprintf, std::fputs (the pad warning)
#include <deque>             // std::deque (the generated flags' text)
#include <initializer_list>  // std::initializer_list
#include <memory>            // std::unique_ptr
#include <span>              // std::span
#include <stdexcept>         // std::logic_error
#include <string>            // std::string
#include <string_view>       // std::string_view
#include <vector>            // std::vector

#include "cli.hpp"
#include "vbucket/plan/epoch_plan.hpp"
#include "vbucket/plan/plan_stats.hpp"
#include "vbucket/run/run_spec.hpp"
#include "vbucket/sample/any_sampler.hpp"

namespace vbucket::cli {

/// A command's flags: its own, and run spec fields whose name, value name and help (with the
/// default) come from the field table.
class flag_table {
 public:
  flag_table() = default;
  // A copy's flags would view the original's text; a move keeps the deque's elements in place.
  flag_table(const flag_table&) = delete;
  flag_table& operator=(const flag_table&) = delete;
  flag_table(flag_table&&) = default;
  flag_table& operator=(flag_table&&) = default;

  /// A flag of the command's own.
  flag_table& own(flag f) {
    flags_.push_back(f);
    field_.emplace_back();
    return *this;
  }
  /// The flag of run spec field `name` (`help`: the command's own text instead of the table's).
  flag_table& field(std::string_view name, bool required = false, std::string_view help = {}) {
    const run_field* f = run_spec::find(name);
    if (f == nullptr) throw std::logic_error("flag_table: no run spec field " + std::string(name));
    const std::string& dashed =
        text_.emplace_back(field_naming{field_naming::style::flag, {}}(name).substr(2));
    const std::string& line = text_.emplace_back(help.empty() ? field_help(*f) : std::string(help));
    flags_.push_back({dashed, f->value_name, required, line});
    field_.push_back(f->name);
    return *this;
  }
  /// The flags of the fields that define a sampler beyond config, metadata, world, seed and
  /// epoch, and --pad-warn: the same for `plan` and `stats`.
  flag_table& sampler_fields() {
    field("policy").field("rule").field("rng").field("fps_max").field("frame_interval");
    field("balance").field("balance_group").field("threads");
    own({"pad-warn", "F", false,
         "warn on stderr when pads are more than this fraction of the batch slots, naming the "
         "worst buckets (0.25; 1 = never)"});
    return field("batching")
        .field("token_budget")
        .field("drop_oversized")
        .field("compression")
        .field("patch");
  }
  /// The flags of every plan field of the run spec not added yet, but those in `skip`, in
  /// table order: a field added to the table becomes a flag of the commands that end with this.
  /// Media fields (timeouts, retries) are `scan`'s and `decode`'s; a run file may give them.
  flag_table& other_fields(std::initializer_list<std::string_view> skip = {}) {
    for (const run_field& f : run_spec::fields()) {
      bool present = f.use != field_use::plan;
      for (const std::string_view have : field_) present = present || have == f.name;
      for (const std::string_view s : skip) present = present || s == f.name;
      if (!present) field(f.name);
    }
    return *this;
  }
  /// --run RUN.json.
  flag_table& run_file() {
    return own({"run", "RUN.json", false,
                "a run file: a JSON object of run spec fields ({\"config\": ..., \"seed\": 42, "
                "...}; paths relative to it); flags given here override its fields"});
  }

  [[nodiscard]] std::span<const flag> flags() const noexcept { return flags_; }
  /// The run spec field of flag `i`, or empty for a command's own flag.
  [[nodiscard]] std::string_view field_of(std::size_t i) const noexcept { return field_[i]; }

 private:
  std::deque<std::string> text_;  // stable addresses for the flags' names and help
  std::vector<flag> flags_;
  std::vector<std::string_view> field_;
};

/// What plan, stats and assign read: the run spec and the CLI's pad warning threshold.
struct run_flags {
  run_spec spec;
  double pad_warn = 0.25;
};

/// Reads a command's run: the defaults, then the run file of --run (its errors name the file and
/// the key: bad data), then every field flag given (errors name the flag: bad usage), except
/// those in `skip` (read by the command itself). Checks the required flags the run file does not
/// give, and the combination. Defined in run.cpp.
run_flags read_run_flags(const args& a, const flag_table& t,
                         std::span<const std::string_view> skip = {});

/// The sampler a spec defines over its metadata CSV, streamed (the sampler reads the CSV in
/// chunks when it plans and keeps only the bucket ids, so the metadata table never exists
/// whole: a 100 M-row CSV plans in under 2 GB), at epoch `spec.epoch`. Data errors throw
/// vbucket::error naming the file. Defined in run.cpp: the sampler types are instantiated once.
std::unique_ptr<any_sampler> make_sampler(const run_spec& spec);

/// `s` as a JSON string literal (nlohmann's encoder; defined in run.cpp).
std::string json_string(std::string_view s);

/// `0x` and 16 hex digits: how the CLI (and Python) print a plan fingerprint.
inline std::string fingerprint_text(std::uint64_t fingerprint) {
  return "0x" + plan_state::hex(fingerprint);
}

/// Prints one warning line on stderr when the plan's pads are more than `threshold` of its
/// slots: their share, the buckets with the most, and what --policy downgrade would leave
/// when it would leave fewer. The semantics stay; a bucket far below its batch size is mostly
/// one sample repeated, which a user should hear about.
inline void warn_pads(std::string_view command, const epoch_plan& plan, const bucket_config& config,
                      double threshold) {
  const pad_report r = compute_pad_report(plan, config);
  if (!r.exceeds(threshold)) return;
  auto percent = [](double v) {
    char text[32];
    std::snprintf(text, sizeof text, "%.1f%%", 100.0 * v);
    return std::string(text);
  };
  char limit[32];
  std::snprintf(limit, sizeof limit, "%g", threshold);
  std::string line = "vbucket " + std::string(command) + ": warning: " + percent(r.fraction()) +
                     " of the batch slots are pads (" + std::to_string(r.pads) + " of " +
                     std::to_string(r.slots) + ", above --pad-warn " + limit + "); most in ";
  for (std::size_t i = 0; i < r.worst.size(); ++i) {
    const bucket_pads& b = r.worst[i];
    if (i > 0) line += ", ";
    line += b.resolution + " frames " + std::to_string(b.frames) + " ratio " + b.ratio + " (" +
            std::to_string(b.pads) + " pads of " + std::to_string(b.slots) + " slots)";
  }
  if (r.downgrade_helps())
    line += "; --policy downgrade would leave " + percent(r.downgrade_fraction()) + " (" +
            std::to_string(r.downgrade_pads) + " of " + std::to_string(r.downgrade_slots) + ")";
  line += "\n";
  std::fputs(line.c_str(), stderr);
}

}  // namespace vbucket::cli
