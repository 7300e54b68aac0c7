// Chapter 09's softmax, the kept max: 06's online softmax (common/fa2_tiles/tile_math.cuh:
// softmax_step) with each key tile tried against the running max first, so that the common path
// takes no row max. flash_v3.cuh's consumers and step v1 (steps/one_warpgroup.cuh) call
// softmax_step_kept_max; README: The kept max; steps.md: the measurements.
#pragma once

#include <limits>

#include "common/fa2_tiles/block.cuh"  // Config, WarpRows, ScoreTile, PTile, fast_exp2, pack2

namespace flash_v3 {

using fa2::PTile;
using fa2::ScoreTile;
using fa2::WarpRows;
using fa::cuda::fast_exp2;
using fa::cuda::pack2;

// The online softmax is exact for any reference point m: O_i = sum_j exp2(x_j - m) V_j / sum_j
// exp2(x_j - m) whatever m is, and LSE = m ln 2 + log(l) carries it. m only has to keep the
// exponentials in range. softmax_step_kept_max therefore first tries a tile against the running
// max as it stands, without the tile's own max (Bc / 2 FMNMX a thread and two shuffles a row
// that every exponential waits for): P = exp2(x - m_i) with the old m_i. If every thread's
// partial row sums stay at or below kKeptMaxBound, every P is at most that bound (P >= 0), which
// T holds (FP8's E4M3 up to 448), and O_i and l_i take the tile with no rescale (alpha = 1).
// Otherwise (the first tile, where m_i = -inf gives inf or NaN; a max that grew by more than
// about log2(kKeptMaxBound / (Bc / 4)) units) the warp raises m_i to the tile's max as
// fa2::softmax_step does (raise_max) and computes P again. Where the max did not grow, the result is
// fa2::softmax_step's to the bit; where it grew by less than the bound, P and l_i are exact against an
// m_i a little below the tile's max, and LSE is the same sum.
constexpr float kKeptMaxBound = 256.0f;

// P_ij's keys 16 kk + 2t, +1 and 16 kk + 8 + 2t, +1 (p[0..3]) in row 16 mt + g + 8 h, in T, where
// fa2::softmax_step puts them: registers h and 2 + h of the 16 keys' A fragment.
template <class C>
struct WriteP {
  PTile<C>& P_ij;
  __device__ __forceinline__ void operator()(int mt, int kk, int h, const float (&p)[4]) const {
    P_ij[mt][kk][h] = pack2<typename C::T>(p[0], p[1]);
    P_ij[mt][kk][2 + h] = pack2<typename C::T>(p[2], p[3]);
  }
};

// fa2::softmax_step's max for row 16 mt + g + 8 h: m_i = max(m_i, the tile's max), O_i and l_i scaled
// by alpha = exp2(old m_i - new m_i). Returns the m the exponentials subtract (0 for a row that
// has seen no key yet).
template <class C>
__device__ __forceinline__ float raise_max(const ScoreTile<C>& S_ij, WarpRows<C>& w, float scale_log2, int mt, int h) {
  float m = fmaxf(S_ij[mt][0][2 * h], S_ij[mt][0][2 * h + 1]);
#pragma unroll
  for (int nt = 1; nt < C::Bc / 8; ++nt) m = fmaxf(m, fmaxf(S_ij[mt][nt][2 * h], S_ij[mt][nt][2 * h + 1]));
  m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 1));
  m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 2));
  const float m_new = fmaxf(w.m[mt][h], __fmul_rn(m, scale_log2));  // fa2::softmax_step says why __fmul_rn
  const float m_ref = m_new == -std::numeric_limits<float>::infinity() ? 0.0f : m_new;
  const float alpha = fast_exp2(w.m[mt][h] - m_ref);
  w.m[mt][h] = m_new;
  w.l[mt][h] *= alpha;
