// Chapter 11 at head dims 192 and 256: the wide kernel.
//
// At D = 128 a consumer group keeps dK and dV of its 64 keys in registers, D / 2 floats each a
// thread, beside S^T and dP^T; past D = 128 that does not fit in 240 registers. So a block owns
// Bc = 64 keys, and the two groups split the work of a step (Br = 64 query rows) by product
// instead of by key:
//   group 0:  S^T  = K_j Q_i^T   (SS, 64 x 64, k = D)  ->  P^T = exp2(S^T scale log2(e) - LSE)
//             stores P^T twice: fp32 for group 1, and in T (stmatrix) as an A operand;
//   group 1:  dP^T = V_j dO_i^T  (SS, 64 x 64, k = D)  ->  dS^T = P^T o (dP^T - D_i), stored in T;
//   both:     dV_j[:, cols_w] += P^T dO_i[:, cols_w]   (SS: A = P^T from shared memory)
//             dK_j[:, cols_w] += dS^T Q_i[:, cols_w]   (SS: A = dS^T from shared memory)
//             dQ_i chunks c = w, w + 2, ...: dS K_j[:, 64 c ..]  (64 x 64, as in backward_v3.cuh)
// cols_0 = 0 .. 127, cols_1 = 128 .. D - 1 (a group's columns start on a 64-column atom), so a
// thread holds 64 + 64 floats of dK and dV in group 0 and (D - 128) / 2 each in group 1.
// Named barriers: P^T ready (group 0 arrives, group 1 waits), dS^T ready (the other way); group 1
// also syncs on its own barrier before its wgmmas read the dS^T its four warps stored. The
// producer, the dQ writer (chunk c from group c % 2), the walk, LSE / D_i and the long-walk sums
// are block.cuh's, as for the other kernel. Q_i and dO_i have one stage: two would not fit beside
// K_j and V_j at D = 256.
#pragma once

#include <cstdint>

#include "11_backward_v3/backward_v3.cuh"  // probs, grads, to_a_fragment; block.cuh
#include "common/device/math.cuh"
#include "common/device/tiles.h"
#include "common/device/wgmma.cuh"
#include "common/device/wgmma_layout.h"

