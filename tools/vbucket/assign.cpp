/// `vbucket assign`: every sample of a metadata CSV through an Open-Sora bucket rule; writes
/// OUT.csv (index,resolution,frames,ratio,T,H,W per input row) and prints a bucket table.

#include <charconv>     // std::to_chars
#include <cstdint>      // std::uint64_t
#include <cstdio>       // std::fputs, std::printf
#include <memory>       // std::unique_ptr
#include <span>         // std::span
#include <string>       // std::string
#include <string_view>  // std::string_view
#include <vector>       // std::vector

#include "cli.hpp"
#include "plan_common.hpp"
#include "vbucket/bucket/bucket_config.hpp"

namespace vbucket::cli {
namespace {

/// assign's flags: its own, and the run spec's (plan_common.hpp).
const flag_table& assign_flags() {
  static const flag_table t = [] {
    flag_table f;
    f.field("config", true).field("meta", true).field("rule", true).field("rng").field("seed");
    f.field("epoch").own(
        {"out", "OUT.csv", true, "output CSV: index,resolution,frames,ratio,T,H,W per sample"});
    f.field("fps_max").field("frame_interval").field("threads");
    f.own({"quiet", "", false, "do not print the bucket table"});
    f.run_file();
    return f;
  }();
  return t;
}

constexpr std::string_view assign_description =
    "Assigns every row of META.csv (row order = sample index) to a bucket (resolution, frames,\n"
    "aspect ratio) with Open-Sora's rule, and writes OUT.csv with one row per sample; the last\n"
    "six fields are empty when the rule chose no bucket. --seed S --epoch E give the buckets\n"
    "`vbucket plan` and `stats` use with the same flags. With --rng numpy the result is\n"
    "Open-Sora's, draw for draw, with Open-Sora's epoch seed S + E (so --seed S+E --epoch 0\n"
    "is the same); with --rng fast it has Open-Sora's distribution, drawn from\n"
    "fast_source(S, E) (for opensora-v2, one draw per sample through compiled_v2_rule).\n"
    "Unless --quiet, prints a table of the non-empty buckets.\n"
    "Exit codes: 0 success, 1 bad data, 2 bad usage.";

struct assign_options {
  run_flags plan;  // the rule, random source, seed and epoch, as plan and stats read them
  std::string out_path;
  bool quiet = false;
};

assign_options read_options(const args& a) {
  assign_options o;
  o.plan = read_run_flags(a, assign_flags());
  o.out_path = a.value("out");
  o.quiet = a.has("quiet");
  return o;
}

/// "resolution,frames,ratio,T,H,W" of every bucket, CSV-quoted where needed.
std::vector<std::string> bucket_fields(const bucket_config& config) {
  std::vector<std::string> fields(config.num_buckets());
  for (std::size_t b = 0; b < fields.size(); ++b) {
    const auto id = static_cast<bucket_id>(b);
    const auto& res = config.resolution_of(id);
    const auto& frames = config.frames_of(id);
    const auto& ratio = config.ratio_of(id);
    fields[b] = csv_field(res.info.name) + "," + std::to_string(frames.frames) + "," +
                csv_field(ratio.key) + "," + std::to_string(frames.frames) + "," +
                std::to_string(ratio.height) + "," + std::to_string(ratio.width);
  }
  return fields;
}

void write_out_csv(const std::string& path, const bucket_config& config,
                   std::span<const bucket_id> ids) {
  const std::vector<std::string> fields = bucket_fields(config);
  output_file out(path);
  std::string buffer = "index,resolution,frames,ratio,T,H,W\n";
  constexpr std::size_t flush_at = std::size_t{1} << 20;
  buffer.reserve(flush_at + 256);
  char digits[24];
  for (std::size_t i = 0; i < ids.size(); ++i) {
    const auto [end, ec] = std::to_chars(digits, digits + sizeof digits, i);
    (void)ec;  // 24 characters hold any 64-bit value
    buffer.append(digits, end);
    if (ids[i] >= 0) {
      buffer.push_back(',');
      buffer += fields[static_cast<std::size_t>(ids[i])];
      buffer.push_back('\n');
    } else {
      buffer += ",,,,,,\n";
    }
    if (buffer.size() >= flush_at) {
      out.write(buffer);
      buffer.clear();
    }
  }
  out.write(buffer);
  out.commit();
}

std::string percent(std::uint64_t part, std::uint64_t whole) {
  if (whole == 0) return "";
  char text[32];
  std::snprintf(text, sizeof text, "(%.1f%%)",
                100.0 * static_cast<double>(part) / static_cast<double>(whole));
  return text;
}

void print_summary(const bucket_config& config, std::span<const bucket_id> ids) {
  std::vector<std::uint64_t> count(config.num_buckets(), 0);
  std::uint64_t unassigned = 0, invalid = 0;
  for (const bucket_id b : ids) {
    if (b >= 0) {
      ++count[static_cast<std::size_t>(b)];
    } else if (b == invalid_sample) {
      ++invalid;
    } else {
      ++unassigned;
    }
  }
  std::vector<std::vector<std::string>> rows = {
      {"resolution", "frames", "ratio", "T x H x W", "batch", "samples"}};
  std::vector<std::uint64_t> per_resolution(config.resolutions().size(), 0);
  for (std::size_t b = 0; b < count.size(); ++b) {
    const auto id = static_cast<bucket_id>(b);
    per_resolution[static_cast<std::size_t>(config.key(id).resolution)] += count[b];
    if (count[b] == 0) continue;
    const auto& frames = config.frames_of(id);
    const auto& ratio = config.ratio_of(id);
    rows.push_back({escape_control(config.resolution_of(id).info.name),
                    std::to_string(frames.frames), escape_control(ratio.key),
                    std::to_string(frames.frames) + "x" + std::to_string(ratio.height) + "x" +
                        std::to_string(ratio.width),
                    frames.batch_size > 0 ? std::to_string(frames.batch_size) : "-",
                    std::to_string(count[b])});
  }
  if (rows.size() > 1) {
    print_table(rows, "lrllrr");
  } else {
    std::fputs("no sample was assigned to a bucket\n", stdout);
  }
  const std::uint64_t total = ids.size();
  const std::uint64_t assigned = total - unassigned - invalid;
  std::vector<std::vector<std::string>> totals = {
      {"samples", std::to_string(total), ""},
      {"assigned", std::to_string(assigned), percent(assigned, total)},
      {"no bucket", std::to_string(unassigned), percent(unassigned, total)}};
  if (invalid > 0) totals.push_back({"invalid", std::to_string(invalid), percent(invalid, total)});
  for (std::size_t r = 0; r < per_resolution.size(); ++r)
    totals.push_back({"  " + escape_control(config.resolutions()[r].info.name),
                      std::to_string(per_resolution[r]), percent(per_resolution[r], total)});
  std::fputs("\n", stdout);
  print_table(totals, "lrl");
}

}  // namespace

int cmd_assign(int argc, char** argv) {
  return run_main("assign", [&] {
    const args a = args::parse(argc, argv, assign_flags().flags());
    if (a.help()) {
      std::fputs(usage_text("assign", assign_description, assign_flags().flags()).c_str(), stdout);
      return exit_ok;
    }
    assign_options o = read_options(a);
    // The assignment the plan of the same flags is made from (one world of one rank).
    o.plan.spec.world = 1;
    o.plan.spec.rank = 0;
    const std::unique_ptr<any_sampler> owned = make_sampler(o.plan.spec);
    const any_sampler& sampler = *owned;
    {
      const std::vector<bucket_id> ids = sampler.assign();
      write_out_csv(o.out_path, sampler.config(), ids);
      if (!o.quiet) {
        print_summary(sampler.config(), ids);
        std::fflush(stdout);
      }
      return exit_ok;
    }
  });
}

}  // namespace vbucket::cli
