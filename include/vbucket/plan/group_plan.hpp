#pragma once
/// A step plan over groups of ranks: an epoch plan (`make_epoch_plan` over a `layout_table`'s
/// config, so a batch is one group's batch) dealt so that every global step partitions the world
/// into groups, each of its bucket's sequence-parallel degree sp and running one batch.
///
/// How it is dealt (`group_plan::deal(world, state)`): the epoch's global batch order is split,
/// order kept, into one queue per degree (a *class*; classes from the largest sp down). Each step
/// takes batches off the queues' fronts: class c, with n_c batches left, is given
/// ⌊W · n_c·sp_c / Σ n·sp⌋ ranks' worth of whole groups (so every class runs out at about the
/// same step and the end of the epoch is not one class alone), then the ranks left over go to
/// further groups, largest sp first, while batches remain; when every queue is empty, the ranks
/// still free in the last step run repeats of the smallest class's first batches (counted, as
/// the epoch plan's alignment repeats). The groups of a step are laid out on consecutive ranks,
/// largest sp first, so a group of sp ranks always starts at a multiple of sp: a trainer makes
/// the W / sp process groups of each degree once and uses the planned one each step.
/// Every group's layout runs about the layout's target time, so a step is balanced whatever its
/// mix of buckets (`group_schedule::step_seconds`).
///
/// Exactly once, and resume: every batch of the epoch plan is in one queue and taken once; the
/// queues do not depend on the world size, and a step depends only on what is left in them, so
/// the resume state is the count taken from each queue (`group_state`), which deals the rest
/// under any world size — the same batches, none replayed, none skipped.
///
///     auto layouts = vbucket::choose_layouts(config, layout_opts);
///     vbucket::group_plan plan(vbucket::make_epoch_plan(ids, layouts.config(), opts), layouts);
///     auto schedule = plan.deal(world, state);  // state: {} at the epoch's start
///     for (std::uint64_t k = 0; k < schedule.steps(); ++k) train(schedule.work(k, rank));
///
/// The ledger (`run/ledger.hpp`, proved by `vbucket audit`; the records below are in
/// `run/delivery_records.hpp`): rank 0 writes the epoch's declaration
/// (`epoch_block_of(plan.plan(), samples, ids)`) before its first step (again on a resume: the
/// audit reads it once), and each step every group's first rank writes its group's batch
/// (`group_record`): a group's batch is one delivery made by its sp ranks together, so it is
/// recorded once, and the audit proves every sample of the epoch delivered exactly once across
/// worlds and resumes.
///
///     if (auto r = vbucket::group_record(work, plan, {.step = run_step, .world = world}))
///       ledger.write(*r);

#include <algorithm>     // std::find, std::min, std::sort, std::upper_bound
#include <charconv>      // std::from_chars
#include <cstddef>       // std::size_t
#include <cstdint>       // std::uint32_t, std::uint64_t, std::int64_t
#include <memory>        // std::shared_ptr, std::make_shared
#include <optional>      // std::optional
#include <span>          // std::span
#include <string>        // std::string, std::to_string
#include <string_view>   // std::string_view
#include <system_error>  // std::errc
#include <utility>       // std::move
#include <vector>        // std::vector

#include "epoch_plan.hpp"
#include "parallel_layout.hpp"
#include "vbucket/base/error.hpp"
#include "vbucket/bucket/batch.hpp"
#include "vbucket/detail/u128.hpp"

