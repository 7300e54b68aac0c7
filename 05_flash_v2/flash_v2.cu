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
// these changes switched off (steps/).
// Layout: this file is the chapter's kernel; tile_math.cuh holds its tile sizes, lane layout and
// the steps of one key tile (load_tile_async, stage_q, tile_scores, mask_scores, softmax_step,
// store_p, accumulate_pv, write_rows); steps/ holds the step-by-step versions.
// Run:  ./build/05_flash_v2/05_flash_v2 --seqlen 4096 --head-dim 128

#include <cstdint>

#include "05_flash_v2/flash_v2.h"
#include "05_flash_v2/tile_math.cuh"  // Traits, Lanes and the steps of one key tile
#include "common/cuda/cuda_check.h"
#include "common/device/grid.cuh"
#include "common/device/launch.h"

namespace flash_v2 {
namespace {

// grid: Tr along x by B*H rows over y and z (common/device/grid.cuh); block: 4 warps. Warp w
// owns rows 16w .. 16w+15 of Q_i; in it, lane (ty, tx) (tile_math.cuh: Lanes) owns rows
// 16w + ty + 4a (a < 4) and, of S_ij, keys tx + 8b (b < Bc/8); of O_i, columns 32c + 4tx .. +3
// (c < kD/32).
// 3 blocks (12 warps) per SM: registers are capped at 168 per thread, and shared memory
// (kSmemBytes <= 74 KB) fits 3 times in the H100's 228 KB.
template <int kD>
__global__ void __launch_bounds__(Traits<kD>::kThreads, Traits<kD>::kMinBlocks)
    flash_v2_kernel(const float* __restrict__ q,  // [B, H, Sq, D] global
                    const float* __restrict__ k,  // [B, Hkv, Sk, D] global
                    const float* __restrict__ v,  // [B, Hkv, Sk, D] global
                    float* __restrict__ o,        // [B, H, Sq, D] global
                    float* __restrict__ lse,      // [B, H, Sq] global
                    fa::Problem p, float scale_log2, bool vec) {  // scale_log2: scale * log2(e)
  using T = Traits<kD>;
  using L = Lanes<true>;
  constexpr int Br = T::Br, Bc = T::Bc, kStride = T::kStride;
  const std::int64_t bh = grid_row();                 // b * H + h
  if (bh >= std::int64_t{p.batch} * p.heads) return;  // a spare block of the grid
  extern __shared__ float4 smem[];                    // float4: 16-byte aligned for LDS.128
  float* Q_s = reinterpret_cast<float*>(smem);        // (Br, kD + 4) smem: Q_i
  float* K_s = Q_s + Br * kStride;                    // (Bc, kD + 4) smem: K_j
  float* V_s = K_s + Bc * kStride;                    // (Bc, kD) smem: V_j
  float* P_s = V_s + Bc * kD;                         // (warps, Bc, 16) smem: each warp's P_ij^T
  const int warp = threadIdx.x / 32;
  const L lanes(threadIdx.x % 32);
  const int ty = lanes.ty, tx = lanes.tx;
  const int Sq = p.seqlen_q, Sk = p.seqlen_k, D = p.head_dim;
  // Causal: the last query tiles see the most keys, so they are launched first (less tail).
  const int i_tile = p.causal ? gridDim.x - 1 - blockIdx.x : blockIdx.x;
  const int i0 = i_tile * Br;
  const int i_first = i0 + 16 * warp + ty;  // the query row of this thread's row a = 0
  const std::int64_t kv_bh = p.kv_index(bh);
  const float* Q_g = q + (bh * Sq + i0) * D;  // (Br, D) global: Q_i
  const float* K_g = k + kv_bh * Sk * D;      // (Sk, D) global
  const float* V_g = v + kv_bh * Sk * D;      // (Sk, D) global
  const float* Q_w = Q_s + (16 * warp + ty) * kStride;  // this thread's first row; row a is +4a rows
  float* P_w = P_s + warp * Bc * 16;                    // (Bc, 16) smem: this warp's P_ij^T
  // Causal: key tiles wholly above the diagonal are never visited (common/device/tiles.h).
  const int Tc_end = key_tile_end(i_tile, Br, Bc, Sq, Sk, p.causal);

  // Prologue: K_0 starts copying while Q_i is staged by hand.
  if (Tc_end > 0) load_tile_async<kD, Bc, kStride, T::kThreads>(K_s, K_g, Sk, D, vec);
  cp_async_commit();
  stage_q<kD>(Q_s, Q_g, Sq - i0, D);

  OutTile<kD> O_i = {};       // (4, kD/8) registers: rows ty + 4a, columns 32c + 4tx + e
  float m_i[4], l_i[4];       // running max (raw scores) and this thread's part of the row sum
  for (int a = 0; a < 4; ++a) m_i[a] = -kInf, l_i[a] = 0.0f;

  for (int j_tile = 0; j_tile < Tc_end; ++j_tile) {
    const int j0 = j_tile * Bc;
    cp_async_wait<0>();  // this thread's copies of K_j have landed
    __syncthreads();     // ... and everyone's (and Q_s is written); every warp is done with P_ij V_j-1
    load_tile_async<kD, Bc, kD, T::kThreads>(V_s, V_g + j0 * D, Sk - j0, D, vec);  // lands during S_ij
    cp_async_commit();

    ScoreTile<kD> S_ij;  // (4, Bc/8) registers: rows ty + 4a, keys tx + 8b
    tile_scores<kD>(S_ij, Q_w, K_s, tx);
    // Only the last partial key tile and the causal diagonal tiles pay for the element mask.
    if (needs_mask(i_tile, j_tile, Br, Bc, Sq, Sk, p.causal)) mask_scores<kD>(S_ij, i_first, j0, tx, p);
    softmax_step<kD, true, L>(S_ij, m_i, l_i, O_i, scale_log2);  // S_ij now holds P_ij
    store_p<kD>(P_w, S_ij, ty, tx);

    cp_async_wait<0>();  // this thread's copies of V_j have landed
    __syncthreads();     // ... and everyone's (and the P_w stores); every warp is done with K_s
    if (j_tile + 1 < Tc_end)  // K_{j+1} lands during P_ij V_j
      load_tile_async<kD, Bc, kStride, T::kThreads>(K_s, K_g + (j0 + Bc) * D, Sk - j0 - Bc, D, vec);
    cp_async_commit();
    accumulate_pv<kD>(O_i, P_w, V_s, ty, tx);
  }

  // Epilogue: O_i / l_i once, and LSE = m * scale + log(l) (natural log).
  write_rows<kD, true, L>(O_i, m_i, l_i, o + bh * Sq * D, lse + bh * Sq, i_first, tx, p, scale_log2, vec);
}

}  // namespace

const fa::Chapter& chapter() {
  static const fa::Chapter c{
      .support = {.chapter = "05_flash_v2", .dtypes = {fa::Dtype::f32}, .head_dims = {}, .max_head_dim = 256},
      .forward = forward,
      .test_head_dims = {7, 8, 32, 40, 64, 72, 80, 96, 112, 128, 160, 192, 256},
      .defaults = fa::default_problem(fa::Dtype::f32)};
  return c;
}

const fa::Chapter& ffma_chapter() {
  static const fa::Chapter c{
      .support = {.chapter = "05_flash_v2_ffma", .dtypes = {fa::Dtype::f32}, .head_dims = {}, .max_head_dim = 256},
      .forward = ffma_forward,
      .test_head_dims = {7, 8, 32, 40, 64, 72, 80, 96, 112, 128},  // above 128 chapter() runs this kernel
      .defaults = fa::default_problem(fa::Dtype::f32)};
  return c;
}

bool prepare_forward(const fa::Support& support, const fa::Problem& p, const void* q, const void* k, const void* v,
                     const void* o, const float* lse) {
  fa::check_forward_args(support, p, q, k, v, o, lse);
  fa::cuda::require_compute_capability(80, "05_flash_v2", "it copies K and V with cp.async");
  // 16-byte copies need every row to start on a 16-byte boundary.
  return p.head_dim % 4 == 0 && aligned16(q) && aligned16(k) && aligned16(v) && aligned16(o);
}

void forward(const fa::Problem& p, const void* q, const void* k, const void* v, void* o, float* lse,
             cudaStream_t stream) {
  fa::check_forward_args(chapter().support, p, q, k, v, o, lse);
  if (on_tensor_cores(p)) tf32x3_forward(p, q, k, v, o, lse, stream);
  else ffma_forward(p, q, k, v, o, lse, stream);
}

void ffma_forward(const fa::Problem& p, const void* q, const void* k, const void* v, void* o, float* lse,
                  cudaStream_t stream) {
  const bool vec = prepare_forward(ffma_chapter().support, p, q, k, v, o, lse);
  with_head_dim<32, 64, 96, 128, 192, 256>(p.head_dim, [&](auto d) {  // any head dim: the next size up
    constexpr int kD = decltype(d)::value;
    launch<kD, true>(flash_v2_kernel<kD>, p, static_cast<const float*>(q), static_cast<const float*>(k),
                     static_cast<const float*>(v), static_cast<float*>(o), lse, vec, stream);
  });
}

}  // namespace flash_v2
