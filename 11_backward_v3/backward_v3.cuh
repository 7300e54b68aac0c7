// Chapter 11 -- FlashAttention-3's backward on Hopper: the five products of 08's backward on wgmma,
// the tiles brought in by the copy engine, and the work split between a producer warpgroup and two
// consumer warpgroups.
//
// One block owns one key tile j of Bc = 128 keys of one (batch, KV head) and walks every query tile
// i (Br rows: 64 at D = 128, 128 at D = 64) of every query head sharing that KV head, as 08 does
// (08_backward/README.md: Algorithm). What changes is where each product runs:
//   * warpgroup 0: one thread loads K_j and V_j once, then Q_i and dO_i into a ring of two stages
//     by TMA, counted on "full" mbarriers; the consumers' warps free a stage on its "empty"
//     mbarrier. Warp 1 is the dQ writer (write_dq). The query tile's LSE and D_i come another way:
//     warp 0 of each consumer group reads the next step's from global memory during a step and
//     stores them into the group's own buffer, so only ordinary loads and stores touch them;
//   * consumer warpgroup w (1 + w) owns keys 64 w .. 64 w + 63 of the tile. Per query tile it
//     computes the transposed scores, keys as rows (FlashAttention-3's SdP_swapAB):
//         S^T  = K_w Q_i^T        dP^T = V_w dO_i^T         (64 x Br, both operands in shared memory)
//         P^T  = exp2(S^T scale log2(e) - LSE_i log2(e)),   dS^T = P^T o (dP^T - D_i)
//     so that P^T and dS^T are already the A operands of the two products that stay in registers
//     across the whole walk:
//         dV_w += P^T dO_i        dK_w += dS^T Q_i          (A from registers: the RS form)
//     S^T and dP^T are two commit groups: P^T is computed while dP^T is still on the tensor cores;
//   * dQ_i += dS K_j needs every key of the tile: both groups store dS^T into shared memory (a
//     128 x Br tile, by stmatrix), meet at a named barrier, and multiply it as wgmma's A operand
//     read transposed (MN-major, imm-trans-a) with K_j as B (MN-major). Group w computes a 64 x 64
//     chunk of the step's dQ tile over all 128 keys: columns 64 w .. at D = 128, rows 64 w .. at
//     D = 64. It stores the fp32 chunk to shared memory in its accumulator order and signals the dQ
//     writer, which has the copy engine add it into an fp32 dQ accumulator in global memory
//     (cp.reduce.async.bulk .add.f32: one 16 KiB instruction, atomic per element in L2). The
//     accumulator keeps that order, a 16 KiB chunk at a time, and convert_dq_kernel (launch.cuh)
//     turns it into dQ.
// dK_j and dV_j leave once, at the end, from registers: each belongs to one block.
// This file holds the consumers' step and the kernel; block.cuh the pieces they call (the
// configuration, the walk, the producer, the dQ writer, the deterministic turns).
#pragma once

#include <cstdint>

#include "11_backward_v3/block.cuh"  // config.cuh; walk_of, produce, write_dq, RowVectors, ...
#include "11_backward_v3/key_grads.cuh"  // flush_after_step, finish_key_grads
#include "common/device/math.cuh"    // fast_exp2
#include "common/device/tiles.h"     // needs_mask
#include "common/device/wgmma.cuh"
#include "common/device/wgmma_layout.h"

