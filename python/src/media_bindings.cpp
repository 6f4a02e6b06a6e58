/// The media part of `vbucket._vbucket` (built when the FFmpeg adapter is): the scan
/// (`ff::list_media`, `ff::probe_all` on a thread the Python caller polls, so progress is
/// shown and Ctrl-C stops it), one clip (`ff::decode_clip` into a buffer the numpy array owns)
/// and the loader (`vbucket::loader` over `ff::file_decoder` and a staging ring — host memory,
/// its batches handed to PyTorch through DLPack without a copy, or with `pin_memory` the CUDA
/// adapter's pinned memory, each batch copied into a tensor PyTorch allocated on the GPU).
/// Registered by `vbucket_bind_media(m)` from vbucket_ext.cpp; the sampler it reads is glue.hpp's
/// `py_sampler`. Glue only: every rule is the
/// library's.

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/array.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <array>               // std::array
#include <atomic>              // std::atomic
#include <chrono>              // std::chrono::duration
#include <condition_variable>  // std::condition_variable
#include <cstddef>             // std::size_t
#include <cstdint>             // std::int64_t, std::uint8_t
#include <cstring>             // std::memcpy
#include <exception>           // std::exception_ptr
#include <future>              // std::async (waiting for a batch while polling for Ctrl-C)
#include <map>                 // std::map (media fields from Python)
#include <memory>              // std::shared_ptr, std::unique_ptr
#include <mutex>               // std::mutex
#include <optional>            // std::optional
#include <stdexcept>           // std::runtime_error
#include <string>              // std::string
#include <thread>              // std::jthread
#include <utility>             // std::move
#include <vector>              // std::vector

#include "vbucket/ffmpeg/ffmpeg.hpp"
#include "vbucket/ffmpeg/file_decoder.hpp"
#include "vbucket/ffmpeg/sources.hpp"  // list_sources (tar shards, URLs)
#include "vbucket/load/loader.hpp"
#include "vbucket/load/staging.hpp"
#include "vbucket/run/run_loader.hpp"  // run_loader: the Loader over a run

#include "staging_backend.hpp"  // py_backend

#include "glue.hpp"
#include "run_glue.hpp"  // py_run_plan

namespace nb = nanobind;
using namespace nb::literals;

namespace {

using vbucket::plan_state;
using vbucket::rule_kind;
using vbucket::run_spec;
using vbucket_py::hex64;
using vbucket_py::py_sampler;
using vbucket_py::sampler_ref;
using vbucket_py::to_numpy;

namespace ff = vbucket::ffmpeg;

/// A file that cannot be decoded: Python's vbucket.DecodeError (a ValueError), with the
/// adapter's one-line message.
struct decode_failure : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// The run spec `base` with the media fields Python's keywords gave (`media`: field name -> the
/// text of its kind, from the package's `_core._field_text`; a keyword left None is absent):
/// the library checks each value, and an error names the key.
run_spec media_spec(run_spec base, const std::map<std::string, std::string>& media) {
  for (const auto& [name, text] : media) {
    const vbucket::run_field* f = run_spec::find(name);
    if (f == nullptr || f->use != vbucket::field_use::media)
      throw vbucket::error("\"" + name + "\" is not a media field of the run spec");
    base.set(name, text);
  }
  return base;
}

/// The time bounds of one probe, decode or listing from Python's keywords (timeout,
/// io_timeout, retries; absent: the library's default).
ff::limits network_limits(const std::map<std::string, std::string>& media) {
  return ff::limits_of(media_spec(run_spec{}, media));
}

// ---------------------------------------------------------------------------------------------
// Scan
// ---------------------------------------------------------------------------------------------

/// A scan running on its own threads. Python polls `wait` (the GIL released meanwhile) and
/// reads `done` for its progress; `stop` (or the destructor) lets the files being probed
/// finish, starts no other and joins every thread.
class py_scan {
 public:
  py_scan(std::vector<std::string> paths, unsigned threads,
          const std::map<std::string, std::string>& network)
      : paths_(std::move(paths)) {
    ff::quiet_logs();
    ff::probe_options opt;
    opt.limits = network_limits(network);
    runner_ = std::jthread([this, threads, opt](std::stop_token stop) {
      std::vector<ff::result<ff::video_info>> results;
      std::exception_ptr failure;
      try {
        results = ff::probe_all(
            paths_, threads, opt, [this](std::size_t d, std::size_t) { done_.store(d); }, stop);
      } catch (...) {
        failure = std::current_exception();
      }
      {
        std::lock_guard lock(mutex_);
        results_ = std::move(results);
        failure_ = failure;
        stopped_ = stop.stop_requested();
        finished_ = true;
      }
      cv_.notify_all();
    });
  }
  py_scan(const py_scan&) = delete;
  py_scan& operator=(const py_scan&) = delete;
  ~py_scan() { stop(); }

  /// Whether the scan has finished, after waiting up to `seconds` for it.
  bool wait(double seconds) {
    nb::gil_scoped_release release;
    std::unique_lock lock(mutex_);
    return cv_.wait_for(lock, std::chrono::duration<double>(seconds), [&] { return finished_; });
  }
  [[nodiscard]] std::size_t done() const noexcept { return done_.load(); }
  [[nodiscard]] std::size_t total() const noexcept { return paths_.size(); }

  void stop() {
    runner_.request_stop();
    nb::gil_scoped_release release;
    if (runner_.joinable()) runner_.join();
  }

