// Chapter 08's fp32 tile math: the tile sizes of the fp32 backward and the named steps of one
// (query tile, key tile) pair that backward_kernel (backward.cu) is written in; at the end, the
// launch that it and the 3xTF32 kernel (backward_tf32x3.cu) share. Its products are
// 05's two register tiles turned around: keys_dot_rows is 05's S_ij = Q_i K_j^T with keys in the
// rows, add_keys_outer is 05's O_i += P_ij V_j summed over query rows.
#pragma once

#include <cstdint>
#include <limits>

#include "common/cuda/cuda_check.h"
#include "common/device/grid.cuh"    // tiles_by_rows
#include "common/device/launch.h"    // allow_shared_memory, aligned16
#include "common/device/math.cuh"  // fast_exp2, kLog2e, kLog2eD
#include "common/device/tiles.h"   // ceil_div
#include "common/host/problem.h"

namespace backward::fp32 {

using namespace fa::cuda;
constexpr float kInf = std::numeric_limits<float>::infinity();

// Tile sizes for head dim kD (a multiple of 32; smaller head dims are zero-padded up to it).
template <int kD>
struct Traits {
  static constexpr int kWarps = 4;
  static constexpr int kThreads = 32 * kWarps;
  static constexpr int Bc = 16 * kWarps;         // keys per block, 16 per warp, 4 per thread
  static constexpr int Br = kD <= 64 ? 64 : 32;  // query rows per step: 32 for large kD (registers)
  static constexpr int kRows = Br / 8;           // query rows of S_ij^T and dP_ij^T per thread
  static constexpr int kChunks = kD / 32;        // float4 column chunks of dK_j, dV_j, dQ_i per thread
  // The dQ_i layout: kQSplit warps share a group of 4 kQRows rows, each taking kQChunks of the
  // kD/32 column chunks, so a thread owns 4 rows where the chunks split evenly (fewer dS loads
  // per FFMA in add_dq): Br = 64: one warp per 16 rows; Br = 32: two warps per 16 rows, or, where
  // kD/32 is odd (96), one warp per 8 rows.
  static constexpr int kQSplit = Br == 32 && kChunks % 2 == 0 ? 2 : 1;
  static constexpr int kQRows = Br * kQSplit / 16;       // rows of dQ_i per thread
  static constexpr int kQChunks = kChunks / kQSplit;     // float4 column chunks of dQ_i per thread
  // As in 05: rows read as float4 by lanes that take consecutive rows have a stride of
  // kD + 4 floats (= 1 mod 8 in 16-byte units), so such a load never has a bank conflict.
  static constexpr int kStride = kD + 4;
  // P_s rows are written as float4 by quarter-warps that take 4 rows x 2 key groups: a stride of
  // Bc + 8 floats (= 2 mod 8 in 16-byte units) puts those 8 stores in 8 different bank groups.
  static constexpr int kPStride = Bc + 8;
  static constexpr int kSmemFloats = 2 * Bc * kStride + 2 * Br * kStride + Br * kPStride + 3 * Br;
  static constexpr int kSmemBytes = kSmemFloats * sizeof(float);
  // Blocks per SM the registers are budgeted for: 2 up to kD = 128; above, one block's shared
  // memory (156.4 KiB at kD = 192, 204.4 KiB at 256) leaves room for no second one.
  static constexpr int kMinBlocks = kD <= 128 ? 2 : 1;
};

// The P_s column of key kk (0 .. Bc-1) of the tile. A thread's 4 keys, 16w + ty + 4a (a < 4),
// sit side by side at columns 16w + 4ty + a, so it writes and reads them as one float4.
__device__ constexpr int p_column(int kk) { return kk / 16 * 16 + kk % 4 * 4 + kk % 16 / 4; }

// Copies rows [0, rows) x columns [0, D) of a row-major (rows, D) global matrix into a
// (kRows, kD + 4) smem tile, zero-filling past `rows` and past D: padded columns then add 0 to
// every product, and padded K/V rows hold no stale NaN. Consecutive threads take consecutive
// columns: coalesced 4-byte loads, for any head dim and any alignment.
template <int kD, int kRows, int kThreads>
__device__ void stage_tile(float* tile, const float* src, int rows, int D) {
#pragma unroll 8
  for (int it = 0; it < kRows * kD / kThreads; ++it) {
    const int n = it * kThreads + threadIdx.x, r = n / kD, c = n % kD;
    tile[r * (kD + 4) + c] = r < rows && c < D ? src[r * D + c] : 0.0f;
  }
}

// acc[e] += s * x.e for the 4 lanes of a float4: one row of a register tile.
__device__ __forceinline__ void fma4(float* acc, float s, float4 x) {
  acc[0] = fmaf(s, x.x, acc[0]);
  acc[1] = fmaf(s, x.y, acc[1]);
  acc[2] = fmaf(s, x.z, acc[2]);
  acc[3] = fmaf(s, x.w, acc[3]);
}

// acc (4 keys, kRows query rows) += A (4 keys, kD) B (kRows query rows, kD)^T, where this thread's
// keys are A rows A_t + 4a (a < 4) and its query rows are B rows tx + 8b (b < kRows): 05's
// S_ij = Q_i K_j^T with keys in the rows. Per 4 head-dim steps, 4 + kRows LDS.128 feed 16 kRows
// FFMAs. Here: S_ij^T = K_j Q_i^T and dP_ij^T = V_j dO_i^T.
template <int kD, int kRows>
__device__ __forceinline__ void keys_dot_rows(float (&acc)[4][kRows], const float* A_t, const float* B_s, int tx) {
  constexpr int kStride = kD + 4;
#pragma unroll 8
  for (int d = 0; d < kD; d += 4) {
    float4 a4[4];
#pragma unroll
    for (int a = 0; a < 4; ++a) a4[a] = *reinterpret_cast<const float4*>(A_t + 4 * a * kStride + d);
#pragma unroll
    for (int b = 0; b < kRows; ++b) {
      const float4 b4 = *reinterpret_cast<const float4*>(B_s + (tx + 8 * b) * kStride + d);
#pragma unroll
      for (int a = 0; a < 4; ++a) {
        acc[a][b] = fmaf(a4[a].x, b4.x, acc[a][b]);
        acc[a][b] = fmaf(a4[a].y, b4.y, acc[a][b]);
        acc[a][b] = fmaf(a4[a].z, b4.z, acc[a][b]);
        acc[a][b] = fmaf(a4[a].w, b4.w, acc[a][b]);
      }
    }
  }
}

// acc (4 keys, kD/8 columns) += X^T B summed over Br query rows, where X (Br, Bc) is P_ij or
// dS_ij in P_s -- this thread's 4 keys of row r are one float4 at X_t + r kPStride -- and B (Br, kD)
// is dO_i or Q_i, of which it owns columns 32c + 4tx .. +3: 05's O_i += P_ij V_j, summed over
// query rows. Per row, 1 + kD/32 LDS.128 feed kD/2 FFMAs. Here: dV_j += P_ij^T dO_i and
// dK_j += dS_ij^T Q_i.
template <int kD, int Br, int kPStride>
__device__ __forceinline__ void add_keys_outer(float (&acc)[4][kD / 8], const float* X_t, const float* B_s, int tx) {
#pragma unroll 8
  for (int r = 0; r < Br; ++r) {
    const float4 x4 = *reinterpret_cast<const float4*>(X_t + r * kPStride);  // 4 keys' X[r]
    const float xa[4] = {x4.x, x4.y, x4.z, x4.w};
#pragma unroll
    for (int c = 0; c < kD / 32; ++c) {
      const float4 b4 = *reinterpret_cast<const float4*>(B_s + r * (kD + 4) + 32 * c + 4 * tx);
#pragma unroll
      for (int a = 0; a < 4; ++a) fma4(&acc[a][4 * c], xa[a], b4);
    }
  }
}

// One query row's LSE_i and D_i, read from global memory a step before they are staged (so the
// loads fly during that step's last products). Threads 0 .. Br-1 take a row each; lse_g, D_g:
// (Sq) global, the step's rows; rows: the query rows left in the problem.
struct RowStats {
  float lse = kInf, d = 0.0f;  // past Sq: LSE +inf, so that row's P is exactly 0
};
template <int Br>
__device__ __forceinline__ RowStats load_row_stats(const float* lse_g, const float* D_g, int rows) {
  RowStats s;
  if (threadIdx.x < Br && static_cast<int>(threadIdx.x) < rows) s.lse = lse_g[threadIdx.x], s.d = D_g[threadIdx.x];
  return s;
}

// LSE_i log2(e) as a float pair hi + lo, and D_i, into shared memory for the tile's Br rows.
// The pair is exact to ~2^-48: with scores of size ~100, one float rounding of LSE log2(e) would
// cost ~1e-5 of every P (README: Pitfalls, Precision). +inf: the row sees no key or lies past Sq, and its
// P is exactly 0.
template <int Br>
__device__ __forceinline__ void stage_row_stats(float* lse_s, float* lse_lo_s, float* D_s, RowStats s) {
  if (threadIdx.x < Br) {
    const int r = threadIdx.x;
    const double lse2 = double{s.lse} * kLog2eD;
    lse_s[r] = static_cast<float>(lse2);
    lse_lo_s[r] = isinf(lse2) ? 0.0f : static_cast<float>(lse2 - static_cast<float>(lse2));
    D_s[r] = s.d;
  }
}

// S_ij^T -> P_ij^T = exp(scale S_ij - LSE_i) = exp2(S_ij scale log2(e) - LSE_i log2(e)): one
// FFMA, one FADD and one MUFU.EX2, already normalized. S_ij is 05's raw score bit for bit (the
// same FFMA chain over d), so the forward's LSE normalizes it. Masked keys (only where `mask`)
// get 0; rows with LSE = +inf get exp2(-inf) = 0 exactly: never NaN. Each thread then writes its
// 4 keys of row r side by side to P_s: one STS.128 (P_t: its keys' column, p_column).
// i0, j_t: the tile's first query row and this thread's first key.
template <int kD>
__device__ __forceinline__ void probs(float (&S)[4][Traits<kD>::kRows], float* P_t, const float* lse_s,
                                      const float* lse_lo_s, int tx, int i0, int j_t, bool mask, const fa::Problem& p,
                                      float scale_log2) {
#pragma unroll
  for (int b = 0; b < Traits<kD>::kRows; ++b) {
    const int r = tx + 8 * b;
    const float lse2 = lse_s[r], lse2_lo = lse_lo_s[r];
#pragma unroll
    for (int a = 0; a < 4; ++a) {
      const int j = j_t + 4 * a;
      const bool seen = !mask || (j < p.seqlen_k && (!p.causal || fa::causal_visible(i0 + r, j, p.seqlen_q, p.seqlen_k)));
      S[a][b] = seen ? fast_exp2(fmaf(S[a][b], scale_log2, -lse2) - lse2_lo) : 0.0f;
    }
    *reinterpret_cast<float4*>(P_t + r * Traits<kD>::kPStride) = make_float4(S[0][b], S[1][b], S[2][b], S[3][b]);
  }
}

// dS_ij = P_ij o (dP_ij - D_i), written over P_ij in P_s: each thread rewrites the entries it wrote.
template <int kD>
__device__ __forceinline__ void grads(float* P_t, const float (&dP)[4][Traits<kD>::kRows], const float* D_s, int tx) {
  // BEGIN SOLUTION: turn this thread's P_ij in shared memory into dS_ij, the softmax's gradient, using dP_ij and the row's D_i (README: Algorithm)
#pragma unroll
  for (int b = 0; b < Traits<kD>::kRows; ++b) {
    const int r = tx + 8 * b;
    float4* P_r = reinterpret_cast<float4*>(P_t + r * Traits<kD>::kPStride);
    const float4 p4 = *P_r;
    const float d_i = D_s[r];
    *P_r = make_float4(p4.x * (dP[0][b] - d_i), p4.y * (dP[1][b] - d_i), p4.z * (dP[2][b] - d_i),
                       p4.w * (dP[3][b] - d_i));
  }
  // END SOLUTION
}

// dQ_i += scale dS_ij K_j, summed here over the tile's Bc keys and across key tiles (blocks) in
// global memory. This thread owns rows qrow + 4a (a < kQRows) and columns qcol + 32c + 4tx + e
// (c < kQChunks) of dQ_i (Traits: the dQ_i layout). P_s keeps keys k16 + g + 4e (e < 4) of a row
// side by side (p_column), so per 4 keys, kQRows LDS.128 of dS and 4 kQChunks LDS.128 of K feed
// 16 kQRows kQChunks FFMAs. dQ_g: (Br, D) global, this tile's rows; rows: the query rows left.
template <int kD>
__device__ __forceinline__ void add_dq(float* dQ_g, const float* P_s, const float* K_s, int qrow, int qcol, int tx,
                                       int rows, int D, float scale) {
  using T = Traits<kD>;
  // BEGIN SOLUTION: this tile's share of dQ_i = scale dS_ij K_j for this thread's rows and columns, added into global dQ, which other key tiles add to at the same time (README: Walkthrough; P_s's layout: p_column)
  float dQ[T::kQRows][4 * T::kQChunks] = {};  // rows qrow + 4a, columns qcol + 32c + 4tx + e
#pragma unroll 1
  for (int k16 = 0; k16 < T::Bc; k16 += 16) {
#pragma unroll
    for (int g = 0; g < 4; ++g) {
      float ds[T::kQRows][4];  // row qrow + 4a, key k16 + g + 4e
#pragma unroll
      for (int a = 0; a < T::kQRows; ++a) {
        const float4 d4 = *reinterpret_cast<const float4*>(P_s + (qrow + 4 * a) * T::kPStride + k16 + 4 * g);
        ds[a][0] = d4.x, ds[a][1] = d4.y, ds[a][2] = d4.z, ds[a][3] = d4.w;
      }
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const float* K_k = K_s + (k16 + g + 4 * e) * T::kStride + qcol + 4 * tx;  // key k16 + g + 4e
#pragma unroll
        for (int c = 0; c < T::kQChunks; ++c) {
          const float4 k4 = *reinterpret_cast<const float4*>(K_k + 32 * c);
#pragma unroll
          for (int a = 0; a < T::kQRows; ++a) fma4(&dQ[a][4 * c], ds[a][e], k4);
        }
      }
    }
  }
  // Other blocks add into the same rows at the same time: atomicAdd, whose result is unused,
  // compiles to a fire-and-forget RED.ADD.F32 done in L2. The order of the adds varies from run
  // to run, so dQ may too, in the last bits (tensor_cores.md: Deterministic mode).
#pragma unroll
  for (int a = 0; a < T::kQRows; ++a) {
    const int r = qrow + 4 * a;
    if (r >= rows) continue;
#pragma unroll
    for (int c = 0; c < T::kQChunks; ++c) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int col = qcol + 32 * c + 4 * tx + e;
        if (col < D) atomicAdd(dQ_g + r * D + col, scale * dQ[a][4 * c + e]);
      }
    }
  }
  // END SOLUTION
}

