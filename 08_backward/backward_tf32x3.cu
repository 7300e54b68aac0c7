// Chapter 08 -- the fp32 backward on the tensor cores in 3xTF32 (fp32's accuracy), paired with
// 05's 3xTF32 forward (05_flash_v2/flash_v2_tf32x3.cu). PyTorch's fp32 memory-efficient backward
// computes this way.
//
// What changes against backward_kernel (backward.cu), which it follows step for step:
//   * A warp's 16 keys are one mma tile: lane (g, t) = (lane / 4, lane % 4) holds keys g and
//     g + 8 of the warp and, of S_ij^T and dP_ij^T, query rows 8n + 2t and 8n + 2t + 1; of dK_j
//     and dV_j, columns 8c + 2t and 8c + 2t + 1.
//   * S_ij^T = K_j Q_i^T is the forward's S_ij = Q_i K_j^T with A and B exchanged, taken with
//     mma_1688_3xtf32_transposed: the same products in the same order, so the same bits (the
//     forward's LSE normalizes P only if the scores are the forward's: README, Pitfalls).
//   * dV_j += P_ij^T dO_i and dK_j += dS_ij^T Q_i straight from the registers, as the forward's
//     O_i += P_ij V_j: the accumulator holds queries 2t and 2t + 1 of each 8-query tile, read as
//     the mma's k = t and t + 4, with dO_i's (Q_i's) rows 2t and 2t + 1 as b0 and b1.
//   * dQ_i += dS_ij K_j needs dS_ij with queries in the rows: dS_ij goes through shared memory
//     (as in the FFMA kernel), and each warp takes kD/4 of dQ_i's columns for every query row.
// Tile sizes and shared memory as the FFMA kernel's (fp32::Traits): Bc = 64 keys, Br = 64 query
// rows up to kD = 64 and 32 above, 2 blocks (8 warps) an SM. The host side (D_i, the dispatch by
// head dim) is backward.cu's: fp32_backward, which calls tf32x3_launch below.
#include <cstdint>

#include "05_flash_v2/tile_math.cuh"       // load_tile_async
#include "08_backward/fp32_tile_math.cuh"  // Traits, stage_tile, RowStats, launch_fp32
#include "common/device/grid.cuh"
#include "common/device/launch.h"
#include "common/device/mma.cuh"
#include "common/device/tiles.h"

