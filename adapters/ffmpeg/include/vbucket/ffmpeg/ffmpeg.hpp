#pragma once
/// vbucket::ffmpeg, all of it: probe, scan and clip decoding over FFmpeg's libraries.

#include "vbucket/ffmpeg/decode.hpp"  // decode_clip, temporal_random_crop, resize_crop_geometry
#include "vbucket/ffmpeg/frame_index.hpp"  // frame_index (index_video, index_all: decode.hpp)
#include "vbucket/ffmpeg/probe.hpp"        // probe, probe_memory, video_info
#include "vbucket/ffmpeg/result.hpp"       // result
#include "vbucket/ffmpeg/scan.hpp"         // list_media, probe_all
