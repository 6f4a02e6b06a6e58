/// `vbucket._vbucket`: the nanobind module under the `vbucket` Python package. Glue only: it
/// converts Python values (JSON text, numpy columns, decimal seeds, state strings) and calls the
/// library (`json::parse_bucket_config`, `load_meta_csv`, `run_spec`, `make_any_sampler`,
/// `opensora_sampler`, `assign_epoch`, `compute_plan_stats`, `encode_opensora_batch`); every
/// rule, default, seed convention and total is the library's. A run's keyword arguments reach
/// the library as one `run_spec` (`RunSpec(dict)`: string keys and values, checked by the spec;
/// `RUN_FIELDS` is its field table). `vbucket::error` becomes ValueError. Calls that assign or
/// plan release the GIL.

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/map.h>
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

#include "vbucket/bucket/csv.hpp"
#include "vbucket/bucket/explain.hpp"
#include "vbucket/bucket/seeding.hpp"
#include "vbucket/json/bucket_config.hpp"
#include "vbucket/json/run_spec.hpp"
#include "vbucket/plan/epoch_plan.hpp"
#include "vbucket/plan/packed_plan.hpp"
#include "vbucket/plan/plan_stats.hpp"
#include "vbucket/run/run_spec.hpp"
#include "vbucket/sample/any_sampler.hpp"
#include "vbucket/sample/batch_sampler.hpp"
#include "vbucket/sample/opensora_sampler.hpp"
#include "vbucket/vbucket.hpp"
#if VBUCKET_PY_HAS_FMT
#include "vbucket/fmt/plan_table.hpp"
#endif

#include "glue.hpp"  // py_config, py_meta, py_sampler, to_numpy, hex64

namespace nb = nanobind;
using namespace nb::literals;

