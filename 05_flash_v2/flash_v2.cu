// Chapter 05 -- FlashAttention-2 (Dao 2023, Algorithm 1), fp32 on the CUDA cores.
//
// New since 04 (diff -u 04_flash_v1/flash_v1.cu 05_flash_v2/flash_v2.cu):
//   * Loops swapped: one block per (query tile Q_i, batch*head) -- the outer loop is the grid --
//     and the inner loop walks K_j, V_j. O_i, m_i, l_i never leave registers, and O_i is divided
//     by l_i once at the end instead of being rescaled in global memory after every step.
//   * Warps split the Br = 64 query rows (16 each), so a row's max and sum stay inside one warp:
//     three shuffles, no shared memory, no __syncthreads for the softmax.
//   * Causal: key tiles wholly above the diagonal are never visited (the j loop ends early,
//     tiles.h); only the diagonal tiles and the last partial key tile are masked element-wise.
//   * exp2 instead of exp: p = exp2(S scale log2(e) - m scale log2(e)) is one FFMA and one
//     MUFU.EX2 (the max m is taken on the raw scores); LSE = (m scale log2(e) + log2(l)) ln(2).
//   * Register tiling for both products: each thread owns 4 rows x Bc/8 keys of S_ij and the same
//     4 rows x D/8 columns of O_i; operands come from shared memory as float4 (LDS.128), laid out
//     and assigned to lanes so that each load takes two shared-memory passes, and the products
//     are straight FFMA chains.
//   * K_j and V_j are copied with cp.async, staggered: V_j lands while S_ij is computed, and
//     K_{j+1} while P_ij V_j is.
// Expected effect: FFMA-bound instead of memory-bound. About 80% of the issued instructions are
// FFMAs; at ~80% issue utilization that is ~60% of the H100's 67 TFLOP/s fp32 peak, about
// 40 TFLOP/s at D = 64 and 128 (README: Results). The README's steps time the kernel with one of
// these changes switched off (Config in flash_v2.h: `if constexpr` below; steps.cu).
// Run:  ./build/05_flash_v2/05_flash_v2 --seqlen 4096 --head-dim 128

#include <cstdint>
#include <limits>
#include <stdexcept>
#include <type_traits>

#include "05_flash_v2/flash_v2.h"
#include "common/cuda_check.h"
#include "common/device/cp_async.cuh"
#include "common/device/grid.cuh"
#include "common/device/launch.h"
#include "common/device/math.cuh"
#include "common/device/tiles.h"

