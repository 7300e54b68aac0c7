// Chapter 06's step alt_pingpong (steps.md: "Two groups take turns"), an alternative the chapter
// measures and does not ship: the chapter's tile functions (tensor_core.cuh) run by 8 warps in two
// groups of 4 that take turns on the tensor cores, as FlashAttention-3 does with warpgroups.
// 13-21% slower than the same tiles in 4 warps on an H100 (README: How we got here).
#pragma once

#include <type_traits>

#include "06_tensor_core/tensor_core.cuh"

namespace tensor_core::steps {

// A configuration C of the chapter's kernel, run by 8 warps: Br doubles (two groups of 4 warps,
// 128 rows each) and K/V stay double-buffered in shared memory, read by both groups.
template <class C>
struct PingPong : C {
  static constexpr int kWarps = 8;
  static constexpr int kThreads = 32 * kWarps;
  static constexpr int Br = 16 * C::kMTiles * kWarps;
  static constexpr int kSmemBytes = (Br + 2 * 2 * C::Bc) * C::kCols * 2;
  static_assert(C::kStages == 2 && C::kSwizzle && !C::kQInRegs, "the turns need the double buffer and Q_i in smem");
};
template <class C>
struct IsPingPong : std::false_type {};
template <class C>
struct IsPingPong<PingPong<C>> : std::true_type {};

// Ping-pong (steps.md: "Two groups take turns"): 8 warps, two groups of 4 with 128 rows of Q_i
// each (Br = 256), sharing every K/V tile. A group's turn s is its mma work of one step:
// O += P_{s-1} V_{s-1}, then S_s = Q K_s^T; its softmax of S_s runs while the other group takes
// its turn. Turns alternate through two named barriers (group g waits on barrier 1 + g and lets
// the other go by arriving on barrier 2 - g), so the tensor cores always have one group's mmas
// while the other's exp2, max and shuffles fill the issue slots in between.
// Shared memory: stage s % 2 holds K_s and V_{s-1}, what turn s reads. Group 0 copies them at the
// start of its turn s - 1: by then both groups' turns s - 2 are done (the barriers order them),
// which frees the stage; group 0 waits for its copies before its turn s, and group 1 reads them
// only after group 0's turn s, so the barriers publish them too. kGroup is a template argument
// so that each group's code has its barrier numbers and its share of the copies built in.
template <class C, int kGroup>
__device__ __forceinline__ void pingpong_turns(const Params& prm, const BlockInputs<C>& in, int i_tile,
                                               std::uint32_t Q_s, std::uint32_t K_s, std::uint32_t V_s) {
  constexpr int kCols = C::kCols, Br = C::Br, Bc = C::Bc, kD = C::kD;
  constexpr int kGroupRows = Br / 2, kGroupThreads = C::kThreads / 2;
  constexpr int kTileBytes = Bc * kCols * 2;  // one K or V stage
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int g = lane / 4, t = lane % 4;
  const int Sq = prm.seqlen_q, Sk = prm.seqlen_k;
  const int Tc_end = key_tile_end(i_tile, Br, Bc, Sq, Sk, prm.causal);  // the block's key tiles
  // The group's rows as a tile of their own: under causal masking group 0 sees fewer key tiles
  // (its turns past them are empty, but still taken, so that the turns keep alternating).
  const int group_tile = 2 * i_tile + kGroup;
  const int my_end = key_tile_end(group_tile, kGroupRows, Bc, Sq, Sk, prm.causal);
  const int row0 = 16 * C::kMTiles * warp;  // this warp's first row of Q_i
  const int lane_a = ldsm_lane_offset(lane, LdsmOrder::kRowsFirst, kCols, true);  // Q, V
  const int lane_b = ldsm_lane_offset(lane, LdsmOrder::kColsFirst, kCols, true);  // K
  const std::uint32_t Q_w = Q_s + 2 * row0 * kCols;
  const QFrags<C> q_frag = {};  // unused: Q_i is read from shared memory
  WarpRows<C> w;
  PTile<C> P_ij;  // the softmax of step s, consumed by turn s + 1

  // Turn s begins with group 0 copying K_{s+1} and V_s into the other stage, and ends by
  // handing the tensor cores over (group 1's last turn hands over nothing: no turn follows).
  auto begin_turn = [&](int s) {
    if constexpr (kGroup == 0) cp_async_wait<0>();  // K_s, V_{s-1}: copied in turn s - 1
    barrier_sync<1 + kGroup>(C::kThreads);
    if constexpr (kGroup == 0) {
      if (s < Tc_end) {
        const std::uint32_t next = (1 - s % 2) * kTileBytes;
        const int j0 = s * Bc;
        if (s + 1 < Tc_end) copy_tile<C, Bc, kGroupThreads>(K_s + next, in.K + (j0 + Bc) * kD, Sk - j0 - Bc);
        copy_tile<C, Bc, kGroupThreads>(V_s + next, in.V + j0 * kD, Sk - j0);
        cp_async_commit();
      }
    }
  };
  auto end_turn = [&](int s) {
    if (kGroup == 0 || s < Tc_end) barrier_arrive<2 - kGroup>(C::kThreads);
  };

  if constexpr (kGroup == 1) barrier_arrive<1>(C::kThreads);  // group 0 takes the first turn
  int s = 0;
  for (; s < my_end; ++s) {  // the group's steps: turn s, then the softmax of S_s
    const std::uint32_t stage = (s % 2) * kTileBytes;
    begin_turn(s);
    if (s > 0) accumulate_pv<C>(w, P_ij, V_s + stage, lane_a);
    ScoreTile<C> S_ij;
    tile_scores<C>(S_ij, q_frag, Q_w, K_s + stage, lane_a, lane_b);
    end_turn(s);
    if (needs_mask(group_tile, s, kGroupRows, Bc, Sq, Sk, prm.causal))
      mask_scores<C>(S_ij, i_tile * Br + row0 + g, s * Bc, t, prm);
    softmax_step<C>(S_ij, P_ij, w, prm.scale_log2);
  }
  begin_turn(s);  // the last P V
  if (s > 0) accumulate_pv<C>(w, P_ij, V_s + (s % 2) * kTileBytes, lane_a);
  end_turn(s);
  for (++s; s <= Tc_end; ++s) begin_turn(s), end_turn(s);  // group 0 under causal masking: empty turns
  write_rows<C>(w, prm, in.bh, i_tile * Br + row0 + g, t);
}

template <class C>
__global__ void __launch_bounds__(C::kThreads, 1) pingpong_kernel(const Params prm) {
  static_assert(C::kWarps == 8);
  if (fa::cuda::grid_row() >= prm.batch_heads) return;  // a spare block of the grid
  constexpr int kCols = C::kCols, Br = C::Br, Bc = C::Bc;
  extern __shared__ __align__(128) unsigned char smem[];
  const std::uint32_t Q_s = smem_u32(smem);                 // (Br, kCols) smem: Q_i
  const std::uint32_t K_s = Q_s + Br * kCols * 2;           // (2, Bc, kCols) smem: K_s in stage s % 2
  const std::uint32_t V_s = K_s + 2 * Bc * kCols * 2;       // (2, Bc, kCols) smem: V_{s-1} in stage s % 2
  const int i_tile = query_tile(prm), i0 = i_tile * Br;
  const BlockInputs<C> in(prm, i0);
  copy_tile<C, Br>(Q_s, in.Q, prm.seqlen_q - i0);  // Q_i and K_0, by all 256 threads
  if (key_tile_end(i_tile, Br, Bc, prm.seqlen_q, prm.seqlen_k, prm.causal) > 0) copy_tile<C, Bc>(K_s, in.K, prm.seqlen_k);
  cp_async_commit();
  cp_async_wait<0>();
  __syncthreads();
  if (threadIdx.x < C::kThreads / 2) pingpong_turns<C, 0>(prm, in, i_tile, Q_s, K_s, V_s);
  else pingpong_turns<C, 1>(prm, in, i_tile, Q_s, K_s, V_s);
}

template <class C>
void launch_pingpong(const Params& prm, cudaStream_t stream) {
  launch_on_grid<C, pingpong_kernel<C>>(prm, stream, "06_tensor_core (steps)");
}

}  // namespace tensor_core::steps
