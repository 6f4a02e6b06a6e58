/// `vbucket._vbucket`: the nanobind module under the `vbucket` Python package. Glue only: it
/// converts Python values (JSON text, numpy columns, decimal seeds, state strings) and calls the
/// library (`json::parse_bucket_config`, `load_meta_csv`, `batch_sampler`, `assign_epoch`,
/// `compute_plan_stats`, `encode_opensora_batch`); every rule, seed convention and total is the
/// library's. `vbucket::error` becomes ValueError. Calls that assign or plan release the GIL.

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <charconv>     // std::to_chars (numbers in messages)
#include <cmath>        // std::isnan, std::isfinite, std::trunc
#include <cstdint>      // std::int64_t, std::uint64_t, std::uint32_t
#include <cstring>      // std::memcpy (index strings)
#include <limits>       // quiet_NaN
#include <memory>       // std::shared_ptr, std::unique_ptr
#include <mutex>        // std::mutex: one sampler call at a time while the GIL is released
#include <optional>     // std::optional
#include <string>       // std::string
#include <string_view>  // std::string_view
#include <type_traits>  // std::is_floating_point_v
#include <utility>      // std::move, std::pair, std::declval
#include <vector>       // std::vector

#include "vbucket/batch_sampler.hpp"
#include "vbucket/csv.hpp"
#include "vbucket/epoch_plan.hpp"
#include "vbucket/explain.hpp"
#include "vbucket/json/bucket_config.hpp"
#include "vbucket/opensora_lifecycle.hpp"
#include "vbucket/packed_plan.hpp"
#include "vbucket/plan_stats.hpp"
#include "vbucket/seeding.hpp"
#include "vbucket/vbucket.hpp"
#if VBUCKET_PY_HAS_FMT
#include "vbucket/fmt/plan_table.hpp"
#endif

namespace nb = nanobind;
using namespace nb::literals;

