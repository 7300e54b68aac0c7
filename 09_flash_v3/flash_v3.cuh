// Chapter 09 -- FlashAttention-3's forward on the H100: wgmma, TMA, warp specialization, ping-pong.
//
// New since 06 (06_tensor_core/tensor_core.cuh), step by step (README: "How we got here"):
//   * v1 (steps/one_warpgroup.cuh): the tensor cores are fed by wgmma.mma_async, issued by a
//     warpgroup (4 warps) and reading Q_i and K_j straight from shared memory through descriptors
//     (common/device/wgmma.cuh); P_ij goes back in from registers (the RS form); Q_i, K_j, V_j
//     arrive by TMA (common/device/tma.cuh), counted on mbarriers. 06's mask_scores, write_rows
//     and online softmax (as the kept max, below) run on the wgmma accumulators.
//   * v2 (this kernel with kPingPong = false): warp specialization. One warpgroup only copies: a
//     single thread issues the TMA boxes of Q_i and of K_j, V_j into a ring of kStages stages,
//     guarded by "full" barriers (the copy engine counts the bytes in) and "empty" barriers (the
//     consumers' warps count themselves out). It gives its registers to the two consumer
//     warpgroups (setmaxnreg), which compute 64 rows of Q_i each (Br = 128) with Bc = 128.
//   * v3 (kPersistent = false): ping-pong. A consumer's turn issues its wgmmas of one step,
//     O_i += P_{s-1} V_{s-1} and S_s = Q_i K_s^T; then it hands the tensor cores to the other
//     consumer (named barriers) and runs the softmax of S_s while the other's wgmmas run.
//   * v4 (kOverlap = false): persistent. One block per SM walks the tiles
//     (causal: in pairs of a long and a short tile, TileWalk): the producer loads the next tile's
//     Q_i and first K/V, and the other consumer starts the next tile's S, while a consumer finishes
//     its last P V and writes O_i. O_i leaves through the copy engine (stage_o, a TMA store), as in
//     FlashAttention-3, instead of v1's write_rows.
//   * v5 (this kernel, the chapter's at D = 96 and 128): FlashAttention-3's overlap, as
//     far as ptxas lets it. S_s and P_{s-1} V_{s-1} are committed as two groups; the consumer waits
//     for S_s alone, releases K_s and masks, runs the softmax on rows of its own (m, l, alpha) and
//     scales O_i by alpha once P V has landed; P alternates between two sets of registers.
//   * v7 (C::kGroups = 3, the chapter's at D = 64 without a short causal mask): v4 with three
//     consumers of 64 rows (Br = 192), which take their turns in a ring.
//   * kept max (every step): the softmax tries each key tile against the running max as it stands
//     (kept_max.cuh: softmax_step_kept_max): no row max on the common path, and a vote that keeps ptxas's
//     wait for P V below the exponentials, which then run under the group's own P V (steps.md).
// Expected effect: the tensor cores always have one warpgroup's wgmmas queued while the other does
// its exp2, max and shuffles, and no consumer ever waits for a copy it could have seen coming.
// Run:  ./build/09_flash_v3/09_flash_v3 --seqlen 4096 --head-dim 128 --dtype bf16
#pragma once

#include <cstdint>
#include <tuple>
#include <type_traits>

#include "common/fa2_tiles/block.cuh"  // Params, Config, WarpRows, mask_scores, cap_scores
#include "09_flash_v3/config.cuh"     // WsConfig, Softcap, ChapterConfig
#include "09_flash_v3/kept_max.cuh"   // softmax_step_kept_max
#include "09_flash_v3/pipeline.cuh"   // Barriers, produce, issue_scores, issue_pv, stage_o
#include "09_flash_v3/tile_walk.h"  // TileWalk: which tiles a block computes, in which order
#include "common/device/tma.cuh"
#include "common/device/wgmma.cuh"
#include "common/device/wgmma_layout.h"