namespace backward_v3 {

using namespace fa::cuda;
// P^T in place of S^T (n = Br queries): register 4 c + e of this thread holds key key0 + 8 (e / 2)
// and query q0 + 8 c + e % 2 (q0 = i Br + 2 t: the thread's first query column). lse_t points at
// that column's LSE log2(e) in the step's buffer (+inf past Sq), so register 4 c + e's is
// lse_t[8 c + e % 2]. `masked`: the tile has keys past Sk, causally invisible pairs or pairs
// outside the sliding window (needs_mask), whose P is 0 (the window's: mask_window, after this).
template <int kRegs>
__device__ __forceinline__ void probs(float (&s)[kRegs], const float* lse_t, const Params& prm, bool masked, int key0,
                                      int q0) {
  // BEGIN SOLUTION: P^T = 2^(S^T scale log2(e) - LSE log2(e)) (fast_exp2), 0 where a key is past Sk or causally invisible (08_backward/README.md: Algorithm; README: Why the scores are transposed)
#pragma unroll
  for (int c = 0; c < kRegs / 4; ++c) {
    const float2 lse = *reinterpret_cast<const float2*>(lse_t + 8 * c);
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int r = 4 * c + e;
      float p = fast_exp2(s[r] * prm.scale_log2 - (e % 2 ? lse.y : lse.x));
      if (masked) {
        const int key = key0 + 8 * (e / 2), q = q0 + 8 * c + e % 2;
        if (key >= prm.seqlen_k || (prm.causal && !fa::causal_visible(q, key, prm.seqlen_q, prm.seqlen_k)))
          p = 0.0f;
      }
      s[r] = p;
    }
  }
  // END SOLUTION
}

// A sliding window's part of the mask, after probs on a masked tile: P^T = 0 for the (query, key)
// pairs outside the window (the same registers and coordinates as probs). Nothing without a window.
template <int kRegs>
__device__ __forceinline__ void mask_window(float (&s)[kRegs], const Params& prm, bool masked, int key0, int q0) {
  if (!masked || (prm.window_left < 0 && prm.window_right < 0)) return;
#pragma unroll
  for (int r = 0; r < kRegs; ++r) {
    const int key = key0 + 8 * (r % 4 / 2), q = q0 + 8 * (r / 4) + r % 2;
    if (!fa::window_visible(q, key, prm.seqlen_q, prm.seqlen_k, prm.window_left, prm.window_right)) s[r] = 0.0f;
  }
}

// The logit softcap (Softcap<C>), on S^T before probs: out tanh(in S^T) (SoftcapConsts, capped),
// so that probs' scale log2(e) turns it into softcap tanh(scale S / softcap) log2(e).
template <int kRegs>
__device__ __forceinline__ void cap_scores(float (&s)[kRegs], const SoftcapConsts& cap) {
#pragma unroll
  for (int r = 0; r < kRegs; ++r) s[r] = capped(s[r], cap);
}

// The softcap's chain rule, on dS^T after grads: d(softcap tanh(x / softcap)) / dx = 1 - tanh^2,
// the tanh recovered from P^T rather than kept in registers: log2 P^T = softcap tanh log2(e) -
// LSE log2(e), so tanh = (log2 P^T + LSE log2(e)) / (softcap log2(e)). Where P^T is 0 (masked, or
// too small for fp32) log2 is -inf and the slope, clamped to its range [0, 1], 0: dS^T is 0 there
// whatever the slope. A NaN in P^T has made dS^T NaN already. lse_t as in probs.
template <int kRegs>
__device__ __forceinline__ void cap_slope(float (&ds)[kRegs], const float (&p)[kRegs], const float* lse_t,
                                          const SoftcapConsts& cap) {
#pragma unroll
  for (int c = 0; c < kRegs / 4; ++c) {
    const float2 lse = *reinterpret_cast<const float2*>(lse_t + 8 * c);
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const float x = p[4 * c + e];
      const float th = (fast_log2(x) + (e % 2 ? lse.y : lse.x)) * cap.inv_log2;
      ds[4 * c + e] *= fmaxf(1.0f - th * th, 0.0f);
    }
  }
}

// dS^T in place of dP^T: dS^T = P^T o (dP^T - D_i), with D_i by query: D_t points at this
// thread's first query column of the step's D_i (register 4 c + e: query 8 c + e % 2 from there).
template <int kRegs>
__device__ __forceinline__ void grads(float (&dp)[kRegs], const float (&p)[kRegs], const float* D_t) {
  // BEGIN SOLUTION: dS^T = P^T o (dP^T - D_i), D_i per query column (08_backward/README.md: Algorithm)
#pragma unroll
  for (int c = 0; c < kRegs / 4; ++c) {
    const float2 d_i = *reinterpret_cast<const float2*>(D_t + 8 * c);
#pragma unroll
    for (int e = 0; e < 4; ++e) dp[4 * c + e] = p[4 * c + e] * (dp[4 * c + e] - (e % 2 ? d_i.y : d_i.x));
  }
  // END SOLUTION
}