namespace {

using vbucket::big_seed;
using vbucket::bucket_config;
using vbucket::bucket_id;
using vbucket::meta_table;
using vbucket::plan_state;
using vbucket::rng_mode;

// ---------------------------------------------------------------------------------------------
// Names from Python
// ---------------------------------------------------------------------------------------------

enum class rule_kind { opensora_v2, opensora_v12 };

rule_kind parse_rule(std::string_view name) {
  if (name == "opensora-v2") return rule_kind::opensora_v2;
  if (name == "opensora-v1.2") return rule_kind::opensora_v12;
  throw vbucket::error("rule: unknown rule \"" + std::string(name) +
                       "\" (expected opensora-v2 or opensora-v1.2)");
}

rng_mode parse_rng(std::string_view name) {
  if (const auto m = vbucket::parse_rng_mode(name)) return *m;
  throw vbucket::error("rng: unknown random mode \"" + std::string(name) +
                       "\" (expected fast or numpy)");
}

vbucket::incomplete_policy parse_policy(std::string_view name) {
  if (const auto p = vbucket::parse_policy(name)) return *p;
  throw vbucket::error("policy: unknown policy \"" + std::string(name) +
                       "\" (expected pad, drop or downgrade)");
}

/// A fingerprint as Python shows it: "0x" and the library's 16 hex digits.
std::string hex64(std::uint64_t v) { return "0x" + plan_state::hex(v); }

std::uint64_t parse_hex64(std::string_view s) { return plan_state::parse_hex(s); }

// ---------------------------------------------------------------------------------------------
// Config
// ---------------------------------------------------------------------------------------------

/// A validated config for one rule's resolution tables (Open-Sora 2.0's or v1.2's).
struct py_config {
  std::shared_ptr<const bucket_config> config;
  rule_kind rule = rule_kind::opensora_v2;
};

py_config config_from_text(const std::string& text, const std::string& where,
                           const std::string& rule) {
  py_config c;
  c.rule = parse_rule(rule);
  c.config = c.rule == rule_kind::opensora_v2
                 ? std::make_shared<const bucket_config>(vbucket::json::parse_bucket_config(
                       text, vbucket::opensora_v2_tables{}, where))
                 : std::make_shared<const bucket_config>(vbucket::json::parse_bucket_config(
                       text, vbucket::opensora_v12_tables{}, where));
  return c;
}

py_config config_from_path(const std::string& path, const std::string& rule) {
  py_config c;
  c.rule = parse_rule(rule);
  c.config = c.rule == rule_kind::opensora_v2
                 ? std::make_shared<const bucket_config>(
                       vbucket::json::load_bucket_config(path, vbucket::opensora_v2_tables{}))
                 : std::make_shared<const bucket_config>(
                       vbucket::json::load_bucket_config(path, vbucket::opensora_v12_tables{}));
  return c;
}

/// Every bucket of the config by id: (resolution, frames, ratio, T, H, W, batch size; 0 =
/// disabled).
nb::list config_buckets(const py_config& c) {
  nb::list out;
  const bucket_config& cfg = *c.config;
  for (std::size_t b = 0; b < cfg.num_buckets(); ++b) {
    const auto id = static_cast<bucket_id>(b);
    const auto& frames = cfg.frames_of(id);
    const auto& ratio = cfg.ratio_of(id);
    out.append(nb::make_tuple(cfg.resolution_of(id).info.name, frames.frames, ratio.key,
                              frames.frames, ratio.height, ratio.width, frames.batch_size));
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Metadata
// ---------------------------------------------------------------------------------------------

using column = nb::ndarray<nb::ro, nb::ndim<1>, nb::device::cpu>;

std::string number_text(double v) {
  if (std::isnan(v)) return "NaN";
  char text[32];
  const auto [end, ec] = std::to_chars(text, text + sizeof text, v);
  (void)ec;  // 32 characters hold any double's shortest form
  return std::string(text, end);
}

/// A size column read as the CSV reader reads its text: an integer from 1 to `max`, written as
/// an integer or as a float with an integral value (pandas' integer column that once held NaN).
struct size_reader {
  const std::string& where;
  const char* name;
  std::int64_t max;

  [[noreturn]] void fail(std::size_t i, const std::string& what) const {
    throw vbucket::error(where + ": sample " + std::to_string(i) + ", column \"" + name +
                         "\": " + what);
  }
  std::string range() const { return vbucket::meta_size_expectation(max); }

  template <class T>
  std::int64_t operator()(std::size_t i, T v) const {
    if constexpr (std::is_floating_point_v<T>) {
      const double d = static_cast<double>(v);
      bool whole = false;
      if (const auto size = vbucket::meta_size_value(d, max, &whole)) return *size;
      if (!whole) fail(i, number_text(d) + " is not an integer (expected " + range() + ")");
      fail(i, "must be " + range() + ", got " + number_text(d));
    } else if constexpr (std::is_signed_v<T>) {
      if (v < 1 || static_cast<std::int64_t>(v) > max)
        fail(i, "must be " + range() + ", got " + std::to_string(v));
      return static_cast<std::int64_t>(v);
    } else {
      if (v < 1 || static_cast<std::uint64_t>(v) > static_cast<std::uint64_t>(max))
        fail(i, "must be " + range() + ", got " + std::to_string(v));
      return static_cast<std::int64_t>(v);
    }
  }
};

/// An fps column under the library's rule (`meta_fps_value`): NaN or 0 = unknown (NaN), otherwise a
/// finite positive number.
struct fps_reader {
  const std::string& where;

  template <class T>
  double operator()(std::size_t i, T v) const {
    const auto d = static_cast<double>(v);
    if (const auto rate = vbucket::meta_fps_value(d)) return *rate;
    throw vbucket::error(where + ": sample " + std::to_string(i) + ", column \"fps\": must be " +
                         std::string(vbucket::meta_fps_expectation) + ", got " + number_text(d));
  }
};

/// Calls `f(element pointer cast to T)` for the column's dtype; TypeError for other dtypes.
template <class F>
void with_dtype(const column& a, const char* name, F&& f) {
  const nb::dlpack::dtype t = a.dtype();
  if (t == nb::dtype<std::int64_t>()) return f(static_cast<const std::int64_t*>(nullptr));
  if (t == nb::dtype<std::int32_t>()) return f(static_cast<const std::int32_t*>(nullptr));
  if (t == nb::dtype<std::int16_t>()) return f(static_cast<const std::int16_t*>(nullptr));
  if (t == nb::dtype<std::int8_t>()) return f(static_cast<const std::int8_t*>(nullptr));
  if (t == nb::dtype<std::uint64_t>()) return f(static_cast<const std::uint64_t*>(nullptr));
  if (t == nb::dtype<std::uint32_t>()) return f(static_cast<const std::uint32_t*>(nullptr));
  if (t == nb::dtype<std::uint16_t>()) return f(static_cast<const std::uint16_t*>(nullptr));
  if (t == nb::dtype<std::uint8_t>()) return f(static_cast<const std::uint8_t*>(nullptr));
  if (t == nb::dtype<double>()) return f(static_cast<const double*>(nullptr));
  if (t == nb::dtype<float>()) return f(static_cast<const float*>(nullptr));
  throw nb::type_error(
      (std::string("column \"") + name + "\" must hold integers or floats (a numeric numpy dtype)")
          .c_str());
}

/// Reads column `a` element by element (any stride) into `out` through `read(i, value)`.
template <class Out, class Read>
void read_column(const column& a, const char* name, const std::vector<std::uint8_t>* invalid,
                 std::vector<Out>& out, Out invalid_value, const Read& read) {
  with_dtype(a, name, [&](auto tag) {
    using T = std::remove_cv_t<std::remove_pointer_t<decltype(tag)>>;
    const auto* base = static_cast<const T*>(a.data());
    const std::int64_t stride = a.stride(0);
    const std::size_t n = a.shape(0);
    out.resize(n);
    for (std::size_t i = 0; i < n; ++i) {
      if (invalid && (*invalid)[i]) {
        out[i] = invalid_value;
        continue;
      }
      out[i] = read(i, base[static_cast<std::int64_t>(i) * stride]);
    }
  });
}

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

py_streamed_meta streamed_meta(const std::string& path, std::size_t chunk_rows) {
  if (chunk_rows == 0) throw vbucket::error("StreamedCsv: chunk_rows must be at least 1");
  auto csv = std::make_shared<const vbucket::streamed_meta_csv>(
      vbucket::streamed_meta_csv{path, chunk_rows});
  nb::gil_scoped_release release;
  csv->check();  // a missing file or a bad header now, not at the first epoch
  return {std::move(csv)};
}

py_meta meta_from_arrays(const column& num_frames, const column& height, const column& width,
                         const column& fps, std::optional<column> invalid,
                         const std::string& where) {
  const std::size_t n = num_frames.shape(0);
  if (height.shape(0) != n || width.shape(0) != n || fps.shape(0) != n ||
      (invalid && invalid->shape(0) != n))
    throw vbucket::error(where +
                         ": columns num_frames, height, width and fps have different "
                         "lengths (" +
                         std::to_string(n) + ", " + std::to_string(height.shape(0)) + ", " +
                         std::to_string(width.shape(0)) + ", " + std::to_string(fps.shape(0)) +
                         ")");
  std::vector<std::uint8_t> mask;
  if (invalid) {
    if (invalid->dtype() != nb::dtype<bool>())
      throw nb::type_error("the invalid-row mask must be a boolean array");
    mask.resize(n);
    const auto* m = static_cast<const bool*>(invalid->data());
    for (std::size_t i = 0; i < n; ++i)
      mask[i] = m[static_cast<std::int64_t>(i) * invalid->stride(0)];
  }
  auto t = std::make_shared<meta_table>();
  {
    nb::gil_scoped_release release;
    const std::vector<std::uint8_t>* m = invalid ? &mask : nullptr;
    std::vector<std::int64_t> f, h, w;
    std::vector<double> r;
    read_column(num_frames, "num_frames", m, f, std::int64_t{0},
                size_reader{where, "num_frames", vbucket::max_meta_frames});
    read_column(height, "height", m, h, std::int64_t{0},
                size_reader{where, "height", vbucket::max_meta_side});
    read_column(width, "width", m, w, std::int64_t{0},
                size_reader{where, "width", vbucket::max_meta_side});
    read_column(fps, "fps", m, r, std::numeric_limits<double>::quiet_NaN(), fps_reader{where});
    t->reserve(n);
    for (std::size_t i = 0; i < n; ++i) t->push_back({f[i], h[i], w[i], r[i]});
  }
  return {std::move(t)};
}

py_meta meta_from_csv(const std::string& path) {
  nb::gil_scoped_release release;
  return {std::make_shared<const meta_table>(vbucket::load_meta_csv(path))};
}

template <class T>
nb::ndarray<nb::numpy, T, nb::ndim<1>> to_numpy(std::vector<T> v) {
  auto* owner = new std::vector<T>(std::move(v));
  nb::capsule free(owner, [](void* p) noexcept { delete static_cast<std::vector<T>*>(p); });
  return nb::ndarray<nb::numpy, T, nb::ndim<1>>(owner->data(), {owner->size()}, free);
}

/// The table's columns as numpy arrays (copies).
nb::tuple meta_columns(const py_meta& m) {
  const meta_table& t = *m.table;
  std::vector<std::int64_t> f(t.size()), h(t.size()), w(t.size());
  std::vector<double> r(t.size());
  for (std::size_t i = 0; i < t.size(); ++i) {
    const vbucket::sample_meta s = t[i];
    f[i] = s.num_frames;
    h[i] = s.height;
    w[i] = s.width;
    r[i] = s.fps;
  }
  return nb::make_tuple(to_numpy(std::move(f)), to_numpy(std::move(h)), to_numpy(std::move(w)),
                        to_numpy(std::move(r)));
}

// ---------------------------------------------------------------------------------------------
// Sampler
// ---------------------------------------------------------------------------------------------

/// This rank's packed batches (`batch_sampler::packed_steps`, the same for every sampler type).
using packed_steps = vbucket::packed_rank_steps;

/// What the module calls on a `batch_sampler` of any rule and source family.
class sampler_base {
 public:
  virtual ~sampler_base() = default;
  virtual void set_epoch(std::uint64_t e) = 0;
  virtual std::uint64_t epoch() const = 0;
  virtual void advance(std::uint64_t steps) = 0;
  virtual plan_state state() const = 0;
  virtual void load_state(const plan_state& s, std::optional<std::uint64_t> fingerprint) = 0;
  virtual vbucket::rank_steps batches() const = 0;
  virtual std::uint64_t fingerprint() const = 0;
  virtual vbucket::plan_stats stats() const = 0;
  virtual vbucket::step_balance_stats balance() const = 0;
  virtual vbucket::epoch_schedule epoch_schedule_from_start() const = 0;
  /// The epoch dealt to this world from global position `from` (whatever the state).
  virtual vbucket::epoch_schedule schedule_from(std::uint64_t from) const = 0;
  virtual vbucket::packed_schedule packing_schedule_from(std::uint64_t from) const = 0;
  /// The schedule the state walks (this world's deal of the epoch), for the loader.
  virtual vbucket::epoch_schedule schedule() const = 0;
  virtual std::uint32_t world() const = 0;
  virtual std::uint32_t rank() const = 0;
  virtual bool packed() const = 0;
  virtual packed_steps packed_batches() const = 0;
  virtual vbucket::packed_schedule packed_schedule_from_start() const = 0;
  /// The packed schedule dealt from the current state (packing samplers only).
  virtual vbucket::packed_schedule packing_schedule() const = 0;
  virtual vbucket::packed_stats packed_stats() const = 0;
  /// This rank's steps from the state, either batching.
  std::size_t size() const { return packed() ? packed_batches().size() : batches().size(); }
  /// (steps, world) of the whole epoch from its start, either batching.
  std::pair<std::uint64_t, std::uint32_t> epoch_shape() const {
    if (packed()) {
      const vbucket::packed_schedule s = packed_schedule_from_start();
      return {s.steps(), s.world_size()};
    }
    const vbucket::epoch_schedule s = epoch_schedule_from_start();
    return {s.steps(), s.world_size()};
  }
};

template <class Samples, class Rule, class Sources>
class sampler_impl final : public sampler_base {
 public:
  sampler_impl(std::shared_ptr<const Samples> meta, std::shared_ptr<const bucket_config> cfg,
               Rule rule, vbucket::sampler_options o, Sources sources)
      : meta_(std::move(meta)),
        s_(*meta_, std::move(cfg), std::move(rule), o, std::move(sources)) {}

  void set_epoch(std::uint64_t e) override { s_.set_epoch(e); }
  std::uint64_t epoch() const override { return s_.epoch(); }
  void advance(std::uint64_t steps) override { s_.advance(steps); }
  plan_state state() const override { return s_.state(); }
  void load_state(const plan_state& st, std::optional<std::uint64_t> fp) override {
    if (fp) {
      s_.load_state(st, *fp);
    } else {
      s_.load_state(st);
    }
  }
  vbucket::rank_steps batches() const override { return s_.batches(); }
  std::uint64_t fingerprint() const override { return s_.fingerprint(); }
  vbucket::plan_stats stats() const override { return s_.stats(); }
  vbucket::step_balance_stats balance() const override {
    return vbucket::step_balance(s_.schedule());
  }
  /// The whole epoch dealt to this world, from its start (whatever the state).
  vbucket::epoch_schedule epoch_schedule_from_start() const override { return schedule_from(0); }
  vbucket::epoch_schedule schedule_from(std::uint64_t from) const override {
    return s_.plan().deal(s_.world_size(), from, s_.options().drop_last);
  }
  vbucket::packed_schedule packing_schedule_from(std::uint64_t from) const override {
    return s_.packing().deal(s_.world_size(), from, s_.options().drop_last);
  }
  vbucket::epoch_schedule schedule() const override { return s_.schedule(); }
  std::uint32_t world() const override { return s_.world_size(); }
  std::uint32_t rank() const override { return s_.rank(); }
  bool packed() const override { return s_.packed(); }
  packed_steps packed_batches() const override { return s_.packed_batches(); }
  vbucket::packed_schedule packed_schedule_from_start() const override {
    return packing_schedule_from(0);
  }
  vbucket::packed_schedule packing_schedule() const override { return s_.packing_schedule(); }
  vbucket::packed_stats packed_stats() const override {
    return vbucket::compute_packed_stats(s_.packing_schedule());
  }

 private:
  std::shared_ptr<const Samples> meta_;  // before s_, which views the table (copies a streamed CSV)
  vbucket::batch_sampler<Samples, Rule, Sources> s_;
};

struct sampler_args {
  std::string rule = "opensora-v2";
  std::string rng{vbucket::to_string(vbucket::defaults::rng)};
  std::string seed = std::to_string(vbucket::defaults::seed);  ///< decimal: NumPy seeds may be huge
  std::uint32_t world = vbucket::defaults::world;
  std::uint32_t rank = 0;
  std::string policy{vbucket::policy_name(vbucket::defaults::policy)};
  bool drop_last = false;
  std::uint32_t balance_group = 0;
  double fps_max = 16.0;
  std::int64_t frame_interval = 1;
  unsigned threads = 0;
  std::string batching = "fixed";
  double token_budget = 0.0;
  bool drop_oversized = false;
  /// The token formula (`vbucket::token_formula`): compression T, H, W and patch T, H, W.
  std::vector<std::int64_t> compression = {vbucket::token_formula{}.compression_t,
                                           vbucket::token_formula{}.compression_h,
                                           vbucket::token_formula{}.compression_w};
  std::vector<std::int64_t> patch = {vbucket::token_formula{}.patch_t,
                                     vbucket::token_formula{}.patch_h,
                                     vbucket::token_formula{}.patch_w};
};

/// The sampler's token formula from its (compression, patch) triples; errors name the argument.
vbucket::token_formula token_formula_of(const sampler_args& a) {
  for (const auto* v : {&a.compression, &a.patch})
    if (v->size() != 3)
      throw vbucket::error(std::string(v == &a.compression ? "compression" : "patch") +
                           " must be three integers (T, H, W), got " + std::to_string(v->size()));
  const vbucket::token_formula f{a.compression[0], a.compression[1], a.compression[2],
                                 a.patch[0],       a.patch[1],       a.patch[2]};
  f.validate();
  return f;
}

template <class Samples, class Rule>
std::unique_ptr<sampler_base> make_sampler_for(std::shared_ptr<const Samples> meta,
                                               const py_config& cfg, Rule rule,
                                               const sampler_args& a) {
  const rng_mode mode = parse_rng(a.rng);
  const big_seed seed = big_seed::parse(a.seed);
  vbucket::check_seed(mode, seed);
  vbucket::sampler_options o;
  o.world = a.world;
  o.rank = a.rank;
  o.rng = mode;
  o.policy = parse_policy(a.policy);
  o.drop_last = a.drop_last;
  o.balance_group = a.balance_group;
  o.threads = a.threads;
  const auto batching = vbucket::parse_batching(a.batching);
  if (!batching)
    throw vbucket::error("batching: unknown batching \"" + a.batching +
                         "\" (expected fixed or packed)");
  o.batching = *batching;
  o.token_budget = a.token_budget;
  o.drop_oversized = a.drop_oversized;
  o.tokens = token_formula_of(a);
  o.seed = vbucket::plan_seed(seed);
  if (vbucket::seed_u64(seed)) {
    return std::make_unique<sampler_impl<Samples, Rule, vbucket::builtin_sources>>(
        std::move(meta), cfg.config, std::move(rule), o, vbucket::builtin_sources{});
  }
  o.rng = rng_mode::fast;  // the family draws NumPy's: rng applies to the built-in sources only
  return std::make_unique<sampler_impl<Samples, Rule, vbucket::numpy_seed_family>>(
      std::move(meta), cfg.config, std::move(rule), o, vbucket::numpy_seed_family{seed});
}

/// A sampler of one rank, and the lock that keeps its calls one at a time.
class py_sampler {
 public:
  py_sampler(const py_meta& meta, const py_config& cfg, const sampler_args& a)
      : lifecycle(a.world), config_(cfg), meta_(meta.table), args_(a) {
    make(meta.table, cfg, a);
  }
  /// Over a streamed CSV: no table is held (`meta()` is null).
  py_sampler(const py_streamed_meta& meta, const py_config& cfg, const sampler_args& a)
      : lifecycle(a.world), config_(cfg), args_(a) {
    make(meta.csv, cfg, a);
  }

  template <class F>
  auto locked(F&& f) const {
    nb::gil_scoped_release release;
    std::lock_guard lock(mutex_);
    return f(*s_);
  }

  const py_config& config() const noexcept { return config_; }
  /// The table, or null for a sampler over a streamed CSV.
  const std::shared_ptr<const meta_table>& meta() const noexcept { return meta_; }
  const sampler_args& args() const noexcept { return args_; }

  /// One step done (a batch handed out), without releasing the GIL: cheap, once per batch.
  void advance_one() {
    std::lock_guard lock(mutex_);
    s_->advance(1);
  }

  /// A Python iteration ran to its end: the next one replays the epoch from its start, as
  /// iterating a torch sampler twice without set_epoch does. Cleared by set_epoch and loads.
  bool finished = false;
  /// Open-Sora's lifecycle (the drop-in sampler's set_step / state_dict(n) / len): the anchor
  /// of this epoch's step numbering. Used with the GIL held.
  vbucket::opensora_lifecycle lifecycle;

 private:
  template <class Samples>
  void make(std::shared_ptr<const Samples> samples, const py_config& cfg, const sampler_args& a) {
    const rule_kind rule = parse_rule(a.rule);
    if (rule != cfg.rule)
      throw vbucket::error(
          "the config was loaded for rule " +
          std::string(cfg.rule == rule_kind::opensora_v2 ? "opensora-v2" : "opensora-v1.2") +
          ", the sampler's rule is " + a.rule);
    if (rule == rule_kind::opensora_v2) {
      s_ = make_sampler_for(std::move(samples), cfg, vbucket::opensora_v2_rule{a.fps_max}, a);
    } else {
      s_ = make_sampler_for(std::move(samples), cfg, vbucket::opensora_v12_rule{a.frame_interval},
                            a);
    }
  }

  py_config config_;
  std::shared_ptr<const meta_table> meta_;
  sampler_args args_;
  std::unique_ptr<sampler_base> s_;
  mutable std::mutex mutex_;
};

/// The state as the library writes it ("vbucket-plan seed=S epoch=E consumed=C balance=G").
std::string state_text(const py_sampler& s) {
  return s.locked([](sampler_base& b) { return b.state().to_string(); });
}

/// Loads a state string (any rank's, any world size's): moves to its epoch, then resumes; with
/// a fingerprint, refuses a state of another plan.
void load_state_text(py_sampler& s, const std::string& text,
                     std::optional<std::string> fingerprint) {
  const plan_state st = plan_state::parse(text);
  const std::optional<std::uint64_t> fp =
      fingerprint ? std::optional<std::uint64_t>(parse_hex64(*fingerprint)) : std::nullopt;
  s.locked([&](sampler_base& b) {
    if (b.epoch() != st.epoch) b.set_epoch(st.epoch);
    b.load_state(st, fp);
    return 0;
  });
  s.finished = false;
}

/// A state string's fields (the library's parser): (plan seed, epoch, consumed global
/// batches, balance group or None).
nb::tuple parse_state(const std::string& text) {
  const plan_state st = plan_state::parse(text);
  return nb::make_tuple(st.seed, st.epoch, st.consumed,
                        st.balance_group ? nb::cast(*st.balance_group) : nb::none(),
                        st.world ? nb::cast(*st.world) : nb::none(),
                        st.fingerprint ? nb::cast(hex64(*st.fingerprint)) : nb::none());
}

/// The state after `steps` steps of this world from the start of the current epoch (Open-Sora's
/// `state_dict(num_steps)`).
std::string epoch_state_text(const py_sampler& s, std::uint64_t steps) {
  return s.locked([steps](sampler_base& b) {
    plan_state start = b.state();  // the epoch's start: the same plan fields, nothing consumed
    start.consumed = 0;
    return start.advanced(steps, b.world()).to_string();
  });
}

/// Loads a state given as fields (Open-Sora's dict: seed, epoch and the consumed count): the
/// run seed in decimal becomes the plan's seed as the library defines it.
void load_state_fields(py_sampler& s, const std::string& seed, std::uint64_t epoch,
                       std::uint64_t consumed, std::optional<std::uint32_t> balance_group,
                       std::optional<std::string> fingerprint) {
  const plan_state st(vbucket::plan_seed(big_seed::parse(seed)), epoch, consumed, balance_group);
  load_state_text(s, st.to_string(), std::move(fingerprint));
}

// --- Open-Sora's lifecycle (`vbucket::opensora_lifecycle`) -------------------------------------

/// The end of the epoch under this world as dealt from global position `from`: from + its
/// steps · world.
std::uint64_t dealt_end(sampler_base& b, std::uint64_t from) {
  const std::uint64_t steps =
      b.packed() ? b.packing_schedule_from(from).steps() : b.schedule_from(from).steps();
  return from + steps * b.world();
}

/// Moves a sampler to global position `consumed` of its current epoch.
void move_to(sampler_base& b, std::uint64_t consumed) {
  plan_state st = b.state();
  st.consumed = consumed;
  st.world.reset();  // a position of this world's deal
  b.load_state(st, std::nullopt);
}

/// Open-Sora's set_epoch: sets the epoch only. The position carries over to the new epoch
/// unless the current one is finished (iterated to its end, or its position at its end), as
/// Open-Sora's index is reset when an epoch ends.
void os_set_epoch(py_sampler& s, std::uint64_t e) {
  s.locked([&](sampler_base& b) {
    if (b.epoch() == e && !s.finished) return 0;
    const std::uint64_t p = b.state().consumed;
    const bool done = s.finished || p >= dealt_end(b, 0);
    b.set_epoch(e);
    if (done) {
      s.lifecycle.reset();
    } else if (p > 0) {
      move_to(b, p);
    }
    return 0;
  });
  s.finished = false;
}

/// Open-Sora's set_step(k) (see `opensora_lifecycle::set_step`).
void os_set_step(py_sampler& s, std::uint64_t k) {
  s.locked([&](sampler_base& b) {
    if (const auto p = s.lifecycle.set_step(k, dealt_end(b, 0))) move_to(b, *p);
    return 0;
  });
  s.finished = false;
}

/// Open-Sora's reset(): the start of the current epoch.
void os_reset(py_sampler& s) {
  s.locked([&](sampler_base& b) {
    b.set_epoch(b.epoch());
    return 0;
  });
  s.lifecycle.reset();
  s.finished = false;
}

/// Open-Sora's load_state_dict for a vbucket state: moves to its epoch and position (checked
/// against the fingerprint it records or `fingerprint`) and anchors the step numbering there.
void os_load(py_sampler& s, const std::string& text, std::optional<std::string> fingerprint) {
  load_state_text(s, text, std::move(fingerprint));
  s.lifecycle.load(plan_state::parse(text));
}

/// Open-Sora's state_dict(num_steps): the state after `num_steps` steps of this epoch in its
/// step numbering (anchored where a resume started).
std::string os_state(const py_sampler& s, std::uint64_t num_steps) {
  return s.locked([&](sampler_base& b) {
    const std::uint64_t from = s.lifecycle.anchor_position();
    plan_state st = b.state();
    st.consumed = s.lifecycle.position_after(num_steps, dealt_end(b, from));
    st.world = b.world();
    return st.to_string();
  });
}

/// What a copy of the sampler needs besides its arguments: (state, finished, anchor step,
/// anchor position).
nb::tuple os_snapshot(const py_sampler& s) {
  return nb::make_tuple(state_text(s), s.finished, s.lifecycle.anchor_step(),
                        s.lifecycle.anchor_position());
}

/// Restores `os_snapshot()` in a sampler made with the same arguments.
void os_restore(py_sampler& s, const nb::tuple& snap) {
  if (snap.size() != 4) throw vbucket::error("sampler snapshot: expected 4 fields");
  const auto text = nb::cast<std::string>(snap[0]);
  const bool finished = nb::cast<bool>(snap[1]);
  load_state_text(s, text, std::nullopt);
  s.lifecycle.restore(nb::cast<std::uint64_t>(snap[2]), nb::cast<std::uint64_t>(snap[3]));
  s.finished = finished;
}

/// The steps of the epoch in its step numbering: the whole epoch after an iteration ended,
/// else the anchor step + the steps dealt from the anchor.
std::uint64_t os_epoch_steps(const py_sampler& s) {
  return s.locked([&](sampler_base& b) -> std::uint64_t {
    if (s.finished) return (dealt_end(b, 0)) / b.world();
    const std::uint64_t from = s.lifecycle.anchor_position();
    return s.lifecycle.epoch_steps((dealt_end(b, from) - from) / b.world());
  });
}

/// A batch as a Python list: Open-Sora's "idx-T-H-W" strings (`encode_opensora_index`) or ints.
nb::object batch_list(const vbucket::batch& b, bool strings) {
  PyObject* list = PyList_New(static_cast<Py_ssize_t>(b.indices.size()));
  if (list == nullptr) throw nb::python_error();
  nb::object owner = nb::steal(list);
  if (strings) {
    // The library's encoding of the batch's first sample gives the "-T-H-W" every sample
    // shares; each string is then its index's digits and that suffix, written straight into
    // an ASCII str (no std::string per sample: 10 M strings in about a second, not three).
    const std::string first = vbucket::encode_opensora_index(
        {b.indices.empty() ? 0 : b.indices[0], b.frames, b.height, b.width});
    const std::string_view suffix = std::string_view(first).substr(first.find('-'));
    char digits[24];
    for (std::size_t i = 0; i < b.indices.size(); ++i) {
      const auto [end, ec] = std::to_chars(digits, digits + sizeof digits, b.indices[i]);
      (void)ec;  // 24 characters hold any 32-bit index
      const auto n = static_cast<std::size_t>(end - digits);
      PyObject* v = PyUnicode_New(static_cast<Py_ssize_t>(n + suffix.size()), 127);
      if (v == nullptr) throw nb::python_error();
      auto* data = static_cast<char*>(PyUnicode_DATA(v));
      std::memcpy(data, digits, n);
      std::memcpy(data + n, suffix.data(), suffix.size());
      PyList_SET_ITEM(list, static_cast<Py_ssize_t>(i), v);
    }
  } else {
    for (std::size_t i = 0; i < b.indices.size(); ++i) {
      PyObject* v = PyLong_FromUnsignedLong(b.indices[i]);
      if (v == nullptr) throw nb::python_error();
      PyList_SET_ITEM(list, static_cast<Py_ssize_t>(i), v);
    }
  }
  return owner;
}

/// A packed batch as a Python list: Open-Sora's "idx-T-H-W" strings of mixed shapes (the
/// library's `encode_opensora_batch`) or ints.
nb::object packed_list(const vbucket::packed_batch& b, bool strings) {
  nb::list out;
  if (strings) {
    for (const std::string& text : vbucket::encode_opensora_batch(b))
      out.append(nb::str(text.c_str()));
  } else {
    for (const std::uint32_t i : b.indices) out.append(i);
  }
  return out;
}

/// A Python iteration over this rank's batches from the sampler's state: each `__next__`
/// hands out one batch and advances the sampler by one step, so a state taken between two
/// batches is exact (as torchdata's StatefulDataLoader snapshots it).
class py_batches {
 public:
  py_batches(py_sampler& s, bool strings) : s_(&s), strings_(strings) {
    if (s.finished) {  // Open-Sora's reset() at the end of an iteration
      s.locked([](sampler_base& b) {
        b.set_epoch(b.epoch());
        return 0;
      });
      s.lifecycle.reset();
      s.finished = false;
    }
    if (s.locked([](sampler_base& b) { return b.packed(); })) {
      packed_ = s.locked([](sampler_base& b) { return b.packed_batches(); });
    } else {
      steps_ = s.locked([](sampler_base& b) { return b.batches(); });
    }
  }

  nb::object next() {
    if (next_ >= size()) {
      if (!done_) s_->finished = true;
      done_ = true;
      throw nb::stop_iteration();
    }
    nb::object list =
        packed_ ? packed_list((*packed_)[next_], strings_) : batch_list(steps_[next_], strings_);
    ++next_;
    s_->advance_one();
    return list;
  }
  std::size_t size() const noexcept { return packed_ ? packed_->size() : steps_.size(); }
  std::size_t remaining() const noexcept { return size() - next_; }

 private:
  py_sampler* s_;  // kept alive by the Python iterator (keep_alive)
  vbucket::rank_steps steps_;
  std::optional<packed_steps> packed_;
  std::size_t next_ = 0;
  bool strings_ = false;
  bool done_ = false;
};

/// This rank's batches from the state when it was made, by position (without advancing).
class py_steps {
 public:
  explicit py_steps(vbucket::rank_steps steps) : steps_(std::move(steps)) {}
  explicit py_steps(packed_steps steps) : packed_(std::move(steps)) {}

  std::size_t size() const noexcept { return packed_ ? packed_->size() : steps_.size(); }
  std::size_t position() const noexcept { return next_; }

  /// Batch `i` of these steps: (bucket id, T, H, W, indices as a numpy uint32 array, repeat);
  /// packed, the bucket ids and T, H, W are numpy arrays with one entry per index.
  nb::tuple at(std::size_t i) const {
    if (i >= size()) throw nb::index_error("step out of range");
    if (packed_) {
      const vbucket::packed_batch b = (*packed_)[i];
      std::vector<bucket_id> ids(b.buckets.begin(), b.buckets.end());
      std::vector<std::int64_t> t, h, w;
      for (std::size_t k = 0; k < b.size(); ++k) {
        const vbucket::sample_shape shape = b.shape(k);
        t.push_back(shape.frames);
        h.push_back(shape.height);
        w.push_back(shape.width);
      }
      std::vector<std::uint32_t> idx(b.indices.begin(), b.indices.end());
      return nb::make_tuple(to_numpy(std::move(ids)), to_numpy(std::move(t)),
                            to_numpy(std::move(h)), to_numpy(std::move(w)),
                            to_numpy(std::move(idx)), b.repeat);
    }
    const vbucket::batch b = steps_[i];
    std::vector<std::uint32_t> idx(b.indices.begin(), b.indices.end());
    return nb::make_tuple(b.bucket, b.frames, b.height, b.width, to_numpy(std::move(idx)),
                          b.repeat);
  }

 private:
  vbucket::rank_steps steps_;
  std::optional<packed_steps> packed_;
  std::size_t next_ = 0;
};

// ---------------------------------------------------------------------------------------------
// Statistics
// ---------------------------------------------------------------------------------------------

nb::dict counts_dict(const vbucket::plan_counts& c) {
  nb::dict d;
  d["buckets"] = c.buckets;
  d["grouped"] = c.grouped;
  d["moved_in"] = c.moved_in;
  d["moved_out"] = c.moved_out;
  d["samples"] = c.samples;
  d["batches"] = c.batches;
  d["pads"] = c.pads;
  d["dropped"] = c.dropped;
  d["slots"] = c.slots();
  d["cost"] = c.cost;
  return d;
}

/// `compute_plan_stats` of the sampler's epoch as dealt from its state, as plain Python data.
nb::dict stats_dict(const py_sampler& s) {
  if (s.locked([](sampler_base& b) { return b.packed(); })) {
    const vbucket::packed_stats st = s.locked([](sampler_base& b) { return b.packed_stats(); });
    nb::dict out;
    out["batching"] = "packed";
    out["token_budget"] = st.budget;
    out["samples"] = st.samples;
    out["unassigned"] = st.unassigned;
    out["invalid"] = st.invalid;
    out["dropped_disabled"] = st.dropped_disabled;
    out["dropped_oversized"] = st.dropped_oversized;
    out["batches"] = st.batches;
    out["mixed_batches"] = st.mixed_batches;
    out["min_entries"] = st.min_entries;
    out["max_entries"] = st.max_entries;
    out["mean_entries"] = st.mean_entries;
    out["min_batch_fill"] = st.min_batch_fill;
    out["total_cost"] = st.total_cost;
    out["fill"] = st.fill;
    nb::dict a;
    a["world"] = st.alignment.world;
    a["consumed"] = st.alignment.consumed;
    a["steps"] = st.alignment.steps;
    a["repeat_batches"] = st.alignment.repeat_batches;
    a["repeat_samples"] = st.alignment.repeat_samples;
    a["dropped_batches"] = st.alignment.dropped_batches;
    a["dropped_samples"] = st.alignment.dropped_samples;
    out["alignment"] = a;
    nb::dict bal;
    bal["steps"] = st.balance.steps;
    bal["max_over_mean"] = st.balance.max_over_mean;
    bal["mean_step_ratio"] = st.balance.mean_step_ratio;
    bal["worst_step_ratio"] = st.balance.worst_step_ratio;
    out["step_balance"] = bal;
    return out;
  }
  const auto [st, balance] = s.locked([](sampler_base& b) {
    return std::pair<vbucket::plan_stats, vbucket::step_balance_stats>(b.stats(), b.balance());
  });
  nb::dict out;
  nb::list buckets;
  for (const vbucket::bucket_stats& b : st.buckets) {
    nb::dict row = counts_dict(b.counts);
    row["bucket"] = b.bucket;
    row["resolution"] = b.resolution;
    row["frames"] = b.frames;
    row["ratio"] = b.ratio;
    row["T"] = b.frames;
    row["H"] = b.height;
    row["W"] = b.width;
    row["batch_size"] = b.batch_size;
    buckets.append(row);
  }
  out["buckets"] = buckets;
  out["images"] = counts_dict(st.images);
  out["videos"] = counts_dict(st.videos);
  out["total"] = counts_dict(st.total);
  out["unassigned"] = st.unassigned;
  out["invalid"] = st.invalid;
  nb::dict a;
  a["world"] = st.alignment.world;
  a["consumed"] = st.alignment.consumed;
  a["steps"] = st.alignment.steps;
  a["repeat_batches"] = st.alignment.repeat_batches;
  a["repeat_samples"] = st.alignment.repeat_samples;
  a["dropped_batches"] = st.alignment.dropped_batches;
  a["dropped_samples"] = st.alignment.dropped_samples;
  out["alignment"] = a;
  nb::dict bal;
  bal["steps"] = balance.steps;
  bal["max_over_mean"] = balance.max_over_mean;
  bal["mean_step_ratio"] = balance.mean_step_ratio;
  bal["worst_step_ratio"] = balance.worst_step_ratio;
  out["step_balance"] = bal;
  return out;
}

/// The bucket of every sample (`assign_epoch`, the seed convention `vbucket assign` uses):
/// ids, or -1 for no bucket and -2 for invalid metadata.
nb::ndarray<nb::numpy, bucket_id, nb::ndim<1>> assign_epoch(
    const py_meta& meta, const py_config& cfg, const std::string& rng, const std::string& seed,
    std::uint64_t epoch, double fps_max, std::int64_t frame_interval, unsigned threads) {
  const rng_mode mode = parse_rng(rng);
  const big_seed s = big_seed::parse(seed);
  std::vector<bucket_id> ids;
  {
    nb::gil_scoped_release release;
    if (cfg.rule == rule_kind::opensora_v2) {
      const vbucket::opensora_v2_rule rule{fps_max};
      rule.validate();
      ids = vbucket::assign_epoch(*cfg.config, *meta.table, rule, mode, s, epoch, threads);
    } else {
      const vbucket::opensora_v12_rule rule{frame_interval};
      rule.validate();
      ids = vbucket::assign_epoch(*cfg.config, *meta.table, rule, mode, s, epoch, threads);
    }
  }
  return to_numpy(std::move(ids));
}

/// The cost of every rank's batch at every step of the epoch from its start, step-major
/// (steps × world values; reshape with the world size): one plan, dealt once, for the report.
nb::ndarray<nb::numpy, double, nb::ndim<1>> step_costs(const py_sampler& s) {
  return to_numpy(s.locked([](sampler_base& b) {
    std::vector<double> out;
    if (b.packed()) {
      const vbucket::packed_schedule sch = b.packed_schedule_from_start();
      out.reserve(static_cast<std::size_t>(sch.steps() * sch.world_size()));
      for (std::uint64_t k = 0; k < sch.steps(); ++k)
        for (std::uint32_t r = 0; r < sch.world_size(); ++r) out.push_back(sch.at(k, r).cost);
      return out;
    }
    const vbucket::epoch_schedule sch = b.epoch_schedule_from_start();
    const vbucket::epoch_plan& plan = sch.plan();
    out.reserve(static_cast<std::size_t>(sch.steps() * sch.world_size()));
    for (std::uint64_t k = 0; k < sch.steps(); ++k)
      for (std::uint32_t r = 0; r < sch.world_size(); ++r)
        out.push_back(plan.bucket(sch.at(k, r).bucket).cost);
    return out;
  }));
}

/// One sample's walk through the rule (`vbucket::explain_sample`, the seed convention of
/// `assign_epoch`): (bucket, the text, the events as dicts).
nb::tuple explain_sample(const py_meta& meta, const py_config& cfg, const std::string& rng,
                         const std::string& seed, std::uint64_t epoch, double fps_max,
                         std::int64_t frame_interval, std::uint64_t index) {
  const rng_mode mode = parse_rng(rng);
  const big_seed s = big_seed::parse(seed);
  vbucket::check_seed(mode, s);
  vbucket::rule_explanation e;
  if (cfg.rule == rule_kind::opensora_v2) {
    const vbucket::opensora_v2_rule rule{fps_max};
    rule.validate();
    e = vbucket::explain_sample(*cfg.config, *meta.table, rule, index, mode, s, epoch);
  } else {
    const vbucket::opensora_v12_rule rule{frame_interval};
    rule.validate();
    e = vbucket::explain_sample(*cfg.config, *meta.table, rule, index, mode, s, epoch);
  }
  const bucket_config& c = *cfg.config;
  nb::list events;
  for (const vbucket::rule_event& ev : e.events) {
    nb::dict d;
    d["step"] = std::string(vbucket::step_name(ev.what));
    d["resolution"] = nb::none();
    d["frames"] = nb::none();
    if (ev.resolution >= 0) {
      const auto& r = c.resolutions()[static_cast<std::size_t>(ev.resolution)];
      d["resolution"] = r.info.name;
      if (ev.frames_index >= 0)
        d["frames"] = r.frames[static_cast<std::size_t>(ev.frames_index)].frames;
    }
    d["draw"] = ev.draw;
    d["probability"] = ev.probability;
    d["value"] = ev.value;
    d["passed"] = ev.passed;
    d["bucket"] = ev.bucket;
    events.append(d);
  }
  return nb::make_tuple(e.bucket, vbucket::describe(e, c), events);
}

#if VBUCKET_PY_HAS_FMT
/// `format_plan_table` of the sampler's epoch with its step balance: the table `vbucket stats`
/// prints.
std::string stats_table(const py_sampler& s) {
  return s.locked([](sampler_base& b) {
    const vbucket::plan_stats st = b.stats();
    const vbucket::step_balance_stats balance = b.balance();
    return vbucket::format_plan_table(st, &balance);
  });
}
#endif

}  // namespace

#if VBUCKET_PY_HAS_FFMPEG
#include "media_bindings.hpp"
#endif
#if VBUCKET_PY_HAS_EIGEN
#include "memory_bindings.hpp"
#endif

void vbucket_bind_cache(nb::module_& m);  // cache_bindings.cpp (issue 32)

NB_MODULE(_vbucket, m) {
  m.doc() = "vbucket's C++ core (glue only; see the vbucket package)";
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const vbucket::error& e) {
      PyErr_SetString(PyExc_ValueError, e.what());
    }
  });

  m.attr("DEFAULT_BALANCE_GROUP") = vbucket::default_balance_group;
  {
    // The run's defaults (vbucket::defaults): every Python keyword default is read from here.
    nb::dict d;
    d["rng"] = std::string(vbucket::to_string(vbucket::defaults::rng));
    d["seed"] = vbucket::defaults::seed;
    d["epoch"] = vbucket::defaults::epoch;
    d["policy"] = std::string(vbucket::policy_name(vbucket::defaults::policy));
    d["world"] = vbucket::defaults::world;
    const vbucket::token_formula f{};
    d["compression"] = nb::make_tuple(f.compression_t, f.compression_h, f.compression_w);
    d["patch"] = nb::make_tuple(f.patch_t, f.patch_h, f.patch_w);
    m.attr("DEFAULTS") = d;
  }
  m.attr("HAS_FMT") = static_cast<bool>(VBUCKET_PY_HAS_FMT);
  m.attr("HAS_FFMPEG") = static_cast<bool>(VBUCKET_PY_HAS_FFMPEG);
  m.attr("HAS_CUDA") = static_cast<bool>(VBUCKET_PY_HAS_CUDA);