  /// The columns: path, num_frames, height, width, fps, duration, codec, error, warning,
  /// stored_height, stored_width, sar ("num:den"), rotation, as `vbucket scan` writes them
  /// (numbers of failed files: -1 and NaN; Python turns them into missing values).
  nb::dict columns() {
    {
      std::lock_guard lock(mutex_);
      if (!finished_) throw vbucket::error("scan: not finished");
      if (failure_) std::rethrow_exception(failure_);
      if (stopped_) throw vbucket::error("scan: stopped before the end");
    }
    const std::size_t n = results_.size();
    std::vector<std::int64_t> frames(n, -1), height(n, -1), width(n, -1);
    std::vector<double> fps(n, std::numeric_limits<double>::quiet_NaN()), duration = fps;
    std::vector<std::int64_t> stored_height(n, -1), stored_width(n, -1), rotation(n, -1);
    nb::list codec, error, warning, path, sar;
    for (std::size_t i = 0; i < n; ++i) {
      const auto& r = results_[i];
      path.append(nb::str(paths_[i].c_str(), paths_[i].size()));
      if (r) {
        frames[i] = r->num_frames;
        height[i] = r->height;
        width[i] = r->width;
        fps[i] = r->fps;
        duration[i] = r->duration;
        codec.append(r->codec);
        error.append("");
        warning.append(r->warning);
        stored_height[i] = r->coded_height;
        stored_width[i] = r->coded_width;
        rotation[i] = r->rotation;
        sar.append(std::to_string(r->sar_num) + ":" + std::to_string(r->sar_den));
      } else {
        codec.append("");
        error.append(r.error());
        warning.append("");
        sar.append("");
      }
    }
    nb::dict d;
    d["path"] = path;
    d["num_frames"] = to_numpy(std::move(frames));
    d["height"] = to_numpy(std::move(height));
    d["width"] = to_numpy(std::move(width));
    d["fps"] = to_numpy(std::move(fps));
    d["duration"] = to_numpy(std::move(duration));
    d["codec"] = codec;
    d["error"] = error;
    d["warning"] = warning;
    d["stored_height"] = to_numpy(std::move(stored_height));
    d["stored_width"] = to_numpy(std::move(stored_width));
    d["sar"] = sar;
    d["rotation"] = to_numpy(std::move(rotation));
    return d;
  }