namespace vbucket {

/// A position in a group plan's epoch: per class (sp descending, as `group_plan::sp_sizes`),
/// the batches taken off its queue. What a trainer saves; valid under any world size.
struct group_state {
  std::uint64_t seed = 0;
  std::uint64_t epoch = 0;
  std::vector<std::int64_t> sp;      ///< the classes' degrees (empty: the epoch's start)
  std::vector<std::uint64_t> taken;  ///< batches taken per class
  friend bool operator==(const group_state&, const group_state&) = default;
};

/// One group of a step: ranks [first_rank, first_rank + sp) run the epoch plan's batch `ref`.
struct step_group {
  std::uint32_t first_rank = 0;
  std::uint32_t sp = 1;
  std::uint64_t ref = 0;       ///< the epoch plan's ref of the batch
  std::uint64_t position = 0;  ///< its global position in the epoch plan
  bool repeat = false;         ///< a repeat filling the last step (its samples are pads)
};

/// What one rank does in one step: its group, its batch (every rank of the group holds the
/// whole batch and takes its 1/sp share of each sample's tokens), its micro-steps.
struct rank_work {
  std::uint64_t step = 0;
  std::uint32_t first_rank = 0;  ///< the group's ranks: [first_rank, first_rank + sp)
  std::uint32_t sp = 1;
  std::uint32_t sp_rank = 0;  ///< this rank's place in its group
  vbucket::batch batch;
  bucket_layout layout;  ///< the bucket's layout (micro-batch, accumulation)
  bool repeat = false;

  /// The samples of micro-step k (k < layout.accumulation()).
  [[nodiscard]] std::span<const std::uint32_t> micro_step(std::int64_t k) const {
    return batch.indices.subspan(static_cast<std::size_t>(layout.micro_offset(k)),
                                 static_cast<std::size_t>(layout.micro_size(k)));
  }
};

/// A state as text: "vbucket-groups seed=S epoch=E sp=4,2,1 taken=10,3,0" (the epoch's start:
/// "vbucket-groups seed=S epoch=E sp= taken=").
[[nodiscard]] inline std::string to_string(const group_state& s) {
  std::string out = "vbucket-groups seed=" + std::to_string(s.seed) +
                    " epoch=" + std::to_string(s.epoch) + " sp=";
  for (std::size_t i = 0; i < s.sp.size(); ++i) out += (i ? "," : "") + std::to_string(s.sp[i]);
  out += " taken=";
  for (std::size_t i = 0; i < s.taken.size(); ++i)
    out += (i ? "," : "") + std::to_string(s.taken[i]);
  return out;
}

namespace detail {
/// The unsigned decimal `text` of key `key`, or an error naming it.
inline std::uint64_t group_state_number(std::string_view text, std::string_view key) {
  std::uint64_t v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc{} || end != text.data() + text.size() || text.empty())
    throw error("group state: " + std::string(key) + "=" + std::string(text) +
                " is not an unsigned integer");
  return v;
}
}  // namespace detail

/// Reads `to_string`'s text. Throws `vbucket::error` naming the key that is missing, unknown
/// or malformed, or when sp and taken differ in length.
[[nodiscard]] inline group_state parse_group_state(std::string_view text) {
  constexpr std::string_view head = "vbucket-groups";
  if (text.substr(0, head.size()) != head)
    throw error("group state: \"" + std::string(text) + "\" does not start with " +
                std::string(head));
  group_state s;
  bool seen[4] = {false, false, false, false};
  std::size_t at = head.size();
  while (at < text.size()) {
    if (text[at] == ' ') {
      ++at;
      continue;
    }
    std::size_t end = text.find(' ', at);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view field = text.substr(at, end - at);
    at = end;
    const std::size_t eq = field.find('=');
    const std::string_view key = field.substr(0, eq);
    const std::string_view value = eq == std::string_view::npos ? "" : field.substr(eq + 1);
    const auto list = [&](auto push) {
      for (std::size_t i = 0; i < value.size();) {
        std::size_t comma = value.find(',', i);
        if (comma == std::string_view::npos) comma = value.size();
        push(detail::group_state_number(value.substr(i, comma - i), key));
        i = comma + 1;
      }
    };
    if (eq == std::string_view::npos)
      throw error("group state: \"" + std::string(field) + "\" is not key=value");
    if (key == "seed") {
      s.seed = detail::group_state_number(value, key);
      seen[0] = true;
    } else if (key == "epoch") {
      s.epoch = detail::group_state_number(value, key);
      seen[1] = true;
    } else if (key == "sp") {
      list([&](std::uint64_t v) { s.sp.push_back(static_cast<std::int64_t>(v)); });
      seen[2] = true;
    } else if (key == "taken") {
      list([&](std::uint64_t v) { s.taken.push_back(v); });
      seen[3] = true;
    } else {
      throw error("group state: unknown key \"" + std::string(key) + "\"");
    }
  }
  const char* const names[] = {"seed", "epoch", "sp", "taken"};
  for (int i = 0; i < 4; ++i)
    if (!seen[i]) throw error(std::string("group state: the key ") + names[i] + " is missing");
  if (s.sp.size() != s.taken.size())
    throw error("group state: sp has " + std::to_string(s.sp.size()) + " classes but taken " +
                std::to_string(s.taken.size()));
  return s;
}