// Epilogue: dK_j (times the scale) and dV_j, written once. Once per block, so plain 4-byte stores
// do (8 lanes cover 128 contiguous bytes of a row). dK_g, dV_g: (Bc, D) global, this tile's keys;
// key_t: this thread's first key (key a is + 4a); keys: the keys left in the problem.
template <int kD>
__device__ __forceinline__ void write_key_grads(float* dK_g, float* dV_g, const float (&dK_j)[4][kD / 8],
                                                const float (&dV_j)[4][kD / 8], int key_t, int tx, int keys, int D,
                                                float scale) {
#pragma unroll
  for (int a = 0; a < 4; ++a) {
    const int j = key_t + 4 * a;
    if (j >= keys) continue;
#pragma unroll
    for (int c = 0; c < kD / 32; ++c) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int col = 32 * c + 4 * tx + e;
        if (col < D) dK_g[j * D + col] = scale * dK_j[a][4 * c + e], dV_g[j * D + col] = dV_j[a][4 * c + e];
      }
    }
  }
}

// The launch of an fp32 backward kernel (backward_kernel of backward.cu, tf32x3_kernel of
// backward_tf32x3.cu) with tile sizes T: one block of T::kThreads per key tile of Bc keys and
// (batch, KV head). The carveout asks for the largest shared-memory split of the L1, so 2 blocks
// of up to 108.4 KiB fit on one SM.
template <class T, class Kernel>
void launch_fp32(Kernel* kernel, const fa::Problem& p, const float* q, const float* k, const float* v,
                 const float* lse, const float* dout, const float* D_row, float* dq, float* dk, float* dv,
                 cudaStream_t stream) {
  allow_shared_memory(kernel, T::kSmemBytes);  // above 48 KB a kernel must opt in
  FA_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout,
                                     cudaSharedmemCarveoutMaxShared));
  const dim3 grid = tiles_by_rows(ceil_div(p.seqlen_k, T::Bc), std::int64_t{p.batch} * p.kv_heads, "08_backward");
  // 16-byte copies need every row of Q and dO to start on a 16-byte boundary.
  const bool vec = p.head_dim % 4 == 0 && aligned16(q) && aligned16(dout);
  kernel<<<grid, T::kThreads, T::kSmemBytes, stream>>>(q, k, v, lse, dout, D_row, dq, dk, dv, p, p.scale(), vec);
  FA_CHECK_LAUNCH();
}

// backward_tf32x3.cu: the 3xTF32 kernel at any head dim up to 128 (the next tile width up), after
// D_i and the zeroed dQ (dot_do_o).
void tf32x3_launch(const fa::Problem& p, const float* q, const float* k, const float* v, const float* lse,
                   const float* dout, const float* D_row, float* dq, float* dk, float* dv, cudaStream_t stream);

}  // namespace backward::fp32