namespace backward::fp32 {
namespace {

template <int kD>
struct Tf32Traits {
  using F = Traits<kD>;  // the FFMA kernel's tile sizes
  static constexpr int kThreads = F::kThreads, Br = F::Br, Bc = F::Bc, kStride = F::kStride;
  static constexpr int kQueryTiles = Br / 8;  // 8-query n-tiles of S_ij^T, dP_ij^T; k-steps of dV_j, dK_j
  static constexpr int kColTiles = kD / 8;    // 8-column n-tiles of dK_j, dV_j
  static constexpr int kQCols = kD / 4;       // dQ_i's columns per warp
  // dS_ij (Br, Bc): rows Bc + 8 floats apart, = 8 (mod 32), so that dQ_i's float2 loads of a
  // half-warp (rows g, keys 2t and 2t + 1) fall in 16 different bank pairs.
  static constexpr int kSStride = Bc + 8;
  static constexpr int kSmemFloats = 2 * Bc * kStride + 2 * Br * kStride + Br * kSStride + 3 * Br;
  static constexpr int kSmemBytes = kSmemFloats * sizeof(float);
  static_assert(F::kWarps == 4 && Bc == 64, "one 16-key mma tile per warp; dQ_i's columns in 4 parts");
};

// acc (this warp's 16 keys, Br query rows) += A B^T over kD, where A (16, kD) is this warp's keys
// of K_j or V_j (A_w: the lane's a0, row g) and B (Br, kD) is Q_i or dO_i in shared memory: S_ij^T
// (kTransposed: the forward's products, bit for bit) or dP_ij^T.
template <int kD, bool kTransposed>
__device__ __forceinline__ void keys_dot_rows(float (&acc)[Tf32Traits<kD>::kQueryTiles][4], const float* A_w,
                                              const float* B_s, int g, int t) {
  using T = Tf32Traits<kD>;
#pragma unroll 2
  for (int d = 0; d < kD; d += 8) {
    const Tf32Pair a[4] = {split_tf32(A_w[d]), split_tf32(A_w[8 * T::kStride + d]), split_tf32(A_w[d + 4]),
                           split_tf32(A_w[8 * T::kStride + d + 4])};
#pragma unroll
    for (int n = 0; n < T::kQueryTiles; ++n) {
      const float* B_n = B_s + (8 * n + g) * T::kStride + d + t;  // b0: (k = t, n = g); b1: k = t + 4
      float x[4] = {};  // from zero, added in fp32, as the forward does
      if constexpr (kTransposed) mma_1688_3xtf32_transposed(x, a, split_tf32(B_n[0]), split_tf32(B_n[4]));
      else mma_1688_3xtf32(x, a, split_tf32(B_n[0]), split_tf32(B_n[4]));
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[n][e] += x[e];
    }
  }
}

// acc (16 keys, kD) += X^T B over Br query rows, X^T (16 keys, Br) in the registers as S_ij^T's
// accumulator (P_ij^T or dS_ij^T) and B (Br, kD) dO_i or Q_i in shared memory. The k order of
// each 8-query step (t, t + 4) is read as queries (2t, 2t + 1).
template <int kD>
__device__ __forceinline__ void add_keys_outer(float (&acc)[Tf32Traits<kD>::kColTiles][4],
                                               const float (&X)[Tf32Traits<kD>::kQueryTiles][4], const float* B_s,
                                               int g, int t) {
  using T = Tf32Traits<kD>;
  // Each 8-query product is taken from zero and added in fp32: dK_j and dV_j fed straight into
  // the mma would take a truncation per mma over every query tile (mma.cuh), and a sum over the
  // step's queries still three per 8 queries, each against the step's partial sum.
#pragma unroll
  for (int n = 0; n < T::kQueryTiles; ++n) {
    const Tf32Pair a[4] = {split_tf32(X[n][0]), split_tf32(X[n][2]), split_tf32(X[n][1]), split_tf32(X[n][3])};
    const float* B_n = B_s + (8 * n + 2 * t) * T::kStride + g;  // b0: query 2t, column g; b1: query 2t + 1
#pragma unroll
    for (int c = 0; c < T::kColTiles; ++c) {
      float x[4] = {};
      mma_1688_3xtf32(x, a, split_tf32(B_n[8 * c]), split_tf32(B_n[T::kStride + 8 * c]));
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[c][e] += x[e];
    }
  }
}

// grid: Tc along x by B*Hkv rows over y and z; block: 4 warps, warp w owns keys 16w .. 16w + 15.
template <int kD>
__global__ void __launch_bounds__(Traits<kD>::kThreads, Traits<kD>::kMinBlocks)
    tf32x3_kernel(const float* __restrict__ q,      // [B, H, Sq, D] global
                  const float* __restrict__ k,      // [B, Hkv, Sk, D] global
                  const float* __restrict__ v,      // [B, Hkv, Sk, D] global
                  const float* __restrict__ lse,    // [B, H, Sq] global, natural log
                  const float* __restrict__ dout,   // [B, H, Sq, D] global
                  const float* __restrict__ D_row,  // [B, H, Sq] global: rowsum(dO o O)
                  float* __restrict__ dq,           // [B, H, Sq, D] global: zeroed, += by atomics
                  float* __restrict__ dk,           // [B, Hkv, Sk, D] global
                  float* __restrict__ dv,           // [B, Hkv, Sk, D] global
                  fa::Problem p, float scale, bool vec) {
  using T = Tf32Traits<kD>;
  constexpr int Br = T::Br, Bc = T::Bc, kStride = T::kStride, kSStride = T::kSStride;
  const std::int64_t kv_bh = grid_row();
  if (kv_bh >= std::int64_t{p.batch} * p.kv_heads) return;
  extern __shared__ float4 smem[];
  float* K_s = reinterpret_cast<float*>(smem);  // (Bc, kD + 4) smem: K_j
  float* V_s = K_s + Bc * kStride;              // (Bc, kD + 4) smem: V_j
  float* Q_s = V_s + Bc * kStride;              // (Br, kD + 4) smem: Q_i
  float* dO_s = Q_s + Br * kStride;             // (Br, kD + 4) smem: dO_i
  float* dS_s = dO_s + Br * kStride;            // (Br, Bc + 8) smem: dS_ij, query rows
  float* lse_s = dS_s + Br * kSStride;          // (Br) smem: LSE_i log2(e) rounded, +inf past Sq
  float* lse_lo_s = lse_s + Br;                 // (Br) smem: what that rounding dropped
  float* D_s = lse_lo_s + Br;                   // (Br) smem: D_i
  const int warp = threadIdx.x / 32, g = threadIdx.x % 32 / 4, t = threadIdx.x % 4;
  const int Sq = p.seqlen_q, Sk = p.seqlen_k, D = p.head_dim;
  const float scale_log2 = scale * kLog2e;
  const int j_tile = blockIdx.x, j0 = j_tile * Bc;
  const std::int64_t bh0 = kv_bh / p.kv_heads * p.heads + kv_bh % p.kv_heads * p.group_size();
  const int key_w = 16 * warp + g;  // this thread's keys of the tile: key_w and key_w + 8
  const float* K_w = K_s + key_w * kStride + t;  // a0's element of K_j; a1 is 8 rows on, a2 4 columns
  const float* V_w = V_s + key_w * kStride + t;
  const int qcol = T::kQCols * warp;  // this warp's first column of dQ_i

  float dK_j[T::kColTiles][4] = {};  // n-tile c: (key_w, 8c + 2t + e) in [e], (key_w + 8, ...) in [2 + e]
  float dV_j[T::kColTiles][4] = {};
  const int Tr = ceil_div(Sq, Br), i_begin = query_tile_begin(j_tile, Br, Bc, Sq, Sk, p.causal);
  const int n_tiles = Tr - i_begin, n_steps = p.group_size() * n_tiles;
  const auto step_row = [&](int n) { return (bh0 + n / n_tiles) * Sq + (i_begin + n % n_tiles) * Br; };
  const auto rows_left = [&](int n) { return Sq - (i_begin + n % n_tiles) * Br; };

  RowStats stats;
  if (n_steps > 0) {
    stats = load_row_stats<Br>(lse + step_row(0), D_row + step_row(0), rows_left(0));
    flash_v2::load_tile_async<kD, Br, kStride, T::kThreads>(Q_s, q + step_row(0) * D, rows_left(0), D, vec);
    flash_v2::load_tile_async<kD, Br, kStride, T::kThreads>(dO_s, dout + step_row(0) * D, rows_left(0), D, vec);
  }
  cp_async_commit();
  stage_tile<kD, Bc, T::kThreads>(K_s, k + (kv_bh * Sk + j0) * D, Sk - j0, D);
  stage_tile<kD, Bc, T::kThreads>(V_s, v + (kv_bh * Sk + j0) * D, Sk - j0, D);

  for (int n = 0; n < n_steps; ++n) {
    const std::int64_t bh = bh0 + n / n_tiles;
    const int i_tile = i_begin + n % n_tiles, i0 = i_tile * Br;
    stage_row_stats<Br>(lse_s, lse_lo_s, D_s, stats);
    cp_async_wait<0>();
    __syncthreads();  // Q_i, dO_i, LSE_i, D_i (and K_j, V_j) are in; every warp is done with dS_s

    // S_ij^T = K_j Q_i^T, the forward's bits; P_ij^T = exp2(S c - LSE_i log2(e)) in place.
    float P[T::kQueryTiles][4] = {};  // n-tile qt: (key_w, query 8qt + 2t + e) in [e], key_w + 8 in [2 + e]
    keys_dot_rows<kD, true>(P, K_w, Q_s, g, t);
    const bool mask = needs_mask(i_tile, j_tile, Br, Bc, Sq, Sk, p.causal);
#pragma unroll
    for (int qt = 0; qt < T::kQueryTiles; ++qt) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int r = 8 * qt + 2 * t + e % 2, j = j0 + key_w + 8 * (e / 2);
        const bool seen = !mask || (j < Sk && (!p.causal || fa::causal_visible(i0 + r, j, Sq, Sk)));
        P[qt][e] = seen ? fast_exp2(fmaf(P[qt][e], scale_log2, -lse_s[r]) - lse_lo_s[r]) : 0.0f;
      }
    }

