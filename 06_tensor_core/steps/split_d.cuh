// Chapter 06's step alt_split_d512 (steps.md: "Beyond 256: splitting the head dim"): head dim 512,
// which the chapter's tile cannot hold. There a warp owns whole rows of O_i, 16 x 512 fp32 = 256
// registers a thread, and Q_i, K_j, V_j of 64 x 512 in 16-bit are 64 KiB each. Here the two
// warps of a row pair split the head dim between them, and the chapter's tile functions
// (common/fa2_tiles/tile_math.cuh) run on the halves:
//   * 8 warps, Br = Bc = 64. Warps w and w + 4 own the same 16 rows of Q_i; group 0 (warps 0-3)
//     computes keys 0-31 of S_ij, group 1 keys 32-63, each over the whole head dim (tile_scores:
//     S accumulated over 32 head-dim chunks of 16).
//   * The row max of S_ij is exchanged through shared memory, so both warps of a pair keep the
//     same running max m_i; each sums its own keys into l_i, and l_a + l_b is formed once at the
//     end (valid because both are relative to the same m_i).
//   * P_ij (16 x 64 a pair) goes through shared memory (chapter: it stays in registers), so that
//     each warp can multiply all 64 keys into its half of O_i: group 0 keeps columns 0-255 of
//     O_i, group 1 columns 256-511 (accumulate_pv: O kept in head-dim chunks), 128 registers.
//   * Q_i, K_j, V_j and P_ij in 201 KiB of shared memory, one block per SM; V_j is copied while
//     S_ij is computed, K_{j+1} while P_ij V_j is. Three __syncthreads per key tile.
// Expected effect: D = 512 runs at all (the chapter stops at 256), with no spills. An estimate of
// its rate: a warp reads 164 ldmatrix.x4 (82 KiB) per key tile for 256 mmas, 328 bytes of shared
// memory per mma (the chapter: 320 at D = 256, 160 at D = 128); at 128 bytes per clock an SM
// issues at most ~0.4 mma per clock, about 65% of the mma.sync ceiling, and with one block per SM
// nothing hides the three barriers. H100 numbers: the README's steps table (How we got here).
// Run:  ./build/06_tensor_core/06_tensor_core_steps_bench --step alt_split_d512 --head-dims 512
//
// Step alt_split_d576_512 is the same kernel with 64 more head dims for Q and K than for V
// (DeepSeek's MLA: S over 576 dims, O over 512): Q_i and K_j's last 64 columns sit in tiles of
// their own, 64 wide, and tile_scores adds their share into S_ij (kAccumulate). 217 KiB of shared
// memory.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <limits>

#include "06_tensor_core/tensor_core.cuh"
#include "common/device/warp_reduce.cuh"

namespace tensor_core::steps {

// Head dim 512 in bf16 or f16 (and kExtra more for Q and K). The block: Br = 64 rows (4 row groups
// of 16) by 8 warps, Bc = 64. Scores and Values are the views of the two products as
// configurations of the chapter's tile functions, so that tile_scores, mask_scores and
// accumulate_pv run on a warp's share as is.
template <class T_, int kExtra_ = 0>
struct SplitD512 : Config<T_, 512, 64, 1> {
  using Base = Config<T_, 512, 64, 1>;
  static constexpr int kWarps = 8;  // warp w: rows 16 (w % 4) .. +15, group w / 4
  static constexpr int kThreads = 32 * kWarps;
  static constexpr int Br = 64, Bc = 64;
  static constexpr int kGroupKeys = Bc / 2;        // S_ij: a group's keys
  static constexpr int kGroupCols = Base::kD / 2;  // O_i: a group's columns
  // S_ij of one warp: 16 rows x its group's 32 keys, over all 512 dims (K_j's rows of the group).
  using Scores = Config<T_, 512, kGroupKeys, 1>;
  // O_i of one warp: 16 rows x its group's 256 columns, P_ij over all 64 keys; V_j's shared rows
  // stay 512 wide (kCols), the group's columns are folded into its lane offset.
  struct Values : Config<T_, kGroupCols, Bc, 1> {
    static constexpr int kCols = Base::kCols;
  };
  // Q and K's head dims beyond V's 512 (0, or 64 for MLA's 576), global rows of kDqk.
  static constexpr int kExtra = kExtra_;
  static constexpr int kDqk = Base::kD + kExtra;
  static constexpr int kExtraCols = kExtra > 0 ? kExtra : 16;  // (a valid Config when unused)
  // S_ij's share over the extra dims: their own (Br, kExtra) and (Bc, kExtra) tiles.
  using ExtraScores = Config<T_, kExtraCols, kGroupKeys, 1>;
  // Copying those tiles with all 8 warps.
  struct ExtraTile : Config<T_, kExtraCols, Bc, 1> {
    static constexpr int kThreads = 32 * kWarps;
  };
  // Q_i, K_j, V_j, P_ij in T; each group's row maxima, then row sums, in fp32; the extra tiles.
  static constexpr int kSmemBytes =
      (Br + 2 * Bc) * Base::kCols * 2 + Br * Bc * 2 + 2 * 2 * Br * 4 + (Br + Bc) * kExtra * 2;
  static_assert(Base::kSwizzle && !Base::kQInRegs && !Base::kPadded && Base::kCols == 512);
  static_assert(kExtra == 0 || (kExtra % 64 == 0 && ExtraScores::kCols == kExtra));
};

// The row max of this warp's keys of S_ij (a quad's, as in softmax_step), published for the other
// warp of its row pair. m_part: this group's (Br) row maxima in smem; row: the lane's first row.
template <class C>
__device__ __forceinline__ void publish_row_max(const ScoreTile<typename C::Scores>& S, float* m_part, int row, int t) {
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float m = -std::numeric_limits<float>::infinity();
#pragma unroll
    for (int nt = 0; nt < C::kGroupKeys / 8; ++nt) m = fmaxf(m, fmaxf(S[0][nt][2 * h], S[0][nt][2 * h + 1]));
    m = warp_max<4>(m);
    if (t == 0) m_part[row + 8 * h] = m;
  }
}