class group_schedule;

/// An epoch plan and its layouts, split into one queue per sp (see the top of this header).
/// A cheap, shared, immutable handle.
class group_plan {
 public:
  /// Throws `vbucket::error` when the plan was not made with `layouts.config()`'s batch sizes.
  group_plan(epoch_plan plan, layout_table layouts) {
    auto d = std::make_shared<data>();
    d->plan = std::move(plan);
    d->layouts = std::move(layouts);
    const epoch_plan& p = d->plan;
    for (std::size_t b = 0; b < p.num_buckets(); ++b) {
      const plan_bucket& pb = p.bucket(static_cast<bucket_id>(b));
      if (pb.batches == 0) continue;
      const bucket_layout& l = d->layouts.of(static_cast<bucket_id>(b));
      if (static_cast<std::int64_t>(pb.batch_size) != l.batch_size)
        throw error("group plan: bucket " + std::to_string(b) + " has batch size " +
                    std::to_string(pb.batch_size) + " in the epoch plan but " +
                    std::to_string(l.batch_size) +
                    " in the layout (plan the epoch with the layout table's config)");
      if (std::find(d->sp.begin(), d->sp.end(), l.sp) == d->sp.end()) d->sp.push_back(l.sp);
    }
    std::sort(d->sp.begin(), d->sp.end(), [](auto a, auto b) { return a > b; });
    d->queues.resize(d->sp.size());
    std::vector<std::size_t> class_of(p.num_buckets(), 0);
    for (std::size_t b = 0; b < p.num_buckets(); ++b) {
      const auto sp = d->layouts.of(static_cast<bucket_id>(b)).sp;
      class_of[b] =
          static_cast<std::size_t>(std::find(d->sp.begin(), d->sp.end(), sp) - d->sp.begin());
    }
    std::vector<std::size_t> sizes(d->sp.size(), 0);
    for (std::size_t b = 0; b < p.num_buckets(); ++b)
      if (p.bucket(static_cast<bucket_id>(b)).batches > 0)
        sizes[class_of[b]] += static_cast<std::size_t>(p.bucket(static_cast<bucket_id>(b)).batches);
    for (std::size_t c = 0; c < sizes.size(); ++c) d->queues[c].reserve(sizes[c]);
    for (std::uint64_t pos = 0; pos < p.num_batches(); ++pos)
      d->queues[class_of[static_cast<std::size_t>(p.bucket_at(pos))]].push_back(pos);
    d_ = std::move(d);
  }

  [[nodiscard]] const epoch_plan& plan() const noexcept { return d_->plan; }
  [[nodiscard]] const layout_table& layouts() const noexcept { return d_->layouts; }
  /// The classes' degrees, largest first.
  [[nodiscard]] std::span<const std::int64_t> sp_sizes() const noexcept { return d_->sp; }
  /// Class c's batches, as global positions in the epoch plan, in order.
  [[nodiscard]] std::span<const std::uint64_t> queue(std::size_t c) const noexcept {
    return d_->queues[c];
  }

  /// Deals the epoch's batches not yet taken in `from` to `world` ranks. Throws
  /// `vbucket::error` when world is 0, an sp in use does not divide it, or `from` is not a
  /// position of this plan (another seed, epoch or classes, or more taken than a queue holds).
  [[nodiscard]] group_schedule deal(std::uint32_t world, const group_state& from = {}) const;