 private:
  std::vector<std::string> paths_;
  std::atomic<std::size_t> done_{0};
  std::mutex mutex_;
  std::condition_variable cv_;
  bool finished_ = false;
  bool stopped_ = false;
  std::exception_ptr failure_;
  std::vector<ff::result<ff::video_info>> results_;
  std::jthread runner_;  // last: joined before the members above go
};

std::vector<std::string> list_media(const std::string& where) {
  nb::gil_scoped_release release;
  return ff::list_media(where);
}

/// What a scan probes under `where` with tar shards and URLs (ff::list_sources): paths,
/// errors (a shard that could not be listed), shard, member, member_offset, member_size, and
/// fields (sidecar column name -> values), as `vbucket scan` writes them.
/// `sources`: one (a str) or several (a list: each a file, URL, shard, directory or list).
nb::dict list_sources(const std::vector<std::string>& sources, bool one, unsigned threads,
                      const std::map<std::string, std::string>& network) {
  const ff::limits lim = network_limits(network);
  ff::media_listing l;
  {
    nb::gil_scoped_release release;
    l = one && sources.size() == 1 ? ff::list_sources(sources[0], threads, lim)
                                   : ff::list_sources(sources, threads, lim);
  }
  nb::dict d;
  d["paths"] = l.paths;
  d["errors"] = l.errors;
  d["from_shards"] = l.from_shards;
  d["shard"] = l.shard;
  d["member"] = l.member;
  d["member_offset"] = l.offset;
  d["member_size"] = l.size;
  nb::dict fields;
  for (std::size_t c = 0; c < l.field_names.size(); ++c)
    fields[nb::str(l.field_names[c].c_str(), l.field_names[c].size())] = l.fields[c];
  d["fields"] = fields;
  return d;
}

// ---------------------------------------------------------------------------------------------
// One clip
// ---------------------------------------------------------------------------------------------

ff::layout parse_clip_layout(const std::string& s) {
  if (s == "thwc") return ff::layout::thwc;
  if (s == "cthw") return ff::layout::cthw;
  throw vbucket::error("layout: expected \"thwc\" or \"cthw\", got \"" + s + "\"");
}

ff::resize_filter parse_filter(const std::string& s) {
  if (s == "bilinear") return ff::resize_filter::bilinear;
  if (s == "bicubic") return ff::resize_filter::bicubic;
  if (s == "area") return ff::resize_filter::area;
  if (s == "nearest") return ff::resize_filter::nearest;
  if (s == "opensora") return ff::resize_filter::opensora;
  throw vbucket::error("filter: expected opensora, bilinear, bicubic, area or nearest, got \"" + s +
                       "\"");
}

vbucket::frame_choice parse_choice(const std::string& s) {
  if (const auto c = vbucket::parse_frame_choice(s)) return *c;
  throw vbucket::error("frame_choice: expected opensora or stride, got \"" + s + "\"");
}

/// Frames start, start + interval, ... of `path` at height x width as a uint8 numpy array
/// (T, H, W, 3) or (3, T, H, W) that owns the buffer the decoder wrote.
nb::ndarray<nb::numpy, std::uint8_t> decode_clip_array(
    const std::string& path, std::int64_t start, std::int64_t frames, std::int64_t interval,
    std::int64_t height, std::int64_t width, const std::string& layout, bool pad,
    const std::string& filter, int threads, const std::map<std::string, std::string>& network,
    const std::string& frame_choice) {
  ff::clip_request req;
  req.limits = network_limits(network);
  req.start = start;
  req.frames = frames;
  req.interval = interval;
  req.choice = parse_choice(frame_choice);
  req.height = height;
  req.width = width;
  req.layout = parse_clip_layout(layout);
  req.pad = pad;
  req.filter = parse_filter(filter);
  req.threads = threads;
  // 0 for an invalid request: the adapter's check then names what is wrong.
  const std::size_t bytes = ff::clip_bytes(req);
  auto buffer = std::make_unique<std::uint8_t[]>(bytes == 0 ? 1 : bytes);
  std::optional<std::string> failed;
  {
    nb::gil_scoped_release release;
    ff::quiet_logs();
    auto r = ff::decode_clip(path, req, std::span<std::uint8_t>(buffer.get(), bytes));
    if (!r) failed = r.error();
  }
  if (failed) throw decode_failure(*failed);
  std::uint8_t* data = buffer.release();
  nb::capsule owner(data, [](void* p) noexcept { delete[] static_cast<std::uint8_t*>(p); });
  const std::size_t t = static_cast<std::size_t>(frames), h = static_cast<std::size_t>(height),
                    w = static_cast<std::size_t>(width);
  if (req.layout == ff::layout::thwc) {
    const std::size_t shape[4] = {t, h, w, 3};
    return nb::ndarray<nb::numpy, std::uint8_t>(data, 4, shape, owner);
  }
  const std::size_t shape[4] = {3, t, h, w};
  return nb::ndarray<nb::numpy, std::uint8_t>(data, 4, shape, owner);
}

/// The same decode, for measurements (examples/python/compare_decoders.py): the buffer is
/// dropped and what the decoder did comes back (`ff::clip_info`: frames decoded, converted,
/// padded; whether it seeked, used the sample table). `skip_unwanted`: clip_request's.
nb::dict decode_clip_info(const std::string& path, std::int64_t start, std::int64_t frames,
                          std::int64_t interval, std::int64_t height, std::int64_t width,
                          int threads, bool skip_unwanted) {
  ff::clip_request req;
  req.start = start;
  req.frames = frames;
  req.interval = interval;
  req.height = height;
  req.width = width;
  req.threads = threads;
  req.skip_unwanted = skip_unwanted;
  std::vector<std::uint8_t> buffer(ff::clip_bytes(req));
  std::optional<ff::result<ff::clip_info>> r;
  {
    nb::gil_scoped_release release;
    ff::quiet_logs();
    r = ff::decode_clip(path, req, buffer);
  }
  if (!*r) throw decode_failure(r->error());
  const ff::clip_info& info = **r;
  nb::dict d;
  d["frames_decoded"] = info.frames_decoded;
  d["frames_converted"] = info.frames_converted;
  d["frames_padded"] = info.frames_padded;
  d["seeked"] = info.seeked;
  d["indexed"] = info.indexed;
  return d;
}

// ---------------------------------------------------------------------------------------------
// The loader
// ---------------------------------------------------------------------------------------------

using py_ring = vbucket::staging_ring<py_backend>;
/// A loader of the sampler's batching, chosen at run time (`make_any_loader`).
using file_loader = vbucket::any_loader<ff::file_decoder, py_backend>;

/// A sampler's position as the loader's `schedule_source` (or `packed_schedule_source` when
/// the sampler packs: then `packed_sched` is set and `sched` is not; `held_schedule_source`
/// when its epochs are held: then `held_sched` is set and `sched` is not), taken under its
/// lock so that the loader is made without it.
struct sampler_position {
  std::optional<vbucket::epoch_schedule> sched;
  std::uint32_t r = 0;
  plan_state st;
  std::optional<vbucket::packed_schedule> packed_sched;
  std::optional<vbucket::held_schedule> held_sched;
  [[nodiscard]] const vbucket::epoch_schedule& schedule() const { return *sched; }
  [[nodiscard]] std::uint32_t rank() const noexcept { return r; }
  [[nodiscard]] plan_state state() const { return st; }
  [[nodiscard]] bool packed() const noexcept { return packed_sched.has_value(); }
  [[nodiscard]] const vbucket::packed_schedule& packing_schedule() const { return *packed_sched; }
  [[nodiscard]] bool held() const noexcept { return held_sched.has_value(); }
  [[nodiscard]] const vbucket::held_schedule& held_epoch_schedule() const { return *held_sched; }
  /// The global position (held: slot) of the first batch the loader hands out.
  [[nodiscard]] std::uint64_t first() const {
    if (held_sched) return held_sched->consumed();
    return packed_sched ? packed_sched->consumed() : sched->consumed();
  }
};

/// What a loader's batches need alive: the ring their slots come from (and its backend). The
/// loader and every batch hold it, so a batch's memory stays valid after the loader is gone.
/// Members go in reverse order: the loader (joining its threads), the decoder, the ring.
struct loader_core {
  std::unique_ptr<py_backend> backend;
  std::unique_ptr<py_ring> ring;
  std::unique_ptr<ff::file_decoder> decoder;
  std::vector<std::unique_ptr<ff::file_decoder>> decoders;  // a run's, one per source
  std::unique_ptr<file_loader> loader;
  std::unique_ptr<vbucket::run_loader<ff::file_decoder, py_backend>> run_loader;
  std::size_t slots = 0;
  std::atomic<std::size_t> held{0};  // batches handed to Python and not yet freed
};

/// One batch handed to Python: its slot, and the core that keeps the ring alive.
template <class Batch>
struct holder_of {
  std::shared_ptr<loader_core> core;
  Batch batch;
  ~holder_of() {
    batch.slot = {};  // back to the ring first, then the count
    core->held.fetch_sub(1);
  }
};
using batch_holder = holder_of<file_loader::loaded_batch>;

vbucket::element_type parse_dtype(const std::string& s) {
  if (s == "uint8") return vbucket::element_type::u8;
  if (s == "float32") return vbucket::element_type::f32;
  if (s == "bfloat16") return vbucket::element_type::bf16;
  throw vbucket::error("dtype: expected \"uint8\", \"float32\" or \"bfloat16\", got \"" + s + "\"");
}

/// The dtype argument's spelling of an element type (parse_dtype's inverse).
std::string dtype_name(vbucket::element_type t) {
  switch (t) {
    case vbucket::element_type::u8:
      return "uint8";
    case vbucket::element_type::f32:
      return "float32";
    case vbucket::element_type::bf16:
      return "bfloat16";
  }
  return "uint8";
}

/// The DLPack dtype of a loader element type.
nb::dlpack::dtype dlpack_dtype(vbucket::element_type t) {
  nb::dlpack::dtype dt;
  dt.lanes = 1;
  switch (t) {
    case vbucket::element_type::u8:
      dt.code = static_cast<std::uint8_t>(nb::dlpack::dtype_code::UInt);
      dt.bits = 8;
      break;
    case vbucket::element_type::f32:
      dt.code = static_cast<std::uint8_t>(nb::dlpack::dtype_code::Float);
      dt.bits = 32;
      break;
    case vbucket::element_type::bf16:
      dt.code = static_cast<std::uint8_t>(nb::dlpack::dtype_code::Bfloat);
      dt.bits = 16;
      break;
  }
  return dt;
}

/// A host batch as a torch tensor over its slot, no copy: the tensor owns the holder. A packed
/// batch is its flat buffer (1-D), and `packed["tensors"]` gets the per-clip views (sharing
/// the owner).
template <class Holder>
nb::object torch_tensor(std::unique_ptr<Holder> holder, nb::object packed) {
  const vbucket::tensor_view& v = holder->batch.tensor.view;
  const auto& clips = holder->batch.packed;
  nb::capsule owner(holder.release(), [](void* p) noexcept { delete static_cast<Holder*>(p); });
  const nb::dlpack::dtype dt = dlpack_dtype(v.type);
  if (clips) {
    nb::list views;
    for (const auto& c : clips->clips) {
      const auto& cv = c.view;
      const std::size_t cs[4] = {
          static_cast<std::size_t>(cv.shape[1]), static_cast<std::size_t>(cv.shape[2]),
          static_cast<std::size_t>(cv.shape[3]), static_cast<std::size_t>(cv.shape[4])};
      views.append(nb::cast(nb::ndarray<nb::pytorch>(cv.data, 4, cs, owner, nullptr, dt)));
    }
    packed["tensors"] = views;
    const std::size_t flat[1] = {clips->offsets.back() / vbucket::element_size(v.type)};
    return nb::cast(nb::ndarray<nb::pytorch>(v.data, 1, flat, owner, nullptr, dt));
  }
  std::size_t shape[5];
  for (std::size_t i = 0; i < 5; ++i) shape[i] = static_cast<std::size_t>(v.shape[i]);
  return nb::cast(nb::ndarray<nb::pytorch>(v.data, 5, shape, owner, nullptr, dt));
}

/// A batch decoded into pinned memory, waiting to be copied to the GPU: Python allocates the
/// device tensor (PyTorch's allocator, its shape and dtype) and calls `submit`, which queues
/// the copy on the backend's stream; the slot goes back to the ring when the copy completes.
/// Dropped without a submit, the slot goes back at once.
class staged_batch {
 public:
  explicit staged_batch(std::unique_ptr<batch_holder> h) : holder_(std::move(h)) {}

