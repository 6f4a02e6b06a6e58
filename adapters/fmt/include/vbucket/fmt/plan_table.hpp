#pragma once
/// The statistics of an epoch plan as text tables, printed with {fmt}: what Open-Sora's
/// `print_bucket_info` shows (samples and batches per bucket, by aspect ratio, by shape; the
/// training batch and sample counts; non-empty buckets) and more: pads, drops and downgrade
/// moves per bucket, image/video totals, rank alignment and step balance.
///
///     const auto stats = vbucket::compute_plan_stats(plan.deal(world), config);
///     vbucket::print_plan_table(stdout, stats);

#include <algorithm>    // std::max
#include <cstddef>      // std::size_t
#include <cstdint>      // std::uint64_t
#include <cstdio>       // std::FILE, std::fputs
#include <string>       // std::string
#include <string_view>  // std::string_view
#include <utility>      // std::move
#include <vector>       // std::vector

#include <fmt/format.h>

#include "vbucket/plan/plan_stats.hpp"

namespace vbucket {

/// Which sections `format_plan_table` writes.
struct plan_table_options {
  bool summary = true;     ///< totals, images/videos, rank alignment, step balance
  bool per_bucket = true;  ///< one row per bucket with samples
  bool by_shape = true;    ///< one row per (resolution, frames) with samples
  bool by_ratio = true;    ///< one row per aspect ratio with samples
};

namespace detail {

/// A plain text table: a header, rows, per-column alignment ('l' or 'r'), two spaces apart.
struct text_table {
  std::vector<std::string> header;
  std::string_view align;
  std::vector<std::vector<std::string>> rows;