namespace {

using vbucket::big_seed;
using vbucket::bucket_config;
using vbucket::bucket_id;
using vbucket::meta_table;
using vbucket::plan_state;
using vbucket::rng_mode;
using vbucket::rule_kind;
using vbucket::run_spec;
using vbucket_py::hex64;
using vbucket_py::os_ref;
using vbucket_py::parse_hex64;
using vbucket_py::py_config;
using vbucket_py::py_meta;
using vbucket_py::py_sampler;
using vbucket_py::py_streamed_meta;
using vbucket_py::sampler_ref;
using vbucket_py::to_numpy;

// ---------------------------------------------------------------------------------------------
// Names from Python
// ---------------------------------------------------------------------------------------------

/// The spec of a run from Python's keyword arguments, as string keys and values (the package
/// converts each value by its field's kind): the library checks the names, the values and the
/// combination; errors name the key.
run_spec spec_from_dict(const std::map<std::string, std::string>& fields) {
  return run_spec::from_map(fields);
}

/// Every field of `spec` that has a value (all, or those `run_spec::to_map` lists), as the
/// Python value of its kind (count and seed: int, number: float, flag: bool, triple: a tuple of
/// 3 ints, choice and path: str). Of a default spec: the keyword defaults of the package, its
/// docstrings and its stubs (`DEFAULTS`).
nb::dict field_values(const run_spec& spec, bool only_set) {
  nb::dict out;
  const auto set = spec.to_map();
  for (const vbucket::run_field& f : run_spec::fields()) {
    const std::string text = vbucket::field_text(spec, f);
    const std::string name(f.name);
    if (text.empty() || (only_set && set.count(name) == 0)) continue;
    switch (f.kind) {
      case vbucket::field_kind::count:
      case vbucket::field_kind::seed:
        out[name.c_str()] = nb::steal(PyLong_FromString(text.c_str(), nullptr, 10));
        break;
      case vbucket::field_kind::number:
        out[name.c_str()] = std::stod(text);
        break;
      case vbucket::field_kind::flag:
        out[name.c_str()] = text == "true";
        break;
      case vbucket::field_kind::triple: {
        const auto v = *vbucket::detail::spec_triple(text);
        out[name.c_str()] = nb::make_tuple(v[0], v[1], v[2]);
        break;
      }
      case vbucket::field_kind::choice:
      case vbucket::field_kind::path:
        out[name.c_str()] = text;
        break;
    }
  }
  return out;
}

/// The field table as Python data: one dict per field (name, kind, value_name, choices,
/// default: the text of a default spec, "" when none, help, use: "plan" or "media").
nb::list run_fields() {
  nb::list out;
  const run_spec defaults;
  for (const vbucket::run_field& f : run_spec::fields()) {
    nb::dict d;
    d["name"] = std::string(f.name);
    d["kind"] = std::string(vbucket::kind_name(f.kind));
    d["value_name"] = std::string(f.value_name);
    nb::list choices;
    for (std::string_view c = f.choices; !c.empty();) {
      const std::size_t bar = c.find('|');
      choices.append(std::string(c.substr(0, bar)));
      c = bar == std::string_view::npos ? std::string_view() : c.substr(bar + 1);
    }
    d["choices"] = choices;
    d["min"] = f.min;
    d["max"] = f.max;
    d["default"] = vbucket::field_text(defaults, f);
    d["help"] = std::string(f.help);
    d["use"] = f.use == vbucket::field_use::plan ? "plan" : "media";
    out.append(d);
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Config
// ---------------------------------------------------------------------------------------------

py_config config_from_text(const std::string& text, const std::string& where,
                           const std::string& rule) {
  py_config c;
  c.rule = vbucket::parse_rule_or_throw(rule);
  c.config = vbucket::visit_rule_kind(c.rule, [&](const auto& tables, const auto&) {
    return std::make_shared<const bucket_config>(
        vbucket::json::parse_bucket_config(text, tables, where));
  });
  return c;
}

py_config config_from_path(const std::string& path, const std::string& rule) {
  py_config c;
  c.rule = vbucket::parse_rule_or_throw(rule);
  c.config = vbucket::visit_rule_kind(c.rule, [&](const auto& tables, const auto&) {
    return std::make_shared<const bucket_config>(vbucket::json::load_bucket_config(path, tables));
  });
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

/// The state as the library writes it ("vbucket-plan seed=S epoch=E consumed=C balance=G").
std::string state_text(const py_sampler& s) {
  return s.locked([](sampler_ref b) { return b.state().to_string(); });
}

/// Loads a state string (any rank's, any world size's): moves to its epoch, then resumes; with
/// a fingerprint, refuses a state of another plan.
void load_state_text(py_sampler& s, const std::string& text,
                     std::optional<std::string> fingerprint) {
  const plan_state st = plan_state::parse(text);
  const std::optional<std::uint64_t> fp =
      fingerprint ? std::optional<std::uint64_t>(parse_hex64(*fingerprint)) : std::nullopt;
  s.locked_os([&](os_ref o) {
    o.load_state(st, fp);
    return 0;
  });
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
  return s.locked([steps](sampler_ref b) { return b.epoch_state(steps).to_string(); });
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

/// Open-Sora's set_epoch (`opensora_sampler::set_epoch`).
void os_set_epoch(py_sampler& s, std::uint64_t e) {
  s.locked_os([e](os_ref o) {
    o.set_epoch(e);
    return 0;
  });
}

/// Open-Sora's set_step(k) (`opensora_sampler::set_step`).
void os_set_step(py_sampler& s, std::uint64_t k) {
  s.locked_os([k](os_ref o) {
    o.set_step(k);
    return 0;
  });
}

/// Open-Sora's reset(): the start of the current epoch.
void os_reset(py_sampler& s) {
  s.locked_os([](os_ref o) {
    o.reset();
    return 0;
  });
}

/// Open-Sora's load_state_dict for a vbucket state (`opensora_sampler::load`).
void os_load(py_sampler& s, const std::string& text, std::optional<std::string> fingerprint) {
  const plan_state st = plan_state::parse(text);
  const std::optional<std::uint64_t> fp =
      fingerprint ? std::optional<std::uint64_t>(parse_hex64(*fingerprint)) : std::nullopt;
  s.locked_os([&](os_ref o) {
    o.load(st, fp);
    return 0;
  });
}

/// Open-Sora's state_dict(num_steps) (`opensora_sampler::state_after`).
std::string os_state(const py_sampler& s, std::uint64_t num_steps) {
  return s.locked_os([&](os_ref o) { return o.state_after(num_steps).to_string(); });
}

/// What a copy of the sampler needs besides its arguments: (state, finished, anchor step,
/// anchor position).
nb::tuple os_snapshot(const py_sampler& s) {
  const vbucket::opensora_snapshot snap = s.locked_os([](os_ref o) { return o.snapshot(); });
  return nb::make_tuple(snap.state.to_string(), snap.finished, snap.anchor_step,
                        snap.anchor_position);
}

/// Restores `os_snapshot()` in a sampler made with the same arguments.
void os_restore(py_sampler& s, const nb::tuple& snap) {
  if (snap.size() != 4) throw vbucket::error("sampler snapshot: expected 4 fields");
  vbucket::opensora_snapshot o{plan_state::parse(nb::cast<std::string>(snap[0])),
                               nb::cast<bool>(snap[1]), nb::cast<std::uint64_t>(snap[2]),
                               nb::cast<std::uint64_t>(snap[3])};
  s.locked_os([&](os_ref os) {
    os.restore(o);
    return 0;
  });
}

/// The steps of the epoch in its step numbering (`opensora_sampler::epoch_steps`).
std::uint64_t os_epoch_steps(const py_sampler& s) {
  return s.locked_os([](os_ref o) { return o.epoch_steps(); });
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
    held_ = s.locked_os([](os_ref o) {
      o.begin_iteration();  // Open-Sora's reset() after an iteration that ran to its end
      return o.held();
    });
    if (held_) return;  // held epochs: batch by batch (`opensora_sampler::next_batch`)
    if (s.locked([](sampler_ref b) { return b.packed(); })) {
      packed_ = s.locked([](sampler_ref b) { return b.packed_batches(); });
    } else {
      steps_ = s.locked([](sampler_ref b) { return b.batches(); });
    }
  }

  nb::object next() {
    if (held_) {
      if (!done_) {
        // The list is built under the lock: the batch views a plan the sampler keeps until
        // its next call.
        nb::object list;
        const bool got = s_->locked_os([&](os_ref o) {
          const std::optional<vbucket::batch> b = o.next_batch();
          if (!b) return false;
          nb::gil_scoped_acquire gil;
          list = batch_list(*b, strings_);
          return true;
        });
        if (got) return list;
        s_->finish();
      }
      done_ = true;
      throw nb::stop_iteration();
    }
    if (next_ >= size()) {
      if (!done_) s_->finish();
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
  std::size_t remaining() const {
    if (held_) return done_ ? 0 : s_->locked_os([](os_ref o) { return o.steps_left(); });
    return size() - next_;
  }

 private:
  py_sampler* s_;  // kept alive by the Python iterator (keep_alive)
  vbucket::rank_steps steps_;
  std::optional<packed_steps> packed_;
  std::size_t next_ = 0;
  bool strings_ = false;
  bool done_ = false;
  bool held_ = false;
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

/// A plan's rank alignment (`alignment_stats`), fixed or packed, as a dict.
nb::dict alignment_dict(const vbucket::alignment_stats& al) {
  nb::dict a;
  a["world"] = al.world;
  a["consumed"] = al.consumed;
  a["steps"] = al.steps;
  a["repeat_batches"] = al.repeat_batches;
  a["repeat_samples"] = al.repeat_samples;
  a["dropped_batches"] = al.dropped_batches;
  a["dropped_samples"] = al.dropped_samples;
  return a;
}

/// A schedule's step balance (`step_balance_stats`), fixed or packed, as a dict.
nb::dict balance_dict(const vbucket::step_balance_stats& b) {
  nb::dict bal;
  bal["steps"] = b.steps;
  bal["max_over_mean"] = b.max_over_mean;
  bal["mean_step_ratio"] = b.mean_step_ratio;
  bal["worst_step_ratio"] = b.worst_step_ratio;
  return bal;
}

/// `compute_plan_stats` of the sampler's epoch as dealt from its state, as plain Python data.
nb::dict stats_dict(const py_sampler& s) {
  if (s.locked([](sampler_ref b) { return b.packed(); })) {
    const vbucket::packed_stats st = s.locked([](sampler_ref b) { return b.packed_stats(); });
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
    out["alignment"] = alignment_dict(st.alignment);
    out["step_balance"] = balance_dict(st.balance);
    return out;
  }
  const auto [st, balance] = s.locked([](sampler_ref b) {
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
  out["alignment"] = alignment_dict(st.alignment);
  out["step_balance"] = balance_dict(balance);
  return out;
}

/// The bucket of every sample (`assign_epoch`, the seed convention `vbucket assign` uses):
/// ids, or -1 for no bucket and -2 for invalid metadata.
nb::ndarray<nb::numpy, bucket_id, nb::ndim<1>> assign_epoch(const py_meta& meta,
                                                            const py_config& cfg,
                                                            const run_spec& spec) {
  std::vector<bucket_id> ids;
  {
    nb::gil_scoped_release release;
    spec.validate();
    ids = spec.visit_rule([&](const auto&, const auto& rule) {
      rule.validate();
      return vbucket::assign_epoch(*cfg.config, *meta.table, rule, spec.rng, spec.seed, spec.epoch,
                                   spec.threads);
    });
  }
  return to_numpy(std::move(ids));
}

/// The cost of every rank's batch at every step of the epoch from its start, step-major
/// (steps × world values; reshape with the world size): one plan, dealt once, for the report.
nb::ndarray<nb::numpy, double, nb::ndim<1>> step_costs(const py_sampler& s) {
  return to_numpy(s.locked([](sampler_ref b) {
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
nb::tuple explain_sample(const py_meta& meta, const py_config& cfg, const run_spec& spec,
                         std::uint64_t index) {
  spec.validate();
  const vbucket::rule_explanation e = spec.visit_rule([&](const auto&, const auto& rule) {
    rule.validate();
    return vbucket::explain_sample(*cfg.config, *meta.table, rule, index, spec.rng, spec.seed,
                                   spec.epoch);
  });
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
  return s.locked([](sampler_ref b) {
    const vbucket::plan_stats st = b.stats();
    const vbucket::step_balance_stats balance = b.balance();
    return vbucket::format_plan_table(st, &balance);
  });
}
#endif

}  // namespace

void vbucket_bind_cache(nb::module_& m);   // cache_bindings.cpp (issue 32)
void vbucket_bind_run(nb::module_& m);     // run_bindings.cpp (issue 31)
void vbucket_bind_media(nb::module_& m);   // media_bindings.cpp (with the FFmpeg adapter)
void vbucket_bind_memory(nb::module_& m);  // memory_bindings.cpp (with the Eigen adapter)
void vbucket_bind_layout(nb::module_& m);  // layout_bindings.cpp (issue 45)

NB_MODULE(_vbucket, m) {
  m.doc() = "vbucket's C++ core (glue only; see the vbucket package)";
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const vbucket::error& e) {
      // The one place a library message becomes a Python str: bytes of a file it quotes that
      // are not UTF-8 are escaped (else Python would show ValueError('')).
      PyErr_SetString(PyExc_ValueError, vbucket_py::readable_text(e.what()).c_str());
    }
  });

  m.attr("DEFAULT_BALANCE_GROUP") = vbucket::default_balance_group;
  // The run spec's field table: every Python keyword argument of a run, its kind, its default
  // and its help come from here (vbucket::run_spec::fields()).
  m.attr("RUN_FIELDS") = run_fields();
  m.attr("DEFAULTS") = field_values(run_spec{}, false);
  m.attr("HAS_FMT") = static_cast<bool>(VBUCKET_PY_HAS_FMT);
  m.attr("HAS_FFMPEG") = static_cast<bool>(VBUCKET_PY_HAS_FFMPEG);
  m.attr("HAS_CUDA") = static_cast<bool>(VBUCKET_PY_HAS_CUDA);
#if VBUCKET_PY_HAS_FFMPEG
  vbucket_bind_media(m);
#endif
  m.attr("HAS_EIGEN") = static_cast<bool>(VBUCKET_PY_HAS_EIGEN);
#if VBUCKET_PY_HAS_EIGEN
  vbucket_bind_memory(m);
#endif
  vbucket_bind_cache(m);
  vbucket_bind_run(m);
  vbucket_bind_layout(m);

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

  nb::class_<run_spec>(m, "RunSpec")
      .def(nb::new_(&spec_from_dict), "fields"_a)
      .def_static(
          "from_json", [](const std::string& path) { return vbucket::json::load_run_spec(path); },
          "path"_a)
      .def("to_dict", &run_spec::to_map)
      .def("values", [](const run_spec& s) { return field_values(s, true); })
      .def_prop_ro("meta", [](const run_spec& s) { return s.meta; })
      .def_prop_ro("config", [](const run_spec& s) { return s.config; })
      .def_prop_ro("rule",
                   [](const run_spec& s) { return std::string(vbucket::rule_name(s.rule)); })
      .def_prop_ro(
          "policy",
          [](const run_spec& s) { return std::string(vbucket::policy_name(s.batches().policy)); })
      .def_prop_ro("epoch", [](const run_spec& s) { return s.epoch; })
      .def("__repr__", [](const run_spec& s) {
        std::string out = "RunSpec(";
        for (const auto& [k, v] : s.to_map()) out += (out.size() > 8 ? ", " : "") + k + "=" + v;
        return out + ")";
      });

  nb::class_<py_steps>(m, "Steps")
      .def("__len__", &py_steps::size)
      .def_prop_ro("position", &py_steps::position)
      .def("at", &py_steps::at, "i"_a);

  nb::class_<py_batches>(m, "Batches")
      .def("__iter__", [](nb::handle self) { return self; })
      .def("__next__", &py_batches::next)
      .def("__length_hint__", &py_batches::remaining);

  nb::class_<py_sampler>(m, "Sampler")
      .def(nb::init<const py_meta&, const py_config&, const run_spec&>(), "meta"_a, "config"_a,
           "spec"_a)
      .def(nb::init<const py_streamed_meta&, const py_config&, const run_spec&>(), "meta"_a,
           "config"_a, "spec"_a)
      .def(
          "set_epoch",
          [](py_sampler& s, std::uint64_t e) {
            s.locked([e](sampler_ref b) {
              b.set_epoch(e);
              return 0;
            });
          },
          "epoch"_a)
      .def_prop_ro(
          "epoch",
          [](const py_sampler& s) { return s.locked([](sampler_ref b) { return b.epoch(); }); })
      .def_prop_ro(
          "world",
          [](const py_sampler& s) { return s.locked([](sampler_ref b) { return b.world(); }); })
      .def_prop_ro(
          "rank",
          [](const py_sampler& s) { return s.locked([](sampler_ref b) { return b.rank(); }); })
      .def(
          "advance",
          [](py_sampler& s, std::uint64_t steps) {
            s.locked([steps](sampler_ref b) {
              b.advance(steps);
              return 0;
            });
          },
          "steps"_a = 1)
      .def(
          "iterate", [](py_sampler& s, bool strings) { return py_batches(s, strings); },
          "strings"_a, nb::keep_alive<0, 1>())
      .def_prop_ro(
          "finished",
          [](const py_sampler& s) { return s.locked_os([](os_ref o) { return o.finished(); }); })
      .def("state", &state_text)
      .def("consumed",
           [](const py_sampler& s) {
             return s.locked([](sampler_ref b) { return b.state().consumed; });
           })
      .def("load_state", &load_state_text, "state"_a, "fingerprint"_a.none())
      .def("steps",
           [](const py_sampler& s) {
             return s.locked([](sampler_ref b) {
               return b.packed() ? py_steps(b.packed_batches()) : py_steps(b.batches());
             });
           })
      .def("size",
           [](const py_sampler& s) { return s.locked([](sampler_ref b) { return b.size(); }); })
      .def("epoch_steps",
           [](const py_sampler& s) {
             return s.locked([](sampler_ref b) { return b.epoch_shape().first; });
           })
      .def("epoch_batches",
           [](const py_sampler& s) {
             return s.locked([](sampler_ref b) {
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
      .def("os_state_now",
           [](const py_sampler& s) {
             return s.locked_os([](os_ref o) { return o.state().to_string(); });
           })
      .def("os_consumed",
           [](const py_sampler& s) { return s.locked_os([](os_ref o) { return o.consumed(); }); })
      .def("os_steps_left",
           [](const py_sampler& s) { return s.locked_os([](os_ref o) { return o.steps_left(); }); })
      .def("os_hold_epochs",
           [](py_sampler& s) {
             s.locked_os([](os_ref o) {
               o.hold_epochs();
               return 0;
             });
           })
      .def("os_quota",
           [](const py_sampler& s) { return s.locked_os([](os_ref o) { return o.quota(); }); })
      .def(
          "os_held_report",
          [](const py_sampler& s, std::uint64_t e) {
            const auto r = s.locked_os([e](os_ref o) {
              if (!o.held()) throw vbucket::error("sampler: a packing sampler holds no epochs");
              return o.held_report(e);
            });
            return nb::make_tuple(nb::make_tuple(r.from.epoch, r.from.position),
                                  nb::make_tuple(r.to.epoch, r.to.position), r.repeats);
          },
          "epoch"_a)
      .def("os_started",
           [](py_sampler& s) {
             s.locked_os([](os_ref o) {
               o.started();
               return 0;
             });
           })
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
             return hex64(s.locked([](sampler_ref b) { return b.fingerprint(); }));
           })
      .def("stats", &stats_dict)
#if VBUCKET_PY_HAS_FMT
      .def("stats_table", &stats_table)
#endif
      ;

  m.def(
      "mix64",
      [](nb::ndarray<const std::uint64_t, nb::ndim<1>, nb::c_contig, nb::device::cpu> z) {
        std::vector<std::uint64_t> out(z.shape(0));
        const std::uint64_t* in = z.data();
        for (std::size_t i = 0; i < out.size(); ++i) out[i] = vbucket::detail::mix64(in[i]);
        return to_numpy(std::move(out));
      },
      "z"_a,
      "SplitMix64's finaliser (the library's vbucket::detail::mix64) of every element of a "
      "uint64 array.");
  m.def("parse_state", &parse_state, "state"_a);
  m.def("explain_sample", &explain_sample, "meta"_a, "config"_a, "spec"_a, "index"_a);
  m.def("step_costs", &step_costs, "sampler"_a);
  m.def("assign_epoch", &assign_epoch, "meta"_a, "config"_a, "spec"_a);
  m.def(
      "encode_opensora_index",
      [](std::uint64_t index, std::int64_t t, std::int64_t h, std::int64_t w) {
        return vbucket::encode_opensora_index({index, t, h, w});
      },
      "index"_a, "frames"_a, "height"_a, "width"_a,
      "Open-Sora's batch item for a sample: the string \"index-frames-height-width\" its "
      "dataset's __getitem__ takes.");
  m.def(
      "decode_opensora_index",
      [](const std::string& s) {
        const vbucket::indexed_sample x = vbucket::decode_opensora_index(s);
        return nb::make_tuple(x.index, x.frames, x.height, x.width);
      },
      "s"_a,
      "(index, frames, height, width) of an Open-Sora batch item \"index-frames-height-width\"; "
      "ValueError naming the string when it is not one.");
}
