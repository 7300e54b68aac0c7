// Chapter 10's stream-K schedule, in plain C++ that the device can call too (CPU-tested in
// test_stream_k.cpp; the kernel that walks it is the step steps/stream_k.cuh).
//
// The plain split (split_plan.h) cuts every tile's key range into the same number of pieces, one
// CTA each, and leaves the SMs that one wave does not fill idle: at batch 8 with 8 KV heads, 64
// tiles x 2 pieces = 128 CTAs on 132 SMs. Stream-K (as llama.cpp's flash-attention kernel does
// it) numbers the work as units, (tile, key tile) pairs, tile-major:
//
//     unit u = tile * key_blocks + key block,   u in [0, tiles * key_blocks)
//
// and gives each of `ctas` persistent CTAs (one per SM) an even share: CTA c takes the units
// [begin(c), begin(c + 1)), the first `U mod ctas` CTAs one unit more than the others. A CTA's
// share crosses tiles wherever it crosses a multiple of key_blocks; each piece of one tile inside
// the share is a segment. The segments of one tile (a single one when the tile lies inside one
// share: `whole`) meet in a fix-up, the combine step of split_plan.h over the tile's pieces, in key
// order: piece_of numbers them, max_pieces sizes the workspace (below).
#pragma once

#include <cstdint>

#include "common/host/problem.h"  // FA_HOST_DEVICE

namespace decoding {

struct StreamK {
  std::int64_t tiles;  // B x Hkv x packed-row tiles
  int key_blocks;      // key tiles of the longest sequence (>= 1)
  int ctas;            // persistent CTAs (>= 1)

  FA_HOST_DEVICE constexpr std::int64_t units() const { return tiles * key_blocks; }
  // The first unit of CTA c's share (c = ctas: units()): even shares, the remainder to the first CTAs.
  FA_HOST_DEVICE constexpr std::int64_t begin(int c) const {
    const std::int64_t base = units() / ctas, extra = units() % ctas;
    return c * base + (c < extra ? c : extra);
  }
  FA_HOST_DEVICE constexpr std::int64_t end(int c) const { return begin(c + 1); }
  // The CTA whose share holds unit u (0 <= u < units()).
  FA_HOST_DEVICE constexpr int owner(std::int64_t u) const {
    const std::int64_t base = units() / ctas, extra = units() % ctas;
    const std::int64_t wide = extra * (base + 1);  // units held by the CTAs with one more
    return static_cast<int>(u < wide ? u / (base + 1) : extra + (base > 0 ? (u - wide) / base : 0));
  }
};

// One tile's piece of a CTA's share: key tiles [kb_begin, kb_end) of `tile`.
struct Segment {
  std::int64_t tile;
  int kb_begin, kb_end;
  bool whole;  // kb_begin == 0 and kb_end == key_blocks: the tile's only piece
};

// The segment of CTA c's share that starts at unit u (begin(c) <= u < end(c)); the next one starts
// at tile * key_blocks + kb_end. A CTA walks its share with:
//   for (u = s.begin(c); u < s.end(c); u = next.tile * key_blocks + next.kb_end) next = segment_at(s, c, u);
FA_HOST_DEVICE constexpr Segment segment_at(const StreamK& s, int c, std::int64_t u) {
  const std::int64_t tile = u / s.key_blocks;
  const int kb_begin = static_cast<int>(u - tile * s.key_blocks);
  const std::int64_t stop = s.end(c) < (tile + 1) * s.key_blocks ? s.end(c) : (tile + 1) * s.key_blocks;
  const int kb_end = static_cast<int>(stop - tile * s.key_blocks);
  const bool whole = kb_begin == 0 && kb_end == s.key_blocks;
  return {tile, kb_begin, kb_end, whole};
}

// The pieces of one tile, in key order: the CTAs first(t) .. last(t) hold them (one piece: whole).
FA_HOST_DEVICE constexpr int first_cta(const StreamK& s, std::int64_t tile) { return s.owner(tile * s.key_blocks); }
FA_HOST_DEVICE constexpr int last_cta(const StreamK& s, std::int64_t tile) {
  return s.owner((tile + 1) * s.key_blocks - 1);
}
// The step's workspace (steps/stream_k.cuh) keeps the plain split's layout, [rows, pieces, D], so
// that chapter 10's combine_kernel is the fix-up: the piece of `tile` held by CTA c is piece
// c - first_cta(tile) of each of the tile's rows, and every row has room for max_pieces(s).
FA_HOST_DEVICE constexpr int piece_of(const StreamK& s, std::int64_t tile, int c) { return c - first_cta(s, tile); }
inline int max_pieces(const StreamK& s) {
  int most = 1;
  for (std::int64_t t = 0; t < s.tiles; ++t) {
    const int n = last_cta(s, t) - first_cta(s, t) + 1;
    most = n > most ? n : most;
  }
  return most;
}

}  // namespace decoding