  [[nodiscard]] std::string render() const {
    std::vector<std::size_t> width(header.size(), 0);
    for (std::size_t c = 0; c < header.size(); ++c) width[c] = header[c].size();
    for (const auto& row : rows)
      for (std::size_t c = 0; c < row.size() && c < width.size(); ++c)
        width[c] = std::max(width[c], row[c].size());
    std::string out;
    auto line = [&](const std::vector<std::string>& cells) {
      std::string text;
      for (std::size_t c = 0; c < cells.size() && c < width.size(); ++c) {
        if (c > 0) text += "  ";
        text += align[c] == 'r' ? ::fmt::format("{:>{}}", cells[c], width[c])
                                : ::fmt::format("{:<{}}", cells[c], width[c]);
      }
      while (!text.empty() && text.back() == ' ') text.pop_back();
      out += text;
      out += '\n';
    };
    line(header);
    std::size_t total = 0;
    for (std::size_t w : width) total += w;
    out += std::string(total + 2 * (width.empty() ? 0 : width.size() - 1), '-');
    out += '\n';
    for (const auto& row : rows) line(row);
    return out;
  }
};

inline std::string count(std::uint64_t v) { return ::fmt::format("{}", v); }
/// A count, or "-" for zero, so that the exceptional columns stand out.
inline std::string count_or_dash(std::uint64_t v) { return v == 0 ? "-" : count(v); }
inline std::string percent(double part, double whole) {
  return whole > 0.0 ? ::fmt::format("{:.1f}%", 100.0 * part / whole) : std::string("-");
}
inline std::string shape(std::int64_t t, std::int64_t h, std::int64_t w) {
  return ::fmt::format("{}x{}x{}", t, h, w);
}

}  // namespace detail

/// The statistics as text; `balance` (optional) adds the step balance.
inline std::string format_plan_table(const plan_stats& s,
                                     const step_balance_stats* balance = nullptr,
                                     const plan_table_options& o = {}) {
  using detail::count;
  using detail::count_or_dash;
  using detail::percent;
  std::string out;
  const plan_counts& t = s.total;
  const double slots = static_cast<double>(t.slots());
  const bool moves = t.moved_out > 0;

  if (o.per_bucket) {
    detail::text_table table{
        {"bucket", "resolution", "frames", "ratio", "TxHxW", "batch", "grouped"},
        moves ? "rllllrrrrrrrrrr" : "rllllrrrrrrr",
        {}};
    if (moves) {
      table.header.push_back("moved in");
      table.header.push_back("moved out");
    }
    for (const char* h : {"samples", "batches", "pads", "dropped", "cost"})
      table.header.push_back(h);
    for (const bucket_stats& b : s.buckets) {
      std::vector<std::string> row = {
          count(static_cast<std::uint64_t>(b.bucket)),
          b.resolution,
          count(static_cast<std::uint64_t>(b.frames)),
          b.ratio,
          detail::shape(b.frames, b.height, b.width),
          b.batch_size > 0 ? count(static_cast<std::uint64_t>(b.batch_size)) : "off",
          count(b.counts.grouped)};
      if (moves) {
        row.push_back(count_or_dash(b.counts.moved_in));
        row.push_back(count_or_dash(b.counts.moved_out));
      }
      row.push_back(count(b.counts.samples));
      row.push_back(count(b.counts.batches));
      row.push_back(count_or_dash(b.counts.pads));
      row.push_back(count_or_dash(b.counts.dropped));
      row.push_back(percent(b.counts.cost, t.cost));
      table.rows.push_back(std::move(row));
    }
    out += "Buckets (samples and batches per bucket; cost = share of the epoch's total cost)\n";
    out += table.rows.empty() ? std::string("(no bucket has samples)\n") : table.render();
    out += '\n';
  }

  if (o.by_shape) {
    detail::text_table table{{"resolution", "frames", "batch", "buckets", "samples", "batches",
                              "pads", "dropped", "samples %"},
                             "lrrrrrrrr",
                             {}};
    for (const shape_stats& x : s.by_shape) {
      if (x.counts.grouped == 0 && x.counts.moved_in == 0) continue;
      table.rows.push_back(
          {x.resolution, count(static_cast<std::uint64_t>(x.frames)),
           x.batch_size > 0 ? count(static_cast<std::uint64_t>(x.batch_size)) : "off",
           count(x.counts.buckets), count(x.counts.samples), count(x.counts.batches),
           count_or_dash(x.counts.pads), count_or_dash(x.counts.dropped),
           percent(static_cast<double>(x.counts.samples), static_cast<double>(t.samples))});
    }
    out += "By (resolution, frames)\n";
    out += table.rows.empty() ? std::string("(none)\n") : table.render();
    out += '\n';
  }

  if (o.by_ratio) {
    detail::text_table table{
        {"ratio", "H/W", "buckets", "samples", "batches", "pads", "dropped", "samples %"},
        "lrrrrrrr",
        {}};
    for (const ratio_stats& x : s.by_ratio)
      table.rows.push_back(
          {x.ratio, ::fmt::format("{:.3f}", x.value), count(x.counts.buckets),
           count(x.counts.samples), count(x.counts.batches), count_or_dash(x.counts.pads),
           count_or_dash(x.counts.dropped),
           percent(static_cast<double>(x.counts.samples), static_cast<double>(t.samples))});
    out += "By aspect ratio\n";
    out += table.rows.empty() ? std::string("(none)\n") : table.render();
    out += '\n';
  }

  if (o.summary) {
    detail::text_table kinds{
        {"", "buckets", "samples", "batches", "pads", "dropped", "moved", "samples %", "cost %"},
        "lrrrrrrrr",
        {}};
    auto kind_row = [&](const char* name, const plan_counts& c) {
      kinds.rows.push_back({name, count(c.buckets), count(c.samples), count(c.batches),
                            count_or_dash(c.pads), count_or_dash(c.dropped),
                            count_or_dash(c.moved_out),
                            percent(static_cast<double>(c.samples), static_cast<double>(t.samples)),
                            percent(c.cost, t.cost)});
    };
    kind_row("images", s.images);
    kind_row("videos", s.videos);
    kind_row("total", t);
    out += "Images and videos\n";
    out += kinds.render();
    out += '\n';
    const std::uint64_t rows = t.grouped + s.unassigned + s.invalid;
    out += ::fmt::format(
        "samples:            {} rows, {} in buckets ({}), {} without bucket, {} invalid\n", rows,
        t.grouped, percent(static_cast<double>(t.grouped), static_cast<double>(rows)), s.unassigned,
        s.invalid);
    out += ::fmt::format("#training sample:   {} distinct samples in batches, {} dropped\n",
                         t.samples, t.dropped);
    out += ::fmt::format("#training batch:    {} ({} slots, {} pads = {} of slots)\n", t.batches,
                         t.slots(), t.pads, percent(static_cast<double>(t.pads), slots));
    out += ::fmt::format("#non-empty bucket:  {}\n", t.buckets);
    if (s.alignment.world > 0) {
      const alignment_stats& a = s.alignment;
      out += ::fmt::format(
          "world:              {} ranks, {} steps each after {} consumed global "
          "batches; {} repeated batches ({} samples), {} dropped ({} samples)\n",
          a.world, a.steps, a.consumed, a.repeat_batches, a.repeat_samples, a.dropped_batches,
          a.dropped_samples);
    }
    if (balance != nullptr) {
      out += ::fmt::format(
          "step balance:       max/mean cost per step {:.4f} (mean of step ratios "
          "{:.4f}, worst step {:.4f})\n",
          balance->max_over_mean, balance->mean_step_ratio, balance->worst_step_ratio);
    }
  }
  return out;
}

/// Prints `format_plan_table` to `out`.
inline void print_plan_table(std::FILE* out, const plan_stats& s,
                             const step_balance_stats* balance = nullptr,
                             const plan_table_options& o = {}) {
  std::fputs(format_plan_table(s, balance, o).c_str(), out);
}

}  // namespace vbucket