namespace flash_v2 {
namespace {

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
};

// e^x for x in the units the scores are scaled to: log2 units and one MUFU.EX2 (kExp2), or
// natural-log units and expf (a range reduction around MUFU.EX2 without --use_fast_math).
template <class C>
__device__ __forceinline__ float score_exp(float x) {
  if constexpr (C::kExp2) return fast_exp2(x);
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

// grid: Tr along x by B*H rows over y and z (common/device/grid.cuh); block: 4 warps. Warp w
// owns rows 16w .. 16w+15 of Q_i; in it, lane (ty, tx), ty < 4, tx < 8, owns rows 16w + ty + 4a
// (a < 4) and, of S_ij, keys tx + 8b (b < Bc/8); of O_i, columns 32c + 4tx .. 32c + 4tx + 3
// (c < kD/32).
// 3 blocks (12 warps) per SM: registers are capped at 168 per thread, and shared memory
// (kSmemBytes <= 74 KB) fits 3 times in the H100's 228 KB.
template <int kD, class C>
__global__ void __launch_bounds__(Traits<kD>::kThreads, 3)
    flash_v2_kernel(const float* __restrict__ q,  // [B, H, Sq, D] global
                    const float* __restrict__ k,  // [B, Hkv, Sk, D] global
                    const float* __restrict__ v,  // [B, Hkv, Sk, D] global
                    float* __restrict__ o,        // [B, H, Sq, D] global
                    float* __restrict__ lse,      // [B, H, Sq] global
                    fa::Problem p, float scale_log2, bool vec) {  // scale_log2: scale without kExp2
  using T = Traits<kD>;
  constexpr int Br = T::Br, Bc = T::Bc, kStride = T::kStride;
  const std::int64_t bh = fa::cuda::grid_row();  // b * H + h
  if (bh >= std::int64_t{p.batch} * p.heads) return;  // a spare block of the grid
  extern __shared__ float4 smem[];                    // float4: 16-byte aligned for LDS.128
  float* Q_s = reinterpret_cast<float*>(smem);        // (Br, kD + 4) smem, pre-scaled Q_i
  float* K_s = Q_s + Br * kStride;                    // (Bc, kD + 4) smem
  float* V_s = K_s + Bc * kStride;                    // (Bc, kD) smem
  float* P_s = V_s + Bc * kD;                         // (warps, Bc, 16) smem: each warp's P_ij^T
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  // Lane (ty, tx): a 16-byte shared load is served a quarter-warp (8 lanes) at a time, and
  // quarters whose addresses fall in different banks share a pass. Giving each quarter 2 row
  // groups x 4 key groups (CUTLASS's RowMajorInterleaved<2>) makes every operand load 2 passes;
  // 1 x 8 would make the K_j and V_j loads 4 passes each (without kInterleavedLanes).
  const int ty = C::kInterleavedLanes ? lane / 16 * 2 + lane % 2 : lane / 8;
  const int tx = C::kInterleavedLanes ? lane / 2 % 8 : lane % 8;
  constexpr int kTxLane = C::kInterleavedLanes ? 2 : 1;  // a row's 8 lanes: xor kTxLane, 2 kTxLane, 4 kTxLane
  const int Sq = p.seqlen_q, Sk = p.seqlen_k, D = p.head_dim;
  // Causal: the last query tiles see the most keys, so they are launched first (less tail).
  const int i_tile = p.causal ? gridDim.x - 1 - blockIdx.x : blockIdx.x;
  const int i0 = i_tile * Br;
  const std::int64_t kv_bh = p.kv_index(bh);
  const float* Q_g = q + (bh * Sq + i0) * D;  // (Br, D) global: Q_i
  const float* K_g = k + kv_bh * Sk * D;      // (Sk, D) global
  const float* V_g = v + kv_bh * Sk * D;      // (Sk, D) global
  const float* Q_w = Q_s + (16 * warp + ty) * kStride;  // this thread's first row; row a is +4a rows
  float* P_w = P_s + warp * Bc * 16;                    // (Bc, 16) smem: this warp's P_ij^T
  // Without kSkipCausalTiles, causal visits every key tile too and masks all of them element-wise.
  const int Tc_end = C::kSkipCausalTiles ? key_tile_end(i_tile, Br, Bc, Sq, Sk, p.causal) : ceil_div(Sk, Bc);

  // Prologue: K_0 starts copying while Q_i is staged by hand (without kOverlapCopies: in the loop).
  if (C::kOverlapCopies && Tc_end > 0) load_tile_async<kD, Bc, kStride, T::kThreads>(K_s, K_g, Sk, D, vec);
  cp_async_commit();
#pragma unroll 4
  for (int it = 0; it < Br * kD / T::kThreads; ++it) {  // Q_i as it is: 08's backward recomputes S bit for bit
    const int n = it * T::kThreads + threadIdx.x, r = n / kD, c = n % kD;
    Q_s[r * kStride + c] = i0 + r < Sq && c < D ? Q_g[r * D + c] : 0.0f;
  }

  float O_i[4][4 * T::kChunks] = {};  // (4, kD/8) registers: rows ty + 4a, columns 32c + 4tx + e
  float m_i[4], l_i[4];               // running max (raw scores) and this thread's part of the sum
  for (int a = 0; a < 4; ++a) m_i[a] = -kInf, l_i[a] = 0.0f;
  float l_div[4] = {};                // without kNormalizeOnce: the row sums O_i is divided by

  for (int j_tile = 0; j_tile < Tc_end; ++j_tile) {
    const int j0 = j_tile * Bc;
    if constexpr (!C::kOverlapCopies) {  // copy K_j and V_j, and compute only once both have landed
      __syncthreads();                   // every warp is done with K_s and V_s of tile j-1
      load_tile_async<kD, Bc, kStride, T::kThreads>(K_s, K_g + j0 * D, Sk - j0, D, vec);
      load_tile_async<kD, Bc, kD, T::kThreads>(V_s, V_g + j0 * D, Sk - j0, D, vec);
      cp_async_commit();
    }
    cp_async_wait<0>();  // this thread's copies of K_j (without kOverlapCopies, and V_j) have landed
    __syncthreads();     // ... and everyone's (and Q_s is written); every warp is done with P_ij V_j-1
    if constexpr (C::kOverlapCopies) {
      load_tile_async<kD, Bc, kD, T::kThreads>(V_s, V_g + j0 * D, Sk - j0, D, vec);  // lands during S_ij
      cp_async_commit();
    }

    // S_ij = Q_i K_j^T: per 4 head-dim steps, 4 + Bc/8 LDS.128 feed 16 * Bc/8 FFMAs.
    float S_ij[4][T::kKeys] = {};  // (4, Bc/8) registers: rows ty + 4a, keys tx + 8b
#pragma unroll 8
    for (int d = 0; d < kD; d += 4) {
      float4 q4[4];
#pragma unroll
      for (int a = 0; a < 4; ++a) q4[a] = *reinterpret_cast<const float4*>(Q_w + 4 * a * kStride + d);
#pragma unroll
      for (int b = 0; b < T::kKeys; ++b) {
        const float4 k4 = *reinterpret_cast<const float4*>(K_s + (tx + 8 * b) * kStride + d);
#pragma unroll
        for (int a = 0; a < 4; ++a) {
          S_ij[a][b] = fmaf(q4[a].x, k4.x, S_ij[a][b]);
          S_ij[a][b] = fmaf(q4[a].y, k4.y, S_ij[a][b]);
          S_ij[a][b] = fmaf(q4[a].z, k4.z, S_ij[a][b]);
          S_ij[a][b] = fmaf(q4[a].w, k4.w, S_ij[a][b]);
        }
      }
    }
    // Only the last partial key tile and the causal diagonal tiles pay for the element mask
    // (without kSkipCausalTiles, every causal tile does).
    if ((!C::kSkipCausalTiles && p.causal) || needs_mask(i_tile, j_tile, Br, Bc, Sq, Sk, p.causal)) {
#pragma unroll
      for (int a = 0; a < 4; ++a) {
#pragma unroll
        for (int b = 0; b < T::kKeys; ++b) {
          const int i = i0 + 16 * warp + ty + 4 * a, j = j0 + tx + 8 * b;
          if (j >= Sk || (p.causal && !fa::causal_visible(i, j, Sq, Sk))) S_ij[a][b] = -kInf;
        }
      }
    }

    if constexpr (!C::kNormalizeOnce) {  // 04: O_i was divided by l_i; undo it before the rescale
#pragma unroll
      for (int a = 0; a < 4; ++a) {
#pragma unroll
        for (int e = 0; e < 4 * T::kChunks; ++e) O_i[a][e] *= l_div[a];
      }
    }

    // Online softmax. A row's Bc keys sit in the 8 lanes with the same ty (they differ in lane
    // bits 1-3), so three xor-shuffles give its max; the sum l_i stays per thread until the end.
    // BEGIN SOLUTION: per row a: m_new (3 shuffles from xor kTxLane), m_scaled = m_new * scale_log2, l_i and O_i *= score_exp<C>(__fmul_rn(m_i, scale_log2) - m_scaled), S_ij -> P_ij = score_exp<C>(S_ij * scale_log2 - m_scaled), l_i += P_ij
#pragma unroll
    for (int a = 0; a < 4; ++a) {
      float m = S_ij[a][0];
#pragma unroll
      for (int b = 1; b < T::kKeys; ++b) m = fmaxf(m, S_ij[a][b]);
      for (int offset = kTxLane; offset < 8 * kTxLane; offset *= 2)
        m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, offset));
      const float m_new = fmaxf(m_i[a], m);
      const float m_use = m_new == -kInf ? 0.0f : m_new;  // no key seen yet: avoid (-inf) - (-inf)
      const float m_scaled = __fmul_rn(m_use, scale_log2);  // rounded once, never fused: the LSE uses it
      // Earlier tiles' P were taken against __fmul_rn(m_i, c): the same rounding here keeps them exact.
      const float alpha = score_exp<C>(__fmul_rn(m_i[a], scale_log2) - m_scaled);  // rescales earlier tiles
      m_i[a] = m_new;
      l_i[a] *= alpha;
#pragma unroll
      for (int e = 0; e < 4 * T::kChunks; ++e) O_i[a][e] *= alpha;
#pragma unroll
      for (int b = 0; b < T::kKeys; ++b) {
        S_ij[a][b] = score_exp<C>(fmaf(S_ij[a][b], scale_log2, -m_scaled));  // P_ij: one FFMA + MUFU.EX2
        l_i[a] += S_ij[a][b];
      }
    }
    // END SOLUTION
    // P_ij^T to this warp's smem, key-major: key tx + 8b holds this thread's 4 rows in slots
    // 4ty .. 4ty+3, so the product below reads them back with one LDS.128 per key.
#pragma unroll
    for (int b = 0; b < T::kKeys; ++b)
      *reinterpret_cast<float4*>(P_w + (tx + 8 * b) * 16 + 4 * ty) =
          make_float4(S_ij[0][b], S_ij[1][b], S_ij[2][b], S_ij[3][b]);

    if constexpr (C::kOverlapCopies) {
      cp_async_wait<0>();  // this thread's copies of V_j have landed
      __syncthreads();     // ... and everyone's (and the P_w stores); every warp is done with K_s
      if (j_tile + 1 < Tc_end) {                           // K_{j+1} lands during P_ij V_j
        load_tile_async<kD, Bc, kStride, T::kThreads>(K_s, K_g + (j0 + Bc) * D, Sk - j0 - Bc, D, vec);
      }
      cp_async_commit();
    } else {
      __syncwarp();  // the P_w stores are visible to the warp's lanes (V_j landed at the top)
    }

    // O_i += P_ij V_j: per key, 1 + kD/32 LDS.128 feed kD/2 FFMAs.
    // BEGIN SOLUTION: for each key kk of the tile: O_i += (my 4 rows of P_w) x (my columns of V_s row kk)
#pragma unroll 8
    for (int kk = 0; kk < Bc; ++kk) {
      const float4 p4 = *reinterpret_cast<const float4*>(P_w + kk * 16 + 4 * ty);  // 4 rows' P
      const float pa[4] = {p4.x, p4.y, p4.z, p4.w};
#pragma unroll
      for (int c = 0; c < T::kChunks; ++c) {
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
    if constexpr (!C::kNormalizeOnce) {  // 04: O_i divided by the row's sum after every key tile
#pragma unroll
      for (int a = 0; a < 4; ++a) {
        l_div[a] = l_i[a];
        for (int offset = kTxLane; offset < 8 * kTxLane; offset *= 2)
          l_div[a] += __shfl_xor_sync(0xffffffffu, l_div[a], offset);
        const float inv_l = l_div[a] > 0.0f ? 1.0f / l_div[a] : 0.0f;  // no key seen yet: O_i stays 0
#pragma unroll
        for (int e = 0; e < 4 * T::kChunks; ++e) O_i[a][e] *= inv_l;
      }
    }
  }

  // Epilogue: the row sums, O_i / l_i once, and LSE = m * ln(2) + log(l) (natural log).
  float l_row[4];
#pragma unroll
  for (int a = 0; a < 4; ++a) {
    l_row[a] = l_i[a];
    for (int offset = kTxLane; offset < 8 * kTxLane; offset *= 2)
      l_row[a] += __shfl_xor_sync(0xffffffffu, l_row[a], offset);
  }
#pragma unroll
  for (int a = 0; a < 4; ++a) {
    const int i = i0 + 16 * warp + ty + 4 * a;
    if (i >= Sq) continue;
    // A row that sees no key: O = 0. Without kNormalizeOnce, O_i is divided already.
    const float inv_l = !C::kNormalizeOnce ? 1.0f : l_row[a] > 0.0f ? 1.0f / l_row[a] : 0.0f;
    float* O_g = o + (bh * Sq + i) * D;  // (D) global: one row of O
#pragma unroll
    for (int c = 0; c < T::kChunks; ++c) {
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
    const double m_scaled = __fmul_rn(m_i[a], scale_log2), l = l_row[a];
    const double lse_i = C::kExp2 ? (m_scaled + log2(l)) * kLn2D : m_scaled + log(l);
    if (tx == 0) lse[bh * Sq + i] = l_row[a] > 0.0f ? static_cast<float>(lse_i) : kInf;
  }
}

template <int kD, class C>
void launch(const fa::Problem& p, const float* q, const float* k, const float* v, float* o,
            float* lse, bool vec, cudaStream_t stream) {
  using T = Traits<kD>;
  // Above 48 KB of shared memory a kernel must opt in; the carveout asks for the largest
  // shared-memory split of the L1, so 3 blocks of ~70 KB fit on one SM.
  allow_shared_memory(flash_v2_kernel<kD, C>, T::kSmemBytes);
  FA_CUDA_CHECK(cudaFuncSetAttribute(flash_v2_kernel<kD, C>, cudaFuncAttributePreferredSharedMemoryCarveout,
                                     cudaSharedmemCarveoutMaxShared));
  const dim3 grid = fa::cuda::tiles_by_rows(ceil_div(p.seqlen_q, T::Br), std::int64_t{p.batch} * p.heads, "05_flash_v2");
  const float scale_log2 = C::kExp2 ? p.scale() * kLog2e : p.scale();  // S in log2 or natural-log units
  flash_v2_kernel<kD, C><<<grid, T::kThreads, T::kSmemBytes, stream>>>(q, k, v, o, lse, p, scale_log2, vec);
  FA_CHECK_LAUNCH();
}


}  // namespace

const fa::Chapter& chapter() {
  static const fa::Chapter c{
      .support = {.chapter = "05_flash_v2", .dtypes = {fa::Dtype::f32}, .head_dims = {}, .max_head_dim = 128},
      .forward = forward,
      .test_head_dims = {7, 32, 64, 96, 128},
      .defaults = fa::default_problem(fa::Dtype::f32)};
  return c;
}

template <class C>
void forward_with(const fa::Problem& p, const void* q, const void* k, const void* v, void* o, float* lse,
                  cudaStream_t stream) {
  fa::check_forward_args(chapter().support, p, q, k, v, o, lse);
  fa::cuda::require_compute_capability(80, "05_flash_v2", "it copies K and V with cp.async");
  // 16-byte copies need every row to start on a 16-byte boundary.
  const bool vec = p.head_dim % 4 == 0 && aligned16(q) && aligned16(k) && aligned16(v) && aligned16(o);
  const auto* qf = static_cast<const float*>(q);
  const auto* kf = static_cast<const float*>(k);
  const auto* vf = static_cast<const float*>(v);
  auto* of = static_cast<float*>(o);
  // Any head_dim runs on the next instantiated size, its extra columns zero-filled.
  if (p.head_dim <= 32) launch<32, C>(p, qf, kf, vf, of, lse, vec, stream);
  else if (p.head_dim <= 64) launch<64, C>(p, qf, kf, vf, of, lse, vec, stream);
  else if (p.head_dim <= 96) launch<96, C>(p, qf, kf, vf, of, lse, vec, stream);
  else launch<128, C>(p, qf, kf, vf, of, lse, vec, stream);
}

void forward(const fa::Problem& p, const void* q, const void* k, const void* v, void* o, float* lse,
             cudaStream_t stream) {
  forward_with<Config<>>(p, q, k, v, o, lse, stream);
}

// The README's steps (steps.cu): the chapter's kernel, and the kernel with one change switched off.
using Forward = std::remove_pointer_t<fa::ForwardFn>;  // forward()'s function type
template Forward forward_with<Config<>>;
template Forward forward_with<NoCausalSkip>;
template Forward forward_with<Expf>;
template Forward forward_with<NormalizeEachTile>;
template Forward forward_with<NoCopyOverlap>;
template Forward forward_with<PlainLanes>;

}  // namespace flash_v2