  /// The batch's shape; a packed batch is its flat buffer (1-D).
  [[nodiscard]] nb::tuple shape() const {
    const auto& s = view().shape;
    if (holder_->batch.packed)
      return nb::make_tuple(holder_->batch.packed->offsets.back() /
                            vbucket::element_size(view().type));
    return nb::make_tuple(s[0], s[1], s[2], s[3], s[4]);
  }
  [[nodiscard]] std::string dtype() const { return dtype_name(view().type); }
  [[nodiscard]] std::size_t nbytes() const { return view().bytes(); }

  /// Queues the copy into `nbytes` bytes of device memory at `dst` (a CUDA pointer, e.g.
  /// `tensor.data_ptr()`), ordered on the loader's stream (`Loader.cuda_stream`). Once.
  void submit(std::uintptr_t dst, std::size_t nbytes) {
    if (!holder_) throw vbucket::error("StagedBatch: already submitted");
    if (dst == 0) throw vbucket::error("StagedBatch: submit to a null pointer");
    const std::size_t n = view().bytes();
    if (nbytes != n)
      throw vbucket::error("StagedBatch: the destination holds " + std::to_string(nbytes) +
                           " bytes, the batch " + std::to_string(n));
    std::unique_ptr<batch_holder> h = std::move(holder_);
    h->core->ring->submit(std::move(h->batch.slot), reinterpret_cast<void*>(dst), n);
  }