namespace backward_v3 {

using namespace fa::cuda;

template <class T_, int kD_>
struct WideConfig {
  using T = T_;
  using Walk = backward::tc::DenseWalk;
  static constexpr int kD = kD_;
  static_assert(kD == 192 || kD == 256, "the wide kernel is for head dims 192 and 256");
  static constexpr int Bc = 64, Br = 64;
  static constexpr bool kWide = true;
  static constexpr bool kBshd = false;  // [B, H, S, D] tensors; Bshd<WideConfig>: [B, S, H, D]
  static constexpr bool kVarlen = false;  // Varlen<WideConfig>: a packed batch of sequences
  static constexpr bool kSoftcap = false;  // Softcap<WideConfig>: the logit softcap
  static constexpr bool kF32Grads = false;  // fp32 gradients: the Config kernels only (F32Grads)
  static constexpr bool kLongestFirst = false;  // the row-by-row order (Config's kLongestFirst)
  static constexpr int kStages = 1;
  static constexpr int kThreads = 3 * 128;
  static constexpr int kConsumerWarps = 8;
  static constexpr int kChunks = kD / 64;    // a step's dQ tile: chunks of 64 x 64 (columns 64 c ..)
  static constexpr int kHandoffs = kChunks;  // chunk c from group c % 2 (write_dq)
  static constexpr int kCols0 = 128, kCols1 = kD - 128;  // dK, dV columns of group 0 and group 1
  static constexpr std::uint32_t kKVBytes = Bc * kD * 2;   // K_j or V_j: (Bc, kD) in 64-column atoms
  static constexpr std::uint32_t kRowBytes = Br * kD * 2;  // Q_i or dO_i
  static constexpr std::uint32_t kPBytes = Bc * Br * 2;    // P^T or dS^T in T: (keys, queries), one atom
  static constexpr std::uint32_t kPfBytes = Bc * Br * 4;   // P^T in fp32, group 0 to group 1
  static constexpr std::uint32_t kDqBytes = 64 * 64 * 4;   // one group's dQ chunk, fp32
  static constexpr std::uint32_t kVecBytes = 2 * Br * 4;   // LSE and D_i of a query tile
  static constexpr std::uint32_t kK = 0, kV = kKVBytes;
  static constexpr std::uint32_t kQ = 2 * kKVBytes;
  static constexpr std::uint32_t kDO = kQ + kStages * kRowBytes;
  static constexpr std::uint32_t kPt = kDO + kStages * kRowBytes;  // + (step % 2) * kPBytes
  static constexpr std::uint32_t kDs = kPt + 2 * kPBytes;          // + (step % 2) * kPBytes
  static constexpr std::uint32_t kPf = kDs + 2 * kPBytes;
  static constexpr std::uint32_t kDq = kPf + kPfBytes;             // + w * kDqBytes
  static constexpr std::uint32_t kVec = kDq + 2 * kDqBytes;        // + (2 w + step % 2) * kVecBytes
  static constexpr int kSmemBytes = kVec + 4 * kVecBytes + 1024;   // + room to align to 1024
  static constexpr std::uint32_t kStageTx = 2 * kRowBytes;
  static constexpr int kProducerRegs = 24, kConsumerRegs = 240;
  static constexpr int kFlushSteps = 256;  // as Config::kFlushSteps
  static_assert(kKVBytes % 1024 == 0 && kRowBytes % 1024 == 0 && kPBytes % 1024 == 0,
                "every swizzled tile starts on a 1024-byte boundary");
  static_assert(kSmemBytes <= 227 * 1024, "an H100 / H200 block has at most 227 KiB of shared memory");
};

// Named barriers of the wide kernel (256 threads: both groups): P^T stored by group 0, dS^T
// stored by group 1. (2, 3: the groups' own; 4-7: the dQ writer's.)
constexpr int kPReadyBar = 8, kDsReadyBar = 9;

// Consumer group W of the wide kernel. W is a template argument: the groups run different code,
// and they meet only through arrive / sync pairs (one side arrives, the other waits).
template <class C, bool kTurns, int W>
__device__ __forceinline__ void consume_wide(const Params& prm, Barriers<C::kStages>& bars, std::uint32_t base,
                                             unsigned char* base_p, int j, std::int64_t kv_bh) {
  using T = typename C::T;
  constexpr int kD = C::kD, Br = C::Br, Bc = C::Bc;
  constexpr int kCols = W == 0 ? C::kCols0 : C::kCols1, kCol0 = W == 0 ? 0 : C::kCols0;
  const int tid = threadIdx.x % 128, warp = tid / 32, lane = tid % 32, g = lane / 4, t = lane % 4;
  const int key0 = j * Bc + 16 * warp + g;  // this lane's first key (the second: + 8)
  float dv[kCols / 2], dk[kCols / 2];
#pragma unroll
  for (int r = 0; r < kCols / 2; ++r) dv[r] = dk[r] = 0.0f;
  float* vec_p = reinterpret_cast<float*>(base_p + C::kVec + 2 * W * C::kVecBytes);
  const typename C::Walk walk = begin_walk<C>(prm, bars, vec_p, 2 + W, j, kv_bh, warp, lane);

  // S^T (group 0: K_j, Q_i) or dP^T (group 1: V_j, dO_i), both K-major over D.
  const std::uint64_t A_desc = kmajor_sw128_desc(base + (W == 0 ? C::kK : C::kV), Bc, 0);
  const std::uint64_t B_desc = kmajor_sw128_desc(base + (W == 0 ? C::kQ : C::kDO), Br, 0);
  // dV and dK: dO_i and Q_i from the group's first column, MN-major (queries are the k index).
  const std::uint64_t dO_mn = mnmajor_sw128_desc(base + C::kDO, Br, 0, kCol0);
  const std::uint64_t Q_mn = mnmajor_sw128_desc(base + C::kQ, Br, 0, kCol0);
  // Where this lane's row of a 16 x 16 block of P^T or dS^T goes (stmatrix, as backward_v3.cuh).
  std::uint32_t row_at[4];
#pragma unroll
  for (int kk = 0; kk < 4; ++kk)
    row_at[kk] = kmajor_sw128_offset(16 * warp + 8 * (lane / 8 % 2) + lane % 8, 16 * kk + 8 * (lane / 16), Bc);
  float* pf = reinterpret_cast<float*>(base_p + C::kPf);

  Step at = walk.first();
  for (int step = 0; step < walk.n_steps; ++step) {
    const int stage = step % C::kStages, i = at.i_tile, buf = step % 2;
    const Step next = step_after(walk, at, step);
    const std::uint32_t stage_bytes = stage * C::kRowBytes;
    RowVectors<Br> vec_next;
    if (warp == 0 && step + 1 < walk.n_steps) vec_next.load(prm, next, lane);
    mbarrier_wait(smem_u32(&bars.full[stage]), step / C::kStages % 2);
    __syncwarp();

    float sd[Br / 2];  // S^T, then P^T (group 0); dP^T, then dS^T (group 1)
    wgmma_fence();
#pragma unroll
    for (int ks = 0; ks < kD / 16; ++ks)
      wgmma_ss<T, Br, 0>(sd, desc_advance(A_desc, kmajor_sw128_step(Bc, 16 * ks)),
                         desc_advance(B_desc, stage_bytes + kmajor_sw128_step(Br, 16 * ks)), ks > 0);
    wgmma_commit();
    wgmma_wait<0>();

    const float* lse_s = vec_p + buf * 2 * Br;
    const std::uint32_t pt_u = base + C::kPt + buf * C::kPBytes, ds_u = base + C::kDs + buf * C::kPBytes;
    std::uint32_t frag[Br / 16][4];
    if constexpr (W == 0) {
      const bool masked =
          needs_mask(i, j, Br, Bc, prm.seqlen_q, prm.seqlen_k, prm.causal, prm.window_left, prm.window_right);
      if constexpr (C::kSoftcap) cap_scores(sd, softcap_of<C>(prm));
      probs(sd, lse_s + 2 * t, prm, masked, key0, i * Br + 2 * t);
      mask_window(sd, prm, masked, key0, i * Br + 2 * t);
#pragma unroll
      for (int c = 0; c < Br / 8; ++c)  // fp32 P^T for group 1, in accumulator order
        *reinterpret_cast<float4*>(pf + 512 * c + 4 * tid) = make_float4(sd[4 * c], sd[4 * c + 1], sd[4 * c + 2], sd[4 * c + 3]);
#pragma unroll
      for (int kk = 0; kk < Br / 16; ++kk) {
        to_a_fragment<T>(frag[kk], sd, kk);
        stmatrix_x4(pt_u + row_at[kk], frag[kk]);
      }
      fence_proxy_async();  // the stores, before wgmma reads them
      barrier_arrive(kPReadyBar, 256);
      barrier_sync(kDsReadyBar, 256);  // dS^T is stored; group 1 has read the fp32 P^T
    } else {
      barrier_sync(kPReadyBar, 256);
      float p[Br / 2];
#pragma unroll
      for (int c = 0; c < Br / 8; ++c) {
        const float4 x = *reinterpret_cast<const float4*>(pf + 512 * c + 4 * tid);
        p[4 * c] = x.x, p[4 * c + 1] = x.y, p[4 * c + 2] = x.z, p[4 * c + 3] = x.w;
      }
      grads(sd, p, lse_s + Br + 2 * t);
      if constexpr (C::kSoftcap) cap_slope(sd, p, lse_s + 2 * t, softcap_of<C>(prm));
#pragma unroll
      for (int kk = 0; kk < Br / 16; ++kk) {
        to_a_fragment<T>(frag[kk], sd, kk);
        stmatrix_x4(ds_u + row_at[kk], frag[kk]);
      }
      fence_proxy_async();
      barrier_arrive(kDsReadyBar, 256);
      barrier_sync(2 + W, 128);  // the group's own dK reads every warp's dS^T: all stored
    }
    // Every thread of the group is past step - 1, the last reader of LSE/D_i buffer (step + 1) % 2.
    if (warp == 0 && step + 1 < walk.n_steps) vec_next.store(vec_p + (step + 1) % 2 * 2 * Br, lane);

    // dV and dK for the group's columns, A from the buffers (K-major: keys x queries, one atom).
    const std::uint64_t Pt_desc = kmajor_sw128_desc(pt_u, Bc, 0), Ds_desc = kmajor_sw128_desc(ds_u, Bc, 0);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < Br / 16; ++kk)
      wgmma_ss<T, kCols, 1>(dv, desc_advance(Pt_desc, 32 * kk), desc_advance(dO_mn, stage_bytes + 16 * 128 * kk), true);
#pragma unroll
    for (int kk = 0; kk < Br / 16; ++kk)
      wgmma_ss<T, kCols, 1>(dk, desc_advance(Ds_desc, 32 * kk), desc_advance(Q_mn, stage_bytes + 16 * 128 * kk), true);
    wgmma_commit();

    // The group's dQ chunks: dS (queries x keys, dS^T read transposed) K_j[:, 64 c ..].
    const std::uint64_t dS_mn = mnmajor_sw128_desc(ds_u, Bc, 0, 0);
#pragma unroll
    for (int c = W; c < C::kChunks; c += 2) {
      float dq[32];
      const std::uint64_t Kn_desc = mnmajor_sw128_desc(base + C::kK, Bc, 0, 64 * c);
      wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < Bc / 16; ++kk)
        wgmma_ss<T, 64, 1, 1>(dq, desc_advance(dS_mn, 16 * 128 * kk), desc_advance(Kn_desc, 16 * 128 * kk), kk > 0);
      wgmma_commit();
      wgmma_wait<0>();
      if (c == W) {  // every product that reads Q_i and dO_i is done
        __syncwarp();
        if (lane == 0) mbarrier_arrive(smem_u32(&bars.empty[stage]));
      }
      hand_dq_chunk<C>(base_p, W, tid, dq);
    }
    flush_after_step<C>(prm, kv_bh, j, W, tid, step, dk, dv);
    at = next;
  }
  finish_key_grads<C>(prm, kv_bh, j, W, tid, walk.n_steps, key0, t, kCol0, dk, dv);
}

// grid: (key tiles of 64, B * Hkv as tiles_by_rows spreads it); block: 3 warpgroups.
template <class C, bool kTurns>
__global__ void __launch_bounds__(C::kThreads, 1)
    backward_v3_wide_kernel(const __grid_constant__ CUtensorMap q_map, const __grid_constant__ CUtensorMap k_map,
                            const __grid_constant__ CUtensorMap v_map, const __grid_constant__ CUtensorMap do_map,
                            const KernelParams<C> prm) {
  run_block<C, kTurns>(&q_map, &k_map, &v_map, &do_map, prm,
                       [&](const Params& sp, Barriers<C::kStages>& bars, std::uint32_t base, unsigned char* base_p,
                           int j, std::int64_t kv_bh, int w) {
                         if (w == 0) consume_wide<C, kTurns, 0>(sp, bars, base, base_p, j, kv_bh);
                         else consume_wide<C, kTurns, 1>(sp, bars, base, base_p, j, kv_bh);
                       });
}

}  // namespace backward_v3
