/// Compile-time conformance (and non-conformance) of stand-in types for every public concept
/// of the core: video_meta, resolution_source, uniform_stream, random_source, bucket_rule,
/// sample_collection, source_family, sampler_rule, batch_cost, tensor_adapter, clip_decoder,
/// schedule_source, packed_schedule_source, loader_source and staging_backend (the adapters'
/// concepts are checked in their suites: media_record in tests/ffmpeg/file_decoder.cpp,
/// batch_probe in tests/eigen/cost_model.cpp). Nothing runs; the file compiles or the build
/// fails.
#include <cstddef>      // std::byte, std::size_t
#include <cstdint>      // std::int32_t, std::int64_t, std::uint64_t
#include <deque>        // std::deque (random access, not contiguous)
#include <list>         // std::list (not random access)
#include <optional>     // std::optional
#include <span>         // std::span
#include <string>       // std::string
#include <string_view>  // std::string_view
#include <vector>       // std::vector

#include "vbucket/vbucket.hpp"

namespace concepts_test {

// ---------------------------------------------------------------------------------------------
// video_meta
// ---------------------------------------------------------------------------------------------

/// The default member names, with narrower and unsigned types and extra members.
struct plain_clip {
  std::string path;
  std::uint32_t num_frames;
  short height;
  std::int64_t width;
  float fps;
};

/// Other member names, adapted through meta_traits below (frames come from a function).
struct renamed_clip {
  int length;
  int rows;
  int cols;
  double rate;
  [[nodiscard]] int frames() const { return length; }
};

/// Like renamed_clip but never adapted: not a video_meta.
struct unadapted_clip {
  int length, rows, cols;
  double rate;
};

/// Has frames, height and width but no fps.
struct no_fps_clip {
  int num_frames, height, width;
};

/// fps that is not a number.
struct text_fps_clip {
  int num_frames, height, width;
  std::string fps;
};

/// A size that is not an integer-like value.
struct pointer_height_clip {
  int num_frames;
  int* height;
  int width;
  double fps;
};

}  // namespace concepts_test

template <>
struct vbucket::meta_traits<concepts_test::renamed_clip> {
  static int frames(const concepts_test::renamed_clip& c) { return c.frames(); }
  static int height(const concepts_test::renamed_clip& c) { return c.rows; }
  static int width(const concepts_test::renamed_clip& c) { return c.cols; }
  static double fps(const concepts_test::renamed_clip& c) { return c.rate; }
};