namespace flash_v3 {

using namespace fa::cuda;
using fa2::Params;

// A consumer warpgroup (group 0 .. kGroups - 1: rows 64 group .. of Q_i), over the block's tiles.
// The group is a run-time value, so all groups run one copy of the code. With the group as a template
// argument the kernel holds two copies (10,600 SASS instructions at D = 128 with the overlap,
// against 5,312), more than the instruction cache keeps: at 1k tokens 18% of Nsight Compute's
// warp samples then wait on an instruction fetch ("no instruction"; cuDNN's kernel almost none).
// Its turn s (s = Tc_begin .. Tc_end) of a tile issues O_i += P_{s-1} V_{s-1} and S_s = Q_i K_s^T; the
// softmax of S_s follows, outside the turn (with kOverlap, before the wait for the turn's own
// P V). Ping-pong: group g waits on named barrier 1 + g for its turn and hands over by arriving
// on the next group's, 1 + (g + 1) % kGroups (two groups: 2 - g). The turns go round across tiles
// as well: the last group lets group 0 go first once, and its last turn of a tile hands over to
// group 0's first turn of the block's next tile, so group 0 starts the next S while the others
// write their O_i (only the block's very last turn hands over nothing). All groups take
// Tc_end - Tc_begin + 1 turns a tile (a group's rows past the causal edge or outside the window of
// a tile are masked), so every bar.sync has its arrival, tile after tile. Varlen: VarlenArgs for a packed batch of sequences (each tile
// masks, and writes O and LSE, by its own sequence's lengths), else NoVarlen. cap: the logit
// softcap's constants where C::kSoftcap (SoftcapOf<C>).
template <class C, bool kBshd, class Varlen = NoVarlen>
__device__ __forceinline__ void consume(int group, const Params& prm, Barriers<C::kStages>& bars, std::uint32_t base,
                                        unsigned char* base_p, const CUtensorMap* o_map, const Varlen& vl = {},
                                        const SoftcapOf<C>& cap = {}, const Fp8Of<C>& fp8 = {}) {
  constexpr bool kVarlen = std::is_same_v<Varlen, VarlenArgs>;
  using Tile = typename C::Tile;
  constexpr int Bc = C::Bc, kTurnThreads = 256;  // both consumers: a turn barrier's count
  const int warp = threadIdx.x / 32 % 4, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  auto K_s = [&](int it) { return base + C::kK + it % C::kStages * C::kTileBytes; };
  auto V_s = [&](int it) { return base + C::kV + it % C::kStages * C::kTileBytes; };
  int it0 = 0, n = 0;  // K/V tiles before this work tile (as the producer counts them), work tiles
  const bool storer = threadIdx.x % 128 == 0;  // the thread of the group that issues the O stores
  auto walk = block_walk(prm.seqlen_q, prm.batch_heads, prm.heads, prm.causal, C::Br, C::kPersistent, blockIdx.x,
                         gridDim.x, vl);
  if (C::kPingPong && group == C::kGroups - 1 && !walk.done()) barrier_arrive<1>(kTurnThreads);  // group 0 goes first
  for (; !walk.done(); walk.advance(), ++n) {
    // The previous tile's Q slot goes back to the producer once the copy engine has read its O
    // boxes (bulk_wait_read), in this tile's first turn, after the turn's wgmmas are issued: a wait
    // there runs beside the group's wgmmas, where at the top of the tile the group's first turn
    // would wait for warp 0's wait. The producer needs the slot only for the tile after this one
    // (1-2.5% at D = 128 on an H200: steps.md).
    bool release_q = n > 0;
    auto release_previous_q = [&] {
      if (release_q && storer) {
        bulk_wait_read<0>();
        for (int k = 0; k < 4; ++k) mbarrier_arrive(smem_u32(&bars.empty_q[(n - 1) % C::kQSlots]));  // the group's 4 warps
      }
      release_q = false;
    };
    const auto wt = walk.tile();
    const bool last_tile = walk.last();  // the block's last: no turn follows its last
    // The tile's parameters: prm, or in a packed batch prm with the sequence's lengths (which
    // mask_scores and stage_o read) and its rows of LSE [H, total_q] (stage_o writes slice 0 of them).
    Params seq_prm;
    if constexpr (kVarlen) {
      seq_prm = prm;
      seq_prm.seqlen_q = queries_of(wt, prm.seqlen_q, vl);
      seq_prm.seqlen_k = keys_of(wt, prm.seqlen_k, vl);
      seq_prm.lse = prm.lse + slice_of(wt) * prm.seqlen_q + first_query(wt, vl);
    }
    const Params& tp = kVarlen ? seq_prm : prm;
    // Key tiles Tc_begin .. Tc_end - 1 (all of them, or the causal prefix, or a sliding window's band).
    const int Tc_begin = key_tile_begin(wt.i_tile, C::Br, C::Bc, tp.seqlen_q, tp.seqlen_k, prm.window_left);
    const int Tc_end = key_tile_end(wt.i_tile, C::Br, C::Bc, tp.seqlen_q, tp.seqlen_k, prm.causal, prm.window_right);
    const int group_tile = C::kGroups * wt.i_tile + group;  // the group's 64 rows as a tile of their own
    const int row = group_tile * 64 + 16 * warp + g;  // this lane's first row
    const int slot = n % C::kQSlots;
    const std::uint32_t Q_w = base + C::kQ + slot * C::kQBytes + group * 64 * 128;  // the group's rows: 8 KiB into each atom
    fa2::WarpRows<Tile> w;
    // P_s leaves the softmax of turn s and is read by turn s + 1's P V. With the overlap, turn s + 1's
    // softmax writes P_{s+1} where that wgmma may still read P_s, so the two alternate between
    // registers P[0] and P[1] (the loop below takes turns in pairs); without it, P[0] serves all.
    PFrags<C> P[C::kOverlap ? 2 : 1];
    // With the overlap, the softmax comes before the wait for P_{s-1} V_{s-1}, which may still
    // accumulate into w.O: it must not touch w.O. So it is handed rows of its own (a Config with a 16-column O, set to
    // ones): they carry m and l, and the O they return holds alpha, by which w.O is scaled once
    // the wgmma has landed.
    using StatsTile = fa2::Config<typename Tile::T, 16, Bc, 1>;
    fa2::WarpRows<StatsTile> ml;
    auto& stats = std::get<C::kOverlap ? 0 : 1>(std::tie(ml, w));  // the rows' m and l

    // Turn s. kScores: it issues S_s (not in the last turn); kPV: it issues P_{s-1} V_{s-1} (not
    // in the first). Compile-time flags, so every wgmma is issued on a path the compiler knows all
    // 128 threads take: a wgmma under a run-time branch makes ptxas serialize them all (C7520).
    // P_in: P_{s-1}; P_out: where P_s goes.
    auto turn = [&](int s, auto kScores, auto kPV, PFrags<C>& P_in, PFrags<C>& P_out) {
      const int it = it0 + s - Tc_begin;  // K_s's place in the ring; V_{s-1} is at it - 1
      if (kScores) mbarrier_wait(smem_u32(&bars.full_k[it % C::kStages]), it / C::kStages % 2);
      if (kPV) mbarrier_wait(smem_u32(&bars.full_v[(it - 1) % C::kStages]), (it - 1) / C::kStages % 2);
      if (C::kPingPong) barrier_sync(1 + group, kTurnThreads);  // our turn on the tensor cores
      fa2::ScoreTile<Tile> S_ij;  // (16, Bc) a warp: the wgmma accumulator, as 06's fragments
      wgmma_fence();  // O_i was rescaled and P_in written by ordinary instructions
      if constexpr (kScores) {
        issue_scores<C>(S_ij, Q_w, K_s(it));
        if constexpr (C::kOverlap) wgmma_commit();  // a group of its own: S_s lands first
      }
      if constexpr (kPV) issue_pv<C>(w, P_in, V_s(it - 1));
      wgmma_commit();
      if (C::kPingPong && (group < C::kGroups - 1 || kScores || !last_tile))
        barrier_arrive(1 + (group + 1) % C::kGroups, kTurnThreads);  // the next group's turn
      release_previous_q();
      // With the overlap: wait for S_s alone (the older group); the softmax comes before the wait
      // for P V.
      if constexpr (C::kOverlap && kScores && kPV) wgmma_wait<1>();
      else wgmma_wait<0>();  // without: S_s and O_i are both in the registers
      if constexpr (kScores) wgmma_fence_operands(*reinterpret_cast<float(*)[Bc / 2]>(&S_ij[0][0][0]));
      if (lane == 0) {  // this warp is done with the stages: the producer may refill them
        if (kScores) mbarrier_arrive(smem_u32(&bars.empty_k[it % C::kStages]));
        if (kPV && !C::kOverlap) mbarrier_arrive(smem_u32(&bars.empty_v[(it - 1) % C::kStages]));
      }
      if constexpr (kScores) {
        if constexpr (C::kSoftcap) fa2::cap_scores<Tile>(S_ij, cap);
        if (needs_mask(group_tile, s, 64, Bc, tp.seqlen_q, tp.seqlen_k, prm.causal, prm.window_left, prm.window_right))
          fa2::mask_scores<Tile>(S_ij, row, s * Bc, t, tp);
        if constexpr (C::kOverlap) {
#pragma unroll
          for (int nt = 0; nt < 2; ++nt) ml.O[0][nt][0] = ml.O[0][nt][1] = ml.O[0][nt][2] = ml.O[0][nt][3] = 1.0f;
          softmax_step_kept_max<StatsTile, C::kRowVote>(S_ij, StoreP<C>{P_out}, ml, prm.scale_log2, /*try_kept=*/kPV);
        } else {
          softmax_step_kept_max<Tile, C::kRowVote>(S_ij, StoreP<C>{P_out}, w, prm.scale_log2, /*try_kept=*/kPV);
        }
      }
      if constexpr (C::kOverlap && kPV) {
        if constexpr (kScores) wgmma_wait<0>();  // O_i is in the registers; V_{s-1} and P_in are read
        wgmma_fence_operands(*reinterpret_cast<float(*)[C::kD / 2]>(&w.O[0][0][0]));
        if (lane == 0) mbarrier_arrive(smem_u32(&bars.empty_v[(it - 1) % C::kStages]));
        // alpha = 1 exactly where the tile kept the max (ml.O stays at its ones) or raise_max found
        // it unchanged (the same float is subtracted), and O_i *= 1 changes no bit: the warp skips
        // its kD / 2 FMULs when none of its 16 rows has another alpha (one vote), as 06's lazy
        // rescale does (FP8 at 8k tokens, before the kept max: 1-2% faster on an H200). Past a row's
        // first key tile of random data that is nearly every turn.
        if (kScores && __any_sync(0xffffffffu, ml.O[0][0][0] != 1.0f || ml.O[0][0][2] != 1.0f)) {
#pragma unroll
          for (int nt = 0; nt < C::kD / 8; ++nt)
#pragma unroll
            for (int e = 0; e < 4; ++e) w.O[0][nt][e] *= ml.O[0][0][e];  // alpha of row g (e < 2), g + 8
        }
      }
    };
    using Yes = std::true_type;
    using No = std::false_type;
    auto& P0 = P[0];
    auto& P1 = P[C::kOverlap ? 1 : 0];

    mbarrier_wait(smem_u32(&bars.full_q[slot]), n / C::kQSlots % 2);  // Q_i has landed
    if (Tc_end <= Tc_begin) {  // no key to see (causal, Sq > Sk): one empty turn keeps the barriers balanced
      turn(Tc_begin, No{}, No{}, P0, P0);
    } else if constexpr (C::kOverlap) {  // P alternates between two register sets: turns in pairs
      turn(Tc_begin, Yes{}, No{}, P1, P0);
      int s = Tc_begin + 1;
      for (; s + 1 < Tc_end; s += 2) {
        turn(s, Yes{}, Yes{}, P0, P1);
        turn(s + 1, Yes{}, Yes{}, P1, P0);
      }
      if (s < Tc_end) {
        turn(s, Yes{}, Yes{}, P0, P1);
        turn(Tc_end, No{}, Yes{}, P1, P0);
      } else {
        turn(Tc_end, No{}, Yes{}, P0, P1);
      }
    } else {  // one P: one turn a loop iteration, half the code of the pairs (no spills at D = 128)
      turn(Tc_begin, Yes{}, No{}, P0, P0);
      for (int s = Tc_begin + 1; s < Tc_end; ++s) turn(s, Yes{}, Yes{}, P0, P0);
      turn(Tc_end, No{}, Yes{}, P0, P0);
    }
    it0 += Tc_end > Tc_begin ? Tc_end - Tc_begin : 0;
    if constexpr (C::kFp8) {  // O_i = (P V's sum over the E4M3 values of V) x V's scale
#pragma unroll
      for (int nt = 0; nt < C::kD / 8; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) w.O[0][nt][e] *= fp8.v_scale;
    }
    // O_i into the slot (Q_i is read), then the group's boxes by TMA; the slot is released at the
    // top of the group's next tile, once the copy engine has read it.
    stage_o<C>(w, stats, tp, kVarlen ? 0 : slice_of(wt), base_p + (Q_w - base), warp, row, g, t);
    fence_proxy_async();                 // the stores, before the copy engine reads them
    barrier_sync(1 + C::kGroups + group, 128);  // the group's 4 warps have stored their rows
    if (kVarlen && group_tile * 64 + 64 > tp.seqlen_q) {
      // The group's rows reach past its sequence's end, where the next sequence's O lies: a TMA box
      // would overwrite it. The group's 128 threads copy the rows inside, 16 bytes at a time.
      copy_rows_out<C>(prm, base_p + (Q_w - base), first_query(wt, vl) + group_tile * 64, tp.seqlen_q - group_tile * 64,
                       slice_of(wt));
      barrier_sync(1 + C::kGroups + group, 128);  // the slot is read before its release at the next tile
    } else if (storer) {
#pragma unroll
      for (int a = 0; a < C::kAtoms; ++a)  // D = 96: the last box stores columns 64-95
        if constexpr (kBshd)
          tma_store_4d(o_map, a * kAtomCols, kVarlen ? first_query(wt, vl) + group_tile * 64 : group_tile * 64,
                       static_cast<int>(slice_of(wt)) % prm.heads, static_cast<int>(slice_of(wt)) / prm.heads,
                       Q_w + a * C::Br * 128);
        else
          tma_store_3d(o_map, a * kAtomCols, group_tile * 64, static_cast<int>(slice_of(wt)), Q_w + a * C::Br * 128);
      bulk_commit();
    }
  }
  if (storer) bulk_wait<0>();  // the last boxes are written before the block (and its smem) goes
}

// grid: one block per unit of TileWalk, or (kPersistent) one per SM; block: kGroups + 1 warpgroups,
// one block per SM.
// kBshd: Q, K, V and O as [B, S, H, D] (4-D tensor maps), else [B, H, S, D]. Varlen: VarlenArgs for
// a packed batch of sequences ([1, total, H, D] tensors, kBshd), NoVarlen otherwise. cap: the
// logit softcap's constants (Softcap<C>), an empty parameter otherwise. fp8: V's scale (Fp8<C>),
// an empty parameter otherwise.
template <class C, bool kBshd = false, class Varlen = NoVarlen>
__global__ void __launch_bounds__(C::kThreads, 1)
    flash_v3_kernel(const __grid_constant__ CUtensorMap q_map, const __grid_constant__ CUtensorMap k_map,
                    const __grid_constant__ CUtensorMap v_map, const __grid_constant__ CUtensorMap o_map,
                    const Params prm, const Varlen vl, const SoftcapOf<C> cap, const Fp8Of<C> fp8) {
  extern __shared__ unsigned char smem_raw[];
  __shared__ __align__(8) Barriers<C::kStages> bars;
  const std::uint32_t base = (smem_u32(smem_raw) + 1023u) & ~1023u;  // the 128-byte swizzle's 1024-byte blocks
  if (threadIdx.x == 0) {
    for (int q = 0; q < 2; ++q) {
      mbarrier_init(smem_u32(&bars.full_q[q]), 1);  // the producer's arrive_expect_tx (+ the bytes)
      mbarrier_init(smem_u32(&bars.empty_q[q]), C::kConsumerWarps);
    }
    for (int s = 0; s < C::kStages; ++s) {
      mbarrier_init(smem_u32(&bars.full_k[s]), 1);
      mbarrier_init(smem_u32(&bars.full_v[s]), 1);
      mbarrier_init(smem_u32(&bars.empty_k[s]), C::kConsumerWarps);
      mbarrier_init(smem_u32(&bars.empty_v[s]), C::kConsumerWarps);
    }
    mbarrier_init_fence();
  }
  __syncthreads();  // the barriers are initialized before anyone waits on them

  const int warpgroup = threadIdx.x / 128;
  if (warpgroup == 0) {  // the producer: one thread issues every copy; the other 127 leave
    setmaxnreg_dec<C::kProducerRegs>();
    if (threadIdx.x == 0) produce<C, kBshd>(&q_map, &k_map, &v_map, bars, base, prm, vl);
    return;
  }
  setmaxnreg_inc<C::kConsumerRegs>();
  unsigned char* base_p = smem_raw + (base - smem_u32(smem_raw));  // the same address, generic
  consume<C, kBshd>(warpgroup - 1, prm, bars, base, base_p, &o_map, vl, cap, fp8);  // both groups, one copy of the code
}

}  // namespace flash_v3
