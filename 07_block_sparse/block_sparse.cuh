// Chapter 07 -- block-sparse attention: chapter 06's kernel, walking a list of active key blocks.
//
// New since 06 (diff the kernel below against tensor_core_kernel in 06_tensor_core/tensor_core.cuh):
//   * A block mask says, per (batch, head, query block of Br = 128 rows), which key blocks of
//     64 or 128 keys are active. The host stores it CSR-style (block_mask.h): row_offsets[row] ..
//     row_offsets[row + 1] index the row's active key blocks in col_indices, ascending.
//   * The key loop walks that list instead of 0 .. Tc_end - 1: step n is kernel tile
//     walk_tile(cols, n) (a 128-key block is two 64-key tiles). K and V of an inactive block are
//     never loaded, and no mma runs for it.
//   * Causal masking and the last partial key tile cut the walk (walk_length, sparse_tiles.h):
//     the list is sorted, so the tiles a row can see are a prefix of it. Diagonal tiles keep the
//     element mask, as before; a block mask needs none, because its blocks are whole tiles.
//   * The prefetch follows the list: the K_j, V_j in flight during a tile are the next *active*
//     tile's.
//   Everything else is 06's, called, not copied: its Config and tiles, copy_tile, tile_scores,
//   mask_scores, softmax_step, accumulate_pv and write_rows.
// Expected effect: the time of a query block is proportional to its active tiles: density 1.0
// runs like 06, density 0.1 about 10x faster (README: Results).
// Run:  ./build/07_block_sparse/07_block_sparse --seqlen 8192 --head-dim 128 --pattern random --density 0.25

#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

#include "common/fa2_tiles/block.cuh"
#include "07_block_sparse/block_mask.h"  // kBlockQ
#include "07_block_sparse/sparse_tiles.h"
#include "common/cuda/cuda_check.h"
#include "common/device/grid.cuh"
#include "common/host/problem.h"

namespace block_sparse {

// 06's tile math, instruction wrappers and shared-memory layout.
using namespace fa2;

// 06's arguments and the block mask.
struct Params : fa2::Params {
  const int* row_offsets;  // [B * H * Tq + 1] the block mask's CSR rows (Tq = ceil(Sq / kBlockQ))
  const int* col_indices;  // [nnz] each row's active key blocks, ascending
};

// 06's kernel with the key loop over the active tiles (the lines marked "07:" are new).
// grid: Tr along x by B*H rows over y and z; block: 4 warps, each owning 16 kMTiles rows of Q_i.
// kTpb: kernel tiles of Bc keys per mask key block (1, 2 or 4), a constant so that walk_tile's
// division is a shift and costs no register. A mask query block is kBlockQ / Br grid blocks
// (1; 2 for head dims above 128, where 06's tiles have Br = 64).
template <class C, int kTpb, bool kBshd = false>
__global__ void __launch_bounds__(C::kThreads, 2) block_sparse_kernel(const Params prm) {
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
  static_assert(kBlockQ % Br == 0, "a query block of the mask is whole blocks of the grid");
  // 07: this query block's active key blocks, cut to the tiles before Tc_end (sparse_tiles.h).
  // BEGIN SOLUTION: cols = this block's CSR row (b, h, query block i_tile / (kBlockQ / Br)) of active key blocks; n_end = walk_length(...) of it before Tc_end
  // STUB: const int* cols = prm.col_indices;
  // STUB: const int n_end = 0;
  // STUB: if (n_end == 0) return;  // the stub walks nothing and writes no O, no LSE
  const std::int64_t row = in.bh * ceil_div(Sq, kBlockQ) + i_tile / (kBlockQ / Br);  // the CSR row: (b, h, query block)
  const int* cols = prm.col_indices + prm.row_offsets[row];  // [count] key blocks, ascending
  const int n_end = walk_length(cols, prm.row_offsets[row + 1] - prm.row_offsets[row], kTpb, Tc_end);
  // END SOLUTION
  const int row0 = 16 * C::kMTiles * warp;  // this warp's first row of Q_i

  // Prologue: Q_i in one group, the first active K_j and V_j in the next.
  in.copy_q(Q_s, Sq - i0, D);
  cp_async_commit();
  if (n_end > 0) {
    const int j0 = walk_tile(cols, 0, kTpb) * Bc;  // 07: the first active tile
    in.copy_kv(K_s, V_s, j0, Sk - j0, D);
  }
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
  for (int n = 0; n < n_end; ++n) {  // 07: step n of the walk, not key tile n
    // Step n's tile and the next one's, read from the list before the wait (after the first
    // read of a 128-byte line of it, L1 hits: cp.async.cg bypasses L1 and leaves it to us).
    const int j_tile = walk_tile(cols, n, kTpb), j0 = j_tile * Bc;
    const int j_next = n + 1 < n_end ? walk_tile(cols, n + 1, kTpb) : 0;
    if constexpr (C::kStages == 1) {
      if (n > 0) {
        __syncthreads();  // every warp is done with K_{j-1}, V_{j-1}: their buffers are free
        in.copy_kv(K_s, V_s, j0, Sk - j0, D);
        cp_async_commit();
      }
    }
    cp_async_wait<0>();  // this thread's copies of K_j, V_j (and Q_i) have landed
    __syncthreads();     // ... and everyone's; and every warp is done with tile j-1's stage
    const int stage = C::kStages == 2 ? n % 2 : 0;
    if constexpr (C::kStages == 2) {
      if (n + 1 < n_end) {  // 07: the next *active* K_j, V_j fly while this tile is computed
        const std::uint32_t next = (1 - stage) * kTileBytes;
        const int j1 = j_next * Bc;
        in.copy_kv(K_s + next, V_s + next, j1, Sk - j1, D);
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

// The kernel's arguments: 06's (with 06's checks), and the mask's CSR lists.
inline Params make_params(const fa::Problem& p, const void* q, const void* k, const void* v, void* o,
                          float* lse, const int* row_offsets, const int* col_indices,
                          const char* chapter) {
  return {fa2::make_params(p, q, k, v, o, lse, chapter), row_offsets, col_indices};
}

template <class C, int kTpb>
void launch(const Params& prm, bool bshd, cudaStream_t stream) {
  if (bshd) launch_on_grid<C, block_sparse_kernel<C, kTpb, true>>(prm, stream, "07_block_sparse");
  else launch_on_grid<C, block_sparse_kernel<C, kTpb>>(prm, stream, "07_block_sparse");
}

}  // namespace block_sparse
