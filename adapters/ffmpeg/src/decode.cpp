// vbucket::ffmpeg's compiled part: clip decoding and frame indexing (decode.hpp) over the libav
// code declared in detail/decode_impl.hpp (decode_impl.cpp: the plan; frame_writer.cpp: the
// conversion).
#include "vbucket/ffmpeg/decode.hpp"

#include <algorithm>  // std::min, std::max
#include <limits>     // std::numeric_limits
#include <string>     // std::string
#include <vector>     // std::vector

#include "vbucket/detail/parallel_tasks.hpp"
#include "vbucket/ffmpeg/detail/decode_impl.hpp"

namespace vbucket::ffmpeg {
/// Decodes the clip `req` asks for from the file at `path` into `out` (exactly
/// clip_bytes(req) bytes). Bad files and impossible requests come back as error values.
result<clip_info> decode_clip(const std::string& path, const clip_request& req,
                              std::span<std::uint8_t> out) noexcept {
  return detail::guarded<clip_info>(path, [&] {
    return detail::decode_input(detail::source{path, {}, false}, req, out);
  });
}

/// The same for a file held in memory; `name` is used in messages only.
result<clip_info> decode_clip_memory(std::span<const std::uint8_t> data, const std::string& name,
                                     const clip_request& req,
                                     std::span<std::uint8_t> out) noexcept {
  return detail::guarded<clip_info>(name, [&] {
    return detail::decode_input(detail::source{name, data, true}, req, out);
  });
}

/// The frame index entry of the video at `path` (frame_index.hpp): its packets demuxed once
/// (no decoding), with the file's size and mtime read before and checked after. A stream where
/// every packet has a pts records the keyframes that split it; else every packet (frames then
/// count in the decoder's output order). Images and unreadable files come back as errors.
result<file_index> index_video(const std::string& path, const limits& lim) noexcept {
  return detail::guarded<file_index>(path, [&] {
    const auto stamp = file_stamp(path);
    if (!stamp) detail::fail(path, "cannot read the file's size and modification time");
    clip_request req;
    req.limits = lim;
    detail::decode_session s(detail::source{path, {}, false}, req);
    AVFormatContext* fmt = s.in->format();
    if (detail::is_image_format(fmt)) detail::fail(path, "an image: nothing to index");
    const bool mov = detail::is_mov(fmt);
    struct packet {
      std::int64_t pos, pts, dts;
      int size;
      bool key;
    };
    std::vector<packet> all;
    bool timestamps = true;
    std::int64_t no_pts_from = 0;
    detail::packet_ptr pkt = detail::make_packet();
    while (detail::next_packet(s, pkt.get())) {
      const bool discard = (pkt->flags & AV_PKT_FLAG_DISCARD) != 0 ||
                           (mov && detail::cut_short(s.stream, pkt.get()));
      if (!discard) {
        if (pkt->pts == AV_NOPTS_VALUE && timestamps) {
          timestamps = false;
          no_pts_from = static_cast<std::int64_t>(all.size());
        }
        all.push_back(
            {pkt->pos, pkt->pts, pkt->dts, pkt->size, (pkt->flags & AV_PKT_FLAG_KEY) != 0});
      }
      av_packet_unref(pkt.get());
    }
    file_index fi;
    fi.path = path;
    fi.size = stamp->first;
    fi.mtime = stamp->second;
    fi.stream = static_cast<std::uint32_t>(s.index);
    fi.time_num = s.stream->time_base.num;
    fi.time_den = s.stream->time_base.den;
    fi.frames = static_cast<std::int64_t>(all.size());
    if (fi.time_num <= 0 || fi.time_den <= 0) detail::fail(path, "the stream has no time base");
    fi.output_order = !timestamps;
    fi.no_pts_from = timestamps ? fi.frames : no_pts_from;
    if (fi.output_order) {
      fi.packets.reserve(all.size());
      for (const packet& p : all) fi.packets.push_back({p.pos, p.dts, p.size, p.key});
    } else {
      // K splits the stream when the largest pts before it is below the smallest from it on.
      std::vector<std::int64_t> min_from(all.size() + 1, std::numeric_limits<std::int64_t>::max());
      for (std::size_t i = all.size(); i-- > 0;)
        min_from[i] = std::min(min_from[i + 1], all[i].pts);
      std::int64_t before = index_no_value;
      for (std::size_t i = 0; i < all.size(); ++i) {
        const packet& p = all[i];
        if (p.key && p.size > 0 && (i == 0 || before < min_from[i]))
          fi.keys.push_back({static_cast<std::int64_t>(i), p.pts, p.dts, p.pos, p.size, before});
        before = std::max(before, p.pts);
      }
    }
    const auto after = file_stamp(path);
    if (!after || *after != *stamp) detail::fail(path, "the file changed while it was indexed");
    return fi;
  });
}

/// `index_video` for every path with `threads` workers (0 = one per core); results[i] is
/// paths[i]'s.
std::vector<result<file_index>> index_all(const std::vector<std::string>& paths, unsigned threads,
                                          const limits& lim) {
  std::vector<result<file_index>> results(paths.size(), result<file_index>::failure("not indexed"));
  vbucket::detail::parallel_tasks(paths.size(), threads,
                                  [&](std::size_t i) { results[i] = index_video(paths[i], lim); });
  return results;
}

}  // namespace vbucket::ffmpeg
