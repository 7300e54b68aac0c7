// Chapter 08 -- FlashAttention-2's backward pass (Dao 2023, Algorithm 2), fp32 on the CUDA cores.
//
// New since 05, the forward (diff -u 05_flash_v2/flash_v2.cu 08_backward/backward.cu):
//   * The loops turn around once more: one block per (key tile K_j V_j, batch * KV head) -- the
//     grid -- and the inner loop walks the query tiles Q_i of every query head that reads this
//     KV head (GQA/MQA). dK_j and dV_j stay in registers from the first query tile to the last
//     and are written once: no atomics on them, the same bits on every run.
//   * Of the forward only LSE is kept: P_ij = exp(scale S_ij - LSE_i) is recomputed per tile,
//     already normalized -- no running max, no rescaling.
//   * Five products per tile instead of two. S_ij^T = K_j Q_i^T and dP_ij^T = V_j dO_i^T are the
//     forward's S_ij with keys in the rows; dV_j += P_ij^T dO_i and dK_j += dS_ij^T Q_i are its
//     O_i += P_ij V_j; dQ_i += dS_ij K_j is new.
//   * dQ_i collects a term from every key tile, that is from every block of a (b, KV head): each
//     block adds its part with fp32 atomicAdd into dQ, which a preprocessing kernel zeroes while
//     it computes D_i = rowsum(dO_i o O_i).
//   * Causal: the i loop starts at the first query tile that sees K_j (tiles.h: query_tile_begin).
//   * Q_i and dO_i are staged with plain coalesced loads (no cp.async pipeline: README, Exercises).
// Expected effect: FFMA-bound like 05 (about 85% of the issued instructions are FFMAs), but with
// 8 warps per SM instead of 12 -- dK_j and dV_j hold D registers per thread -- and three
// block-wide barriers per tile, so somewhat below the forward's TFLOP/s (README: Results).
// Run:  ./build/08_backward/08_backward --seqlen 4096 --head-dim 128

#include <cstdint>
#include <limits>
#include <stdexcept>

#include "05_flash_v2/flash_v2.h"    // the f32 forward that writes the O and LSE the backward reads
#include "06_tensor_core/tensor_core.h"  // the f16/bf16 forward
#include "08_backward/backward.h"
#include "08_backward/dot_do_o.cuh"
#include "common/cuda_check.h"
#include "common/device/cp_async.cuh"
#include "common/device/grid.cuh"
#include "common/device/launch.h"
#include "common/device/math.cuh"  // fast_exp2, kLog2e
#include "common/device/tiles.h"
#include "common/device_memory.h"
#include "common/warp_reduce.cuh"