    // dV_j += P_ij^T dO_i
    add_keys_outer<kD>(dV_j, P, dO_s, g, t);

    // dP_ij^T = V_j dO_i^T, then dS_ij^T = P_ij^T o (dP_ij^T - D_i) over P, and dS_ij to dS_s.
    float dP[T::kQueryTiles][4] = {};
    keys_dot_rows<kD, false>(dP, V_w, dO_s, g, t);
#pragma unroll
    for (int qt = 0; qt < T::kQueryTiles; ++qt) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int r = 8 * qt + 2 * t + e % 2;
        P[qt][e] *= dP[qt][e] - D_s[r];
        dS_s[r * kSStride + key_w + 8 * (e / 2)] = P[qt][e];
      }
    }
    __syncthreads();  // all of dS_ij is in dS_s; dO_s is free

    const bool next = n + 1 < n_steps;
    if (next) stats = load_row_stats<Br>(lse + step_row(n + 1), D_row + step_row(n + 1), rows_left(n + 1));
    if (next) flash_v2::load_tile_async<kD, Br, kStride, T::kThreads>(dO_s, dout + step_row(n + 1) * D, rows_left(n + 1), D, vec);
    cp_async_commit();
    // dK_j += dS_ij^T Q_i (the scale is applied once, in the epilogue).
    add_keys_outer<kD>(dK_j, P, Q_s, g, t);
    __syncthreads();  // every warp is done with Q_s
    if (next) flash_v2::load_tile_async<kD, Br, kStride, T::kThreads>(Q_s, q + step_row(n + 1) * D, rows_left(n + 1), D, vec);
    cp_async_commit();

    // dQ_i += scale dS_ij K_j: this warp's kD/4 columns of all Br rows, 8 keys a k-step, its k
    // order (t, t + 4) read as keys (2t, 2t + 1): one float2 of dS_s a row, K_j's rows 2t, 2t + 1.
    float dQ[Br / 16][T::kQCols / 8][4] = {};  // m-tile m, n-tile c: (16m + g, qcol + 8c + 2t + e), row + 8 in [2 + e]