 private:
  [[nodiscard]] const vbucket::tensor_view& view() const {
    if (!holder_) throw vbucket::error("StagedBatch: already submitted");
    return holder_->batch.tensor.view;
  }
  std::unique_ptr<batch_holder> holder_;
};

/// The field dtype of a NumPy dtype name ("float32", "int64", "bool", …).
vbucket::field_dtype parse_field_dtype(const std::string& name, const std::string& column) {
  for (int t = 0; t <= static_cast<int>(vbucket::field_dtype::f64); ++t) {
    const auto d = static_cast<vbucket::field_dtype>(t);
    if (name == vbucket::field_dtype_name(d)) return d;
  }
  throw vbucket::error("Loader: fields: column \"" + column + "\" has dtype " + name +
                       ", not one of bool, int8-64, uint8-64, float16/32/64");
}

/// The strings of a Python sequence (str or os.PathLike for paths), naming the first that is not.
std::vector<std::string> strings_of(nb::handle seq, const std::string& column, bool paths) {
  nb::object fast = nb::steal(PySequence_Fast(seq.ptr(), "not a sequence"));
  if (!fast.is_valid()) throw nb::python_error();
  const Py_ssize_t n = PySequence_Fast_GET_SIZE(fast.ptr());
  PyObject** items = PySequence_Fast_ITEMS(fast.ptr());
  std::vector<std::string> out;
  out.reserve(static_cast<std::size_t>(n));
  for (Py_ssize_t i = 0; i < n; ++i) {
    PyObject* v = items[i];
    if (paths && !PyUnicode_Check(v))
      v = PyOS_FSPath(v);  // a new reference, or null
    else
      Py_INCREF(v);
    nb::object owned = nb::steal(v);
    if (v == nullptr) PyErr_Clear();
    if (v == nullptr || !PyUnicode_Check(v)) {
      nb::handle item(items[i]);
      throw nb::type_error(("Loader: column \"" + column + "\" row " + std::to_string(i) +
                            " must be a " + (paths ? "path (str or os.PathLike)" : "str") +
                            ", got " + nb::inst_name(item).c_str() + " " + nb::repr(item).c_str())
                               .c_str());
    }
    Py_ssize_t size = 0;
    const char* c = PyUnicode_AsUTF8AndSize(v, &size);
    if (c == nullptr) throw nb::python_error();
    out.emplace_back(c, static_cast<std::size_t>(size));
  }
  return out;
}

/// The fields of a Python spec: a list of (kind, name, payload) with kind "text" (payload a
/// sequence of str), "numbers" (payload (dtype name, bytes)) or "tensors" (a sequence of paths).
std::shared_ptr<const vbucket::field_table> make_fields(nb::list spec, std::size_t rows) {
  if (spec.size() == 0) return nullptr;
  auto table = std::make_shared<vbucket::field_table>(rows);
  for (nb::handle item : spec) {
    auto t = nb::cast<nb::tuple>(item);
    const auto kind = nb::cast<std::string>(t[0]);
    auto name = nb::cast<std::string>(t[1]);
    if (kind == "text") {
      const auto values = strings_of(t[2], name, false);
      table->add_strings(name, values);
    } else if (kind == "tensors") {
      const auto values = strings_of(t[2], name, true);
      table->add_tensor_files(name, values);
    } else {
      auto payload = nb::cast<nb::tuple>(t[2]);
      const auto dtype = parse_field_dtype(nb::cast<std::string>(payload[0]), name);
      auto raw = nb::cast<nb::bytes>(payload[1]);
      std::vector<std::byte> bytes(raw.size());
      if (!bytes.empty()) std::memcpy(bytes.data(), raw.c_str(), raw.size());
      table->add_numbers(name, dtype, std::move(bytes));
    }
  }
  return table;
}

/// A batch's field bytes as a flat uint8 numpy array that owns them (Python views it as the
/// column's dtype and shape).
nb::object owned_bytes(std::vector<std::byte>&& data) {
  auto* v = new std::vector<std::byte>(std::move(data));
  nb::capsule owner(v, [](void* p) noexcept { delete static_cast<std::vector<std::byte>*>(p); });
  const std::size_t shape[1] = {v->size()};
  return nb::cast(
      nb::ndarray<nb::numpy, std::uint8_t>(v->empty() ? nullptr : v->data(), 1, shape, owner));
}

/// The fields of a batch: {name: list of str | (dtype, shape, bytes)}.
nb::dict fields_dict(vbucket::batch_fields&& f) {
  nb::dict d;
  for (auto& c : f.text) {
    nb::list values;
    for (std::size_t i = 0; i < c.size(); ++i) {
      const std::string_view s = c.at(i);
      values.append(nb::str(s.data(), s.size()));
    }
    d[c.name.c_str()] = values;
  }
  for (auto& c : f.numbers) {
    const std::size_t n = c.data.size() / vbucket::field_dtype_size(c.dtype);
    d[c.name.c_str()] = nb::make_tuple(vbucket::field_dtype_name(c.dtype), nb::make_tuple(n),
                                       owned_bytes(std::move(c.data)));
  }
  for (auto& c : f.tensors) {
    nb::list shape;
    for (const auto x : c.stacked.shape) shape.append(x);
    d[c.name.c_str()] = nb::make_tuple(vbucket::field_dtype_name(c.stacked.dtype), nb::tuple(shape),
                                       owned_bytes(std::move(c.stacked.data)));
  }
  return d;
}

/// Refuses a next batch while every staging slot is held by a batch Python keeps alive (it
/// would wait forever).
void check_slots_free(const loader_core& core) {
  if (core.held.load() >= core.slots)
    throw std::runtime_error(
        "Loader: all " + std::to_string(core.slots) +
        " staging slots are held by batches still alive (their tensors, or views of them), so "
        "no further batch can be decoded; drop the old batches (or copy what you keep: "
        "tensor.clone()), or make the Loader with more slots");
}

/// A packed batch's layout as the Python Batch's `packed` dict (None for a fixed batch):
/// cu_seqlens (int32 tensor), max_seqlen, thw, buckets and shapes per clip, offsets (element
/// offsets of the clips, n + 1); `torch_tensor` adds the per-clip views.
template <class Batch>
nb::object packed_dict(const Batch& b) {
  if (!b.packed) return nb::none();
  const auto& p = *b.packed;
  const std::size_t es = vbucket::element_size(b.tensor.view.type);
  nb::list thw, buckets, offsets, shapes;
  for (std::size_t c = 0; c < p.clips.size(); ++c) {
    const auto& cs = p.clips[c].view.shape;
    shapes.append(nb::make_tuple(cs[1], cs[2], cs[3], cs[4]));
    thw.append(nb::make_tuple(p.shapes[c].frames, p.shapes[c].height, p.shapes[c].width));
    buckets.append(p.buckets[c]);
  }
  for (const std::size_t o : p.offsets) offsets.append(o / es);
  auto* cu = new std::vector<std::int32_t>(p.cu_seqlens);
  nb::capsule cu_owner(cu,
                       [](void* q) noexcept { delete static_cast<std::vector<std::int32_t>*>(q); });
  const std::size_t cu_shape[1] = {cu->size()};
  nb::dict d;
  d["cu_seqlens"] =
      nb::cast(nb::ndarray<nb::pytorch, std::int32_t>(cu->data(), 1, cu_shape, cu_owner));
  d["max_seqlen"] = p.max_seqlen;
  d["thw"] = thw;
  d["buckets"] = buckets;
  d["offsets"] = offsets;
  d["shapes"] = shapes;
  return d;
}

/// The loader options and decoder options of a Loader's keywords over a run spec's media
/// fields (`media_spec`).
struct loader_setup {
  vbucket::loader_options loader;
  ff::file_decoder::options decoder;
};
loader_setup loader_setup_of(const run_spec& spec, unsigned workers, std::size_t prefetch,
                             const std::string& dtype, const std::string& layout,
                             std::array<double, 3> mean, std::array<double, 3> stdev, bool pixels,
                             const std::string& filter,
                             const std::map<std::string, std::string>& network,
                             const std::string& frame_choice) {
  const run_spec media = media_spec(spec, network);
  loader_setup out;
  vbucket::loader_options& o = out.loader;
  o.outage_deadline_seconds = media.outage_deadline;
  o.pixels = pixels;
  o.workers = workers;
  o.prefetch = prefetch;
  o.layout = parse_clip_layout(layout) == ff::layout::thwc ? vbucket::clip_layout::thwc
                                                           : vbucket::clip_layout::cthw;
  o.element = parse_dtype(dtype);
  for (std::size_t c = 0; c < 3; ++c) {
    o.normalize.mean[c] = static_cast<float>(mean[c]);
    o.normalize.std[c] = static_cast<float>(stdev[c]);
  }
  ff::file_decoder::options& d = out.decoder;
  d.filter = parse_filter(filter);
  d.limits = ff::limits_of(media);
  d.choice = parse_choice(frame_choice);
  if (spec.rule == rule_kind::opensora_v2) {
    d.fps_max = spec.v2_rule().fps_max;
  } else {
    d.frame_interval = spec.v12_rule().frame_interval;
  }
  return out;
}

/// The clip of each of `rows` rows, from any source form (the library's one resolver).
std::vector<std::string> clip_paths_of(const std::vector<std::string>& sources, bool one,
                                       std::size_t rows, const ff::limits& limits,
                                       const std::string& what) {
  nb::gil_scoped_release release;
  try {
    return one && sources.size() == 1 ? ff::clip_paths(sources[0], rows, 0, limits)
                                      : ff::clip_paths(sources, rows, 0, limits);
  } catch (const vbucket::error& e) {
    throw vbucket::error(what + ": " + e.what());
  }
}

/// A loader's figures as the Python Loader's `stats()` dict.
nb::dict stats_dict(const vbucket::loader_stats& s) {
  nb::dict d;
  d["batches"] = s.batches;
  d["samples"] = s.samples;
  d["repeat_batches"] = s.repeat_batches;
  d["decoded"] = s.decoded;
  d["failed"] = s.failed;
  d["substitutions"] = s.substitutions;
  d["stalls"] = s.stalls;
  d["stall_seconds"] = s.stall_seconds;
  d["unavailable"] = s.unavailable;
  d["decode_seconds"] = s.decode_seconds;
  d["convert_seconds"] = s.convert_seconds;
  d["slot_wait_seconds"] = s.slot_wait_seconds;
  d["trainer_wait_seconds"] = s.trainer_wait_seconds;
  d["elapsed_seconds"] = s.elapsed_seconds;
  d["max_ready"] = s.max_ready;
  d["mean_ready"] = s.mean_ready;
  d["samples_per_second"] = s.samples_per_second();
  return d;
}

class py_loader {
 public:
  py_loader(const py_sampler& sampler, const std::vector<std::string>& sources, bool one,
            unsigned workers, std::size_t prefetch, std::size_t slots, const std::string& dtype,
            const std::string& layout, std::array<double, 3> mean, std::array<double, 3> stdev,
            int pin_device, nb::list fields, bool pixels, const std::string& filter,
            const std::map<std::string, std::string>& network, const std::string& frame_choice) {
    // The sampler's run (a run file's media fields too), the Loader's keywords over it.
    loader_setup setup = loader_setup_of(sampler.spec(), workers, prefetch, dtype, layout, mean,
                                         stdev, pixels, filter, network, frame_choice);
    vbucket::loader_options& o = setup.loader;
    const ff::file_decoder::options& d = setup.decoder;
    // The plan's fingerprint with its schedule: the sampler may move on (set_epoch) while
    // the loader runs, and the loader's states are positions in its own plan.
    // The loader starts where an iteration of the sampler would (after one that ran to its
    // end: the epoch's start). Held epochs (the drop-in's default): the held epoch's schedule
    // from the held slot, the batches and the length the sampler's own iteration has.
    const sampler_position pos = sampler.locked_os([this](vbucket::opensora_sampler& os) {
      os.begin_iteration();
      sampler_position p;
      if (os.held()) p.held_sched = os.held_epoch_schedule();  // first: it may plan epochs
      const vbucket::any_sampler& b = os.sampler();
      fingerprint_ = b.fingerprint();
      p.r = b.rank();
      p.st = os.state();
      if (os.held()) return p;
      if (b.packed())
        p.packed_sched = b.packing_schedule();
      else
        p.sched = b.schedule();
      return p;
    });
    // The steps of the batches in the sampler's numbering (Open-Sora's: after a resume, the
    // resumed step on), not the schedule's (which starts where the sampler was loaded).
    const std::uint64_t from = pos.first();
    step_offset_ = sampler.locked_os(
        [from](vbucket::opensora_sampler& os) { return os.lifecycle().step_of(from); });
    if (slots < prefetch + 1)
      throw vbucket::error("Loader: slots (" + std::to_string(slots) + ") must be at least " +
                           "prefetch + 1 (" + std::to_string(prefetch + 1) + ")");
    ff::quiet_logs();
    core_ = std::make_shared<loader_core>();
    core_->slots = slots;
    core_->backend =
        pin_device < 0 ? std::make_unique<py_backend>() : py_backend::pinned(pin_device);
    vbucket::staging_options so;
    so.slots = slots;
    core_->ring = std::make_unique<py_ring>(*core_->backend, so);
    if (!sampler.meta())
      throw vbucket::error(
          "Loader: the sampler streams its metadata CSV (StreamedCsv), and the loader checks "
          "every decoded clip against the metadata table: give the sampler the table "
          "(a path, DataFrame or Meta) instead");
    const std::size_t rows = sampler.meta()->size();
    std::vector<std::string> paths = pixels ? clip_paths_of(sources, one, rows, d.limits,
                                                            "Loader: paths")
                                            : std::vector<std::string>(rows);  // never opened
    o.fields = make_fields(fields, sampler.meta()->size());
    core_->decoder =
        std::make_unique<ff::file_decoder>(std::move(paths), *sampler.meta(), d);  // checks sizes
    core_->loader = vbucket::make_any_loader(pos, *core_->decoder, *core_->ring, o);
  }