#if VBUCKET_PY_HAS_FFMPEG
  bind_media(m);
#endif
  m.attr("HAS_EIGEN") = static_cast<bool>(VBUCKET_PY_HAS_EIGEN);
#if VBUCKET_PY_HAS_EIGEN
  bind_memory(m);
#endif
  vbucket_bind_cache(m);

  nb::class_<py_config>(m, "Config")
      .def_static("from_text", &config_from_text, "text"_a, "where"_a, "rule"_a)
      .def_static("from_path", &config_from_path, "path"_a, "rule"_a)
      .def_prop_ro("num_buckets", [](const py_config& c) { return c.config->num_buckets(); })
      .def("buckets", &config_buckets);

  nb::class_<py_meta>(m, "Meta")
      .def_static("from_arrays", &meta_from_arrays, "num_frames"_a, "height"_a, "width"_a, "fps"_a,
                  "invalid"_a.none(), "where"_a)
      .def_static("from_csv", &meta_from_csv, "path"_a)
      .def("__len__", [](const py_meta& m) { return m.table->size(); })
      .def("columns", &meta_columns);

  nb::class_<py_streamed_meta>(m, "StreamedCsv")
      .def(nb::new_(&streamed_meta), "path"_a, "chunk_rows"_a = std::size_t{1} << 20)
      .def_prop_ro("path", [](const py_streamed_meta& s) { return s.csv->path; })
      .def_prop_ro("chunk_rows", [](const py_streamed_meta& s) { return s.csv->chunk_rows; })
      .def("__repr__", [](const py_streamed_meta& s) {
        return "StreamedCsv(" + nb::cast<std::string>(nb::repr(nb::str(s.csv->path.c_str()))) +
               ", chunk_rows=" + std::to_string(s.csv->chunk_rows) + ")";
      });

  nb::class_<sampler_args>(m, "SamplerArgs")
      .def(nb::init<>())
      .def_rw("rule", &sampler_args::rule)
      .def_rw("rng", &sampler_args::rng)
      .def_rw("seed", &sampler_args::seed)
      .def_rw("world", &sampler_args::world)
      .def_rw("rank", &sampler_args::rank)
      .def_rw("policy", &sampler_args::policy)
      .def_rw("drop_last", &sampler_args::drop_last)
      .def_rw("balance_group", &sampler_args::balance_group)
      .def_rw("fps_max", &sampler_args::fps_max)
      .def_rw("frame_interval", &sampler_args::frame_interval)
      .def_rw("threads", &sampler_args::threads)
      .def_rw("batching", &sampler_args::batching)
      .def_rw("token_budget", &sampler_args::token_budget)
      .def_rw("drop_oversized", &sampler_args::drop_oversized)
      .def_rw("compression", &sampler_args::compression)
      .def_rw("patch", &sampler_args::patch);

  nb::class_<py_steps>(m, "Steps")
      .def("__len__", &py_steps::size)
      .def_prop_ro("position", &py_steps::position)
      .def("at", &py_steps::at, "i"_a);

  nb::class_<py_batches>(m, "Batches")
      .def("__iter__", [](nb::handle self) { return self; })
      .def("__next__", &py_batches::next)
      .def("__length_hint__", &py_batches::remaining);

  nb::class_<py_sampler>(m, "Sampler")
      .def(nb::init<const py_meta&, const py_config&, const sampler_args&>(), "meta"_a, "config"_a,
           "args"_a)
      .def(nb::init<const py_streamed_meta&, const py_config&, const sampler_args&>(), "meta"_a,
           "config"_a, "args"_a)
      .def(
          "set_epoch",
          [](py_sampler& s, std::uint64_t e) {
            s.locked([e](sampler_base& b) {
              b.set_epoch(e);
              return 0;
            });
          },
          "epoch"_a)
      .def_prop_ro(
          "epoch",
          [](const py_sampler& s) { return s.locked([](sampler_base& b) { return b.epoch(); }); })
      .def_prop_ro(
          "world",
          [](const py_sampler& s) { return s.locked([](sampler_base& b) { return b.world(); }); })
      .def_prop_ro(
          "rank",
          [](const py_sampler& s) { return s.locked([](sampler_base& b) { return b.rank(); }); })
      .def(
          "advance",
          [](py_sampler& s, std::uint64_t steps) {
            s.locked([steps](sampler_base& b) {
              b.advance(steps);
              return 0;
            });
          },
          "steps"_a = 1)
      .def(
          "iterate", [](py_sampler& s, bool strings) { return py_batches(s, strings); },
          "strings"_a, nb::keep_alive<0, 1>())
      .def_prop_ro("finished", [](const py_sampler& s) { return s.finished; })
      .def("state", &state_text)
      .def("consumed",
           [](const py_sampler& s) {
             return s.locked([](sampler_base& b) { return b.state().consumed; });
           })
      .def("load_state", &load_state_text, "state"_a, "fingerprint"_a.none())
      .def("steps",
           [](const py_sampler& s) {
             return s.locked([](sampler_base& b) {
               return b.packed() ? py_steps(b.packed_batches()) : py_steps(b.batches());
             });
           })
      .def("size",
           [](const py_sampler& s) { return s.locked([](sampler_base& b) { return b.size(); }); })
      .def("epoch_steps",
           [](const py_sampler& s) {
             return s.locked([](sampler_base& b) { return b.epoch_shape().first; });
           })
      .def("epoch_batches",
           [](const py_sampler& s) {
             return s.locked([](sampler_base& b) {
               const auto [steps, world] = b.epoch_shape();
               return steps * world;
             });
           })
      .def("epoch_state", &epoch_state_text, "steps"_a)
      .def("os_set_epoch", &os_set_epoch, "epoch"_a)
      .def("os_set_step", &os_set_step, "step"_a)
      .def("os_reset", &os_reset)
      .def("os_load", &os_load, "state"_a, "fingerprint"_a.none())
      .def("os_state", &os_state, "num_steps"_a)
      .def("os_epoch_steps", &os_epoch_steps)
      .def("os_started", [](py_sampler& s) { s.lifecycle.started(); })
      .def("table",
           [](const py_sampler& s) -> std::optional<py_meta> {
             if (!s.meta()) return std::nullopt;  // a streamed CSV holds no table
             return py_meta{s.meta()};
           })
      .def("os_snapshot", &os_snapshot)
      .def("os_restore", &os_restore, "snapshot"_a)
      .def("load_state_fields", &load_state_fields, "seed"_a, "epoch"_a, "consumed"_a,
           "balance_group"_a.none(), "fingerprint"_a.none())
      .def("fingerprint",
           [](const py_sampler& s) {
             return hex64(s.locked([](sampler_base& b) { return b.fingerprint(); }));
           })
      .def("stats", &stats_dict)
#if VBUCKET_PY_HAS_FMT
      .def("stats_table", &stats_table)
#endif
      ;

  m.def("parse_state", &parse_state, "state"_a);
  m.def("explain_sample", &explain_sample, "meta"_a, "config"_a, "rng"_a, "seed"_a, "epoch"_a,
        "fps_max"_a, "frame_interval"_a, "index"_a);
  m.def("step_costs", &step_costs, "sampler"_a);
  m.def("assign_epoch", &assign_epoch, "meta"_a, "config"_a, "rng"_a, "seed"_a, "epoch"_a,
        "fps_max"_a, "frame_interval"_a, "threads"_a);
  m.def(
      "encode_opensora_index",
      [](std::uint64_t index, std::int64_t t, std::int64_t h, std::int64_t w) {
        return vbucket::encode_opensora_index({index, t, h, w});
      },
      "index"_a, "frames"_a, "height"_a, "width"_a);
  m.def(
      "decode_opensora_index",
      [](const std::string& s) {
        const vbucket::indexed_sample x = vbucket::decode_opensora_index(s);
        return nb::make_tuple(x.index, x.frames, x.height, x.width);
      },
      "s"_a);
}
