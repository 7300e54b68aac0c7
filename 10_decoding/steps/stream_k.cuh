// Chapter 10's stream-K step (README: Stream-K): persistent CTAs, one per SM, each walking an even
// share of the (tile, key tile) units (stream_k.h, CPU-tested), then chapter 10's combine_kernel as
// the fix-up.
//
// New since decoding.cuh's split_kv_kernel, whose attend_piece every segment calls unchanged:
//   * grid: one CTA per slot (the SM count); CTA c walks the segments of its share, units
//     begin(c) .. end(c) - 1, one tile's key tiles [kb_begin, kb_end) at a time, with a barrier
//     between segments (the next one's Q and K/V reuse the same shared memory).
//   * Every segment writes its piece as a partial, at piece c - first_cta(tile) of its rows, in the
//     plain split's workspace layout [rows, pieces, D] with pieces = max_pieces: so the combine
//     merges a tile's pieces as it merges the plain split's. A simplification against llama.cpp's
//     fix-up, which touches only the tiles split across CTAs: here a tile held whole by one CTA
//     also makes the round trip (64 rows x D floats, small next to its K and V).
//   * The CTA that holds a tile's last piece fills the rows' unused pieces with LSE = +inf, which
//     the combine skips (a piece that saw no key).
#pragma once

#include "10_decoding/decoding.cuh"
#include "10_decoding/stream_k.h"

namespace decoding::steps {

// grid: sk.ctas CTAs (one per SM), 4 warps each. prm.splits: max_pieces(sk), the workspace's
// pieces per row.
template <class C>
__global__ void __launch_bounds__(C::kThreads, 1) stream_k_kernel(const SplitParams prm, const StreamK sk) {
  constexpr float kInf = std::numeric_limits<float>::infinity();
  const int c = blockIdx.x;
  for (std::int64_t u = sk.begin(c); u < sk.end(c);) {
    const Segment seg = segment_at(sk, c, u);
    u = seg.tile * sk.key_blocks + seg.kb_end;
    const int piece = piece_of(sk, seg.tile, c);
    attend_piece<C, false>(prm, seg.tile, seg.kb_begin * C::Bc, seg.kb_end * C::Bc, false, u >= sk.end(c),
                           [&](int, std::int64_t qr) { return qr * prm.splits + piece; });
    if (c == last_cta(sk, seg.tile) && threadIdx.x < C::Br) {  // the rows' pieces past the tile's last
      const int r = static_cast<int>(seg.tile % prm.row_tiles) * C::Br + threadIdx.x;
      if (r < packed_rows(prm.base.group_size, prm.base.seqlen_q)) {
        const std::int64_t qr = q_row(prm, seg.tile / prm.row_tiles, r);
        for (int k = piece + 1; k < prm.splits; ++k) prm.lse_part[qr * prm.splits + k] = kInf;
      }
    }
    // Every copy of this segment has landed (an empty segment never waited for its Q) and every
    // warp is done with its Q and K/V, before the next segment's copies reuse the same smem.
    cp_async_wait<0>();
    __syncthreads();
  }
}

}  // namespace decoding::steps