  /// The next batch as (tensor, samples, planned, bucket, (T, H, W), step, position, repeat,
  /// substitutions, packed); StopIteration at the end. `packed` is None for a fixed batch; for
  /// a packed one `tensor` is the flat buffer (1-D) and `packed` a dict: cu_seqlens (int32
  /// tensor), max_seqlen, thw, buckets and shapes (per clip), offsets (element offsets of the
  /// clips, n + 1) and, for host memory, tensors (per-clip views of the buffer). With pinned
  /// staging the first item is a `StagedBatch` instead: the batch in pinned memory, to
  /// `submit` into a GPU tensor.
  nb::tuple next() {
    file_loader& l = running();
    const std::shared_ptr<loader_core> keep = core_;  // close() from another thread keeps it
    check_slots_free(*core_);
    // The wait runs on a helper thread so that this one, polling, sees Ctrl-C: it then stops
    // the loader (the clips being decoded finish) and raises KeyboardInterrupt; the state
    // stays that of the batches handed out, for a resume.
    std::optional<file_loader::loaded_batch> b;
    bool interrupted = false;
    // A Ctrl-C that arrives as the batch becomes ready must not lose it: the signal is checked
    // after every wait, the last one included, and an interrupted call resumes from the state
    // before it, whether or not the loader had handed the batch out.
    std::string before = l.state().to_string();
    {
      nb::gil_scoped_release release;
      auto pending = std::async(std::launch::async, [&l] { return l.next(); });
      while (true) {
        const bool ready =
            pending.wait_for(std::chrono::milliseconds(50)) == std::future_status::ready;
        nb::gil_scoped_acquire acquire;
        if (PyErr_CheckSignals() != 0) {  // the error (KeyboardInterrupt) stays set
          interrupted = true;
          break;
        }
        if (ready) break;
      }
      if (interrupted) {
        l.stop();
        try {
          (void)pending.get();  // nullopt, or a batch it took: dropped, its slot goes back
        } catch (...) {         // a loader error: the interrupt is what the caller sees
        }
      } else {
        b = pending.get();  // rethrows the loader's error
      }
    }
    if (interrupted) {
      interrupted_state_ = std::move(before);
      throw nb::python_error();
    }
    if (!b && closed_)  // not the end of the epoch: the trainer must not take it for one
      throw vbucket::error(
          "Loader: closed (by close() from another thread) while next() waited "
          "for a batch; state_dict() resumes after the batches handed out");
    if (!b) throw nb::stop_iteration();
    core_->held.fetch_add(1);
    std::unique_ptr<batch_holder> holder(new batch_holder{core_, std::move(*b)});
    nb::object packed = packed_dict(holder->batch);
    const auto& info = holder->batch.info;
    nb::list subs;
    for (const auto& s : holder->batch.substitutions) {
      nb::dict d;
      d["position"] = s.position;
      d["clip"] = s.clip;
      d["failed"] = s.failed;
      d["replacement"] = s.replacement;
      d["error"] = s.error;
      subs.append(d);
    }
    std::vector<std::uint32_t> samples(holder->batch.samples);
    std::vector<std::uint32_t> planned(info.indices.begin(), info.indices.end());
    nb::dict fields = fields_dict(std::move(holder->batch.fields));
    // The tensor last: `holder` (and `info`) belong to it from here on.
    nb::object tensor = core_->backend->is_pinned() ? nb::cast(staged_batch(std::move(holder)))
                                                    : torch_tensor(std::move(holder), packed);
    return nb::make_tuple(tensor, to_numpy(std::move(samples)), to_numpy(std::move(planned)),
                          info.bucket, nb::make_tuple(info.frames, info.height, info.width),
                          step_offset_ + info.step, info.position, info.repeat, subs, packed,
                          fields);
  }