#pragma unroll 2
    for (int kk = 0; kk < Bc; kk += 8) {
      Tf32Pair b[T::kQCols / 8][2];
#pragma unroll
      for (int c = 0; c < T::kQCols / 8; ++c) {
        const float* K_c = K_s + (kk + 2 * t) * kStride + qcol + 8 * c + g;
        b[c][0] = split_tf32(K_c[0]), b[c][1] = split_tf32(K_c[kStride]);
      }
#pragma unroll
      for (int m = 0; m < Br / 16; ++m) {
        const float2 lo = *reinterpret_cast<const float2*>(dS_s + (16 * m + g) * kSStride + kk + 2 * t);
        const float2 hi = *reinterpret_cast<const float2*>(dS_s + (16 * m + g + 8) * kSStride + kk + 2 * t);
        const Tf32Pair a[4] = {split_tf32(lo.x), split_tf32(hi.x), split_tf32(lo.y), split_tf32(hi.y)};
#pragma unroll
        for (int c = 0; c < T::kQCols / 8; ++c) mma_1688_3xtf32(dQ[m][c], a, b[c][0], b[c][1]);
      }
    }
    float* dQ_g = dq + (bh * Sq + i0) * D;
#pragma unroll
    for (int m = 0; m < Br / 16; ++m) {
#pragma unroll
      for (int c = 0; c < T::kQCols / 8; ++c) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int r = 16 * m + g + 8 * (e / 2), col = qcol + 8 * c + 2 * t + e % 2;
          if (i0 + r < Sq && col < D) atomicAdd(dQ_g + r * D + col, scale * dQ[m][c][e]);
        }
      }
    }
  }

  // Epilogue: dK_j (times the scale) and dV_j, written once.
  float* dK_g = dk + (kv_bh * Sk + j0) * D;
  float* dV_g = dv + (kv_bh * Sk + j0) * D;
#pragma unroll
  for (int c = 0; c < T::kColTiles; ++c) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int j = key_w + 8 * (e / 2), col = 8 * c + 2 * t + e % 2;
      if (j0 + j < Sk && col < D) dK_g[j * D + col] = scale * dK_j[c][e], dV_g[j * D + col] = dV_j[c][e];
    }
  }
}

}  // namespace

void tf32x3_launch(const fa::Problem& p, const float* q, const float* k, const float* v, const float* lse,
                   const float* dout, const float* D_row, float* dq, float* dk, float* dv, cudaStream_t stream) {
  with_head_dim<32, 64, 96, 128>(p.head_dim, [&](auto d) {  // any head dim up to 128: the next size up
    constexpr int kD = decltype(d)::value;
    launch_fp32<Tf32Traits<kD>>(tf32x3_kernel<kD>, p, q, k, v, lse, dout, D_row, dq, dk, dv, stream);
  });
}

}  // namespace backward::fp32