// Consumer warpgroup w (0 or 1): keys 64 w .. 64 w + 63 of the tile; dK_j and dV_j of those keys
// in registers across the walk, written at the end. w is a run-time value, so that both groups run
// the same instructions: the named barrier they share is then one bar.sync, as an aligned barrier
// must be (compute-sanitizer's synccheck checks it).
template <class C, bool kTurns>
__device__ __forceinline__ void consume(const Params& prm, Barriers<C::kStages>& bars, std::uint32_t base,
                                        unsigned char* base_p, int j, std::int64_t kv_bh, int w) {
  using T = typename C::T;
  constexpr int kD = C::kD, Br = C::Br, Bc = C::Bc;
  const int tid = threadIdx.x % 128, warp = tid / 32, lane = tid % 32, g = lane / 4, t = lane % 4;
  const int key0 = j * Bc + 64 * w + 16 * warp + g;  // this lane's first key (the second: + 8)
  const std::uint32_t K_w = base + C::kK + w * 64 * 128, V_w = base + C::kV + w * 64 * 128;  // the group's rows
  const int group_bar = 2 + w;  // the group's own named barrier
  float dv[kD / 2], dk[kD / 2];
#pragma unroll
  for (int r = 0; r < kD / 2; ++r) dv[r] = dk[r] = 0.0f;
  // LSE and D_i of a step in buffer step % 2 of the group (RowVectors), brought by warp 0.
  float* vec_p = reinterpret_cast<float*>(base_p + C::kVec + 2 * w * C::kVecBytes);
  const typename C::Walk walk = begin_walk<C>(prm, bars, vec_p, group_bar, j, kv_bh, warp, lane);

  // The descriptors, built once: a k-step, a stage and the dS^T buffer only move their start
  // address (desc_advance). Byte offsets of k-step ks: K-major kmajor_sw128_step (32 ks within an
  // atom, then atoms of rows x 128 bytes); MN-major 16 rows of 128 bytes.
  const std::uint64_t K_desc = kmajor_sw128_desc(K_w, Bc, 0), V_desc = kmajor_sw128_desc(V_w, Bc, 0);
  const std::uint64_t Q_desc = kmajor_sw128_desc(base + C::kQ, Br, 0), dO_desc = kmajor_sw128_desc(base + C::kDO, Br, 0);
  const std::uint64_t Q_mn = mnmajor_sw128_desc(base + C::kQ, Br, 0, 0), dO_mn = mnmajor_sw128_desc(base + C::kDO, Br, 0, 0);

  // Where this lane's row of a 16 x 16 block of dS^T goes in the first atom of the buffer, for
  // the four k-steps of an atom: stmatrix's matrix lane / 8 is rows + 8 (m % 2), columns + 8 (m / 2)
  // of the block, as the A fragment's registers are.
  std::uint32_t ds_row[4];
#pragma unroll
  for (int kk = 0; kk < 4; ++kk)
    ds_row[kk] = kmajor_sw128_offset(64 * w + 16 * warp + 8 * (lane / 8 % 2) + lane % 8, 16 * kk + 8 * (lane / 16), Bc);

  Step at = walk.first();
  for (int step = 0; step < walk.n_steps; ++step) {
    const int stage = step % C::kStages, i = at.i_tile;
    const Step next = step_after(walk, at, step);
    const std::uint32_t stage_bytes = stage * C::kRowBytes;
    RowVectors<Br> vec_next;  // warp 0: the next step's LSE and D_i, stored after this step's barrier 1
    if (warp == 0 && step + 1 < walk.n_steps) vec_next.load(prm, next, lane);
    mbarrier_wait(smem_u32(&bars.full[stage]), step / C::kStages % 2);
    __syncwarp();

    // S^T = K_w Q_i^T and dP^T = V_w dO_i^T: 64 keys x Br queries each, contracted over kD, as two
    // commit groups, so that P^T is computed while dP^T is still on the tensor cores.
    float s[Br / 2], dp[Br / 2];
    wgmma_fence();
#pragma unroll
    for (int ks = 0; ks < kD / 16; ++ks)
      wgmma_ss<T, Br, 0>(s, desc_advance(K_desc, kmajor_sw128_step(Bc, 16 * ks)),
                         desc_advance(Q_desc, stage_bytes + kmajor_sw128_step(Br, 16 * ks)), ks > 0);
    if constexpr (C::kOverlap) wgmma_commit();
#pragma unroll
    for (int ks = 0; ks < kD / 16; ++ks)
      wgmma_ss<T, Br, 0>(dp, desc_advance(V_desc, kmajor_sw128_step(Bc, 16 * ks)),
                         desc_advance(dO_desc, stage_bytes + kmajor_sw128_step(Br, 16 * ks)), ks > 0);
    wgmma_commit();

    // P^T in place: register 4 c + e holds key key0 + 8 (e / 2), query 8 c + 2 t + e % 2.
    const float* lse_s = vec_p + step % 2 * 2 * Br;
    const float* D_s = lse_s + Br;
    const bool masked =
        needs_mask(i, j, Br, Bc, prm.seqlen_q, prm.seqlen_k, prm.causal, prm.window_left, prm.window_right);
    if constexpr (C::kOverlap) wgmma_wait<1>();  // S^T is done
    else wgmma_wait<0>();  // S^T and dP^T are done
    if constexpr (C::kSoftcap) cap_scores(s, softcap_of<C>(prm));
    probs(s, lse_s + 2 * t, prm, masked, key0, i * Br + 2 * t);
    mask_window(s, prm, masked, key0, i * Br + 2 * t);
    if constexpr (C::Walk::kHalves) {  // the block-sparse step: the mask may turn the group's 64 keys off
      if ((at.halves >> w & 1) == 0) {
#pragma unroll
        for (int r = 0; r < Br / 2; ++r) s[r] = 0.0f;
      }
    }
    // dV_w += P^T dO_i: 64 keys x kD, contracted over the Br queries (A from registers: RS), issued
    // before dS^T is computed (kEarlyDV) or after.
    constexpr int kQSteps = Br / 16;
    const std::uint32_t ds_u = base + C::kDs + step % 2 * C::kDsBytes;
    constexpr bool kEarlyDV = C::kEarlyDV;
    std::uint32_t pa[kQSteps][4], dsa[kQSteps][4];  // P^T and dS^T as A fragments, a k-step (16 queries) each
    auto issue_dv = [&] {
#pragma unroll
      for (int kk = 0; kk < kQSteps; ++kk) to_a_fragment<T>(pa[kk], s, kk);
      wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < kQSteps; ++kk)
        wgmma_rs<T, kD, 1>(dv, pa[kk], desc_advance(dO_mn, stage_bytes + 16 * 128 * kk), true);
      wgmma_commit();
    };
    if constexpr (kEarlyDV) {
      issue_dv();
      wgmma_wait<1>();  // dP^T is done (dV may still run)
    } else if constexpr (C::kOverlap) {
      wgmma_wait<0>();  // dP^T is done
    }
    grads(dp, s, D_s + 2 * t);
    if constexpr (C::kSoftcap) cap_slope(dp, s, lse_s + 2 * t, softcap_of<C>(prm));
#pragma unroll
    for (int kk = 0; kk < kQSteps; ++kk) to_a_fragment<T>(dsa[kk], dp, kk);
    // dS^T into this step's buffer, a 16 x 16 block a k-step by stmatrix (ds_row: this lane's row
    // address within an atom; the next atom of 64 queries is Bc rows further).
#pragma unroll
    for (int kk = 0; kk < kQSteps; ++kk)
      stmatrix_x4(ds_u + ds_row[kk % 4] + kk / 4 * Bc * 128, dsa[kk]);
    fence_proxy_async();  // the stores, before wgmma reads them
    if constexpr (!kEarlyDV) issue_dv();  // dP^T's registers are free now

    // dK_w += dS^T Q_i, like dV: here, or after the dQ product (kDqFirst).
    auto issue_dk = [&] {
      wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < kQSteps; ++kk)
        wgmma_rs<T, kD, 1>(dk, dsa[kk], desc_advance(Q_mn, stage_bytes + 16 * 128 * kk), true);
      wgmma_commit();
    };
    if constexpr (!C::kDqFirst) issue_dk();

    __syncwarp();
    barrier_sync<1>(256);  // both halves of dS^T are stored
    // Every thread of the group is past step - 1, the last reader of LSE/D_i buffer (step + 1) % 2.
    if (warp == 0 && step + 1 < walk.n_steps) vec_next.store(vec_p + (step + 1) % 2 * 2 * Br, lane);
    // dQ partial: 64 queries x 64 columns = dS (queries x keys) K_j (keys x columns); dS is dS^T
    // read transposed, its queries wgmma's M. Two chunks: warpgroup w's chunk over all Bc keys
    // (queries 64 w .. at Br = 128, columns 64 w .. at D = 128). One chunk: the group's own keys.
    constexpr bool kOwnKeys = C::kChunks == 1;
    const int k_first = kOwnKeys ? 64 * w : 0;
    const int m0 = !kOwnKeys && C::kChunkRows ? 64 * w : 0, n0 = !kOwnKeys && !C::kChunkRows ? 64 * w : 0;
    float dq[32];
    const std::uint64_t dS_desc = mnmajor_sw128_desc(ds_u, Bc, k_first, m0);
    const std::uint64_t Kn_desc = mnmajor_sw128_desc(base + C::kK, Bc, k_first, n0);
