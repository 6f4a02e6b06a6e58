#pragma once
/// The libav side of clip decoding and indexing (decode.hpp), declared here and compiled in
/// vbucket::ffmpeg: src/decode_impl.cpp (the decoding plan: decode_planned), src/frame_writer.cpp
/// (libswscale's conversion: decode_input). The CUDA adapter's NVDEC decoder runs the same plan
/// with its own frame_sink.

#include <cstddef>      // std::size_t
#include <cstdint>      // std::int64_t, std::uint8_t
#include <cstring>      // std::memcpy
#include <memory>       // std::unique_ptr
#include <span>         // std::span
#include <string>       // std::string
#include <type_traits>  // std::is_enum_v

#include "vbucket/ffmpeg/decode.hpp"
#include "vbucket/ffmpeg/detail/libav.hpp"
#include "vbucket/ffmpeg/detail/probe_impl.hpp"  // detail::guarded, for the callers
#include "vbucket/ffmpeg/result.hpp"

namespace vbucket::ffmpeg::detail {

/// An enum field of an FFmpeg struct as its integer value, read without loading it as the
/// enum: decoders copy some fields (colour space, range) from the bitstream unchecked, and
/// loading a value outside the enum's range is undefined behaviour (fuzz_decode found a
/// colour space of 78).
template <class E>
int enum_value(const E& field) noexcept {
  static_assert(std::is_enum_v<E> && sizeof(E) == sizeof(int));
  int v = 0;
  std::memcpy(&v, &field, sizeof v);
  return v;
}

/// An opened input, its video stream and decoder.
struct decode_session {
  std::unique_ptr<input> in;
  int index = -1;
  AVStream* stream = nullptr;
  codec_ptr codec;

  /// `setup`: hardware decoding (decoder_setup; null: software).
  decode_session(const source& src, const clip_request& req, const decoder_setup* setup = nullptr);
};

/// Reads the next packet of the session's stream into `pkt`; false at the end (or at a read
/// error, which ends a truncated file like its end). Throws on a timeout.
bool next_packet(decode_session& s, AVPacket* pkt);

/// Checks the request and the output buffer's size (`bytes`); throws naming `name`.
void check_request(const std::string& name, const clip_request& req, std::size_t bytes);

/// Where decode_planned puts the frames wanted: converts each into its slot of the output.
class frame_sink {
 public:
  virtual ~frame_sink() = default;
  /// Called once, before any frame: the stream's display rotation (0, 90, 180, 270), its
  /// sample aspect ratio (AVStream::sample_aspect_ratio; 0/1 when the container records none,
  /// and then each frame's own is used, as ffmpeg does), and whether the source is a still
  /// image (Open-Sora's image transform: the crop offset rounded; else its video transform's,
  /// floored). Kept for `write`.
  void start(int rotation, AVRational container_sar, bool image) noexcept {
    rotation_ = rotation;
    container_sar_ = container_sar;
    image_ = image;
  }
  /// Converts frame `f` of the input named `name` into slot `slot`; fills `info`'s source
  /// fields and counts the frame converted.
  virtual void write(const std::string& name, const AVFrame* f, std::int64_t slot,
                     clip_info& info) = 0;
  /// Fills slot `to` with a copy of slot `from` (padding).
  virtual void repeat(std::int64_t from, std::int64_t to) = 0;

 protected:
  int rotation_ = 0;                ///< `start`'s
  AVRational container_sar_{0, 1};  ///< `start`'s
  bool image_ = false;              ///< `start`'s
};

/// Decodes the frames `req` asks for (checked by the caller: check_request) and hands each to
/// `writer` (after writer.start). `setup`: hardware decoding (null: software). decode_input's
/// plan, shared with the CUDA adapter's NVDEC decoder.
clip_info decode_planned(const source& src, const clip_request& req, const decoder_setup* setup,
                         frame_sink& writer);

/// The clip `req` asks for into `out` (exactly clip_bytes(req) bytes), converted by libswscale.
clip_info decode_input(const source& src, const clip_request& req, std::span<std::uint8_t> out);

}  // namespace vbucket::ffmpeg::detail