namespace backward {
namespace {

using namespace fa::cuda;  // fast_exp2, kLog2e, kLog2eD, tile math (common/device/)
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
  static constexpr int kQRows = Br / 16;         // rows of dQ_i per thread
  // As in 05: rows read as float4 by lanes that take consecutive rows have a stride of
  // kD + 4 floats (= 1 mod 8 in 16-byte units), so such a load never has a bank conflict.
  static constexpr int kStride = kD + 4;
  // P_s rows are written as float4 by quarter-warps that take 4 rows x 2 key groups: a stride of
  // Bc + 8 floats (= 2 mod 8 in 16-byte units) puts those 8 stores in 8 different bank groups.
  static constexpr int kPStride = Bc + 8;
  static constexpr int kSmemFloats = 2 * Bc * kStride + 2 * Br * kStride + Br * kPStride + 3 * Br;
  static constexpr int kSmemBytes = kSmemFloats * sizeof(float);
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

// grid: Tc along x by B*Hkv rows over y and z (common/device/grid.cuh); block: 4 warps. Warp w owns keys 16w .. 16w+15 of K_j; in it, lane (ty, tx)
// (05's layout) owns keys 16w + ty + 4a (a < 4) and, of S_ij^T and dP_ij^T, query rows tx + 8b
// (b < Br/8); of dK_j and dV_j, columns 32c + 4tx .. 32c + 4tx + 3 (c < kD/32). For dQ_i the
// block splits the query rows instead: lane (ty, tx) of warp w owns rows (Br/4) w + ty + 4a
// (a < Br/16) and the same columns.
// 2 blocks (8 warps) per SM: dK_j and dV_j take kD registers per thread, and shared memory
// (kSmemBytes <= 108.4 KiB) fits twice in the H100's 228 KiB.
template <int kD>
__global__ void __launch_bounds__(Traits<kD>::kThreads, 2)
    backward_kernel(const float* __restrict__ q,      // [B, H, Sq, D] global
                    const float* __restrict__ k,      // [B, Hkv, Sk, D] global
                    const float* __restrict__ v,      // [B, Hkv, Sk, D] global
                    const float* __restrict__ lse,    // [B, H, Sq] global, natural log
                    const float* __restrict__ dout,   // [B, H, Sq, D] global
                    const float* __restrict__ D_row,  // [B, H, Sq] global: rowsum(dO o O)
                    float* __restrict__ dq,           // [B, H, Sq, D] global: zeroed, += by atomics
                    float* __restrict__ dk,           // [B, Hkv, Sk, D] global
                    float* __restrict__ dv,           // [B, Hkv, Sk, D] global
                    fa::Problem p, float scale) {
  using T = Traits<kD>;
  constexpr int Br = T::Br, Bc = T::Bc, kStride = T::kStride, kPStride = T::kPStride;
  const std::int64_t kv_bh = fa::cuda::grid_row();  // b * Hkv + kv head
  if (kv_bh >= std::int64_t{p.batch} * p.kv_heads) return;  // a spare block of the grid
  extern __shared__ float4 smem[];                 // float4: 16-byte aligned for LDS.128
  float* K_s = reinterpret_cast<float*>(smem);     // (Bc, kD + 4) smem: K_j
  float* V_s = K_s + Bc * kStride;                 // (Bc, kD + 4) smem: V_j
  float* Q_s = V_s + Bc * kStride;                 // (Br, kD + 4) smem: Q_i
  float* dO_s = Q_s + Br * kStride;                // (Br, kD + 4) smem: dO_i
  float* P_s = dO_s + Br * kStride;                // (Br, Bc + 8) smem: P_ij, then dS_ij (p_column)
  float* lse_s = P_s + Br * kPStride;              // (Br) smem: LSE_i * log2(e) rounded, +inf past Sq
  float* lse_lo_s = lse_s + Br;                    // (Br) smem: what that rounding dropped
  float* D_s = lse_lo_s + Br;                      // (Br) smem: D_i
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int ty = lane / 16 * 2 + lane % 2, tx = lane / 2 % 8;  // 05's lane layout: 2-pass float4 loads
  const int Sq = p.seqlen_q, Sk = p.seqlen_k, D = p.head_dim;
  const float scale_log2 = scale * kLog2e;
  // Causal: the first key tiles are seen by the most query rows, and they are launched first.
  const int j_tile = blockIdx.x, j0 = j_tile * Bc;
  // GQA/MQA: query heads bh0 .. bh0 + H/Hkv - 1 read this KV head; dK_j, dV_j sum over all of them.
  const std::int64_t bh0 = kv_bh / p.kv_heads * p.heads + kv_bh % p.kv_heads * p.group_size();
  const int key_t = 16 * warp + ty;          // this thread's first key of the tile; key a is + 4a
  const float* K_t = K_s + key_t * kStride;  // its first K_j row; row a is + 4a rows
  const float* V_t = V_s + key_t * kStride;  // its first V_j row
  float* P_t = P_s + 16 * warp + 4 * ty;     // its 4 keys in P_s (= p_column(key_t)); row r is + r rows
  const int qrow = Br / 4 * warp + ty;       // its first row of dQ_i; row a is + 4a

  stage_tile<kD, Bc, T::kThreads>(K_s, k + (kv_bh * Sk + j0) * D, Sk - j0, D);
  stage_tile<kD, Bc, T::kThreads>(V_s, v + (kv_bh * Sk + j0) * D, Sk - j0, D);

  float dK_j[4][4 * T::kChunks] = {};  // (4, kD/8) registers: keys key_t + 4a, columns 32c + 4tx + e
  float dV_j[4][4 * T::kChunks] = {};
  const int Tr = ceil_div(Sq, Br), i_begin = query_tile_begin(j_tile, Br, Bc, Sq, Sk, p.causal);

  for (std::int64_t bh = bh0; bh < bh0 + p.group_size(); ++bh) {
    for (int i_tile = i_begin; i_tile < Tr; ++i_tile) {
      const int i0 = i_tile * Br;
      stage_tile<kD, Br, T::kThreads>(Q_s, q + (bh * Sq + i0) * D, Sq - i0, D);
      stage_tile<kD, Br, T::kThreads>(dO_s, dout + (bh * Sq + i0) * D, Sq - i0, D);
      if (threadIdx.x < Br) {
        const int i = i0 + threadIdx.x;
        // LSE_i log2(e) as a float pair hi + lo, exact to ~2^-48: with scores of size ~100, one
        // float rounding of it would cost ~1e-5 of every P (README: Precision). +inf: the row sees
        // no key or lies past Sq, and its P is exactly 0.
        const double lse2 = i < Sq ? double{lse[bh * Sq + i]} * kLog2eD : kInf;
        lse_s[threadIdx.x] = static_cast<float>(lse2);
        lse_lo_s[threadIdx.x] = isinf(lse2) ? 0.0f : static_cast<float>(lse2 - static_cast<float>(lse2));
        D_s[threadIdx.x] = i < Sq ? D_row[bh * Sq + i] : 0.0f;
      }
      __syncthreads();  // Q_i, dO_i, LSE_i, D_i (and on the first pass K_j, V_j) are staged

      // S_ij^T = K_j Q_i^T
      float S[4][T::kRows] = {};  // (4, Br/8) registers: keys key_t + 4a, query rows tx + 8b
      keys_dot_rows<kD, T::kRows>(S, K_t, Q_s, tx);
      // P_ij = exp(scale S_ij - LSE_i) = exp2(S_ij scale log2(e) - LSE_i log2(e)): one FFMA, one
      // FADD and one MUFU.EX2, already normalized. S_ij is 05's raw score bit for bit (the same
      // FFMA chain over d), so the forward's LSE normalizes it. Masked keys get 0; rows with
      // LSE = +inf (no visible key, or past Sq) get exp2(-inf) = 0 exactly: never NaN.
      const bool mask = needs_mask(i_tile, j_tile, Br, Bc, Sq, Sk, p.causal);
#pragma unroll
      for (int b = 0; b < T::kRows; ++b) {
        const int r = tx + 8 * b;
        const float lse2 = lse_s[r], lse2_lo = lse_lo_s[r];
#pragma unroll
        for (int a = 0; a < 4; ++a) {
          const int j = j0 + key_t + 4 * a;
          const bool seen = !mask || (j < Sk && (!p.causal || fa::causal_visible(i0 + r, j, Sq, Sk)));
          S[a][b] = seen ? fast_exp2(fmaf(S[a][b], scale_log2, -lse2) - lse2_lo) : 0.0f;
        }
        // P_ij^T to P_s: row r, this thread's 4 keys side by side, one STS.128.
        *reinterpret_cast<float4*>(P_t + r * kPStride) = make_float4(S[0][b], S[1][b], S[2][b], S[3][b]);
      }
      __syncwarp();  // the warp's P_ij is in P_s: the dV_j product reads what other lanes wrote

      // dV_j += P_ij^T dO_i
      add_keys_outer<kD, Br, kPStride>(dV_j, P_t, dO_s, tx);

      // dP_ij^T = V_j dO_i^T: the same product as S_ij^T.
      float dP[4][T::kRows] = {};  // (4, Br/8) registers: keys key_t + 4a, query rows tx + 8b
      keys_dot_rows<kD, T::kRows>(dP, V_t, dO_s, tx);
      __syncwarp();  // every lane of the warp has read P_s for dV_j before P_ij becomes dS_ij
      // dS_ij = P_ij o (dP_ij - D_i), written over P_ij: each thread rewrites the entries it wrote.
      // BEGIN SOLUTION: for my query rows r = tx + 8b: P_s's float4 of my 4 keys (at P_t) = P o (dP[a][b] - D_s[r])
#pragma unroll
      for (int b = 0; b < T::kRows; ++b) {
        const int r = tx + 8 * b;
        float4* P_r = reinterpret_cast<float4*>(P_t + r * kPStride);
        const float4 p4 = *P_r;
        const float d_i = D_s[r];
        *P_r = make_float4(p4.x * (dP[0][b] - d_i), p4.y * (dP[1][b] - d_i), p4.z * (dP[2][b] - d_i),
                           p4.w * (dP[3][b] - d_i));
      }
      // END SOLUTION
      __syncthreads();  // all of dS_ij is in P_s: dQ_i below reads every warp's keys

      // dQ_i += scale dS_ij K_j, summed here over the tile's Bc keys and across key tiles (blocks)
      // in global memory. Per key, Br/16 LDS.32 and kD/32 LDS.128 feed Br/16 * kD/8 FFMAs.
      // BEGIN SOLUTION: dQ (rows qrow + 4a, columns 32c + 4tx + e) = dS_ij K_j over the Bc keys (dS at p_column in P_s), then atomicAdd scale * dQ into dq (rows < Sq, columns < D)
      float dQ[T::kQRows][4 * T::kChunks] = {};  // rows qrow + 4a, columns 32c + 4tx + e
#pragma unroll 1
      for (int k16 = 0; k16 < Bc; k16 += 16) {
#pragma unroll
        for (int kk = 0; kk < 16; ++kk) {
          const float* dS_k = P_s + k16 + p_column(kk);  // p_column(k16 + kk) = k16 + p_column(kk)
          float ds[T::kQRows];
#pragma unroll
          for (int a = 0; a < T::kQRows; ++a) ds[a] = dS_k[(qrow + 4 * a) * kPStride];
#pragma unroll
          for (int c = 0; c < T::kChunks; ++c) {
            const float4 k4 = *reinterpret_cast<const float4*>(K_s + (k16 + kk) * kStride + 32 * c + 4 * tx);
#pragma unroll
            for (int a = 0; a < T::kQRows; ++a) fma4(&dQ[a][4 * c], ds[a], k4);
          }
        }
      }
      // Other blocks add into the same rows at the same time: atomicAdd, whose result is unused,
      // compiles to a fire-and-forget RED.ADD.F32 done in L2. The order of the adds varies from run
      // to run, so dQ may too, in the last bits (README: a deterministic mode).
#pragma unroll
      for (int a = 0; a < T::kQRows; ++a) {
        const int i = i0 + qrow + 4 * a;
        if (i >= Sq) continue;
        float* dQ_g = dq + (bh * Sq + i) * D;  // (D) global: one row of dQ
#pragma unroll
        for (int c = 0; c < T::kChunks; ++c) {
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            if (32 * c + 4 * tx + e < D) atomicAdd(dQ_g + 32 * c + 4 * tx + e, scale * dQ[a][4 * c + e]);
          }
        }
      }
      // END SOLUTION

      // dK_j += dS_ij^T Q_i (the scale is applied once, in the epilogue)
      add_keys_outer<kD, Br, kPStride>(dK_j, P_t, Q_s, tx);
      __syncthreads();  // every warp is done with Q_s, dO_s and P_s before the next tile is staged
    }
  }

