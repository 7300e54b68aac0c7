// Chapter 06 -- FlashAttention-2's forward on the tensor cores: fp16 / bf16 in, fp32 accumulate.
//
// New since 05 (diff -u 05_flash_v2/flash_v2.cu 06_tensor_core/tensor_core.cuh):
//   * Both products run on the tensor cores: mma.sync.m16n8k16 (HMMA.16816.F32) takes 16x16 and
//     16x8 tiles of fp16/bf16 and accumulates in fp32. S_ij, O_i, m_i, l_i stay fp32.
//   * Operands reach registers through ldmatrix.x4 (LDSM): 4 8x8 matrices per instruction, laid
//     out as the mma wants them (common/device/mma.cuh). K_j is read as is: a row-major (Bc, d) tile is the
//     column-major B that S = Q K^T needs. V_j is read with .trans for O += P V.
//   * P never touches shared memory: the fp32 accumulators of two adjacent 8-key n-tiles of S_ij
//     are, element for element, the A fragment of a 16-key k-step of P V (README: Walkthrough).
//   * Shared tiles are XOR-swizzled (common/device/swizzle.h): the 16-byte cp.async stores and the ldmatrix
//     reads are both conflict free, with no padding.
//   * K_j and V_j are double buffered: K_{j+1}, V_{j+1} are in flight during all of tile j, and
//     one __syncthreads per tile both publishes a stage and frees the other (README: The pipeline).
//   * Each warp owns 16 x kMTiles rows (32 for D <= 128), so every K/V fragment read from shared
//     memory feeds kMTiles mmas; Br = 128 for D <= 128, as in FlashAttention-2.
//   * The scale is folded into the exponent instead of into Q: p = exp2(s * scale * log2(e) - m'),
//     one FFMA and one MUFU.EX2, because Q now stays in its 16-bit type from global to mma.
//   * At D = 128 a warp rescales O_i (128 FMULs per thread) only in key tiles where the max of
//     some of its rows grew (kLazyRescale, one vote): an unchanged max means alpha = 1 exactly,
//     and after the first few dozen tiles most tiles change no row's max.
// Expected effect: a ceiling ~10x higher than 05's (mma.sync bf16 ~645 TFLOP/s on an H100 against
// 67 for FFMA). What now decides how close we get is feeding the tensor cores: the softmax
// (MUFU.EX2 does 16 per clock per SM) and the shared-memory reads must hide behind the mmas of
// the other warps, with 8 warps per SM at most (README: Results).
// Layout: this file is the chapter's kernel. common/fa2_tiles/ holds what 07-10 build on too:
// tile_math.cuh its arguments, tile sizes and the steps of one key tile (copy_tile, tile_scores,
// mask_scores, softmax_step, accumulate_pv, write_rows), block.cuh the tiles per head dim, the
// block's inputs and the launch. steps/ holds the step-by-step versions, Hopper's copy-engine
// K/V (v7_tma_kv) and the alternatives the chapter measures and does not ship.
// Run:  ./build/06_tensor_core/06_tensor_core --seqlen 4096 --head-dim 128 --dtype bf16

#pragma once

#include <cstdint>

#include "common/fa2_tiles/block.cuh"      // ChapterConfig, BlockInputs, query_tile, launch_on_grid
#include "common/fa2_tiles/tile_math.cuh"  // Params, Config and the steps of one key tile