namespace concepts_test {

static_assert(vbucket::video_meta<vbucket::sample_meta>);
static_assert(vbucket::video_meta<plain_clip>);
static_assert(vbucket::video_meta<renamed_clip>);
static_assert(!vbucket::video_meta<unadapted_clip>);
static_assert(!vbucket::video_meta<no_fps_clip>);
static_assert(!vbucket::video_meta<text_fps_clip>);
static_assert(!vbucket::video_meta<pointer_height_clip>);
static_assert(!vbucket::video_meta<int>);

// ---------------------------------------------------------------------------------------------
// resolution_source
// ---------------------------------------------------------------------------------------------

struct my_tables {
  [[nodiscard]] vbucket::resolution_info resolve(std::string_view name) const;
};
/// resolve is not const: a source is used through a const reference.
struct mutable_tables {
  vbucket::resolution_info resolve(std::string_view name);
};
/// Returns something other than resolution_info.
struct pixels_only_tables {
  [[nodiscard]] std::int64_t resolve(std::string_view name) const;
};
/// Takes something a string_view does not convert to.
struct by_index_tables {
  [[nodiscard]] vbucket::resolution_info resolve(int index) const;
};

static_assert(vbucket::resolution_source<vbucket::opensora_v2_tables>);
static_assert(vbucket::resolution_source<vbucket::opensora_v12_tables>);
static_assert(vbucket::resolution_source<vbucket::user_tables>);
static_assert(vbucket::resolution_source<my_tables>);
static_assert(!vbucket::resolution_source<mutable_tables>);
static_assert(!vbucket::resolution_source<pixels_only_tables>);
static_assert(!vbucket::resolution_source<by_index_tables>);

// ---------------------------------------------------------------------------------------------
// uniform_stream and random_source
// ---------------------------------------------------------------------------------------------

/// A stream that is a plain value holding a counter, not a generator or pointer-like handle.
struct counter_stream {
  std::uint64_t n;
  double random() { return static_cast<double>(n++ % 7) / 7.0; }
};
/// A source whose stream type is that distinct struct, returned by value.
struct counter_source {
  [[nodiscard]] counter_stream stream(std::uint64_t sample, std::uint64_t sub) const {
    return {sample * 31 + sub};
  }
};
/// A stream whose random() gives float: not a uniform_stream (draws are doubles).
struct float_stream {
  float random();
};
struct float_source {
  [[nodiscard]] float_stream stream(std::uint64_t, std::uint64_t) const;
};
/// A stream that draws through operator() instead of random().
struct call_stream {
  double operator()();
};
struct call_source {
  [[nodiscard]] call_stream stream(std::uint64_t, std::uint64_t) const;
};
/// stream() that is not const: not usable from a const source.
struct mutable_source {
  counter_stream stream(std::uint64_t, std::uint64_t);
};
/// stream() that returns a draw, not a stream.
struct draw_source {
  [[nodiscard]] double stream(std::uint64_t, std::uint64_t) const;
};
/// stream() with one key only.
struct one_key_source {
  [[nodiscard]] counter_stream stream(std::uint64_t) const;
};

static_assert(vbucket::uniform_stream<vbucket::fast_stream>);
static_assert(vbucket::uniform_stream<vbucket::numpy_rng>);
static_assert(vbucket::uniform_stream<counter_stream>);
static_assert(!vbucket::uniform_stream<float_stream>);
static_assert(!vbucket::uniform_stream<call_stream>);
static_assert(!vbucket::uniform_stream<double>);

static_assert(vbucket::random_source<vbucket::fast_source>);
static_assert(vbucket::random_source<vbucket::numpy_source>);
static_assert(vbucket::random_source<counter_source>);
static_assert(!vbucket::random_source<float_source>);
static_assert(!vbucket::random_source<call_source>);
static_assert(!vbucket::random_source<mutable_source>);
static_assert(!vbucket::random_source<draw_source>);
static_assert(!vbucket::random_source<one_key_source>);

// ---------------------------------------------------------------------------------------------
// bucket_rule
// ---------------------------------------------------------------------------------------------

/// A user rule generic over any source.
struct first_bucket_rule {
  template <vbucket::random_source S>
  [[nodiscard]] vbucket::bucket_id assign(const vbucket::bucket_config&,
                                          const vbucket::sample_meta&, std::uint64_t,
                                          const S&) const {
    return 0;
  }
};
/// A rule that works only with one source type.
struct counter_only_rule {
  [[nodiscard]] vbucket::bucket_id assign(const vbucket::bucket_config&,
                                          const vbucket::sample_meta&, std::uint64_t,
                                          const counter_source&) const;
};
/// Returns a wider integer than bucket_id.
struct long_rule {
  template <class S>
  [[nodiscard]] std::int64_t assign(const vbucket::bucket_config&, const vbucket::sample_meta&,
                                    std::uint64_t, const S&) const;
};
/// assign is not const: rules must be pure, usable from const references across threads.
struct stateful_rule {
  template <class S>
  vbucket::bucket_id assign(const vbucket::bucket_config&, const vbucket::sample_meta&,
                            std::uint64_t, const S&);
};
/// Forgets the sample index.
struct no_index_rule {
  template <class S>
  [[nodiscard]] vbucket::bucket_id assign(const vbucket::bucket_config&,
                                          const vbucket::sample_meta&, const S&) const;
};

static_assert(vbucket::bucket_rule<vbucket::opensora_v2_rule>);
static_assert(vbucket::bucket_rule<vbucket::opensora_v12_rule>);
static_assert(vbucket::bucket_rule<vbucket::opensora_v2_rule, vbucket::numpy_source>);
static_assert(vbucket::bucket_rule<vbucket::opensora_v12_rule, counter_source>);
static_assert(vbucket::bucket_rule<first_bucket_rule>);
static_assert(vbucket::bucket_rule<first_bucket_rule, counter_source>);
static_assert(vbucket::bucket_rule<counter_only_rule, counter_source>);
static_assert(!vbucket::bucket_rule<counter_only_rule>);  // not with fast_source
static_assert(!vbucket::bucket_rule<long_rule>);
static_assert(!vbucket::bucket_rule<stateful_rule>);
static_assert(!vbucket::bucket_rule<no_index_rule>);
// A good rule with a source that is not a random_source is not a bucket_rule.
static_assert(!vbucket::bucket_rule<first_bucket_rule, float_source>);
static_assert(!vbucket::bucket_rule<vbucket::opensora_v2_rule, draw_source>);

// ---------------------------------------------------------------------------------------------
// sample_collection, source_family, sampler_rule (batch_sampler.hpp)
// ---------------------------------------------------------------------------------------------

static_assert(vbucket::sample_collection<vbucket::meta_table>);
static_assert(vbucket::sample_collection<const vbucket::meta_table>);
static_assert(vbucket::sample_collection<std::vector<plain_clip>>);
static_assert(vbucket::sample_collection<std::vector<renamed_clip>>);
static_assert(vbucket::sample_collection<std::deque<vbucket::sample_meta>>);
static_assert(vbucket::sample_collection<std::span<const plain_clip>>);
static_assert(!vbucket::sample_collection<std::list<plain_clip>>);  // not random access
static_assert(!vbucket::sample_collection<std::vector<unadapted_clip>>);
static_assert(!vbucket::sample_collection<plain_clip>);

/// A family of sources: a lambda-like type callable as (seed, epoch, num_buckets).
struct halves_family {
  [[nodiscard]] vbucket::fast_source operator()(std::uint64_t s, std::uint64_t e,
                                                std::size_t) const {
    return vbucket::fast_source(s / 2, e);
  }
};
/// Makes draws, not sources.
struct draw_family {
  [[nodiscard]] double operator()(std::uint64_t, std::uint64_t, std::size_t) const;
};
/// Callable only when not const.
struct mutable_family {
  vbucket::fast_source operator()(std::uint64_t, std::uint64_t, std::size_t);
};
/// Not copyable: a sampler keeps its own copy.
struct unique_family {
  unique_family() = default;
  unique_family(const unique_family&) = delete;
  [[nodiscard]] counter_source operator()(std::uint64_t, std::uint64_t, std::size_t) const;
};

static_assert(vbucket::source_family<halves_family>);
static_assert(!vbucket::source_family<draw_family>);
static_assert(!vbucket::source_family<mutable_family>);
static_assert(!vbucket::source_family<unique_family>);
static_assert(!vbucket::source_family<vbucket::fast_source>);

/// A family whose source is counter_source.
struct counter_family {
  [[nodiscard]] counter_source operator()(std::uint64_t, std::uint64_t, std::size_t) const;
};

static_assert(vbucket::sampler_rule<vbucket::opensora_v2_rule, vbucket::builtin_sources>);
static_assert(vbucket::sampler_rule<first_bucket_rule, vbucket::builtin_sources>);
static_assert(vbucket::sampler_rule<first_bucket_rule, counter_family>);
static_assert(vbucket::sampler_rule<counter_only_rule, counter_family>);
static_assert(!vbucket::sampler_rule<counter_only_rule, vbucket::builtin_sources>);
static_assert(!vbucket::sampler_rule<stateful_rule, vbucket::builtin_sources>);
static_assert(!vbucket::sampler_rule<first_bucket_rule, draw_family>);

// ---------------------------------------------------------------------------------------------
// batch_cost (plan_options.hpp)
// ---------------------------------------------------------------------------------------------

/// Seconds per batch from frames and batch size.
struct seconds_cost {
  [[nodiscard]] double operator()(const vbucket::bucket_config& c, vbucket::bucket_id b,
                                  std::int64_t bs) const {
    return 0.01 * static_cast<double>(bs * c.frames_of(b).frames);
  }
};
/// An integer cost converts to double: fine.
struct integer_cost {
  [[nodiscard]] std::int64_t operator()(const vbucket::bucket_config&, vbucket::bucket_id,
                                        std::int64_t bs) const {
    return bs;
  }
};
/// Takes no config (a common slip: the cost of a bucket needs the config to know its shape).
struct config_free_cost {
  [[nodiscard]] double operator()(vbucket::bucket_id, std::int64_t) const;
};
/// Returns text.
struct text_cost {
  [[nodiscard]] std::string operator()(const vbucket::bucket_config&, vbucket::bucket_id,
                                       std::int64_t) const;
};

static_assert(vbucket::batch_cost<vbucket::latent_tokens_cost>);
static_assert(vbucket::batch_cost<seconds_cost>);
static_assert(vbucket::batch_cost<integer_cost>);
static_assert(!vbucket::batch_cost<config_free_cost>);
static_assert(!vbucket::batch_cost<text_cost>);

// ---------------------------------------------------------------------------------------------
// tensor_adapter, clip_decoder, schedule_source, packed_schedule_source, loader_source
// (loader.hpp)
// ---------------------------------------------------------------------------------------------

/// A user tensor: a pointer and a byte count, adapted through tensor_traits below.
struct my_tensor {
  void* data;
  std::size_t bytes;
};
/// Never adapted.
struct unadapted_tensor {
  void* data;
};
/// Adapted, but wrap returns another type.
struct wrong_wrap_tensor {
  void* data;
};

}  // namespace concepts_test

