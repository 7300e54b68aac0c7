// Chapter 06's step v7_tma_kv (tiles.md: "The copy-engine path on Hopper"): the chapter's kernel
// with K_j and V_j brought by Hopper's copy engine (TMA) instead of 16 cp.async per thread and
// tile. Thread 0 issues each tile's box loads onto the stage's mbarrier; everyone waits on that
// barrier instead of on cp.async groups. Q_i keeps cp.async. sm_90 only, [B, H, S, D], the 64 and
// 128 tiles (Config::kTmaKV). Chapter 09 builds its whole pipeline this way; here it is one step
// of the mma.sync kernel, so its gain can be measured on its own (README: How we got here).
#pragma once

#include <cstdint>

#include "06_tensor_core/tensor_core.cuh"
#include "common/device/tma.cuh"  // mbarriers, TMA loads, CUtensorMap

namespace tensor_core::steps {

// K and V as [B * Hkv][Sk][D], boxes of Bc rows x 64 columns (rows past Sk and columns past D land
// as zeros): kernel parameters (__grid_constant__).
struct KVMaps {
  CUtensorMap k, v;
};

// One thread: K_j and V_j (keys j0 .. j0 + Bc - 1 of matrix kv_bh) into one stage as the copy
// engine's 64-column panels, counted on the stage's mbarrier `full`.
template <class C>
__device__ __forceinline__ void copy_kv_tma(const KVMaps& maps, std::uint32_t K_dst, std::uint32_t V_dst,
                                            std::uint32_t full, int j0, std::int64_t kv_bh) {
  mbarrier_arrive_expect_tx(full, 2 * C::Bc * C::kD * 2);  // whole boxes, zero-filled parts included
#pragma unroll
  for (int a = 0; a < C::kD / 64; ++a) {  // panel a: columns 64a .. 64a + 63, Bc rows of 128 bytes
    tma_load_3d(K_dst + a * C::Bc * 128, &maps.k, 64 * a, j0, static_cast<int>(kv_bh), full);
    tma_load_3d(V_dst + a * C::Bc * 128, &maps.v, 64 * a, j0, static_cast<int>(kv_bh), full);
  }
}

// tensor_core_kernel with the copy engine's K/V pipeline; the tile functions are the chapter's.
// The tiles start on a 1024-byte boundary (the 128-byte swizzle's period; Config::kSmemBytes keeps
// 1024 bytes of room) and the two mbarriers follow them.
template <class C>
__global__ void __launch_bounds__(C::kThreads, 2) tma_kv_kernel(const Params prm, const __grid_constant__ KVMaps maps) {
  static_assert(C::kTmaKV);
  if (fa::cuda::grid_row() >= prm.batch_heads) return;  // a spare block of the grid
  constexpr int kCols = C::kCols, Br = C::Br, Bc = C::Bc;
  constexpr int kTileBytes = Bc * kCols * 2;  // one K or V stage
  extern __shared__ __align__(128) unsigned char smem[];
  const std::uint32_t Q_s = (smem_u32(smem) + 1023u) & ~1023u;  // (Br, kCols) smem: Q_i
  const std::uint32_t K_s = Q_s + Br * kCols * 2;                // (2, Bc, kCols) smem: K_j
  const std::uint32_t V_s = K_s + 2 * kTileBytes;                // (2, Bc, kCols) smem: V_j
  const std::uint32_t full = V_s + 2 * kTileBytes;               // one mbarrier per stage
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int g = lane / 4, t = lane % 4;
  const int i_tile = query_tile(prm), i0 = i_tile * Br;
  const BlockInputs<C> in(prm, i0);
  const int Sq = prm.seqlen_q, D = head_dim_of<C>(prm);
  const int Tc_end = key_tile_end(i_tile, Br, Bc, Sq, prm.seqlen_k, prm.causal);
  const int row0 = 16 * C::kMTiles * warp;
  const std::int64_t kv_bh = in.bh / prm.group_size;  // the matrix of K and V

  // Prologue: Q_i by cp.async; K_0, V_0 by the copy engine onto stage 0's barrier.
  in.copy_q(Q_s, Sq - i0, D);
  cp_async_commit();
  if (threadIdx.x == 0) mbarrier_init_stages(full, 2);
  __syncthreads();  // the barriers are set up before anyone waits on them
  if (threadIdx.x == 0 && Tc_end > 0) copy_kv_tma<C>(maps, K_s, V_s, full, 0, kv_bh);
  cp_async_wait<0>();  // this thread's copies of Q_i (the loop's first barrier publishes them)

  // K's and V's ldmatrix offsets are taken for the copy engine's 64-column panels.
  const int lane_a = ldsm_lane_offset(lane, LdsmOrder::kRowsFirst, kCols, C::kSwizzle);  // Q
  const int lane_v = ldsm_lane_offset(lane, LdsmOrder::kRowsFirst, 64, C::kSwizzle);     // V
  const int lane_b = ldsm_lane_offset(lane, LdsmOrder::kColsFirst, 64, C::kSwizzle);     // K
  const std::uint32_t Q_w = Q_s + 2 * row0 * kCols;
  QFrags<C> q_frag;  // unused: Q_i is re-read from shared memory (kQInRegs = false)

  WarpRows<C> w;
  for (int j_tile = 0; j_tile < Tc_end; ++j_tile) {
    const int j0 = j_tile * Bc, stage = j_tile % 2;
    __syncthreads();  // every warp is done with tile j-1's stage, which K_{j+1}, V_{j+1} overwrite
    if (threadIdx.x == 0 && j_tile + 1 < Tc_end)
      copy_kv_tma<C>(maps, K_s + (1 - stage) * kTileBytes, V_s + (1 - stage) * kTileBytes, full + 8 * (1 - stage),
                     j0 + Bc, kv_bh);
    mbarrier_wait(full + 8 * stage, j_tile / 2 % 2);  // K_j, V_j have landed (the stage's use j_tile / 2)
    ScoreTile<C> S_ij;
    tile_scores<C>(S_ij, q_frag, Q_w, K_s + stage * kTileBytes, lane_a, lane_b);
    if (needs_mask(i_tile, j_tile, Br, Bc, Sq, prm.seqlen_k, prm.causal)) mask_scores<C>(S_ij, i0 + row0 + g, j0, t, prm);
    PTile<C> P_ij;
    softmax_step<C>(S_ij, P_ij, w, prm.scale_log2);
    accumulate_pv<C>(w, P_ij, V_s + stage * kTileBytes, lane_v);
  }
  write_rows<C>(w, prm, in.bh, i0 + row0 + g, t);
}

// The host side: the two tensor maps (built per call: a few microseconds of driver work), then the
// launch on the chapter's grid. k, v: [B, Hkv, Sk, D] in T.
template <class C>
void launch_tma_kv(const Params& prm, const void* k, const void* v, bool bf16, std::int64_t batch_kv_heads,
                   cudaStream_t stream) {
  fa::cuda::require_compute_capability(90, "06_tensor_core.v7_tma_kv", "it uses the copy engine (TMA) and mbarriers");
  const KVMaps maps{fa::cuda::make_tma(k, bf16, batch_kv_heads, prm.seqlen_k, prm.head_dim, C::Bc, 64),
                    fa::cuda::make_tma(v, bf16, batch_kv_heads, prm.seqlen_k, prm.head_dim, C::Bc, 64)};
  launch_on_grid<C, tma_kv_kernel<C>>(prm, stream, "06_tensor_core.v7_tma_kv", maps);
}

}  // namespace tensor_core::steps