  // Epilogue: dK_j (times the scale) and dV_j, written once, after every query head of the group.
  // Once per block, so plain 4-byte stores do (8 lanes cover 128 contiguous bytes of a row).
#pragma unroll
  for (int a = 0; a < 4; ++a) {
    const int j = j0 + key_t + 4 * a;
    if (j >= Sk) continue;
    float* dK_g = dk + (kv_bh * Sk + j) * D;  // (D) global: one row of dK
    float* dV_g = dv + (kv_bh * Sk + j) * D;  // (D) global: one row of dV
#pragma unroll
    for (int c = 0; c < T::kChunks; ++c) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int col = 32 * c + 4 * tx + e;
        if (col < D) dK_g[col] = scale * dK_j[a][4 * c + e], dV_g[col] = dV_j[a][4 * c + e];
      }
    }
  }
}

template <int kD>
void launch(const fa::Problem& p, const float* q, const float* k, const float* v, const float* lse,
            const float* dout, const float* D_row, float* dq, float* dk, float* dv, cudaStream_t stream) {
  using T = Traits<kD>;
  // Above 48 KB of shared memory a kernel must opt in; the carveout asks for the largest
  // shared-memory split of the L1, so 2 blocks of up to 108.4 KiB fit on one SM.
  allow_shared_memory(backward_kernel<kD>, T::kSmemBytes);
  FA_CUDA_CHECK(cudaFuncSetAttribute(backward_kernel<kD>, cudaFuncAttributePreferredSharedMemoryCarveout,
                                     cudaSharedmemCarveoutMaxShared));
  const dim3 grid = fa::cuda::tiles_by_rows(ceil_div(p.seqlen_k, T::Bc), std::int64_t{p.batch} * p.kv_heads, "08_backward");
  backward_kernel<kD><<<grid, T::kThreads, T::kSmemBytes, stream>>>(q, k, v, lse, dout, D_row, dq, dk, dv,
                                                                     p, p.scale());
  FA_CHECK_LAUNCH();
}

}  // namespace