namespace tensor_core {

using namespace fa2;  // the tiles and the steps of one key tile (common/fa2_tiles/)

// grid: Tr along x by B*H rows over y and z; block: 4 warps. Warp w owns rows
// [16 kMTiles w, 16 kMTiles (w+1)) of Q_i. kBshd: [B, S, H, D] tensors (BlockInputs).
template <class C, bool kBshd = false>
__global__ void __launch_bounds__(C::kThreads, 2) tensor_core_kernel(const Params prm) {
  if (fa::cuda::grid_row() >= prm.batch_heads) return;  // a spare block of the grid
  constexpr int kCols = C::kCols, Br = C::Br, Bc = C::Bc, kD = C::kD;
  constexpr int kTileBytes = Bc * kCols * 2;  // one K or V stage
  extern __shared__ __align__(128) unsigned char smem[];
  const std::uint32_t Q_s = smem_u32(smem);                    // (Br, kCols) smem: Q_i
  const std::uint32_t K_s = Q_s + Br * kCols * 2;              // (kStages, Bc, kCols) smem: K_j
  const std::uint32_t V_s = K_s + C::kStages * kTileBytes;     // (kStages, Bc, kCols) smem: V_j
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int g = lane / 4, t = lane % 4;  // fragment coordinates (mma.cuh)
  const int i_tile = query_tile(prm), i0 = i_tile * Br;
  const BlockInputs<C, kBshd> in(prm, i0);
  const int Sq = prm.seqlen_q, Sk = prm.seqlen_k, D = head_dim_of<C>(prm);  // D <= kD: the tile is zero-padded

  const int Tc_end = key_tile_end(i_tile, Br, Bc, Sq, Sk, prm.causal);
  const int row0 = 16 * C::kMTiles * warp;  // this warp's first row of Q_i

  // Prologue: Q_i in one group, K_0 and V_0 in the next.
  in.copy_q(Q_s, Sq - i0, D);
  cp_async_commit();
  if (Tc_end > 0) in.copy_kv(K_s, V_s, 0, Sk, D);
  cp_async_commit();

  // ldmatrix row addresses (swizzle.h): one offset per lane and order, the rest is constant.
  const int lane_a = ldsm_lane_offset(lane, LdsmOrder::kRowsFirst, kCols, C::kSwizzle);  // Q, V
  const int lane_b = ldsm_lane_offset(lane, LdsmOrder::kColsFirst, kCols, C::kSwizzle);  // K
  const std::uint32_t Q_w = Q_s + 2 * row0 * kCols;  // this warp's rows of Q_i

  // Q_i's A fragments: loaded once if they fit in registers, else re-read at every key tile.
  QFrags<C> q_frag;
  if constexpr (C::kQInRegs) {
    cp_async_wait<1>();  // this thread's copies of Q_i have landed (K_0, V_0 may still fly)
    __syncthreads();     // ... and everyone's
#pragma unroll
    for (int mt = 0; mt < C::kMTiles; ++mt)
#pragma unroll
      for (int ks = 0; ks < kD / 16; ++ks) ldmatrix_x4(q_frag[mt][ks], Q_w + ldsm_address(lane_a, 16 * mt, 16 * ks, kCols));
  }

  WarpRows<C> w;
  for (int j_tile = 0; j_tile < Tc_end; ++j_tile) {
    const int j0 = j_tile * Bc;
    if constexpr (C::kStages == 1) {
      if (j_tile > 0) {
        __syncthreads();  // every warp is done with K_{j-1}, V_{j-1}: their buffers are free
        in.copy_kv(K_s, V_s, j0, Sk - j0, D);
        cp_async_commit();
      }
    }
    const int stage = C::kStages == 2 ? j_tile % 2 : 0;
    cp_async_wait<0>();  // this thread's copies of K_j, V_j (and Q_i) have landed
    __syncthreads();     // ... and everyone's; and every warp is done with tile j-1's stage
    if constexpr (C::kStages == 2) {
      if (j_tile + 1 < Tc_end) {  // K_{j+1}, V_{j+1} fly while tile j is computed
        const std::uint32_t next = (1 - stage) * kTileBytes;
        in.copy_kv(K_s + next, V_s + next, j0 + Bc, Sk - j0 - Bc, D);
      }
      cp_async_commit();
    }
    ScoreTile<C> S_ij;
    tile_scores<C>(S_ij, q_frag, Q_w, K_s + stage * kTileBytes, lane_a, lane_b);
    // Only the last partial key tile and the causal diagonal tiles pay for the element mask.
    if (needs_mask(i_tile, j_tile, Br, Bc, Sq, Sk, prm.causal)) mask_scores<C>(S_ij, i0 + row0 + g, j0, t, prm);
    PTile<C> P_ij;
    softmax_step<C>(S_ij, P_ij, w, prm.scale_log2);
    accumulate_pv<C>(w, P_ij, V_s + stage * kTileBytes, lane_a);
  }
  write_rows<C, kBshd>(w, prm, in.bh, i0 + row0 + g, t);
}

template <class C, bool kBshd = false>
void launch(const Params& prm, cudaStream_t stream) {
  static_assert(!C::kTmaKV, "the copy engine's K/V pipeline is step v7_tma_kv (steps/tma_kv.cuh)");
  launch_on_grid<C, tensor_core_kernel<C, kBshd>>(prm, stream, "06_tensor_core");
}

}  // namespace tensor_core