#pragma unroll
    for (int kk = 0; kk < (kOwnKeys ? 4 : Bc / 16); ++kk)
      wgmma_ss<T, 64, 1, 1>(dq, desc_advance(dS_desc, 16 * 128 * kk), desc_advance(Kn_desc, 16 * 128 * kk), kk > 0);
    wgmma_commit();
    if constexpr (C::kDqFirst) {
      issue_dk();
      wgmma_wait<1>();  // dV and dQ are done; dK runs while dQ goes to the writer
      hand_dq_chunk<C>(base_p, w, tid, dq);
    }
    wgmma_wait<0>();
    __syncwarp();  // every lane's reads of the stage come before lane 0 frees it
    if (lane == 0) mbarrier_arrive(smem_u32(&bars.empty[stage]));  // Q_i and dO_i are read

    // The partial dQ to the dQ writer, which hands it to the copy engine (kDqFirst: above); a long
    // walk's flush (the wait above has completed this step's dV and dK wgmmas).
    if constexpr (!C::kDqFirst) hand_dq_chunk<C>(base_p, w, tid, dq);
    flush_after_step<C>(prm, kv_bh, j, w, tid, step, dk, dv);
    at = next;
  }
  finish_key_grads<C>(prm, kv_bh, j, w, tid, walk.n_steps, key0, t, 0, dk, dv);
}

// grid: (key tiles, B * Hkv as tiles_by_rows spreads it); block: 3 warpgroups. kTurns: the
// deterministic mode (dQ's adds in key-tile order).
template <class C, bool kTurns>
__global__ void __launch_bounds__(C::kThreads, 1)
    backward_v3_kernel(const __grid_constant__ CUtensorMap q_map, const __grid_constant__ CUtensorMap k_map,
                       const __grid_constant__ CUtensorMap v_map, const __grid_constant__ CUtensorMap do_map,
                       const KernelParams<C> prm) {
  run_block<C, kTurns>(&q_map, &k_map, &v_map, &do_map, prm,
                       [&](const Params& sp, Barriers<C::kStages>& bars, std::uint32_t base, unsigned char* base_p,
                           int j, std::int64_t kv_bh, int w) { consume<C, kTurns>(sp, bars, base, base_p, j, kv_bh, w); });
}

}  // namespace backward_v3
