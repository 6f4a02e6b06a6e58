// vbucket::run: the run plan's state line (`run_plan::state`, `load`) and a segment's text,
// compiled once (include/vbucket/run/run_plan.hpp declares them and describes the line).
#include "vbucket/run/run_plan.hpp"

#include <algorithm>    // std::min
#include <array>        // std::array (the state's fields)
#include <cstdint>      // std::uint32_t, std::uint64_t, std::int64_t
#include <limits>       // std::numeric_limits
#include <optional>     // std::optional
#include <string>       // std::string
#include <string_view>  // std::string_view
#include <utility>      // std::move
#include <vector>       // std::vector

#include "vbucket/base/error.hpp"
#include "vbucket/detail/parse_number.hpp"  // parse_uint_in, parse_positive, split_text
#include "vbucket/plan/plan_state.hpp"      // plan_state::hex, parse_hex, budget_text

namespace vbucket {

using detail::split_text;

std::string segment_settings::to_string() const {
  std::string s = std::to_string(stage) + ':' + std::string(policy_name(batches.policy)) + ':' +
                  std::to_string(batches.balance_group) + ':';
  s += batches.batching == batching_mode::packed
           ? "packed=" + plan_state::budget_text(batches.token_budget)
           : std::string("fixed");
  s += ':';
  for (std::size_t i = 0; i < batch_sizes.size(); ++i)
    s += (i ? "-" : "") + std::to_string(batch_sizes[i]);
  return s + ':' + plan_state::hex(assign_hash);
}

segment_settings segment_settings::parse(std::string_view text) {
  auto fail = [&](const std::string& why) -> segment_settings {
    throw error("run state: segment \"" + std::string(text) + "\": " + why);
  };
  const std::vector<std::string_view> f = split_text(text, ':');
  if (f.size() != 6) return fail("expected STAGE:POLICY:BALANCE:fixed|packed=B:BS-...:HASH");
  segment_settings s;
  const auto stage = detail::parse_uint_in(f[0], 0, std::numeric_limits<std::uint32_t>::max());
  if (!stage) return fail("stage \"" + std::string(f[0]) + "\" is not an integer below 2^32");
  s.stage = static_cast<std::uint32_t>(*stage);
  if (const std::string why = run_spec::check_value("policy", f[1]); !why.empty())
    return fail("policy: " + why);
  s.batches.policy = *parse_policy(f[1]);
  if (const std::string why = run_spec::check_value("balance_group", f[2]); !why.empty())
    return fail("balance group: " + why);
  s.batches.balance_group =
      static_cast<std::uint32_t>(*detail::parse_uint_in(f[2], 0, max_run_world));
  if (f[3] == "fixed") {
    s.batches.batching = batching_mode::fixed;
  } else if (f[3].substr(0, 7) == "packed=") {
    s.batches.batching = batching_mode::packed;
    const auto b = detail::parse_positive(f[3].substr(7));
    if (!b) return fail("token budget \"" + std::string(f[3].substr(7)) + "\" is not a number > 0");
    s.batches.token_budget = *b;
  } else {
    return fail("batching \"" + std::string(f[3]) + "\" is not fixed or packed=B");
  }
  for (const std::string_view v :
       f[4].empty() ? std::vector<std::string_view>{} : split_text(f[4], '-')) {
    const auto bs = detail::parse_uint_in(v, 0, bucket_config::max_batch);
    if (!bs)
      return fail("batch size \"" + std::string(v) + "\" is not an integer from 0 to " +
                  std::to_string(bucket_config::max_batch));
    s.batch_sizes.push_back(static_cast<std::int64_t>(*bs));
  }
  s.assign_hash = plan_state::parse_hex(f[5], "run state: segment hash");
  return s;
}

std::string run_plan::state() const {
  std::string s = "vbucket-run v=1 seed=" + std::to_string(opts_.seed) +
                  " epoch=" + std::to_string(pos_.epoch) + " step=" + std::to_string(pos_.step) +
                  " epoch_step=" + std::to_string(pos_.epoch_step) +
                  " world=" + std::to_string(pos_.world) +
                  " consumed=" + std::to_string(pos_.consumed) + " sources=";
  for (std::size_t i = 0; i < sources_.size(); ++i)
    s += (i ? "," : "") + sources_[i].name + ':' + std::to_string(sources_[i].table->size()) + ':' +
         plan_state::hex(fingerprints_[i]);
  s += " draw=" + pos_.draw.to_string() + " drawn=";
  for (std::size_t i = 0; i < sources_.size(); ++i)
    s += (i ? "," : "") + std::to_string(pos_.drawn.count(i));
  s += " caps=";
  for (std::size_t i = 0; i < pos_.caps.size(); ++i)
    s += (i ? "," : "") + pos_.caps[i].resolution + '/' + std::to_string(pos_.caps[i].frames) +
         '=' + std::to_string(pos_.caps[i].batch_size);
  if (pos_.caps.empty()) s += '-';
  s += " budget_cap=" +
       (pos_.budget_cap ? plan_state::budget_text(*pos_.budget_cap) : std::string("-"));
  s += " segs=";
  for (std::size_t i = 0; i < pos_.closed.size(); ++i)
    s += (i ? "|" : "") + pos_.closed[i].settings.to_string() + '@' +
         std::to_string(pos_.closed[i].end);
  if (pos_.closed.empty()) s += '-';
  s += " cur=" + pos_.cur.to_string();
  return s + " check=" + plan_state::hex(detail::hash_bytes(s));
}

void run_plan::load(std::string_view text) {
  loaded_state st = parse_state(text);
  position saved = std::move(pos_);
  try {
    apply_state(std::move(st));
  } catch (...) {
    pos_ = std::move(saved);
    ++deals_;  // the schedule is the saved one again, but a loader may have followed another
    throw;
  }
}

run_plan::loaded_state run_plan::parse_state(std::string_view text) const {
  const auto fail = [](const std::string& why) { throw error("run state: " + why); };
  constexpr std::string_view head = "vbucket-run ";
  if (text.substr(0, head.size()) != head)
    fail("expected a line starting with \"vbucket-run v=1\"");
  constexpr std::array<std::string_view, 15> names = {
      "v",    "seed",  "epoch", "step",       "epoch_step", "world", "consumed", "sources",
      "draw", "drawn", "caps",  "budget_cap", "segs",       "cur",   "check"};
  std::array<std::optional<std::string_view>, names.size()> value{};
  std::size_t check_at = text.size();  // where " check=" begins
  for (const std::string_view f : split_text(text.substr(head.size()), ' ')) {
    if (f.empty()) fail("fields must be separated by one space");
    const std::size_t eq = f.find('=');
    if (eq == std::string_view::npos) fail("field \"" + std::string(f) + "\" has no '='");
    const std::string_view key = f.substr(0, eq);
    std::size_t k = 0;
    while (k < names.size() && names[k] != key) ++k;
    if (k == names.size()) fail("unknown field \"" + std::string(key) + "\"");
    if (value[k]) fail("duplicate field \"" + std::string(key) + "\"");
    value[k] = f.substr(eq + 1);
    if (key == "check") check_at = static_cast<std::size_t>(f.data() - text.data()) - 1;
  }
  const auto get = [&](std::string_view key) -> std::string_view {
    std::size_t k = 0;
    while (names[k] != key) ++k;
    if (!value[k]) fail("missing field \"" + std::string(key) + "\"");
    return *value[k];
  };
  // The run spec's fields, through its field table; the others are counts.
  const auto field = [&](std::string_view key) {
    const std::string_view v = get(key);
    if (const std::string why = run_spec::check_value(key, v); !why.empty())
      fail(std::string(key) + ": " + why);
    return v;
  };
  const auto count = [&](std::string_view key) {
    const std::string_view v = get(key);
    const auto n = detail::parse_uint_in(v, 0, std::numeric_limits<std::uint64_t>::max());
    if (!n)
      fail(std::string(key) + " must be a non-negative integer below 2^64, got \"" +
           std::string(v) + "\"");
    return *n;
  };
  if (get("v") != "1")
    fail("version " + std::string(get("v")) + " is not 1 (this library reads version 1)");
  loaded_state st;
  const std::string_view seed = field("seed");
  st.epoch = *detail::parse_uint_in(field("epoch"), 0, std::numeric_limits<std::uint64_t>::max());
  st.world = static_cast<std::uint32_t>(*detail::parse_uint_in(field("world"), 1, max_run_world));
  st.step = count("step");
  st.epoch_step = count("epoch_step");
  st.consumed = count("consumed");
  if (st.epoch_step > st.step)
    fail("epoch_step=" + std::to_string(st.epoch_step) + " is after step=" +
         std::to_string(st.step) + " (the epoch cannot begin after the run's step)");
  for (const std::string_view c : split_text(get("caps") == "-" ? "" : get("caps"), ',')) {
    if (c.empty()) break;
    const std::size_t slash = c.rfind('/'), eq = c.rfind('=');
    if (slash == std::string_view::npos || eq == std::string_view::npos || eq < slash)
      fail("cap \"" + std::string(c) + "\" is not RES/FRAMES=BS");
    batch_size_cap cap;
    cap.resolution = std::string(c.substr(0, slash));
    const auto fr = detail::parse_uint_in(c.substr(slash + 1, eq - slash - 1), 1, 1ULL << 31);
    const auto bs = detail::parse_uint_in(c.substr(eq + 1), 1, bucket_config::max_batch);
    if (cap.resolution.empty() || !fr || !bs)
      fail("cap \"" + std::string(c) +
           "\" is not RES/FRAMES=BS (frames and a batch size from 1 to " +
           std::to_string(bucket_config::max_batch) + ")");
    cap.frames = static_cast<std::int64_t>(*fr);
    cap.batch_size = static_cast<std::int64_t>(*bs);
    for (const batch_size_cap& other : st.caps)
      if (other.resolution == cap.resolution && other.frames == cap.frames)
        fail("cap \"" + std::string(c) + "\": a second cap of the same pair");
    st.caps.push_back(std::move(cap));
  }
  if (get("budget_cap") != "-") {
    const auto b = detail::parse_positive(get("budget_cap"));
    if (!b)
      fail("budget_cap must be a finite number > 0 or -, got \"" + std::string(get("budget_cap")) +
           "\"");
    st.budget_cap = *b;
  }
  try {
    st.draw = draw_spec::parse(get("draw"));
  } catch (const error& e) {
    fail(e.what());
  }
  const std::vector<std::string_view> drawn = split_text(get("drawn"), ',');
  if (drawn.size() != sources_.size())
    fail("drawn=" + std::string(get("drawn")) + " has " + std::to_string(drawn.size()) +
         " counts for " + std::to_string(sources_.size()) + " sources");
  for (const std::string_view d : drawn) {
    const auto n = detail::parse_uint_in(d, 0, std::numeric_limits<std::uint32_t>::max());
    if (!n) fail("drawn count \"" + std::string(d) + "\" is not an integer below 2^32");
    st.drawn.push_back(*n);
  }
  if (get("segs") != "-")
    for (const std::string_view sg : split_text(get("segs"), '|')) {
      const std::size_t at = sg.rfind('@');
      if (at == std::string_view::npos) fail("segment \"" + std::string(sg) + "\" has no @END");
      const auto end =
          detail::parse_uint_in(sg.substr(at + 1), 1, std::numeric_limits<std::uint64_t>::max());
      if (!end)
        fail("segment \"" + std::string(sg) +
             "\": END is not an integer ≥ 1 (a closed segment delivered a batch)");
      st.segs.push_back({segment_settings::parse(sg.substr(0, at)), *end});
    }
  st.cur = segment_settings::parse(get("cur"));
  // Another run's seed is named first (an edited one as well), then the line as written: an
  // edited field (an epoch, a count) is not another valid state.
  if (seed != std::to_string(opts_.seed))
    fail("saved with seed " + std::string(seed) + " but this run's seed is " +
         std::to_string(opts_.seed) + ": the draws and plans differ");
  const std::string_view check = get("check");
  if (check_at + 7 + check.size() != text.size()) fail("check must be the last field");
  if (plan_state::parse_hex(check, "run state: check") !=
      detail::hash_bytes(text.substr(0, check_at)))
    fail("the line does not match its check=" + std::string(check) +
         " (edited or damaged: a state line is saved and loaded whole)");

  // Against this run: the sources, the stages that planned the segments.
  const auto srcs = split_text(get("sources"), ',');
  if (srcs.size() != sources_.size())
    fail("saved with " + std::to_string(srcs.size()) + " sources but this run has " +
         std::to_string(sources_.size()));
  for (std::size_t i = 0; i < srcs.size(); ++i) {
    const auto parts = split_text(srcs[i], ':');
    if (parts.size() != 3) fail("source \"" + std::string(srcs[i]) + "\" is not NAME:ROWS:FP");
    if (parts[0] != sources_[i].name)
      fail("source " + std::to_string(i) + " was \"" + std::string(parts[0]) +
           "\" but this run's is \"" + sources_[i].name + "\"");
    const std::string rows = std::to_string(sources_[i].table->size());
    const std::uint64_t fp = plan_state::parse_hex(parts[2], "run state: source fingerprint");
    if (parts[1] != rows || fp != fingerprints_[i])
      fail("source \"" + sources_[i].name + "\"'s metadata differs from the state's: " +
           std::string(parts[1]) + " rows, fingerprint " + std::string(parts[2]) +
           " when saved; now " + rows + " rows, fingerprint " + plan_state::hex(fingerprints_[i]));
  }
  // The draws the recorded spec gives (counts only: nothing is drawn yet) are the state's.
  std::vector<std::uint64_t> sizes;
  std::vector<std::string> source_names;
  for (const run_source& src : sources_) {
    sizes.push_back(src.table->size());
    source_names.push_back(src.name);
  }
  std::vector<std::uint64_t> counts;
  try {
    counts = draw_counts(sizes, source_names, st.draw);
  } catch (const error& e) {
    fail("draw=" + std::string(get("draw")) + ": " + e.what());
  }
  std::uint64_t samples = 0;
  for (std::size_t i = 0; i < counts.size(); ++i) {
    if (counts[i] != st.drawn[i])
      fail("the draw spec gives source \"" + sources_[i].name + "\" " + std::to_string(counts[i]) +
           " samples, the state recorded " + std::to_string(st.drawn[i]));
    samples += counts[i];
  }
  if (samples > max_epoch_samples)
    fail("drawn=" + std::string(get("drawn")) + " is more than an epoch holds (4294967295)");
  for (std::size_t i = 0; i <= st.segs.size(); ++i)
    check_recorded(i < st.segs.size() ? st.segs[i].settings : st.cur, i, st.epoch, st.step,
                   samples);
  return st;
}

void run_plan::apply_state(loaded_state&& st) {
  pos_.epoch = st.epoch;
  pos_.step = st.step;
  pos_.epoch_step = st.epoch_step;
  pos_.world = st.world;
  pos_.caps = std::move(st.caps);
  pos_.budget_cap = st.budget_cap;
  pos_.draw = std::move(st.draw);
  pos_.drawn = draw_epoch(sources_, pos_.draw, opts_.seed, pos_.epoch);
  for (std::size_t i = 0; i < sources_.size(); ++i)
    if (st.drawn[i] != pos_.drawn.count(i))
      throw error("run state: the draw spec gives source \"" + sources_[i].name + "\" " +
                  std::to_string(pos_.drawn.count(i)) + " samples, the state recorded " +
                  std::to_string(st.drawn[i]));
  pos_.ids_hash.reset();
  pos_.closed.clear();
  pos_.remaining.clear();
  pos_.all = true;
  for (const closed_segment& c : st.segs) {
    pos_.cur = c.settings;
    make_plan();
    pos_.consumed = c.end;
    close_segment();
  }
  pos_.cur = std::move(st.cur);
  make_plan();
  pos_.consumed = st.consumed;
  deal();
  if (step_in_deal() >= steps_total())
    throw error("run state: consumed=" + std::to_string(st.consumed) +
                " is past the end of the epoch's plan");
  follow_settings();
}

void run_plan::check_recorded(const segment_settings& s, std::size_t index, std::uint64_t epoch,
                              std::uint64_t step, std::uint64_t samples) const {
  const std::string which =
      "segment " + std::to_string(index) + " of epoch " + std::to_string(epoch);
  if (s.stage >= stages_.size())
    throw error("run state: " + which + " was planned under stage " + std::to_string(s.stage) +
                " but the run has " + std::to_string(stages_.size()) + " stages");
  const run_stage& st = stages_[s.stage];
  if (s.assign_hash != assign_hash(s.stage) ||
      s.batch_sizes.size() != pair_batch_sizes(st.config).size())
    throw error("run state: " + which + " was planned under stage " + std::to_string(s.stage) +
                " (\"" + st.name + "\") whose buckets, probabilities or rules have changed " +
                "since (settings hash " + plan_state::hex(s.assign_hash) + ", now " +
                plan_state::hex(assign_hash(s.stage)) +
                "): the samples it delivered cannot be recomputed; keep that stage as it was "
                "and add a new stage from step " +
                std::to_string(step) + " on");
  const std::vector<std::int64_t> now = pair_batch_sizes(st.config);
  for (std::size_t i = 0; i < now.size(); ++i)
    if ((now[i] == 0) != (s.batch_sizes[i] == 0))
      throw error("run state: " + which + ": batch size " + std::to_string(s.batch_sizes[i]) +
                  " of " + pair_name(st.config, i) + ", which stage " + std::to_string(s.stage) +
                  " (\"" + st.name + "\") has " + (now[i] == 0 ? "disabled" : "enabled"));
    else if (s.batch_sizes[i] > now[i] && static_cast<std::uint64_t>(s.batch_sizes[i]) > samples)
      throw error("run state: " + which + ": batch size " + std::to_string(s.batch_sizes[i]) +
                  " of " + pair_name(st.config, i) + " is above both stage " +
                  std::to_string(s.stage) + " (\"" + st.name + "\")'s " + std::to_string(now[i]) +
                  " and the epoch's " + std::to_string(samples) +
                  " drawn samples: not a batch size a plan of this epoch had");
}

}  // namespace vbucket