void forward(const fa::Problem& p, const void* q, const void* k, const void* v, void* o, float* lse,
             cudaStream_t stream) {
  if (p.dtype == fa::Dtype::f32) flash_v2::forward(p, q, k, v, o, lse, stream);
  else tensor_core::forward(p, q, k, v, o, lse, stream);
}

const fa::BackwardChapter& chapter() {
  static const fa::BackwardChapter c{
      .support = {.chapter = "08_backward",
                  .dtypes = {fa::Dtype::f32, fa::Dtype::f16, fa::Dtype::bf16},
                  .head_dims = {},
                  .max_head_dim = 128},
      .forward = forward,
      .backward = backward,
      .test_head_dims = {64, 128},
      .defaults = fa::default_problem(fa::Dtype::f32),
      .deterministic = backward_deterministic};
  return c;
}

const fa::BackwardChapter& fp32_chapter() {
  // Its own backward checks against its own Support, so the shared refusal tests see f16/bf16
  // refused for the dtype, as this object declares.
  static const fa::BackwardFn fp32_only = [](const fa::Problem& p, const void* q, const void* k, const void* v,
                                             const void* o, const float* lse, const void* dout, void* dq, void* dk,
                                             void* dv, cudaStream_t stream) {
    fa::check_backward_args(fp32_chapter().support, p, q, k, v, o, lse, dout, dq, dk, dv);
    backward(p, q, k, v, o, lse, dout, dq, dk, dv, stream);
  };
  static const fa::BackwardChapter c{
      .support = {.chapter = "08_backward", .dtypes = {fa::Dtype::f32}, .head_dims = {}, .max_head_dim = 128},
      .forward = flash_v2::forward,
      .backward = fp32_only,
      .test_head_dims = {7, 32, 96},
      .defaults = fa::default_problem(fa::Dtype::f32),
      .deterministic = nullptr};
  return c;
}

