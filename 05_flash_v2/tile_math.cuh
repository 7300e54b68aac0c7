// Chapter 05's tile math: the tile sizes, the lane layout, and the named steps of one key tile that
// flash_v2_kernel (flash_v2.cu) is written in: load_tile_async, stage_q, tile_scores, mask_scores,
// softmax_step, store_p, accumulate_pv, write_rows. The step-by-step versions (steps/) call them too.
#pragma once

#include <cstdint>
#include <limits>

#include "common/cuda/cuda_check.h"
#include "common/device/cp_async.cuh"
#include "common/device/grid.cuh"
#include "common/device/launch.h"
#include "common/device/math.cuh"
#include "common/device/tiles.h"
#include "common/host/problem.h"

namespace flash_v2 {

using namespace fa::cuda;  // cp.async, fast_exp2, kLog2e, kLn2D, tile math (common/device/)
constexpr float kInf = std::numeric_limits<float>::infinity();

// Tile sizes for head dim kD (a multiple of 32; smaller head dims are zero-padded up to it).
template <int kD>
struct Traits {
  static constexpr int kWarps = 4;
  static constexpr int kThreads = 32 * kWarps;
  static constexpr int Br = 16 * kWarps;         // query rows per block, 16 per warp
  static constexpr int Bc = kD <= 64 ? 64 : 32;  // keys per tile: 32 for large kD, to fit 3 blocks/SM
  static constexpr int kKeys = Bc / 8;           // keys of S_ij per thread
  static constexpr int kChunks = kD / 32;        // float4 column chunks of O_i per thread
  // Q_s and K_s rows are read as float4 by lanes that take consecutive rows. A stride of
  // kD + 4 floats, = 1 (mod 8) in 16-byte units, puts 8 consecutive rows in 8 different groups
  // of 4 banks: such a load never has a bank conflict.
  static constexpr int kStride = kD + 4;
  static constexpr int kSmemFloats = Br * kStride + Bc * kStride + Bc * kD + kWarps * Bc * 16;
  static constexpr int kSmemBytes = kSmemFloats * sizeof(float);
  // Blocks per SM the registers are budgeted for: 3 up to kD = 128; above, shared memory alone
  // allows 2 (kD = 192: 105.5 KiB a block) or 1 (kD = 256: 137.5 KiB), so each thread may use more.
  static constexpr int kMinBlocks = kD <= 128 ? 3 : kD <= 192 ? 2 : 1;
};

// A thread's registers: 4 rows of the warp's 16 (ty + 4a), Bc/8 keys of S_ij (tx + 8b), and
// D/8 columns of O_i (32c + 4tx + e).
template <int kD>
using ScoreTile = float[4][Traits<kD>::kKeys];  // (4, Bc/8) registers: S_ij, then P_ij
template <int kD>
using OutTile = float[4][4 * Traits<kD>::kChunks];  // (4, kD/8) registers: O_i

// Lane (ty, tx), ty < 4, tx < 8. A 16-byte shared load is served a quarter-warp (8 lanes) at a
// time, and quarters whose addresses fall in different banks share a pass. Giving each quarter
// 2 row groups x 4 key groups (CUTLASS's RowMajorInterleaved<2>) makes every operand load of
// tile_scores and accumulate_pv 2 passes; the plain (lane / 8, lane % 8) would make the K_j and
// V_j loads 4 passes each (steps/: plain_lanes). A row's 8 lanes are lane ^ kTxLane, ^ 2 kTxLane,
// ^ 4 kTxLane: the shuffles of the row max and sum.
template <bool kInterleaved>
struct Lanes {
  static constexpr int kTxLane = kInterleaved ? 2 : 1;
  int ty, tx;
  __device__ __forceinline__ explicit Lanes(int lane)
      : ty(kInterleaved ? lane / 16 * 2 + lane % 2 : lane / 8), tx(kInterleaved ? lane / 2 % 8 : lane % 8) {}
  // The sum (kMax = false) or max of x over the row's 8 lanes: three xor-shuffles.
  template <bool kMax>
  static __device__ __forceinline__ float row_reduce(float x) {
    for (int offset = kTxLane; offset < 8 * kTxLane; offset *= 2) {
      const float y = __shfl_xor_sync(0xffffffffu, x, offset);
      x = kMax ? fmaxf(x, y) : x + y;
    }
    return x;
  }
};

// e^x for x in the units the scores are scaled to: log2 units and one MUFU.EX2 (kExp2), or
// natural-log units and expf (a range reduction around MUFU.EX2 without --use_fast_math).
template <bool kExp2>
__device__ __forceinline__ float score_exp(float x) {
  if constexpr (kExp2) return fast_exp2(x);
  else return expf(x);
}

// Stages rows [0, rows) x columns [0, D) of a row-major (rows, D) global matrix into a
// (kRows, kSmemStride) smem tile with cp.async, zero-filling past `rows` and past D. With
// `vec` (D % 4 == 0 and 16-byte aligned pointers), thread t copies the 16-byte chunks at
// columns 4 (t % 8) + 32c of rows t / 8 + 16 it: 8 threads cover 128 contiguous bytes of a row.
// Otherwise (odd head dims) it copies single floats.
template <int kD, int kRows, int kSmemStride, int kThreads>
__device__ void load_tile_async(float* tile, const float* src, int rows, int D, bool vec) {
  static_assert(kThreads % 8 == 0 && kRows % (kThreads / 8) == 0 && kRows * kD % kThreads == 0);
  if (vec) {
#pragma unroll
    for (int it = 0; it < kRows / (kThreads / 8); ++it) {
#pragma unroll
      for (int k = 0; k < kD / 32; ++k) {
        const int r = threadIdx.x / 8 + it * (kThreads / 8), c = threadIdx.x % 8 * 4 + 32 * k;
        const bool inside = r < rows && c < D;
        cp_async_16(tile + r * kSmemStride + c, src + (inside ? r * D + c : 0), inside);
      }
    }
  } else {
#pragma unroll 4
    for (int it = 0; it < kRows * kD / kThreads; ++it) {
      const int n = it * kThreads + threadIdx.x, r = n / kD, c = n % kD;
      const bool inside = r < rows && c < D;
      cp_async_4(tile + r * kSmemStride + c, src + (inside ? r * D + c : 0), inside);
    }
  }
}

// Q_i into Q_s by plain loads, unscaled: 08's backward recomputes S bit for bit from the same
// products. rows: the query rows left in the problem (zero-filled beyond, and beyond D).
template <int kD>
__device__ __forceinline__ void stage_q(float* Q_s, const float* Q_g, int rows, int D) {
  using T = Traits<kD>;
#pragma unroll 4
  for (int it = 0; it < T::Br * kD / T::kThreads; ++it) {
    const int n = it * T::kThreads + threadIdx.x, r = n / kD, c = n % kD;
    Q_s[r * T::kStride + c] = r < rows && c < D ? Q_g[r * D + c] : 0.0f;
  }
}

// S_ij = Q_i K_j^T for this thread's 4 rows x Bc/8 keys: per 4 head-dim steps, 4 + Bc/8 LDS.128
// feed 16 Bc/8 FFMAs. Q_w: this thread's first row of Q_s (row a is 4a rows further).
template <int kD>
__device__ __forceinline__ void tile_scores(ScoreTile<kD>& S_ij, const float* Q_w, const float* K_s, int tx) {
  using T = Traits<kD>;
#pragma unroll
  for (int a = 0; a < 4; ++a) {
#pragma unroll
    for (int b = 0; b < T::kKeys; ++b) S_ij[a][b] = 0.0f;
  }
#pragma unroll 8
  for (int d = 0; d < kD; d += 4) {
    float4 q4[4];
#pragma unroll
    for (int a = 0; a < 4; ++a) q4[a] = *reinterpret_cast<const float4*>(Q_w + 4 * a * T::kStride + d);
#pragma unroll
    for (int b = 0; b < T::kKeys; ++b) {
      const float4 k4 = *reinterpret_cast<const float4*>(K_s + (tx + 8 * b) * T::kStride + d);
#pragma unroll
      for (int a = 0; a < 4; ++a) {
        S_ij[a][b] = fmaf(q4[a].x, k4.x, S_ij[a][b]);
        S_ij[a][b] = fmaf(q4[a].y, k4.y, S_ij[a][b]);
        S_ij[a][b] = fmaf(q4[a].z, k4.z, S_ij[a][b]);
        S_ij[a][b] = fmaf(q4[a].w, k4.w, S_ij[a][b]);
      }
    }
  }
}

// The element mask, for the tiles needs_mask picks: -inf where the key is past Sk or causally
// hidden. i_first: the query row of this thread's row a = 0; j0: the tile's first key.
template <int kD>
__device__ __forceinline__ void mask_scores(ScoreTile<kD>& S_ij, int i_first, int j0, int tx, const fa::Problem& p) {
#pragma unroll
  for (int a = 0; a < 4; ++a) {
#pragma unroll
    for (int b = 0; b < Traits<kD>::kKeys; ++b) {
      const int i = i_first + 4 * a, j = j0 + tx + 8 * b;
      if (j >= p.seqlen_k || (p.causal && !fa::causal_visible(i, j, p.seqlen_q, p.seqlen_k))) S_ij[a][b] = -kInf;
    }
  }
}

// Online softmax over one key tile. A row's Bc keys sit in the 8 lanes with the same ty, so three
// xor-shuffles give its max; the sum l_i stays per thread until write_rows. The max is kept on raw
// scores and rounded once into the exponent's units (m_scaled), so P_ij = exp2(S c - m_scaled) is
// one FFMA and one MUFU.EX2. S_ij leaves holding P_ij.
template <int kD, bool kExp2, class L>
__device__ __forceinline__ void softmax_step(ScoreTile<kD>& S_ij, float (&m_i)[4], float (&l_i)[4], OutTile<kD>& O_i,
                                             float scale_log2) {
  // BEGIN SOLUTION: the online softmax of one tile for this thread's rows: a row's keys span 8 lanes (the layout's row_reduce), the scale folds into the exponent, S_ij becomes P_ij in place; keep alpha exactly 1 where the max holds, so no fused multiply-add may round it (README: Walkthrough)
#pragma unroll
  for (int a = 0; a < 4; ++a) {
    float m = S_ij[a][0];
#pragma unroll
    for (int b = 1; b < Traits<kD>::kKeys; ++b) m = fmaxf(m, S_ij[a][b]);
    const float m_new = fmaxf(m_i[a], L::template row_reduce<true>(m));
    const float m_use = m_new == -kInf ? 0.0f : m_new;     // no key seen yet: avoid (-inf) - (-inf)
    const float m_scaled = __fmul_rn(m_use, scale_log2);  // rounded once, never fused: the LSE uses it
    // Earlier tiles' P were taken against __fmul_rn(m_i, c): the same rounding here keeps them exact.
    const float alpha = score_exp<kExp2>(__fmul_rn(m_i[a], scale_log2) - m_scaled);  // rescales earlier tiles
    m_i[a] = m_new;
    l_i[a] *= alpha;
#pragma unroll
    for (int e = 0; e < 4 * Traits<kD>::kChunks; ++e) O_i[a][e] *= alpha;
#pragma unroll
    for (int b = 0; b < Traits<kD>::kKeys; ++b) {
      S_ij[a][b] = score_exp<kExp2>(fmaf(S_ij[a][b], scale_log2, -m_scaled));  // P_ij: one FFMA + MUFU.EX2
      l_i[a] += S_ij[a][b];
    }
  }
  // END SOLUTION
}

// P_ij^T to this warp's (Bc, 16) smem, key-major: key tx + 8b holds this thread's 4 rows in
// slots 4ty .. 4ty+3, so accumulate_pv reads them back with one LDS.128 per key.
template <int kD>
__device__ __forceinline__ void store_p(float* P_w, const ScoreTile<kD>& P_ij, int ty, int tx) {
#pragma unroll
  for (int b = 0; b < Traits<kD>::kKeys; ++b)
    *reinterpret_cast<float4*>(P_w + (tx + 8 * b) * 16 + 4 * ty) =
        make_float4(P_ij[0][b], P_ij[1][b], P_ij[2][b], P_ij[3][b]);
}

// O_i += P_ij V_j: per key, 1 + kD/32 LDS.128 feed kD/2 FFMAs.
template <int kD>
__device__ __forceinline__ void accumulate_pv(OutTile<kD>& O_i, const float* P_w, const float* V_s, int ty, int tx) {
  // BEGIN SOLUTION: for each key kk of the tile: O_i += (my 4 rows of P_w) x (my columns of V_s row kk)
#pragma unroll 8
  for (int kk = 0; kk < Traits<kD>::Bc; ++kk) {
    const float4 p4 = *reinterpret_cast<const float4*>(P_w + kk * 16 + 4 * ty);  // 4 rows' P
    const float pa[4] = {p4.x, p4.y, p4.z, p4.w};
#pragma unroll
    for (int c = 0; c < Traits<kD>::kChunks; ++c) {
      const float4 v4 = *reinterpret_cast<const float4*>(V_s + kk * kD + 32 * c + 4 * tx);
#pragma unroll
      for (int a = 0; a < 4; ++a) {
        O_i[a][4 * c + 0] = fmaf(pa[a], v4.x, O_i[a][4 * c + 0]);
        O_i[a][4 * c + 1] = fmaf(pa[a], v4.y, O_i[a][4 * c + 1]);
        O_i[a][4 * c + 2] = fmaf(pa[a], v4.z, O_i[a][4 * c + 2]);
        O_i[a][4 * c + 3] = fmaf(pa[a], v4.w, O_i[a][4 * c + 3]);
      }
    }
  }
  // END SOLUTION
}

// Epilogue: the row sums over the 8 lanes, O_i / l_i once, and the LSE (natural log). i_first:
// the query row of this thread's row a = 0; rows past Sq are not written. kDivided: O_i was
// divided by l_i already (the normalize_each_tile step).
template <int kD, bool kExp2, class L, bool kDivided = false>
__device__ __forceinline__ void write_rows(const OutTile<kD>& O_i, const float (&m_i)[4], const float (&l_i)[4],
                                           float* O_bh, float* lse_bh, int i_first, int tx, const fa::Problem& p,
                                           float scale_log2, bool vec) {
  const int D = p.head_dim;
#pragma unroll
  for (int a = 0; a < 4; ++a) {
    const float l = L::template row_reduce<false>(l_i[a]);
    const int i = i_first + 4 * a;
    if (i >= p.seqlen_q) continue;
    const float inv_l = kDivided ? 1.0f : l > 0.0f ? 1.0f / l : 0.0f;  // a row that sees no key: O = 0
    float* O_g = O_bh + std::int64_t{i} * D;                            // (D) global: one row of O
#pragma unroll
    for (int c = 0; c < Traits<kD>::kChunks; ++c) {
      const int col = 32 * c + 4 * tx;
      const float4 out = make_float4(O_i[a][4 * c] * inv_l, O_i[a][4 * c + 1] * inv_l,
                                     O_i[a][4 * c + 2] * inv_l, O_i[a][4 * c + 3] * inv_l);
      if (vec && col < D) {
        *reinterpret_cast<float4*>(O_g + col) = out;  // 8 lanes write 128 contiguous bytes
      } else if (!vec) {
        const float outs[4] = {out.x, out.y, out.z, out.w};
        for (int e = 0; e < 4; ++e)
          if (col + e < D) O_g[col + e] = outs[e];
      }
    }
    // LSE = m_scaled + log(l) in the units of P_ij's exponent, in double and rounded once: the
    // backward's P = exp(scale S - LSE) must give back this forward's P, and at scores of size
    // ~100 each float rounding of LSE would cost ~1e-5 of P, as much as all of fp32's own error.
    const double m_scaled = __fmul_rn(m_i[a], scale_log2), l_d = l;
    const double lse_i = kExp2 ? (m_scaled + log2(l_d)) * kLn2D : m_scaled + log(l_d);
    if (tx == 0) lse_bh[i] = l > 0.0f ? static_cast<float>(lse_i) : kInf;
  }
}

// The launch for head dim kD: shared-memory opt-in and carveout, the grid of (query tile,
// b * h), and the scale in the exponent's units (log2 with kExp2, else natural log). T: the
// kernel's tile sizes (kThreads, Br, kSmemBytes), Traits unless a step has its own.
template <int kD, bool kExp2, class T = Traits<kD>, class Kernel>
void launch(Kernel kernel, const fa::Problem& p, const float* q, const float* k, const float* v, float* o,
            float* lse, bool vec, cudaStream_t stream) {
  // Above 48 KB of shared memory a kernel must opt in; the carveout asks for the largest
  // shared-memory split of the L1, so 3 blocks of ~70 KB fit on one SM.
  allow_shared_memory(kernel, T::kSmemBytes);
  FA_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout,
                                     cudaSharedmemCarveoutMaxShared));
  const dim3 grid = tiles_by_rows(ceil_div(p.seqlen_q, T::Br), std::int64_t{p.batch} * p.heads, "05_flash_v2");
  const float scale_log2 = kExp2 ? p.scale() * kLog2e : p.scale();
  kernel<<<grid, T::kThreads, T::kSmemBytes, stream>>>(q, k, v, o, lse, p, scale_log2, vec);
  FA_CHECK_LAUNCH();
}

}  // namespace flash_v2