 private:
  friend class group_schedule;
  struct data {
    epoch_plan plan;
    layout_table layouts;
    std::vector<std::int64_t> sp;
    std::vector<std::vector<std::uint64_t>> queues;
  };
  std::shared_ptr<const data> d_;
};

/// A group plan dealt to a world size from a position: every step's groups.
class group_schedule {
 public:
  [[nodiscard]] std::uint32_t world_size() const noexcept { return world_; }
  [[nodiscard]] std::uint64_t steps() const noexcept { return step_begin_.size() - 1; }
  /// Step k's groups, by first rank.
  [[nodiscard]] std::span<const step_group> groups(std::uint64_t k) const noexcept {
    return std::span<const step_group>(groups_).subspan(
        static_cast<std::size_t>(step_begin_[static_cast<std::size_t>(k)]),
        static_cast<std::size_t>(step_begin_[static_cast<std::size_t>(k) + 1] -
                                 step_begin_[static_cast<std::size_t>(k)]));
  }
  /// Repeats added to fill the last step.
  [[nodiscard]] std::uint64_t repeat_groups() const noexcept { return repeats_; }
  /// What `rank` does at step k.
  [[nodiscard]] rank_work work(std::uint64_t k, std::uint32_t rank) const {
    const auto gs = groups(k);
    auto it =
        std::upper_bound(gs.begin(), gs.end(), rank,
                         [](std::uint32_t r, const step_group& g) { return r < g.first_rank; });
    const step_group& g = *(it - 1);
    rank_work w;
    w.step = k;
    w.first_rank = g.first_rank;
    w.sp = g.sp;
    w.sp_rank = rank - g.first_rank;
    w.batch = plan_.plan().make_batch(g.ref);
    w.batch.step = k;
    w.batch.position = g.position;
    w.batch.repeat = g.repeat;
    w.repeat = g.repeat;
    w.layout = plan_.layouts().of(w.batch.bucket);
    return w;
  }
  /// A group's predicted step time (its bucket's layout).
  [[nodiscard]] double group_seconds(const step_group& g) const noexcept {
    return plan_.layouts().of(plan_.plan().bucket_at(g.position)).seconds;
  }
  /// Step k's predicted time: its slowest group's.
  [[nodiscard]] double step_seconds(std::uint64_t k) const noexcept {
    double most = 0.0;
    for (const step_group& g : groups(k)) most = std::max(most, group_seconds(g));
    return most;
  }
  /// The position after `steps_done` steps of this schedule (steps_done ≤ steps()).
  [[nodiscard]] group_state state_after(std::uint64_t steps_done) const {
    const std::size_t nc = plan_.sp_sizes().size();
    group_state s{plan_.plan().seed(), plan_.plan().epoch(),
                  std::vector<std::int64_t>(plan_.sp_sizes().begin(), plan_.sp_sizes().end()),
                  std::vector<std::uint64_t>(nc, 0)};
    for (std::size_t c = 0; c < nc; ++c)
      s.taken[c] = taken_[static_cast<std::size_t>(std::min(steps_done, steps())) * nc + c];
    return s;
  }

 private:
  friend class group_plan;
  group_schedule(group_plan plan, std::uint32_t world) : plan_(std::move(plan)), world_(world) {}

  group_plan plan_;
  std::uint32_t world_ = 1;
  std::vector<step_group> groups_;
  std::vector<std::uint64_t> step_begin_;  // steps + 1 offsets into groups_
  std::vector<std::uint64_t> taken_;       // (steps + 1) × classes: taken before each step
  std::uint64_t repeats_ = 0;
};

