// vbucket::ffmpeg's clip decoding plan (detail/decode_impl.hpp): which frames to decode, found
// by demuxing (timestamps, the MP4 sample table, the frame index, AVI's index), where to seek,
// which packets to skip, and the checks that fall back to decoding from the start. Each frame
// wanted goes to a frame_sink: libswscale's (frame_writer.cpp) or the CUDA adapter's (nvdec.cpp).
#include <algorithm>    // std::sort, std::lower_bound, std::unique, std::adjacent_find, std::max
#include <cstddef>      // std::size_t
#include <cstdint>      // std::int64_t
#include <functional>   // std::function
#include <limits>       // std::numeric_limits
#include <memory>       // std::unique_ptr, std::make_unique
#include <optional>     // std::optional
#include <string>       // std::string, std::to_string
#include <string_view>  // std::string_view
#include <utility>      // std::move
#include <vector>       // std::vector

#include "vbucket/ffmpeg/decode.hpp"
#include "vbucket/ffmpeg/detail/decode_impl.hpp"
#include "vbucket/ffmpeg/detail/libav.hpp"
#include "vbucket/ffmpeg/frame_index.hpp"

namespace vbucket::ffmpeg::detail {

decode_session::decode_session(const source& src, const clip_request& req,
                               const decoder_setup* setup)
    : in(std::make_unique<input>(src, req.limits)) {
  AVFormatContext* fmt = in->format();
  bool need_info = is_image_format(fmt);
  if (!need_info) check_media_data(*in);
  for (unsigned i = 0; i < fmt->nb_streams; ++i) {
    const AVCodecParameters* par = fmt->streams[i]->codecpar;
    if (par->codec_type == AVMEDIA_TYPE_VIDEO && (par->width <= 0 || par->height <= 0))
      need_info = true;
  }
  if (fmt->nb_streams == 0) need_info = true;
  // Several video streams: the choice weighs what the packets show, as in probe.
  if (in->video_candidates() > 1) need_info = true;
  if (need_info) in->find_stream_info();
  index = in->video_stream();
  stream = fmt->streams[index];
  check_size(in->name(), stream->codecpar->height, stream->codecpar->width, req.limits);
  in->discard_others(index);
  codec = open_decoder(*in, stream, req.threads, req.limits, setup);
}

/// Reads the next packet of the session's stream into `pkt`; false at the end (or at a read
/// error, which ends a truncated file like its end). Throws on a timeout.
bool next_packet(decode_session& s, AVPacket* pkt) {
  for (;;) {
    const int rc = av_read_frame(s.in->format(), pkt);
    if (rc < 0) {
      s.in->check_read_failure(rc);  // a timeout, or the network's failure: not the end
      return false;
    }
    // Custom I/O (memory) is never interrupted by FFmpeg: the deadline is checked here too.
    if (s.in->timed_out()) {
      av_packet_unref(pkt);
      s.in->check_read_failure(AVERROR_EXIT);
    }
    if (pkt->stream_index == s.index) return true;
    av_packet_unref(pkt);
  }
}

void check_request(const std::string& name, const clip_request& req, std::size_t bytes) {
  if (req.frames < 1 || req.frames > max_clip_frames)
    fail(name, "frames must be from 1 to " + std::to_string(max_clip_frames) + ", got " +
                   std::to_string(req.frames));
  if (req.interval < 1 || req.interval > max_clip_index)
    fail(name, "interval must be from 1 to " + std::to_string(max_clip_index) + ", got " +
                   std::to_string(req.interval));
  if (req.frames * req.interval > max_clip_index)
    fail(name, "frames x interval must be at most " + std::to_string(max_clip_index) + ", got " +
                   std::to_string(req.frames) + " x " + std::to_string(req.interval));
  if (req.start < 0 || req.start > max_clip_index)
    fail(name, "start must be from 0 to " + std::to_string(max_clip_index) + ", got " +
                   std::to_string(req.start));
  if (req.height < 1 || req.width < 1 || req.height > req.limits.max_side ||
      req.width > req.limits.max_side)
    fail(name, "target size " + std::to_string(req.width) + "x" + std::to_string(req.height) +
                   " must have sides from 1 to " + std::to_string(req.limits.max_side));
  const std::size_t need = clip_bytes(req);
  if (bytes != need)
    fail(name, "the output buffer holds " + std::to_string(bytes) + " bytes, the clip needs " +
                   std::to_string(need) + " (frames x height x width x 3)");
}

namespace {

/// Frame j of the clip `req` asks for (`vbucket::clip_frame_index`).
std::int64_t frame_at(const clip_request& req, std::int64_t j) noexcept {
  return clip_frame_index(req.choice, req.start, req.frames, req.interval, j);
}

/// The packets a decode needs (streams with timestamps), by packet timestamp: `wanted`, the
/// wanted frames' timestamps (sorted, distinct). Any other packet is sent with
/// AVDISCARD_NONREF: its frame is decoded only when other frames refer to it. A decoder decides
/// by decode order, but the wanted set is by timestamp, so a wanted B-frame whose packet comes
/// after reference frames it is shown before is still decoded, and a reference frame is decoded
/// whatever it is. With `drain_after_wanted` (the stream's timestamps are distinct), once every
/// wanted timestamp has been sent the decoder is drained: what is still to come out is in it,
/// and the packets after it are neither shown nor referenced by what is wanted.
struct packet_plan {
  const std::vector<std::int64_t>* wanted = nullptr;
  bool drain_after_wanted = false;
  bool drained = false;  ///< out: decoding stopped that way (a wanted frame not out is missing)
};

/// Frames come out of the decoder; `take` sees each one and returns true when it is done.
/// `plan` (optional): which packets' frames need not be decoded (packet_plan).
/// `first` (optional): a packet already read, sent before the ones read after it.
/// Returns the frames still in the decoder when `take` was done (decoded, or being decoded by
/// its threads, but not yet out: a decoder holds frames back to reorder them); they are drained
/// and counted, not shown to `take`, so that frames decoded = frames out + that count.
std::int64_t decode_frames(decode_session& s, const clip_request& req, packet_plan* plan,
                           const std::function<bool(const AVFrame*)>& take,
                           AVPacket* first = nullptr) {
  packet_ptr pkt = make_packet();
  bool held = first != nullptr;
  if (held) av_packet_move_ref(pkt.get(), first);
  frame_ptr frame = make_frame();
  AVCodecContext* ctx = s.codec.get();
  std::int64_t since_frame = 0;
  // Which wanted timestamps have been sent (a duplicate packet counts once).
  std::vector<bool> sent(plan != nullptr ? plan->wanted->size() : 0, false);
  std::size_t sent_count = 0;
  // true when done
  auto drain = [&]() -> bool {
    for (;;) {
      const int rc = avcodec_receive_frame(ctx, frame.get());
      if (rc == AVERROR(EAGAIN) || rc == AVERROR_EOF) return false;
      if (rc < 0) fail(s.in->name(), "cannot decode: " + av_error_text(rc));
      since_frame = 0;
      const bool done = take(frame.get());
      av_frame_unref(frame.get());
      if (done) return true;
    }
  };
  auto held_back = [&]() -> std::int64_t {
    ctx->skip_frame = AVDISCARD_DEFAULT;
    avcodec_send_packet(ctx, nullptr);
    std::int64_t left = 0;
    for (; avcodec_receive_frame(ctx, frame.get()) >= 0; ++left) av_frame_unref(frame.get());
    return left;
  };
  for (; held || next_packet(s, pkt.get()); held = false) {
    if (plan != nullptr) {
      const std::vector<std::int64_t>& w = *plan->wanted;
      const auto at = std::lower_bound(w.begin(), w.end(), pkt->pts);
      const bool wanted = pkt->pts == AV_NOPTS_VALUE || (at != w.end() && *at == pkt->pts);
      ctx->skip_frame = wanted ? AVDISCARD_DEFAULT : AVDISCARD_NONREF;
      if (wanted && at != w.end() && *at == pkt->pts) {
        const auto i = static_cast<std::size_t>(at - w.begin());
        if (!sent[i]) ++sent_count;
        sent[i] = true;
      }
    }
    const int rc = avcodec_send_packet(ctx, pkt.get());
    av_packet_unref(pkt.get());
    if (rc < 0 && rc != AVERROR(EAGAIN) && rc != AVERROR_INVALIDDATA)
      fail(s.in->name(), "cannot decode: " + av_error_text(rc));
    if (++since_frame > req.limits.max_packets_without_frame)
      fail(s.in->name(), "no frame decoded from " + std::to_string(since_frame) + " packets");
    if (drain()) return held_back();
    if (plan != nullptr && plan->drain_after_wanted && sent_count == sent.size()) {
      plan->drained = true;
      break;
    }
  }
  ctx->skip_frame = AVDISCARD_DEFAULT;
  avcodec_send_packet(ctx, nullptr);
  return drain() ? held_back() : 0;
}

/// Timestamps of presentation indices base, base + 1, ... (unsorted), from `indexed_pts`.
struct indexed_timestamps {
  std::int64_t base = 0;
  std::vector<std::int64_t> pts;
};

/// MP4/MOV only, where the demuxer's index is the sample table: one entry per packet, in
/// decode order. Finds the last keyframe K whose count of earlier (non-discarded) packets d_K
/// is at most `start`, and an earlier keyframe K0 at least `margin` packets before it, seeks to
/// K0 and demuxes from there, collecting the timestamps of K and the packets after it until
/// presentation indices below `until` are covered (or the stream ends). Presentation index
/// d_K + r is then the r-th smallest of those, provided K splits the stream: every packet
/// decoded before K is shown before every packet decoded from K on. That is checked on the
/// packets read (from where the seek lands on; reordering is assumed to span fewer than
/// `margin` packets, as in the plain scan), and each packet read must be the table entry
/// expected (same position and decode time). std::nullopt when any of this does not hold; the
/// session has then been seeked and must be reopened if `touched` is set.
std::optional<indexed_timestamps> indexed_pts(decode_session& s, std::int64_t start,
                                              std::int64_t until, std::int64_t margin,
                                              bool& touched) {
  touched = false;
  AVFormatContext* fmt = s.in->format();
  if (!is_mov(fmt)) return std::nullopt;
  AVStream* st = s.stream;
  const int entries = avformat_index_get_entries_count(st);
  // A fragmented file's index grows as fragments are read: only a table that already has
  // every sample the header announced is trusted.
  if (entries <= 0 || st->nb_frames != entries) return std::nullopt;
  struct key {
    int entry;
    std::int64_t before;  // non-discarded packets before it
  };
  std::vector<key> keys;
  std::int64_t before = 0;
  std::int64_t last_dts = std::numeric_limits<std::int64_t>::min();
  for (int e = 0; e < entries && before <= start; ++e) {
    const AVIndexEntry* ie = avformat_index_get_entry(st, e);
    if (ie == nullptr || ie->timestamp <= last_dts) return std::nullopt;
    last_dts = ie->timestamp;
    const bool discard = (ie->flags & AVINDEX_DISCARD_FRAME) != 0;
    if ((ie->flags & AVINDEX_KEYFRAME) != 0 && !discard) keys.push_back({e, before});
    if (!discard) ++before;
  }
  // K: the last keyframe with at most `start` packets before it; K0: the last keyframe at
  // least `margin` packets before K. Without both, or with K0 the first packet (a clip near
  // the start), the plain scan costs the same.
  std::size_t k = keys.size();
  while (k > 0 && keys[k - 1].before > start) --k;
  if (k == 0) return std::nullopt;
  const key kk = keys[k - 1];
  std::size_t k0 = k - 1;
  while (k0 > 0 && keys[k0 - 1].before > kk.before - margin) --k0;
  if (k0 == 0) return std::nullopt;
  const key kk0 = keys[k0 - 1];
  if (kk0.entry == 0) return std::nullopt;

  touched = true;
  // The demuxer may land on an earlier keyframe than asked (MP4 seeks by presentation time):
  // the packet it lands on is looked up in the table, and demuxing is checked from there.
  const AVIndexEntry* first = avformat_index_get_entry(st, kk0.entry);
  if (av_seek_frame(fmt, s.index, first->timestamp, AVSEEK_FLAG_BACKWARD) < 0) return std::nullopt;
  packet_ptr pkt = make_packet();
  if (!next_packet(s, pkt.get())) return std::nullopt;
  int landed = kk0.entry;
  for (; landed >= 0; --landed) {
    const AVIndexEntry* ie = avformat_index_get_entry(st, landed);
    if (ie != nullptr && ie->pos == pkt->pos && ie->timestamp == pkt->dts) break;
  }
  if (landed < 0) return std::nullopt;
  indexed_timestamps out;
  out.base = kk.before;
  const std::int64_t count = until - kk.before;  // > 0: start < until
  out.pts.reserve(static_cast<std::size_t>(std::min<std::int64_t>(count, entries)));
  std::int64_t max_before_k = std::numeric_limits<std::int64_t>::min();
  std::int64_t min_from_k = std::numeric_limits<std::int64_t>::max();
  bool held = true;  // `pkt` holds the packet of entry `landed`
  for (int e = landed;; ++e) {
    if (e >= kk.entry && static_cast<std::int64_t>(out.pts.size()) >= count) break;
    if (!held && !next_packet(s, pkt.get())) {
      if (e <= kk.entry) return std::nullopt;  // the stream ended before K
      break;                                   // the whole rest of the stream is in hand
    }
    held = false;
    const AVIndexEntry* ie = e < entries ? avformat_index_get_entry(st, e) : nullptr;
    const bool discard = (pkt->flags & AV_PKT_FLAG_DISCARD) != 0;
    const std::int64_t p = pkt->pts, dts = pkt->dts, pos = pkt->pos;
    const int size = pkt->size;
    av_packet_unref(pkt.get());
    // A packet cut short by the end of the file: the plain scan leaves it out.
    if (ie == nullptr || pos != ie->pos || dts != ie->timestamp || size != ie->size ||
        discard != ((ie->flags & AVINDEX_DISCARD_FRAME) != 0))
      return std::nullopt;
    if (discard) continue;
    if (p == AV_NOPTS_VALUE) return std::nullopt;
    if (e < kk.entry) {
      max_before_k = std::max(max_before_k, p);
      continue;
    }
    min_from_k = std::min(min_from_k, p);
    out.pts.push_back(p);
  }
  // K splits the stream when everything decoded before it is shown before everything decoded
  // from it on (an open GOP's leading frames, decoded after K but shown before it, are fine:
  // they are counted among the packets from K on).
  if (out.pts.empty() || max_before_k >= min_from_k) return std::nullopt;
  return out;
}

/// MPEG-TS and PS: seeks through the frame index go by byte position (their timestamp seeks
/// can land after the target).
bool seeks_by_byte(const AVFormatContext* fmt) noexcept {
  if (fmt->iformat == nullptr || fmt->iformat->name == nullptr) return false;
  const std::string_view name = fmt->iformat->name;
  return name == "mpegts" || name == "mpeg";
}

/// Seeks `s` to keyframe `ki` (≥ 1) of the frame index entry `fi` and reads up to it: true
/// with its packet in `pkt` when a packet of the same position, size and pts comes before any
/// packet past it. MPEG-TS/PS seek by byte to the keyframe before it (after a byte seek the
/// parser loses the first frame it meets); the rest by its decode time (else pts), backward.
bool seek_to_key(decode_session& s, const file_index& fi, std::size_t ki, AVPacket* pkt) {
  if (ki == 0 || ki >= fi.keys.size()) return false;
  const index_key& k = fi.keys[ki];
  AVFormatContext* fmt = s.in->format();
  const bool by_byte = seeks_by_byte(fmt);
  const bool mov = is_mov(fmt);
  int rc = -1;
  if (by_byte) {
    const std::int64_t from = fi.keys[ki - 1].pos;
    if (from < 0 || k.pos < 0) return false;
    rc = av_seek_frame(fmt, s.index, from, AVSEEK_FLAG_BYTE);
  } else {
    const std::int64_t target = k.dts != index_no_value ? k.dts : k.pts;
    rc = av_seek_frame(fmt, s.index, target, AVSEEK_FLAG_BACKWARD);
  }
  if (rc < 0) return false;
  // Past K: a later position (positions grow in decode order, except in MP4/MOV) or decode
  // time. Demuxing is cheap, but a landing far before K is bounded all the same.
  constexpr int max_skipped = 1 << 16;
  for (int skipped = 0; skipped < max_skipped; ++skipped) {
    if (!next_packet(s, pkt)) return false;
    if (pkt->pos == k.pos && pkt->size == k.size && pkt->pts == k.pts) return true;
    const bool past = (!mov && k.pos >= 0 && pkt->pos > k.pos) ||
                      (k.dts != index_no_value && pkt->dts != AV_NOPTS_VALUE && pkt->dts > k.dts);
    av_packet_unref(pkt);
    if (past) return false;
  }
  return false;
}

/// The frame index's counterpart of `indexed_pts` (mode 0: a stream with presentation times):
/// K is the last keyframe of the entry at frame ≤ `start`; the input is seeked to K (checked:
/// `seek_to_key`), and the timestamps of K and the packets after it are read until presentation
/// indices below `until` are covered. Index K.frame + r is the r-th smallest of those, as the
/// scan checked that K splits the stream; here the packets read must agree: each one shown
/// after every packet before K (K.before), and a stream that ends must end at the entry's
/// frame count. std::nullopt on any doubt; the session must then be reopened if `touched`.
std::optional<indexed_timestamps> index_pts(decode_session& s, const file_index& fi,
                                            std::int64_t start, std::int64_t until, bool& touched) {
  touched = false;
  if (fi.output_order || fi.keys.empty()) return std::nullopt;
  std::size_t ki = fi.keys.size();
  while (ki > 0 && fi.keys[ki - 1].frame > start) --ki;
  if (ki <= 1) return std::nullopt;  // near the start: the plain scan costs the same
  --ki;
  const index_key& k = fi.keys[ki];
  touched = true;
  packet_ptr pkt = make_packet();
  if (!seek_to_key(s, fi, ki, pkt.get())) return std::nullopt;
  const bool mov = is_mov(s.in->format());
  indexed_timestamps out;
  out.base = k.frame;
  const std::int64_t count = until - k.frame;  // > 0: start < until
  out.pts.reserve(static_cast<std::size_t>(std::min<std::int64_t>(count, fi.frames)));
  bool ended = false;
  for (bool held = true; static_cast<std::int64_t>(out.pts.size()) < count; held = false) {
    if (!held && !next_packet(s, pkt.get())) {
      ended = true;
      break;
    }
    const bool discard =
        (pkt->flags & AV_PKT_FLAG_DISCARD) != 0 || (mov && cut_short(s.stream, pkt.get()));
    const std::int64_t p = pkt->pts;
    av_packet_unref(pkt.get());
    if (discard) continue;
    if (p == AV_NOPTS_VALUE || (k.before != index_no_value && p <= k.before)) return std::nullopt;
    out.pts.push_back(p);
  }
  if (ended && k.frame + static_cast<std::int64_t>(out.pts.size()) != fi.frames)
    return std::nullopt;
  if (out.pts.empty()) return std::nullopt;
  return out;
}

/// Packets shortly before a keyframe whose frames the decoder may show after it: H.264
/// reorders at most 16 frames.
constexpr std::int64_t output_order_margin = 16;

/// Streams without timestamps (AVI; MPEG-PS/TS where some packet has none): frames are
/// numbered in the decoder's output order from the stream's start. With `table`, the stream's
/// first packets in decode order (from the AVI index, or demuxed), the clip is decoded from a
/// keyframe instead of the start. K: the last keyframe at entry e_K <= req.start. If every
/// packet decodes to one frame and K splits the stream (every frame decoded before K comes out
/// before every frame decoded from K on), the first frame out of packets from K on is frame
/// e_K, and the frames after it count on from there. Decoding starts at an earlier keyframe K0
/// (at least `output_order_margin` packets before K) and checks that split on the frames out:
/// each packet is tagged with its entry number (the packet's pts, which the decoder hands to the
/// frame); each of the last `output_order_margin` packets before K must come out once, before
/// any frame of K on, and none before K after one (reordering across more packets is assumed
/// not to happen, as for the packets before K0); unreferenced frames before those are not
/// decoded. Every packet read from K0 on must be the table's entry (AVI: same decode time and
/// size; else same position and size). `s`: an opened session whose decoder has had no packet
/// (it is seeked). False when any of this fails or K0 does not exist: the caller then decodes
/// from the start in a new session (slots already written are overwritten).
bool decode_output_order_from_keyframe(decode_session& s, const clip_request& req,
                                       const std::vector<packet_entry>& table, bool avi,
                                       frame_sink& writer, clip_info& info, std::int64_t& filled) {
  const auto entries = static_cast<std::int64_t>(table.size());
  if (req.start >= entries) return false;  // a short stream: the start decides
  std::int64_t k = req.start;
  while (k >= 0 && !table[static_cast<std::size_t>(k)].key) --k;
  if (k < 0) return false;
  std::int64_t k0 = k - output_order_margin;
  while (k0 >= 0 && !table[static_cast<std::size_t>(k0)].key) --k0;
  if (k0 <= 0) return false;  // near the start: decoding from there costs the same

  const packet_entry& first = table[static_cast<std::size_t>(k0)];
  // AVI seeks through its index to the entry; its packets' positions are past the chunk
  // header the index points at, and their decode times are the index's: they are matched by
  // decode time and size. The rest seek by byte position, to a packet before K0 whose position
  // is known (a frame that starts inside another's PES packet has none), and are matched by
  // position and size: after a byte seek the parser loses the first frame it sees, and the
  // decode times it interpolates for packets without their own can differ from a read from
  // the start.
  // The target is the second such packet before K0, so that the first one is recognised.
  std::int64_t b = k0 - 1, last_known = -1;
  for (int known = 0; !avi && b >= 0; --b) {
    const std::int64_t pos = table[static_cast<std::size_t>(b)].pos;
    if (pos >= 0 && last_known < 0) last_known = pos;
    if (pos >= 0 && ++known == 2) break;
  }
  if (!avi && b < 0) return false;
  if (first.pos >= 0) last_known = first.pos;
  const int rc = avi ? av_seek_frame(s.in->format(), s.index, first.dts, AVSEEK_FLAG_BACKWARD)
                     : av_seek_frame(s.in->format(), s.index,
                                     table[static_cast<std::size_t>(b)].pos, AVSEEK_FLAG_BYTE);
  if (rc < 0) return false;
  auto is_entry = [avi](const AVPacket* p, const packet_entry& e) {
    return p->size == e.size && (avi ? p->dts == e.dts : p->pos == e.pos);
  };
  packet_ptr pkt = make_packet();
  frame_ptr frame = make_frame();
  // The landing is verified: the first packet recognised (AVI: K0; else one of entries b to
  // K0 with a known position) must come no later than K0, and the packets from there on must
  // be the table's, up to K0.
  std::int64_t at = -1;  // the entry `pkt` holds
  for (int skipped = 0; at < 0; ++skipped) {
    if (skipped > 4096 || !next_packet(s, pkt.get())) return false;
    if (avi) {
      if (is_entry(pkt.get(), first))
        at = k0;
      else if (pkt->dts == AV_NOPTS_VALUE || pkt->dts >= first.dts)
        return false;
    } else if (pkt->pos >= 0) {
      for (std::int64_t e = b; e <= k0 && at < 0; ++e)
        if (is_entry(pkt.get(), table[static_cast<std::size_t>(e)])) at = e;
      if (at < 0 && pkt->pos > last_known) return false;
    }
    if (at < 0) av_packet_unref(pkt.get());
  }
  for (; at < k0; ++at) {
    av_packet_unref(pkt.get());
    if (!next_packet(s, pkt.get()) || !is_entry(pkt.get(), table[static_cast<std::size_t>(at + 1)]))
      return false;
  }
  AVCodecContext* ctx = s.codec.get();
  const std::int64_t n = req.frames;
  const std::int64_t checked_from = k - output_order_margin;  // must come out before K's
  std::vector<bool> seen(static_cast<std::size_t>(k - k0), false);
  std::int64_t checked_seen = 0, from_k = 0, sent = k0, since_frame = 0;
  bool bad = false;
  filled = 0;
  info.frames_decoded = 0;
  info.frames_converted = 0;
  // true when done (or a check failed: `bad`)
  auto drain = [&]() -> bool {
    for (;;) {
      const int r = avcodec_receive_frame(ctx, frame.get());
      if (r == AVERROR(EAGAIN) || r == AVERROR_EOF) return false;
      if (r < 0) return bad = true;
      since_frame = 0;
      ++info.frames_decoded;
      const std::int64_t tag = frame->pts;
      if (tag == AV_NOPTS_VALUE || tag < k0 || tag >= sent) return bad = true;
      if (tag < k) {
        const auto seen_at = static_cast<std::size_t>(tag - k0);
        if (from_k > 0 || seen[seen_at]) return bad = true;
        seen[seen_at] = true;
        if (tag >= checked_from) ++checked_seen;
      } else {
        if (from_k == 0 && checked_seen != k - checked_from) return bad = true;
        const std::int64_t index = k + from_k++;
        if (filled < n && index == frame_at(req, filled)) {
          writer.write(s.in->name(), frame.get(), filled, info);
          ++filled;
        }
      }
      av_frame_unref(frame.get());
      if (filled == n) return true;
    }
  };
  for (bool held = true;; held = false) {
    if (!held && !next_packet(s, pkt.get())) break;
    if (sent < entries) {
      const packet_entry& e = table[static_cast<std::size_t>(sent)];
      if (!is_entry(pkt.get(), e)) return false;
    }
    // Frames decoded more than the margin before K need not come out: the ones no other
    // frame refers to are not decoded.
    ctx->skip_frame = req.skip_unwanted && sent > k0 && sent < checked_from ? AVDISCARD_NONREF
                                                                            : AVDISCARD_DEFAULT;
    pkt->pts = sent++;  // the tag
    const int r = avcodec_send_packet(ctx, pkt.get());
    av_packet_unref(pkt.get());
    if (r < 0 && r != AVERROR(EAGAIN) && r != AVERROR_INVALIDDATA) return false;
    if (++since_frame > req.limits.max_packets_without_frame) return false;
    if (drain()) return !bad;
  }
  avcodec_send_packet(ctx, nullptr);
  drain();
  // The stream ended: a clip past its end is reported by the caller, as from the start; one
  // that never reached K proves nothing.
  return !bad && from_k > 0;
}

}  // namespace

clip_info decode_planned(const source& src, const clip_request& req, const decoder_setup* setup,
                         frame_sink& writer) {
  const std::int64_t n = req.frames;
  const std::int64_t last = frame_at(req, n - 1);
  clip_info info;
  auto s = std::make_unique<decode_session>(src, req, setup);
  info.rotation = display_rotation(s->stream);
  const bool image = is_image_format(s->in->format());
  writer.start(info.rotation, s->stream->sample_aspect_ratio, image);
  // A copy: `s` is replaced when decoding restarts from the start (a reference into it would
  // dangle; fuzz_decode found that).
  const std::string name = src.name;

  // The frame index's entry for the file, when it is the file indexed (same size, mtime,
  // stream and time base; else it is stale and ignored).
  const file_index* fi = nullptr;
  if (req.index != nullptr && req.use_index && !src.in_memory && !image) {
    fi = req.index->find(src.name);
    if (fi != nullptr &&
        (!is_fresh(*fi) || fi->stream != static_cast<std::uint32_t>(s->index) ||
         fi->time_num != s->stream->time_base.num || fi->time_den != s->stream->time_base.den)) {
      info.index_stale = true;
      fi = nullptr;
    }
  }

  // 1. Timestamps of the frames up to the last wanted one, by demuxing (no decoding). The
  // margin covers decoders' reordering (H.264 reorders at most 16 frames).
  constexpr std::int64_t reorder_margin = 64;
  std::vector<std::int64_t> pts;
  std::int64_t base = 0;  // pts[r] (once sorted) is presentation index base + r
  // Images and streams without timestamps are decoded in order from the start.
  bool timestamps = !image;
  if (timestamps && req.use_index) {
    bool touched = false;
    auto fast = indexed_pts(*s, req.start, last + reorder_margin + 1, reorder_margin, touched);
    if (fast) {
      base = fast->base;
      pts = std::move(fast->pts);
      info.indexed = true;
    } else if (touched) {
      s = std::make_unique<decode_session>(src, req, setup);
    }
  }
  if (timestamps && !info.indexed && fi != nullptr && !fi->output_order) {
    bool touched = false;
    auto fast = index_pts(*s, *fi, req.start, last + reorder_margin + 1, touched);
    if (fast) {
      base = fast->base;
      pts = std::move(fast->pts);
      info.index_used = true;
    } else if (touched) {
      s = std::make_unique<decode_session>(src, req, setup);
    }
  }
  // Without timestamps, the packets up to `start` in decode order let decoding start at a
  // keyframe (decode_output_order_from_keyframe): AVI lists them in its index; elsewhere the
  // pass below records them, reading on up to `start` once a packet without one shows up.
  const bool avi = is_avi(s->in->format());
  const bool mov = is_mov(s->in->format());
  std::vector<packet_entry> table;
  bool table_done = !req.use_index || mov;
  // Without the index the pass below turns to output order when it meets a packet without pts
  // within a margin past the clip; with it, the same rule from the recorded first such packet.
  if (timestamps && fi != nullptr && fi->output_order && fi->no_pts_from <= last + reorder_margin) {
    // The index lists every packet in decode order: no pass.
    timestamps = false;
    table.reserve(fi->packets.size());
    for (const index_packet& p : fi->packets) table.push_back({p.pos, p.dts, p.size, p.key});
    table_done = true;
    info.index_used = true;
  }
  if (timestamps && !info.indexed && !info.index_used) {
    packet_ptr pkt = make_packet();
    for (;;) {
      if (timestamps ? static_cast<std::int64_t>(pts.size()) > last + reorder_margin
                     : table_done || static_cast<std::int64_t>(table.size()) > req.start)
        break;
      if (!next_packet(*s, pkt.get())) break;  // the whole stream is in `pts`
      // Not frames: samples before the edit list's start, and (MP4) a sample the end of the
      // file cuts (probe counts neither).
      const bool discard =
          (pkt->flags & AV_PKT_FLAG_DISCARD) != 0 || (mov && cut_short(s->stream, pkt.get()));
      const std::int64_t p = pkt->pts;
      if (!table_done && !discard)
        table.push_back({pkt->pos, pkt->dts, pkt->size, (pkt->flags & AV_PKT_FLAG_KEY) != 0});
      av_packet_unref(pkt.get());
      if (discard) continue;
      if (timestamps && p == AV_NOPTS_VALUE) {
        timestamps = false;
        if (avi && !table_done) {  // without a complete index, the pass goes on
          auto index = avi_index_table(s->stream);
          if (!index.empty()) {
            table = std::move(index);
            table_done = true;
          }
        }
        continue;
      }
      if (timestamps) pts.push_back(p);
    }
  }

  std::int64_t filled = 0;
  if (!timestamps) {
    // 2a. No timestamps: frames are numbered in the decoder's output order, from the start.
    info.presentation_index = false;
    bool done = false;
    if (!image && !table.empty()) {
      // The session the pass read packets from: seeked, its decoder still unused.
      done = decode_output_order_from_keyframe(*s, req, table, avi, writer, info, filled);
      info.seeked = done;
    }
    if (!done) {
      filled = 0;
      info.frames_decoded = 0;
      info.frames_converted = 0;
      if (!image) s = std::make_unique<decode_session>(src, req, setup);  // the pass read packets
      std::int64_t k = 0;
      const std::int64_t held_back = decode_frames(*s, req, nullptr, [&](const AVFrame* f) {
        ++info.frames_decoded;
        const std::int64_t index = k++;
        if (filled < n && index == frame_at(req, filled)) {
          writer.write(name, f, filled, info);
          ++filled;
        }
        return filled == n;
      });
      info.frames_decoded += held_back;
    }
  } else {
    // 2b. Presentation index i is the i-th smallest timestamp.
    std::sort(pts.begin(), pts.end());
    std::vector<std::int64_t> wanted;
    for (std::int64_t j = 0; j < n; ++j) {
      const std::int64_t i = frame_at(req, j) - base;
      if (i >= static_cast<std::int64_t>(pts.size())) break;
      wanted.push_back(pts[static_cast<std::size_t>(i)]);
    }
    const auto available = static_cast<std::int64_t>(wanted.size());
    if (available < n && (!req.pad || available == 0))
      fail(name, "clip too short: frames " + std::to_string(req.start) + " to " +
                     std::to_string(last) + " asked, the video has " +
                     std::to_string(base + static_cast<std::int64_t>(pts.size())) + " frames");
    // Distinct timestamps (as in any sound stream) let decoding stop at the last wanted packet.
    const bool distinct = std::adjacent_find(pts.begin(), pts.end()) == pts.end();
    std::vector<std::int64_t> sorted_wanted = wanted;
    std::sort(sorted_wanted.begin(), sorted_wanted.end());
    sorted_wanted.erase(std::unique(sorted_wanted.begin(), sorted_wanted.end()),
                        sorted_wanted.end());
    // Seek targets: the first wanted frame's timestamp, then 1, 3 and 7 s before it (MPEG-TS
    // and PS seek by byte position and decode time, and can land after the frame or nowhere:
    // a landing is taken only when the first frame out comes at or before it and every
    // wanted frame comes out), then the file's start.
    const AVRational tb = s->stream->time_base;
    const std::int64_t second =
        tb.num > 0 && tb.den > 0 ? std::max<std::int64_t>(1, av_rescale_q(1, {1, 1}, tb)) : 1;
    const std::int64_t targets[] = {wanted.front(), wanted.front() - second,
                                    wanted.front() - 3 * second, wanted.front() - 7 * second};
    constexpr int seek_attempts = static_cast<int>(sizeof targets / sizeof targets[0]);
    // With the frame index, first the keyframe D at or before the first wanted frame (the last
    // one shown no later), reached by `seek_to_key` (MPEG-TS/PS: by byte position).
    std::size_t d = 0;
    if (fi != nullptr && !fi->output_order)
      while (d < fi->keys.size() && fi->keys[d].pts <= wanted.front()) ++d;
    const bool key_seek = d >= 2;  // D = keys[d - 1], not the first
    bool decoded = false;          // the decoder has had packets
    bool skip = req.skip_unwanted;
    for (int attempt = key_seek ? -1 : 0; attempt <= seek_attempts; ++attempt) {
      bool seek = attempt < seek_attempts;
      packet_ptr landed;
      if (attempt < 0) {
        landed = make_packet();
        if (!seek_to_key(*s, *fi, d - 1, landed.get())) continue;
      } else if (seek) {
        if (decoded) avcodec_flush_buffers(s->codec.get());
        const int rc =
            av_seek_frame(s->in->format(), s->index, targets[attempt], AVSEEK_FLAG_BACKWARD);
        seek = rc >= 0;
      }
      if (!seek) s = std::make_unique<decode_session>(src, req, setup);  // from the start
      info.seeked = seek;
      decoded = true;
      bool overshot = false, first = true, missing = false;
      filled = 0;
      info.frames_decoded = 0;
      info.frames_converted = 0;
      packet_plan plan{.wanted = &sorted_wanted, .drain_after_wanted = distinct};
      const std::int64_t held_back = decode_frames(
          *s, req, skip ? &plan : nullptr,
          [&](const AVFrame* f) {
            ++info.frames_decoded;
            const std::int64_t p = frame_pts(f);
            if (first && p > wanted.front()) {
              overshot = true;  // the seek landed after the first wanted frame
              return true;
            }
            first = false;
            if (filled < available && p > wanted[static_cast<std::size_t>(filled)]) {
              missing = true;  // a later frame came out first
              return true;
            }
            if (filled < available && p == wanted[static_cast<std::size_t>(filled)]) {
              writer.write(name, f, filled, info);
              ++filled;
            }
            return filled == available;
          },
          landed.get());
      info.frames_decoded += held_back;
      // A wanted frame the stream has did not come out. After a seek that is the landing's
      // doing: started at an open GOP's keyframe, the frames decoded after it but shown before
      // it refer to the GOP before, and FFmpeg's H.264 decoder can then lose later frames too
      // (x264 open-gop; tests/ffmpeg/decode_skip.cpp): an earlier landing, then the start.
      // From the start it is the data's (corrupt): with skipping, once more without it, so
      // that what follows (an error, padding) is what decoding every frame gives.
      const bool short_of_wanted = !overshot && (missing || filled < available);
      if (short_of_wanted && seek) continue;
      if (short_of_wanted && plan.drained && skip) {
        skip = false;
        --attempt;
        continue;
      }
      if (missing)
        fail(name, "frame " + std::to_string(frame_at(req, filled)) +
                       " is missing from the decoded stream (corrupt data?)");
      if (!overshot && (filled > 0 || !seek)) break;
      // Landed after the first wanted frame, or nothing at all came out (some demuxers seek
      // badly, e.g. MPEG-TS near its end): earlier, then from the start.
      if (!seek)
        fail(name, "the first frame decoded comes after frame " + std::to_string(req.start));
    }
  }
  if (filled < n) {
    if (!req.pad || filled == 0)
      fail(name, "clip too short: " + std::to_string(filled) + " of " + std::to_string(n) +
                     " frames decoded (frames " + std::to_string(req.start) + " to " +
                     std::to_string(last) + " asked)");
    for (std::int64_t j = filled; j < n; ++j) writer.repeat(filled - 1, j);
    info.frames_padded = n - filled;
  }
  return info;
}

}  // namespace vbucket::ffmpeg::detail