// softmax_step for a row pair. softmax_step cannot be reused as is: it takes the row max over the
// quad, which here sees only half of the row's keys. The new max is the larger of both groups'
// (m_s: (2, Br) smem), the same in both warps, so their alphas, P_ij and l_i are relative to the
// same m_i. O *= alpha on this group's columns; P_ij goes to shared memory in T (P_b, at
// pair_address from p_store, the lane's first pair), for both groups' P V. w.l sums this group's
// keys only.
template <class C>
__device__ __forceinline__ void split_softmax_step(const ScoreTile<typename C::Scores>& S, WarpRows<typename C::Values>& w,
                                                   const float* m_s, unsigned char* P_b, int p_store, int row,
                                                   float scale_log2) {
  constexpr float kInf = std::numeric_limits<float>::infinity();
  float m_scaled[2], alpha[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    // w.m in exp2 units, rounded once, as softmax_step keeps it: alpha = 1 exactly when m holds.
    const float m = fmaxf(w.m[0][h], __fmul_rn(fmaxf(m_s[row + 8 * h], m_s[C::Br + row + 8 * h]), scale_log2));
    // No key seen yet (m = -inf): subtract 0 instead, so exp2(-inf - (-inf)) = NaN never happens.
    m_scaled[h] = m == -kInf ? 0.0f : m;
    alpha[h] = fast_exp2(w.m[0][h] - m_scaled[h]);  // rescales earlier tiles
    w.m[0][h] = m;
  }
#pragma unroll
  for (int nt = 0; nt < C::kGroupCols / 8; ++nt)
#pragma unroll
    for (int e = 0; e < 4; ++e) w.O[0][nt][e] *= alpha[e / 2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float sum = 0.0f;
#pragma unroll
    for (int nt = 0; nt < C::kGroupKeys / 8; ++nt) {
      // exp(scale (s - m)) = exp2(s * scale * log2e - m * scale * log2e): one FFMA + MUFU.EX2
      const float p0 = fast_exp2(fmaf(S[0][nt][2 * h], scale_log2, -m_scaled[h]));
      const float p1 = fast_exp2(fmaf(S[0][nt][2 * h + 1], scale_log2, -m_scaled[h]));
      sum += p0 + p1;
      *reinterpret_cast<std::uint32_t*>(P_b + pair_address(p_store, 8 * h, 8 * nt, C::Bc)) = pack2<typename C::T>(p0, p1);
    }
    w.l[0][h] = w.l[0][h] * alpha[h] + sum;
  }
}