  /// The resume state after the batches handed out so far (also after `close()`).
  [[nodiscard]] std::string state() const {
    if (interrupted_state_) return *interrupted_state_;
    return live().state().to_string();
  }
  /// The fingerprint of the plan the loader runs (the sampler's when the loader was made).
  [[nodiscard]] std::string fingerprint() const { return hex64(fingerprint_); }
  [[nodiscard]] std::uint64_t steps() const { return live().steps(); }
  [[nodiscard]] std::size_t held() const { return core_ ? core_->held.load() : 0; }
  /// The CUDA stream of pinned staging's copies (0 for host memory).
  [[nodiscard]] std::uintptr_t cuda_stream() const { return core_ ? core_->backend->stream() : 0; }

  [[nodiscard]] nb::dict stats() const { return stats_dict(live().stats()); }
  [[nodiscard]] std::string stats_table() const {
    return vbucket::format_loader_stats(live().stats());
  }

  /// Stops the workers (the batches handed out stay valid; the ring goes with the last). The
  /// position stays: `state()` and `stats()` still answer. A `next()` waiting on another
  /// thread raises.
  void close() {
    if (closed_ || !core_) return;
    closed_ = true;
    std::shared_ptr<loader_core> core = core_;
    nb::gil_scoped_release release;
    core->loader->stop();
  }
  [[nodiscard]] bool closed() const noexcept { return closed_; }

  ~py_loader() {
    if (core_) {
      // Joining the workers with the GIL held deadlocks when one of them waits for it: FFmpeg's
      // av_log calls Python when PyAV is imported (its log callback takes the GIL).
      nb::gil_scoped_release release;
      core_->loader->stop();
      core_->loader.reset();
    }
  }

 private:
  file_loader& live() const { return *core_->loader; }
  file_loader& running() const {
    if (closed_) throw vbucket::error("Loader: closed");
    if (interrupted_state_)
      throw vbucket::error(
          "Loader: stopped by KeyboardInterrupt; resume from its state_dict() with a new Loader");
    return live();
  }

  /// Set by an interrupted `next()`: the state before it (the loader is stopped).
  std::optional<std::string> interrupted_state_;
  std::uint64_t fingerprint_ = 0;
  std::uint64_t step_offset_ = 0;  // the sampler's step number of the schedule's step 0
  bool closed_ = false;

  std::shared_ptr<loader_core> core_;
};

using run_file_loader = vbucket::run_loader<ff::file_decoder, py_backend>;

/// `vbucket.Loader(run, ...)`'s core: a loader over a run's loop (`vbucket::run_loader`), each
/// source's clips resolved from its own paths and decoded against its own table. The loop
/// (Python's Run) keeps its semantics: the Loader hands out the loop's batches, and state,
/// out-of-memory calls, world changes and loads go to the loop, which the loader follows.
class py_run_loader {
 public:
  py_run_loader(vbucket_py::py_run_plan& plan, vbucket::run_loop& loop,
                const std::vector<std::vector<std::string>>& sources, const std::vector<bool>& one,
                unsigned workers, std::size_t prefetch, std::size_t slots, const std::string& dtype,
                const std::string& layout, std::array<double, 3> mean, std::array<double, 3> stdev,
                const std::string& filter, const std::map<std::string, std::string>& network,
                const std::string& frame_choice, nb::list fields)
      : plan_(plan) {
    if (&loop.run() != plan.run.get())
      throw vbucket::error("Loader: the run's loop does not follow its plan");
    loader_setup setup = loader_setup_of(plan.spec, workers, prefetch, dtype, layout, mean, stdev,
                                         true, filter, network, frame_choice);
    const auto run_sources = loop.run().sources();
    if (sources.size() != run_sources.size() || one.size() != sources.size()) {
      std::string names;
      for (const auto& s : run_sources) names += (names.empty() ? "" : ", ") + s.name;
      throw vbucket::error("Loader: paths: " + std::to_string(sources.size()) +
                           " entries for the run's " + std::to_string(run_sources.size()) +
                           " sources (one per source, in the run file's order: " + names + ")");
    }
    if (slots < prefetch + 1)
      throw vbucket::error("Loader: slots (" + std::to_string(slots) + ") must be at least " +
                           "prefetch + 1 (" + std::to_string(prefetch + 1) + ")");
    ff::quiet_logs();
    core_ = std::make_shared<loader_core>();
    core_->slots = slots;
    core_->backend = std::make_unique<py_backend>();
    vbucket::staging_options so;
    so.slots = slots;
    core_->ring = std::make_unique<py_ring>(*core_->backend, so);
    std::vector<ff::file_decoder*> decoders;
    for (std::size_t s = 0; s < sources.size(); ++s) {
      const vbucket::meta_table& table = *run_sources[s].table;
      std::vector<std::string> paths =
          clip_paths_of(sources[s], one[s], table.size(), setup.decoder.limits,
                        "Loader: paths of source \"" + run_sources[s].name + "\"");
      core_->decoders.push_back(
          std::make_unique<ff::file_decoder>(std::move(paths), table, setup.decoder));
      decoders.push_back(core_->decoders.back().get());
    }
    if (fields.size() > 0)  // one table over the sources' rows stacked (the ledger's ids)
      setup.loader.fields = make_fields(fields, vbucket::run_id_bases(loop.run()).back());
    core_->run_loader =
        std::make_unique<run_file_loader>(loop, std::move(decoders), *core_->ring, setup.loader);
  }