void backward(const fa::Problem& p, const void* q, const void* k, const void* v, const void* o,
              const float* lse, const void* dout, void* dq, void* dk, void* dv, cudaStream_t stream) {
  backward(p, q, k, v, o, lse, dout, dq, dk, dv, stream, BackwardOptions{});
}

void backward_deterministic(const fa::Problem& p, const void* q, const void* k, const void* v, const void* o,
                            const float* lse, const void* dout, void* dq, void* dk, void* dv,
                            cudaStream_t stream) {
  backward(p, q, k, v, o, lse, dout, dq, dk, dv, stream, BackwardOptions{true});
}

void backward(const fa::Problem& p, const void* q, const void* k, const void* v, const void* o,
              const float* lse, const void* dout, void* dq, void* dk, void* dv, cudaStream_t stream,
              const BackwardOptions& options) {
  fa::check_backward_args(chapter().support, p, q, k, v, o, lse, dout, dq, dk, dv);
  if (p.dtype != fa::Dtype::f32) return tensor_core_backward(p, q, k, v, o, lse, dout, dq, dk, dv, options, stream);
  if (options.deterministic)
    throw std::invalid_argument("08_backward: the deterministic mode is implemented for f16/bf16 only "
                                "(the fp32 kernel adds into dQ with unordered atomics)");
  auto* D_row = static_cast<float*>(
      fa::cuda::workspace(p.lse_elems() * sizeof(float), "08_backward's D_i = rowsum(dO o O)"));  // [B, H, Sq]
  const auto* qf = static_cast<const float*>(q);
  const auto* kf = static_cast<const float*>(k);
  const auto* vf = static_cast<const float*>(v);
  const auto* dof = static_cast<const float*>(dout);
  auto* dqf = static_cast<float*>(dq);
  auto* dkf = static_cast<float*>(dk);
  auto* dvf = static_cast<float*>(dv);

  const std::int64_t rows = p.lse_elems();
  dot_do_o(static_cast<const float*>(o), dof, D_row, dqf, rows, p.head_dim, stream);

  // Any head_dim runs on the next instantiated size, its extra columns zero-filled.
  if (p.head_dim <= 32) launch<32>(p, qf, kf, vf, lse, dof, D_row, dqf, dkf, dvf, stream);
  else if (p.head_dim <= 64) launch<64>(p, qf, kf, vf, lse, dof, D_row, dqf, dkf, dvf, stream);
  else if (p.head_dim <= 96) launch<96>(p, qf, kf, vf, lse, dof, D_row, dqf, dkf, dvf, stream);
  else launch<128>(p, qf, kf, vf, lse, dof, D_row, dqf, dkf, dvf, stream);
}

}  // namespace backward