inline group_schedule group_plan::deal(std::uint32_t world, const group_state& from) const {
  if (world == 0) throw error("group plan: world size must be at least 1");
  const data& d = *d_;
  const std::size_t nc = d.sp.size();
  for (const std::int64_t sp : d.sp)
    if (static_cast<std::int64_t>(world) % sp != 0)
      throw error("group plan: sequence-parallel size " + std::to_string(sp) +
                  " does not divide world size " + std::to_string(world));
  std::vector<std::uint64_t> taken(nc, 0);
  if (!from.sp.empty() || !from.taken.empty()) {
    if (from.seed != d.plan.seed() || from.epoch != d.plan.epoch())
      throw error("group plan: the state is of seed " + std::to_string(from.seed) + " epoch " +
                  std::to_string(from.epoch) + " but the plan of seed " +
                  std::to_string(d.plan.seed()) + " epoch " + std::to_string(d.plan.epoch()));
    if (from.sp != d.sp || from.taken.size() != nc)
      throw error(
          "group plan: the state's sequence-parallel classes are not the plan's "
          "(another layout)");
    for (std::size_t c = 0; c < nc; ++c) {
      if (from.taken[c] > d.queues[c].size())
        throw error("group plan: the state took " + std::to_string(from.taken[c]) +
                    " batches of sp " + std::to_string(d.sp[c]) + " but the plan has " +
                    std::to_string(d.queues[c].size()));
      taken[c] = from.taken[c];
    }
  }
  group_schedule s(*this, world);
  const auto w = static_cast<std::uint64_t>(world);
  std::uint64_t batches_left = 0, smallest = 1;
  for (std::size_t c = 0; c < nc; ++c) batches_left += d.queues[c].size() - taken[c];
  if (nc > 0) smallest = static_cast<std::uint64_t>(d.sp[nc - 1]);
  // At least one group per step (the largest sp) and at most world / smallest sp.
  s.groups_.reserve(static_cast<std::size_t>(batches_left + w / smallest));
  s.step_begin_.reserve(static_cast<std::size_t>(
      batches_left * static_cast<std::uint64_t>(nc > 0 ? d.sp[0] : 1) / w + 2));
  std::vector<std::uint64_t> groups(nc);
  std::uint64_t repeat_cursor = 0;
  for (;;) {
    s.step_begin_.push_back(s.groups_.size());
    s.taken_.insert(s.taken_.end(), taken.begin(), taken.end());
    u128 demand = 0;
    for (std::size_t c = 0; c < nc; ++c)
      demand += static_cast<u128>(d.queues[c].size() - taken[c]) * static_cast<u128>(d.sp[c]);
    if (demand == 0) break;
    std::uint64_t idle = w;
    for (std::size_t c = 0; c < nc; ++c) {  // proportional shares, whole groups
      const auto sp = static_cast<std::uint64_t>(d.sp[c]);
      const std::uint64_t left = d.queues[c].size() - taken[c];
      const auto share = static_cast<std::uint64_t>(static_cast<u128>(w) *
                                                    (static_cast<u128>(left) * sp) / demand);
      groups[c] = std::min({left, share / sp, idle / sp});
      idle -= groups[c] * sp;
    }
    for (std::size_t c = 0; c < nc; ++c) {  // the ranks left over, largest sp first
      const auto sp = static_cast<std::uint64_t>(d.sp[c]);
      const std::uint64_t more = std::min(d.queues[c].size() - taken[c] - groups[c], idle / sp);
      groups[c] += more;
      idle -= more * sp;
    }
    std::uint32_t rank = 0;
    for (std::size_t c = 0; c < nc; ++c)
      for (std::uint64_t g = 0; g < groups[c]; ++g) {
        const std::uint64_t pos = d.queues[c][static_cast<std::size_t>(taken[c]++)];
        s.groups_.push_back(
            {rank, static_cast<std::uint32_t>(d.sp[c]), d.plan.ref_at(pos), pos, false});
        rank += static_cast<std::uint32_t>(d.sp[c]);
      }
    if (idle > 0) {  // the queues ran dry: repeats of the smallest class's first batches
      const std::size_t c = nc - 1;
      const auto sp = static_cast<std::uint32_t>(d.sp[c]);
      for (; idle > 0; idle -= sp, rank += sp, ++s.repeats_) {
        const std::uint64_t pos =
            d.queues[c][static_cast<std::size_t>(repeat_cursor++ % d.queues[c].size())];
        s.groups_.push_back({rank, sp, d.plan.ref_at(pos), pos, true});
      }
    }
  }
  return s;
}

}  // namespace vbucket