  /// The next batch as (tensor, info, substitutions, packed, fields), or None once at the end
  /// of an epoch. `info`: the run batch's fields (step, epoch, stage, rank, bucket, thw, source and
  /// row as decoded, planned_source and planned_row, pads, repeat, world, position);
  /// substitutions: dicts of clip, failed and replacement (the ledger's global ids), error.
  nb::object next() {
    if (closed_) throw vbucket::error("Loader: closed");
    check_slots_free(*core_);
    std::optional<run_file_loader::loaded_batch> b;
    {
      nb::gil_scoped_release release;
      b = core_->run_loader->next();
    }
    if (!b) return nb::none();
    core_->held.fetch_add(1);
    nb::dict info = vbucket_py::batch_dict(b->run, plan_.stages[b->run.stage].config);
    info["source"] = vbucket_py::id_list(b->sources);
    info["row"] = vbucket_py::id_list(b->rows);
    info["planned_source"] = vbucket_py::id_list(b->run.sources);
    info["planned_row"] = vbucket_py::id_list(b->run.rows);
    info["world"] = b->run.world;
    info["position"] = b->run.position;
    nb::list subs;
    for (const auto& s : b->substitutions) {
      nb::dict d;
      d["clip"] = s.slot;
      d["failed"] = s.failed;
      d["replacement"] = s.replacement;
      d["error"] = s.why;
      subs.append(d);
    }
    nb::dict fields = fields_dict(std::move(b->data.fields));
    using holder = holder_of<run_file_loader::inner_loader::loaded_batch>;
    std::unique_ptr<holder> h(new holder{core_, std::move(b->data)});
    nb::object packed = packed_dict(h->batch);
    nb::object tensor = torch_tensor(std::move(h), packed);
    return nb::make_tuple(tensor, info, subs, packed, fields);
  }

  [[nodiscard]] nb::dict stats() const { return stats_dict(core_->run_loader->stats()); }
  [[nodiscard]] std::string stats_table() const {
    return vbucket::format_loader_stats(core_->run_loader->stats());
  }
  [[nodiscard]] std::vector<std::uint64_t> substitutions_by_source() const {
    return core_->run_loader->substitutions_by_source();
  }
  /// Stops the workers (batches handed out stay valid). Idempotent.
  void close() {
    if (closed_) return;
    closed_ = true;
    nb::gil_scoped_release release;
    core_->run_loader->stop();
  }
  [[nodiscard]] bool closed() const noexcept { return closed_; }
  ~py_run_loader() {
    if (core_) {
      nb::gil_scoped_release release;  // as py_loader: a worker may wait for the GIL
      core_->run_loader.reset();
    }
  }

 private:
  vbucket_py::py_run_plan& plan_;
  bool closed_ = false;
  std::shared_ptr<loader_core> core_;
};

}  // namespace

void vbucket_bind_media(nb::module_& m) {
  nb::exception<decode_failure> decode_error(m, "DecodeError", PyExc_ValueError);
  decode_error.attr("__doc__") =
      "A clip that cannot be decoded (a ValueError): the message names the file and what is "
      "wrong with it, in one line.";

  m.def("list_media", &list_media, "where"_a);
  m.def("list_sources", &list_sources, "sources"_a, "one"_a, "threads"_a, "network"_a);
  nb::class_<py_scan>(m, "Scan")
      .def(
          nb::init<std::vector<std::string>, unsigned, const std::map<std::string, std::string>&>(),
          "paths"_a, "threads"_a, "network"_a)
      .def("wait", &py_scan::wait, "seconds"_a)
      .def_prop_ro("done", &py_scan::done)
      .def_prop_ro("total", &py_scan::total)
      .def("stop", &py_scan::stop)
      .def("columns", &py_scan::columns);

  m.def("decode_clip", &decode_clip_array, "path"_a, "start"_a, "frames"_a, "interval"_a,
        "height"_a, "width"_a, "layout"_a, "pad"_a, "filter"_a, "threads"_a, "network"_a,
        "frame_choice"_a = "stride");
  m.def("decode_clip_info", &decode_clip_info, "path"_a, "start"_a, "frames"_a, "interval"_a,
        "height"_a, "width"_a, "threads"_a, "skip_unwanted"_a);

  m.def(
      "sampler_rows",
      [](const py_sampler& s) { return s.meta() ? s.meta()->size() : std::size_t{0}; },
      "sampler"_a);

  nb::class_<staged_batch>(m, "StagedBatch")
      .def_prop_ro("shape", &staged_batch::shape)
      .def_prop_ro("dtype", &staged_batch::dtype)
      .def_prop_ro("nbytes", &staged_batch::nbytes)
      .def("submit", &staged_batch::submit, "dst"_a, "nbytes"_a);

  nb::class_<py_run_loader>(m, "RunLoader")
      .def(nb::init<vbucket_py::py_run_plan&, vbucket::run_loop&,
                    const std::vector<std::vector<std::string>>&, const std::vector<bool>&,
                    unsigned, std::size_t, std::size_t, const std::string&, const std::string&,
                    std::array<double, 3>, std::array<double, 3>, const std::string&,
                    const std::map<std::string, std::string>&, const std::string&, nb::list>(),
           "plan"_a, "loop"_a, "sources"_a, "one"_a, "workers"_a, "prefetch"_a, "slots"_a,
           "dtype"_a, "layout"_a, "mean"_a, "std"_a, "filter"_a, "media"_a, "frame_choice"_a,
           "fields"_a, nb::keep_alive<1, 2>(), nb::keep_alive<1, 3>())
      .def("next", &py_run_loader::next)
      .def("stats", &py_run_loader::stats)
      .def("stats_table", &py_run_loader::stats_table)
      .def("substitutions_by_source", &py_run_loader::substitutions_by_source)
      .def("close", &py_run_loader::close)
      .def_prop_ro("closed", &py_run_loader::closed);
  nb::class_<py_loader>(m, "Loader")
      .def(nb::init<const py_sampler&, const std::vector<std::string>&, bool, unsigned, std::size_t,
                    std::size_t, const std::string&, const std::string&, std::array<double, 3>,
                    std::array<double, 3>, int, nb::list, bool, const std::string&,
                    const std::map<std::string, std::string>&, const std::string&>(),
           "sampler"_a, "sources"_a, "one"_a, "workers"_a, "prefetch"_a, "slots"_a, "dtype"_a,
           "layout"_a, "mean"_a, "std"_a, "pin_device"_a, "fields"_a, "pixels"_a, "filter"_a,
           "network"_a, "frame_choice"_a = "opensora")
      .def("next", &py_loader::next)
      .def("state", &py_loader::state)
      .def("fingerprint", &py_loader::fingerprint)
      .def("steps", &py_loader::steps)
      .def_prop_ro("held", &py_loader::held)
      .def_prop_ro("cuda_stream", &py_loader::cuda_stream)
      .def("stats", &py_loader::stats)
      .def("stats_table", &py_loader::stats_table)
      .def("close", &py_loader::close)
      .def_prop_ro("closed", &py_loader::closed);
}