// grid: Tr along x by B*H rows over y and z; block: 8 warps. Warp w owns rows [16 (w % 4), +16)
// of Q_i; group w / 4 owns keys [32 group, +32) of S_ij and columns [256 group, +256) of O_i.
template <class C>
__global__ void __launch_bounds__(C::kThreads, 1) split_d_kernel(const Params prm) {
  if (fa::cuda::grid_row() >= prm.batch_heads) return;  // a spare block of the grid
  using Sc = typename C::Scores;
  using Va = typename C::Values;
  constexpr int kCols = C::kCols, Br = C::Br, Bc = C::Bc, kD = C::kD;
  extern __shared__ __align__(128) unsigned char smem[];
  const std::uint32_t Q_s = smem_u32(smem);           // (Br, kCols) smem: Q_i
  const std::uint32_t K_s = Q_s + Br * kCols * 2;     // (Bc, kCols) smem: K_j
  const std::uint32_t V_s = K_s + Bc * kCols * 2;     // (Bc, kCols) smem: V_j
  unsigned char* const P_b = smem + (Br + 2 * Bc) * kCols * 2;    // (Br, Bc) smem: P_ij in T
  const std::uint32_t P_s = smem_u32(P_b);
  float* const m_s = reinterpret_cast<float*>(P_b + Br * Bc * 2);  // (2, Br) smem: each group's row max of S_ij
  float* const l_s = m_s + 2 * Br;                                  // (2, Br) smem: each group's row sum, at the end
  const std::uint32_t Qx_s = smem_u32(l_s + 2 * Br);                // (Br, kExtra) smem: Q_i's extra dims
  const std::uint32_t Kx_s = Qx_s + Br * C::kExtra * 2;             // (Bc, kExtra) smem: K_j's extra dims
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int g = lane / 4, t = lane % 4;  // fragment coordinates (mma.cuh)
  const int group = warp / 4;            // 0: keys 0-31 of S_ij, columns 0-255 of O_i; 1: the rest
  const int row0 = 16 * (warp % 4);      // this warp's first row of Q_i, shared with warp w +- 4
  const int i_tile = query_tile(prm), i0 = i_tile * Br;
  const int Sq = prm.seqlen_q, Sk = prm.seqlen_k;
  const int Tc_end = key_tile_end(i_tile, Br, Bc, Sq, Sk, prm.causal);
  // Global rows: Q and K of kDqk, V and O of kD (BlockInputs' with two head dims).
  using T = typename C::T;
  constexpr int kDqk = C::kDqk;
  const std::int64_t bh = fa::cuda::grid_row(), kv_bh = bh / prm.group_size;
  const T* Q = static_cast<const T*>(prm.q) + (bh * Sq + i0) * kDqk;  // (Br, kDqk) global: Q_i
  const T* K = static_cast<const T*>(prm.k) + kv_bh * Sk * kDqk;      // (Sk, kDqk) global
  const T* V = static_cast<const T*>(prm.v) + kv_bh * Sk * kD;        // (Sk, kD) global
  // K_j (from key j0) into the K tiles: its first 512 dims, and the extra ones.
  auto copy_keys = [&](int j0) {
    copy_tile<C, Bc>(K_s, K + std::int64_t{j0} * kDqk, Sk - j0, kDqk);
    if constexpr (C::kExtra > 0)
      copy_tile<typename C::ExtraTile, Bc>(Kx_s, K + std::int64_t{j0} * kDqk + kD, Sk - j0, kDqk);
  };

  // Prologue: Q_i and K_0 in one group (a block whose rows see no key copies nothing).
  if (Tc_end > 0) {
    copy_tile<C, Br>(Q_s, Q, Sq - i0, kDqk);
    if constexpr (C::kExtra > 0) copy_tile<typename C::ExtraTile, Br>(Qx_s, Q + kD, Sq - i0, kDqk);
    copy_keys(0);
  }
  cp_async_commit();

  // ldmatrix row addresses (swizzle.h), with the warp's corner of each tile folded in.
  const int lane_a = ldsm_lane_offset(lane, LdsmOrder::kRowsFirst, kCols, true);
  const std::uint32_t Q_w = Q_s + 2 * row0 * kCols;                   // the warp's rows of Q_i
  const std::uint32_t K_w = K_s + 2 * C::kGroupKeys * group * kCols;  // the group's keys of K_j
  const int lane_b = ldsm_lane_offset(lane, LdsmOrder::kColsFirst, kCols, true);
  const int lane_v = ldsm_warp_offset(lane_a, 0, C::kGroupCols * group, kCols);  // the group's columns of V_j
  const std::uint32_t P_w = P_s + 2 * row0 * Bc;                      // the warp's rows of P_ij, all 64 keys
  const int lane_p = ldsm_lane_offset(lane, LdsmOrder::kRowsFirst, Bc, true);
  const int p_store = 2 * tile_offset(row0 + g, C::kGroupKeys * group + 2 * t, Bc, true);  // this lane's P_ij pairs
  const QFrags<Sc> q_frag = {};  // unused: Q_i is read from shared memory
  // The same corners in the extra tiles (rows of kExtra).
  const int lane_ax = ldsm_lane_offset(lane, LdsmOrder::kRowsFirst, C::kExtraCols, true);
  const int lane_bx = ldsm_lane_offset(lane, LdsmOrder::kColsFirst, C::kExtraCols, true);
  const std::uint32_t Qx_w = Qx_s + 2 * row0 * C::kExtra;
  const std::uint32_t Kx_w = Kx_s + 2 * C::kGroupKeys * group * C::kExtra;

  WarpRows<Va> w;  // this group's columns of O_i; m_i shared by the row pair; l_i over this group's keys
  for (int j_tile = 0; j_tile < Tc_end; ++j_tile) {
    const int j0 = j_tile * Bc;
    cp_async_wait<0>();  // this thread's copies of K_j (and Q_i) have landed
    __syncthreads();     // ... and everyone's; and every warp is done with V_{j-1} and P_{j-1}
    copy_tile<C, Bc>(V_s, V + std::int64_t{j0} * kD, Sk - j0);  // V_j flies while S_ij is computed
    cp_async_commit();

    ScoreTile<Sc> S_ij;  // (16, 32): the warp's rows, the group's keys
    tile_scores<Sc>(S_ij, q_frag, Q_w, K_w, lane_a, lane_b);
    if constexpr (C::kExtra > 0)  // + the extra dims' share
      tile_scores<typename C::ExtraScores, true>(S_ij, q_frag, Qx_w, Kx_w, lane_ax, lane_bx);
    // Only the last partial key tile and the causal diagonal tiles pay for the element mask.
    if (needs_mask(i_tile, j_tile, Br, Bc, Sq, Sk, prm.causal))
      mask_scores<Sc>(S_ij, i0 + row0 + g, j0 + C::kGroupKeys * group, t, prm);
    publish_row_max<C>(S_ij, m_s + Br * group, row0 + g, t);
    __syncthreads();  // both groups' row maxima are published; and every warp is done with K_j
    if (j_tile + 1 < Tc_end)  // K_{j+1} flies during the softmax and P_ij V_j
      copy_keys(j0 + Bc);
    cp_async_commit();

    split_softmax_step<C>(S_ij, w, m_s, P_b, p_store, row0 + g, prm.scale_log2);
    cp_async_wait<1>();  // this thread's copies of V_j have landed (K_{j+1} may still fly)
    __syncthreads();     // ... and everyone's; and both groups' halves of P_ij are in shared memory
    PTile<Va> P_ij;      // (16, 64): the warp's rows, all keys, as A fragments
#pragma unroll
    for (int kk = 0; kk < Bc / 16; ++kk) ldmatrix_x4(P_ij[0][kk], P_w + ldsm_address(lane_p, 0, 16 * kk, Bc));
    accumulate_pv<Va>(w, P_ij, V_s, lane_v);
  }

  // Epilogue. write_rows cannot be reused as is: it assumes a warp holds whole rows of O_i and
  // the whole l_i. Here the row sum is l_a + l_b, through shared memory, and each group writes
  // its 256 columns; group 0 writes the LSE (natural log, as write_rows).
  const int row = row0 + g;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const float l = warp_sum<4>(w.l[0][h]);  // this group's keys of the row
    if (t == 0) l_s[Br * group + row + 8 * h] = l;
  }
  __syncthreads();  // both groups' row sums are published
  T* O_g = static_cast<T*>(prm.o) + bh * Sq * kD + C::kGroupCols * group;  // (Sq, kD) global, the group's columns
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int r = i0 + row + 8 * h;
    if (r >= Sq) continue;
    const float l = l_s[row + 8 * h] + l_s[Br + row + 8 * h];  // same order in both groups: same bits
    const float inv_l = l > 0.0f ? 1.0f / l : 0.0f;             // a row that sees no key: O = 0
#pragma unroll
    for (int nt = 0; nt < C::kGroupCols / 8; ++nt)  // a quad writes 16 contiguous bytes
      *reinterpret_cast<std::uint32_t*>(O_g + std::int64_t{r} * kD + 8 * nt + 2 * t) =
          pack2<T>(w.O[0][nt][2 * h] * inv_l, w.O[0][nt][2 * h + 1] * inv_l);
    if (group == 0 && t == 0)
      prm.lse[bh * Sq + r] = l > 0.0f ? w.m[0][h] * kLn2 + logf(l) : std::numeric_limits<float>::infinity();
  }
}

// 201 KiB of shared memory (217 with the extra dims): an H100 (227 KiB a block) takes it; on an A100 (163 KiB)
// allow_shared_memory (common/device/launch.h) refuses it by size.
template <class C>
void launch_split_d(const Params& prm, cudaStream_t stream) {
  launch_on_grid<C, split_d_kernel<C>>(prm, stream, "06_tensor_core (steps)");
}

}  // namespace tensor_core::steps