#pragma unroll
  for (int nt = 0; nt < C::kD / 8; ++nt) {
    w.O[mt][nt][2 * h] *= alpha;
    w.O[mt][nt][2 * h + 1] *= alpha;
  }
  return m_ref;
}

// Row 16 mt + g + 8 h of P_ij against m_ref into store_p, 16 keys (an A fragment's two registers of
// the row) at a time; returns the row's partial sum (this thread's keys), added in fa2::softmax_step's order.
template <class C, class StoreP>
__device__ __forceinline__ float row_exps(const ScoreTile<C>& S_ij, StoreP& store_p, float m_ref, float scale_log2,
                                          int mt, int h) {
  float sum = 0.0f;
#pragma unroll
  for (int kk = 0; kk < C::Bc / 16; ++kk) {
    float p[4];  // keys 16 kk + 2t, +1 (n-tile 2 kk) and 16 kk + 8 + 2t, +1 (n-tile 2 kk + 1)
#pragma unroll
    for (int e = 0; e < 4; ++e)  // exp(scale (s - m)) = exp2(s * scale * log2e - m * scale * log2e): FFMA + MUFU.EX2
      p[e] = fast_exp2(fmaf(S_ij[mt][2 * kk + e / 2][2 * h + e % 2], scale_log2, -m_ref));
    sum += p[0] + p[1];
    sum += p[2] + p[3];
    store_p(mt, kk, h, p);
  }
  return sum;
}

// fa2::softmax_step's result: w from S_ij, and P_ij handed to store_p(mt, kk, h, p), the keys
// 16 kk + 2t, +1 and 16 kk + 8 + 2t, +1 of row 16 mt + g + 8 h (WriteP: into a PTile; the FP8 step
// packs E4M3 fragments instead: pipeline.cuh's StoreP). try_kept = false skips the first try (a row's first tile, whose
// m_i is -inf). The warp votes once over all its rows, or with kRowVote once a row: then a row's
// scores are free as soon as its exponentials are taken, so S_ij and P_ij are never live in full
// together (fewer registers, two votes and branches a tile instead of one).
template <class C, bool kRowVote, class StoreP>
__device__ __forceinline__ void softmax_step_kept_max(const ScoreTile<C>& S_ij, StoreP&& store_p, WarpRows<C>& w,
                                                      float scale_log2, bool try_kept = true) {
  constexpr int kRows = 2 * C::kMTiles, kVoteRows = kRowVote ? 1 : kRows;  // row r: mt = r / 2, h = r % 2
#pragma unroll
  for (int r0 = 0; r0 < kRows; r0 += kVoteRows) {
    float m_ref[kVoteRows], sum[kVoteRows];
#pragma unroll
    for (int r = 0; r < kVoteRows; ++r) {
      const int mt = (r0 + r) / 2, h = (r0 + r) % 2;
      m_ref[r] = try_kept ? w.m[mt][h] : raise_max<C>(S_ij, w, scale_log2, mt, h);
    }
#pragma unroll 1
    for (bool check = try_kept;; check = false) {
      bool in_range = true;
#pragma unroll
      for (int r = 0; r < kVoteRows; ++r) {
        sum[r] = row_exps<C>(S_ij, store_p, m_ref[r], scale_log2, (r0 + r) / 2, (r0 + r) % 2);
        in_range &= sum[r] <= kKeptMaxBound;  // false for inf and NaN too
      }
      if (!check || __all_sync(0xffffffffu, in_range)) break;
#pragma unroll
      for (int r = 0; r < kVoteRows; ++r)  // m_i no longer bounds the rows: fa2::softmax_step's way
        m_ref[r] = raise_max<C>(S_ij, w, scale_log2, (r0 + r) / 2, (r0 + r) % 2);
    }
#pragma unroll
    for (int r = 0; r < kVoteRows; ++r) w.l[(r0 + r) / 2][(r0 + r) % 2] += sum[r];
  }
}

}  // namespace flash_v3