template <>
struct vbucket::tensor_traits<concepts_test::my_tensor> {
  static concepts_test::my_tensor wrap(const tensor_view& v) { return {v.data, v.bytes()}; }
};
template <>
struct vbucket::tensor_traits<concepts_test::wrong_wrap_tensor> {
  static concepts_test::my_tensor wrap(const tensor_view& v) { return {v.data, v.bytes()}; }
};

namespace concepts_test {

static_assert(vbucket::tensor_adapter<vbucket::plain_tensor>);
static_assert(vbucket::tensor_adapter<my_tensor>);
static_assert(!vbucket::tensor_adapter<unadapted_tensor>);
static_assert(!vbucket::tensor_adapter<wrong_wrap_tensor>);

/// Returns an error message or nothing.
struct message_decoder {
  std::optional<std::string> decode(const vbucket::clip_task&, std::span<std::uint8_t>);
};
/// Returns a bool: no message to report.
struct bool_decoder {
  bool decode(const vbucket::clip_task&, std::span<std::uint8_t>);
};
/// Decodes into a vector it allocates (not into the staging slot).
struct allocating_decoder {
  std::optional<std::string> decode(const vbucket::clip_task&, std::vector<std::uint8_t>&);
};

static_assert(vbucket::clip_decoder<message_decoder>);
static_assert(!vbucket::clip_decoder<bool_decoder>);
static_assert(!vbucket::clip_decoder<allocating_decoder>);
static_assert(!vbucket::clip_decoder<int>);

/// A trainer's own source of one rank's fixed batches.
struct my_schedule_source {
  [[nodiscard]] vbucket::epoch_schedule schedule() const;
  [[nodiscard]] std::uint32_t rank() const;
  [[nodiscard]] vbucket::plan_state state() const;
};
/// A source of packed batches.
struct my_packed_source {
  [[nodiscard]] bool packed() const;
  [[nodiscard]] vbucket::packed_schedule packing_schedule() const;
  [[nodiscard]] std::uint32_t rank() const;
  [[nodiscard]] vbucket::plan_state state() const;
};
/// Forgets the resume state, so the loader could not say where it is.
struct stateless_source {
  [[nodiscard]] vbucket::epoch_schedule schedule() const;
  [[nodiscard]] std::uint32_t rank() const;
};
/// A schedule only from a non-const source.
struct mutable_schedule_source {
  vbucket::epoch_schedule schedule();
  std::uint32_t rank();
  vbucket::plan_state state();
};

static_assert(vbucket::schedule_source<my_schedule_source>);
static_assert(!vbucket::schedule_source<my_packed_source>);
static_assert(!vbucket::schedule_source<stateless_source>);
static_assert(!vbucket::schedule_source<mutable_schedule_source>);
static_assert(vbucket::packed_schedule_source<my_packed_source>);
static_assert(!vbucket::packed_schedule_source<my_schedule_source>);
static_assert(vbucket::loader_source<my_schedule_source>);
static_assert(vbucket::loader_source<my_packed_source>);
static_assert(vbucket::loader_source<vbucket::batch_sampler<vbucket::meta_table>>);
static_assert(!vbucket::loader_source<stateless_source>);
static_assert(!vbucket::loader_source<vbucket::epoch_schedule>);

// ---------------------------------------------------------------------------------------------
// staging_backend (staging.hpp)
// ---------------------------------------------------------------------------------------------

/// A minimal backend: synchronous copies, an empty event.
struct sync_backend {
  struct event {};
  std::byte* allocate(std::size_t n);
  void deallocate(std::byte*, std::size_t) noexcept;
  event copy_async(void*, const std::byte*, std::size_t);
  void wait(event&);
  bool ready(event&);
};
/// No ready(): the ring could not ask without blocking.
struct no_ready_backend {
  struct event {};
  std::byte* allocate(std::size_t n);
  void deallocate(std::byte*, std::size_t) noexcept;
  event copy_async(void*, const std::byte*, std::size_t);
  void wait(event&);
};
/// deallocate may throw: the ring frees memory in destructors.
struct throwing_free_backend {
  struct event {};
  std::byte* allocate(std::size_t n);
  void deallocate(std::byte*, std::size_t);
  event copy_async(void*, const std::byte*, std::size_t);
  void wait(event&);
  bool ready(event&);
};
/// An event that may throw when moved: the ring moves events while it holds its lock.
struct throwing_event_backend {
  struct event {
    event() = default;
    event(event&&) noexcept(false);
  };
  std::byte* allocate(std::size_t n);
  void deallocate(std::byte*, std::size_t) noexcept;
  event copy_async(void*, const std::byte*, std::size_t);
  void wait(event&);
  bool ready(event&);
};

static_assert(vbucket::staging_backend<vbucket::host_backend>);
static_assert(vbucket::staging_backend<sync_backend>);
static_assert(!vbucket::staging_backend<no_ready_backend>);
static_assert(!vbucket::staging_backend<throwing_free_backend>);
static_assert(!vbucket::staging_backend<throwing_event_backend>);

}  // namespace concepts_test
