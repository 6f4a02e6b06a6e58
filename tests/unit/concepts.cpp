/// Compile-time conformance (and non-conformance) of stand-in types for vbucket's concepts:
/// video_meta, resolution_source, uniform_stream, random_source and bucket_rule. Nothing runs;
/// the file compiles or the build fails.
#include <cstdint>      // std::int32_t, std::int64_t, std::uint64_t
#include <string>       // std::string
#include <string_view>  // std::string_view

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

}  // namespace concepts_test
