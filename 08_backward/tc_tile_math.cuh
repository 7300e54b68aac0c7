// Chapter 08's tensor-core tile math: the named steps of one (query tile, key tile) pair that
// backward_tc.cu's kernels are written in (the tiles, arguments and walks: tc_tiles.cuh):
//   stage_rows       Q_i, dO_i, LSE_i, D_i into a shared-memory stage (cp.async)
//   tile_product     S_ij = Q_i K_j^T, dP_ij = dO_i V_j^T (mma over d)
//   probs_and_grads  P_ij from S_ij and LSE_i, dS_ij = P_ij o (dP_ij - D_i), both to shared memory
//   dq_product       dQ_i's part from this key tile: dS_ij K_j
//   add_dq           ... added into the fp32 dQ accumulator (atomics; wait_turn/pass_turn order them)
//   key_grads        dV_j += P_ij^T dO_i, dK_j += dS_ij^T Q_i (mma over the query rows)
//   write_key_grads  dK_j * scale and dV_j to global memory in T, once
#pragma once

#include <cstdint>

#include "08_backward/tc_tiles.cuh"  // TcConfig, TcParams, SmemTiles, WarpTiles, the walks
#include "common/device/tma.cuh"    // bulk_reduce_add_f32 (kBulkDq)
#include "common/device/wgmma.cuh"  // fence_proxy_async

namespace backward::tc {

// Q_i, dO_i, LSE_i, D_i of step st into stage `buf`, as one cp.async group with what came before.
// kBshd: Q and dO are [B, S, H, D] (SliceRows).
template <class C, bool kBshd = false>
__device__ __forceinline__ void stage_rows(const SmemTiles<C>& sm, const TcParams& prm, const Step& st, int buf) {
  using T = typename C::T;
  constexpr int Br = C::Br;
  const int Sq = prm.seqlen_q, i0 = st.i_tile * Br, D = head_dim_of<C>(prm);  // columns D .. kD - 1 zero-filled
  const SliceRows<kBshd> rows(prm.q_strides, prm.heads, st.bh, Sq, i0, D);
  copy_tile<C, Br>(sm.Q_s + buf * C::kStageStride, static_cast<const T*>(prm.q) + rows.at, Sq - i0, D, rows.pitch);
  copy_tile<C, Br>(sm.dO_s + buf * C::kStageStride, static_cast<const T*>(prm.dout) + rows.at, Sq - i0, D, rows.pitch);
  if (threadIdx.x < 2 * Br) {  // threads 0..Br-1: LSE_i, Br..2Br-1: D_i; zero past Sq
    const int r = threadIdx.x % Br, i = i0 + r;
    const float* src = (threadIdx.x < Br ? prm.lse : prm.D_row) + st.bh * Sq;
    // Row r = (warp's first row) + 16 mt + 8 h + g goes to (warp's first row) + 2 kSM g + 2 mt + h,
    // so the lane that reads it (RowStats) finds its 2 kSM rows side by side.
    const int rr = r % C::kSRows, pos = r - rr + rr % 8 * 2 * C::kSM + rr / 16 * 2 + rr % 16 / 8;
    cp_async_4((threadIdx.x < Br ? sm.lse_s : sm.D_s) + buf * Br + pos, i < Sq ? src + i : src, i < Sq);
  }
}

// S_ij = Q_i K_j^T or dP_ij = dO_i V_j^T, as 06's S: per 16-wide step of d, kSM LDSM of A
// (Q_i, dO_i) and kSN/2 of B (K_j, V_j) feed kSM * kSN mmas.
template <class C>
__device__ __forceinline__ void tile_product(ScoreTile<C>& acc, std::uint32_t A_s, std::uint32_t B_s,
                                             const WarpTiles<C>& w) {
#pragma unroll
  for (int ks = 0; ks < C::kD / 16; ++ks) {
    std::uint32_t a[C::kSM][4];
#pragma unroll
    for (int mt = 0; mt < C::kSM; ++mt) ldmatrix_x4(a[mt], A_s + ldsm_address(w.lane_s_a, 16 * mt, 16 * ks, C::kCols));
#pragma unroll
    for (int nb = 0; nb < C::kSN / 2; ++nb) {
      std::uint32_t b[4];  // keys 16nb..+7: {b[0], b[1]}; keys 16nb+8..+15: {b[2], b[3]}
      ldmatrix_x4(b, B_s + ldsm_address(w.lane_s_b, 16 * nb, 16 * ks, C::kCols));
#pragma unroll
      for (int mt = 0; mt < C::kSM; ++mt) {
        mma_16816<typename C::T>(acc[mt][2 * nb], a[mt], b[0], b[1]);
        mma_16816<typename C::T>(acc[mt][2 * nb + 1], a[mt], b[2], b[3]);
      }
    }
  }
}

// LSE_i log2(e) and D_i of the warp's rows 16 mt + g + 8 h, read from shared memory once per step
// (before the branch between the masked and unmasked probs_and_grads, so the loads issue early).
// stage_rows stored a lane's 2 kSM rows side by side, so they come as kSM / 2 float4 loads each
// instead of 2 kSM scalar ones: shared-memory instructions queue with the ldmatrix and the dQ REDs
// (tensor_cores.md: How we got here).
template <class C>
struct RowStats {
  static_assert(C::kSM % 2 == 0, "a lane's rows are read four at a time");
  float lse2[C::kSM][2], D_r[C::kSM][2];
  __device__ __forceinline__ RowStats(const float* lse_i, const float* D_i, const WarpTiles<C>& w) {
    const float4* lse4 = reinterpret_cast<const float4*>(lse_i + w.s_row0 + w.g * 2 * C::kSM);
    const float4* D4 = reinterpret_cast<const float4*>(D_i + w.s_row0 + w.g * 2 * C::kSM);
#pragma unroll
    for (int q = 0; q < C::kSM / 2; ++q) {  // rows of mt = 2q, 2q + 1, each h = 0, 1
      const float4 l = lse4[q], d = D4[q];
      lse2[2 * q][0] = l.x * kLog2e, lse2[2 * q][1] = l.y * kLog2e;
      lse2[2 * q + 1][0] = l.z * kLog2e, lse2[2 * q + 1][1] = l.w * kLog2e;
      D_r[2 * q][0] = d.x, D_r[2 * q][1] = d.y, D_r[2 * q + 1][0] = d.z, D_r[2 * q + 1][1] = d.w;
    }
  }
};

// P_ij = exp2(S scale log2(e) - LSE_i log2(e)), already normalized, and dS_ij = P_ij o (dP_ij - D_i),
// both in fp32, then to P_s and dS_s in T (4-byte stores: a lane's two adjacent keys; the 8 rows g
// of a warp land in 8 bank groups thanks to the swizzle). kMasked (the tiles needs_mask picks, and
// sparse halves the mask turns off): masked keys get P = 0. Rows with LSE = +inf get exp2(-inf) = 0,
// never NaN. Rows past Sq have LSE = 0 (zero-filled) and P = 1, but also dO = 0 and D = 0: they
// add exactly 0. i0, j0: the tile's first query row and key; half_on: the warp's 64 keys are kept.
template <class C, bool kMasked>
__device__ __forceinline__ void probs_and_grads(ScoreTile<C>& S, ScoreTile<C>& dP, const SmemTiles<C>& sm,
                                                const RowStats<C>& rs, const WarpTiles<C>& w, const TcParams& prm,
                                                int i0, int j0, bool half_on) {
  using T = typename C::T;
  // BEGIN SOLUTION: recompute P_ij from the forward's LSE (exactly as the forward's exponent rounds it), form dS_ij from dP_ij and D_i, and leave both in shared memory in T for the three products that read them (README: Algorithm; tensor_cores.md)
#pragma unroll
  for (int mt = 0; mt < C::kSM; ++mt) {
#pragma unroll
    for (int nt = 0; nt < C::kSN; ++nt) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        bool seen = true;
        if constexpr (kMasked) {
          const int r = i0 + w.s_row0 + 16 * mt + w.g + 8 * (e / 2), key = j0 + w.s_key0 + 8 * nt + 2 * w.t + e % 2;
          // & and |, not && and ||: no short circuit, so the compiler predicates instead of branching.
          seen = half_on & (key < prm.seqlen_k) & (!prm.causal | fa::causal_visible(r, key, prm.seqlen_q, prm.seqlen_k));
        }
        S[mt][nt][e] = seen ? fast_exp2(fmaf(S[mt][nt][e], prm.scale_log2, -rs.lse2[mt][e / 2])) : 0.0f;
        dP[mt][nt][e] = S[mt][nt][e] * (dP[mt][nt][e] - rs.D_r[mt][e / 2]);
      }
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int at = pair_address(w.lane_store, 16 * mt + 8 * h, 8 * nt, C::Bc);
        *reinterpret_cast<std::uint32_t*>(sm.P_p + at) = pack2<T>(S[mt][nt][2 * h], S[mt][nt][2 * h + 1]);
        *reinterpret_cast<std::uint32_t*>(sm.dS_p + at) = pack2<T>(dP[mt][nt][2 * h], dP[mt][nt][2 * h + 1]);
      }
    }
  }
  // END SOLUTION
}

// dQ_i's part from this key tile, dS_ij K_j over the Bc keys. A = dS_ij (rows x keys) as 06's Q;
// B = K_j (keys x d) with .trans, as 06's V_j.
template <class C>
__device__ __forceinline__ void dq_product(DqTile<C>& dQ, const SmemTiles<C>& sm, const WarpTiles<C>& w) {
#pragma unroll
  for (int kk = 0; kk < C::Bc / 16; ++kk) {
    std::uint32_t a[C::kQM][4];
#pragma unroll
    for (int mt = 0; mt < C::kQM; ++mt) ldmatrix_x4(a[mt], sm.dS_s + ldsm_address(w.lane_q_a, 16 * mt, 16 * kk, C::Bc));
#pragma unroll
    for (int nb = 0; nb < C::kQN / 2; ++nb) {
      std::uint32_t b[4];  // dims 16nb..+7: {b[0], b[1]}; dims 16nb+8..+15: {b[2], b[3]}
      ldmatrix_x4_trans(b, sm.K_s + w.q_b(16 * kk, 16 * nb));
#pragma unroll
      for (int mt = 0; mt < C::kQM; ++mt) {
        mma_16816<typename C::T>(dQ[mt][2 * nb], a[mt], b[0], b[1]);
        mma_16816<typename C::T>(dQ[mt][2 * nb + 1], a[mt], b[2], b[3]);
      }
    }
  }
}

// dst[0] += a, dst[1] += b in global memory, atomically per element; dst is 8-byte aligned.
__device__ __forceinline__ void add_pair(float* dst, float a, float b) {
#if __CUDA_ARCH__ >= 900
  asm volatile("red.global.add.v2.f32 [%0], {%1, %2};\n" ::"l"(__cvta_generic_to_global(dst)), "f"(a), "f"(b)
               : "memory");
#else
  atomicAdd(dst, a);
  atomicAdd(dst + 1, b);
#endif
}

// dQ_accum of Q_i += dQ. Other blocks add into the same rows: the add is a fire-and-forget RED,
// resolved in L2. The two columns 2t, 2t+1 a lane holds are adjacent: sm_90 adds them with one
// 8-byte RED.E.ADD.F32x2, so a warp's instruction fills whole 32-byte sectors (8 rows x 4 lanes
// x 8 bytes); sm_80 has only the 4-byte RED. The accumulator has a whole number of query tiles per
// head (TcParams::dq_rows), so no row is checked against Sq: rows past Sq land in padding that is
// never read. Without a branch the adds are straight-line code that the compiler mixes into the
// ldmatrix and mma of the key_grads that follows; a bounds check per row would keep them apart in
// a burst of 16, and the warp would stall until the memory pipe took them (tensor_cores.md: How we
// got here). dQ_g: (Br, D) global, fp32.
template <class C>
__device__ __forceinline__ void add_dq(float* dQ_g, const DqTile<C>& dQ, const WarpTiles<C>& w) {
#pragma unroll
  for (int mt = 0; mt < C::kQM; ++mt) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int r = w.q_row0 + 16 * mt + w.g + 8 * h;
#pragma unroll
      for (int nt = 0; nt < C::kQN; ++nt)
        add_pair(dQ_g + r * C::kD + w.q_col0 + 8 * nt + 2 * w.t, dQ[mt][nt][2 * h], dQ[mt][nt][2 * h + 1]);
    }
  }
}

// kBulkDq: the warp's part of dQ_i into the shared fp32 tile (rows kDqStride apart), then fenced
// for the copy engine; the bulk reduction of the next barrier's far side adds it to dQ_accum.
template <class C>
__device__ __forceinline__ void store_dq(const SmemTiles<C>& sm, const DqTile<C>& dQ, const WarpTiles<C>& w) {
#pragma unroll
  for (int mt = 0; mt < C::kQM; ++mt)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int r = w.q_row0 + 16 * mt + w.g + 8 * h;
#pragma unroll
      for (int nt = 0; nt < C::kQN; ++nt)
        *reinterpret_cast<float2*>(sm.dQ_p + r * C::kDqStride + w.q_col0 + 8 * nt + 2 * w.t) =
            make_float2(dQ[mt][nt][2 * h], dQ[mt][nt][2 * h + 1]);
    }
  fence_proxy_async();  // these generic-proxy stores before the copy engine's reads
}

// kBulkDq: thread r < Br adds row r of the shared dQ tile to row r of dQ_g (the tile's rows of
// dQ_accum, kD floats each), by one bulk reduction, and commits it. After a barrier that follows
// every thread's store_dq.
template <class C>
__device__ __forceinline__ void add_dq_rows(float* dQ_g, const SmemTiles<C>& sm) {
  if (threadIdx.x < C::Br) {
    bulk_reduce_add_f32(dQ_g + threadIdx.x * C::kD, sm.dQ_s + threadIdx.x * C::kDqStride * 4, C::kD * 4);
    bulk_commit();
  }
}

// kDqInStage: the warp's part of dQ_i into the step's stage (its Q_i and dO_i, which every warp has
// read), as kD / 32 boxes of Br rows x 32 floats in the 128-byte swizzle the dQ map reads: 16-byte
// chunk c of row r at chunk c ^ (r % 8), so the 8 rows of a float2 store fall in 8 chunk columns
// (2 wavefronts for 256 bytes). Then fenced for the copy engine.
template <class C>
__device__ __forceinline__ void store_dq_boxes(unsigned char* stage, const DqTile<C>& dQ, const WarpTiles<C>& w) {
  // The warp's columns from q_col0 = 32 box0 + 8 k0 on, in groups of 8 (one mma tile, nt): group
  // k0 + nt is in box box0 + (k0 + nt) / 4, group (k0 + nt) % 4 of it. k0 is 0 where a warp's
  // columns are whole boxes (D = 256: 64 a warp), 0 or 2 at D = 192 (48 a warp).
  const int k0 = C::kQCols % 32 == 0 ? 0 : w.q_col0 / 8 % 4;
  // Column 8 (k0 + nt) + 2t of a box (box row r, r % 8 = g) sits in chunk 2 ((k0 + nt) % 4) + t / 2
  // at byte 8 (t % 2): swizzled, chunk 2 ((k0 + nt) % 4) ^ (g & 6) plus (t / 2) ^ (g & 1).
  unsigned char* lane = stage + (w.q_col0 / 32) * (C::Br * 128) + w.g * 128 + ((w.t >> 1) ^ (w.g & 1)) * 16 + (w.t & 1) * 8;
  const int gg = w.g >> 1;
#pragma unroll
  for (int mt = 0; mt < C::kQM; ++mt)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      unsigned char* row = lane + (w.q_row0 + 16 * mt + 8 * h) * 128;
#pragma unroll
      for (int nt = 0; nt < C::kQN; ++nt) {
        const int group = k0 + nt;
        *reinterpret_cast<float2*>(row + group / 4 * (C::Br * 128) + ((group % 4) ^ gg) * 32) =
            make_float2(dQ[mt][nt][2 * h], dQ[mt][nt][2 * h + 1]);
      }
    }
  fence_proxy_async();  // these generic-proxy stores before the copy engine's reads
}

// kDqInStage: thread 0 has the copy engine add the stage's kD / 32 boxes to rows i0 .. i0 + Br of
// head bh of dq_accum, and commits them. After a barrier that follows every warp's store_dq_boxes.
template <class C>
__device__ __forceinline__ void add_dq_boxes(const CUtensorMap* map, std::uint32_t stage, int i0, std::int64_t bh) {
  if (threadIdx.x == 0) {
#pragma unroll
    for (int a = 0; a < C::kD / 32; ++a)
      tma_reduce_add_3d(map, 32 * a, i0, static_cast<int>(bh), stage + a * C::Br * 128);
    bulk_commit();
  }
}

// Turn order (deterministic mode): the key tiles that add into one query tile take turns through
// a counter, so every dQ element sees the same order of additions on every run. wait_turn blocks
// the whole block until the counter reaches `rank`; pass_turn, after the block's adds, sets it to
// rank + 1. The tiles of lower rank were launched before this one (blocks start in blockIdx order,
// and ranks follow key tiles), so they are running or done: the wait cannot deadlock.
__device__ __forceinline__ void wait_turn(int* turn, int rank) {
  if (threadIdx.x == 0) {
    while (*reinterpret_cast<volatile int*>(turn) != rank) {
    }
    __threadfence();  // acquire: the previous tile's adds are ordered before ours
  }
  __syncthreads();  // nobody adds before it is this tile's turn
}
__device__ __forceinline__ void pass_turn(int* turn, int rank) {
  __threadfence();  // release: this thread's adds are visible device-wide before the turn passes
  __syncthreads();  // ... for every thread of the block
  if (threadIdx.x == 0) atomicExch(turn, rank + 1);
}

// acc += A^T B over the Br query rows: dV_j += P_ij^T dO_i (A_s = P_s, B_s = dO_i) or
// dK_j += dS_ij^T Q_i. A^T (keys x rows) is read from P_ij / dS_ij (rows x keys) with .trans in
// "cols first" order; B = dO_i (Q_i) with .trans, as 06's V_j.
template <class C>
__device__ __forceinline__ void key_grads(KeyTile<C>& acc, std::uint32_t A_s, std::uint32_t B_s, const WarpTiles<C>& w) {
#pragma unroll
  for (int kk = 0; kk < C::Br / 16; ++kk) {
    std::uint32_t a[C::kVM][4];
#pragma unroll
    for (int mt = 0; mt < C::kVM; ++mt) ldmatrix_x4_trans(a[mt], A_s + ldsm_address(w.lane_v_a, 16 * kk, 16 * mt, C::Bc));
#pragma unroll
    for (int nb = 0; nb < C::kVN / 2; ++nb) {
      std::uint32_t b[4];
      ldmatrix_x4_trans(b, B_s + w.v_b(16 * kk, 16 * nb));
#pragma unroll
      for (int mt = 0; mt < C::kVM; ++mt) {
        mma_16816<typename C::T>(acc[mt][2 * nb], a[mt], b[0], b[1]);
        mma_16816<typename C::T>(acc[mt][2 * nb + 1], a[mt], b[2], b[3]);
      }
    }
  }
}

// dK_j * scale and dV_j, written once in T after the whole walk. dK_g, dV_g: (Bc, D) global, rows
// pitch_or_d(pitch, D) apart (SliceRows); keys: the keys left in the problem; columns D .. kD - 1
// (the tile's padding) are not written.
template <class C, class Pitch>
__device__ __forceinline__ void write_key_grads(typename C::T* dK_g, typename C::T* dV_g, const KeyTile<C>& dK_j,
                                                const KeyTile<C>& dV_j, const WarpTiles<C>& w, int keys, int D,
                                                Pitch pitch, float scale) {
  using T = typename C::T;
  const auto row = pitch_or_d(pitch, D);
#pragma unroll
  for (int mt = 0; mt < C::kVM; ++mt) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int key = w.v_key0 + 16 * mt + w.g + 8 * h;
      if (key >= keys) continue;
#pragma unroll
      for (int nt = 0; nt < C::kVN; ++nt) {  // a quad writes 16 contiguous bytes
        const int col = w.v_col0 + 8 * nt + 2 * w.t;
        if (C::kPadded && w.v_col0 + 8 * nt >= D) continue;  // D a multiple of 8: 8 columns all in or out
        *reinterpret_cast<std::uint32_t*>(dK_g + key * row + col) =
            pack2<T>(scale * dK_j[mt][nt][2 * h], scale * dK_j[mt][nt][2 * h + 1]);
        *reinterpret_cast<std::uint32_t*>(dV_g + key * row + col) = pack2<T>(dV_j[mt][nt][2 * h], dV_j[mt][nt][2 * h + 1]);
      }
    }
  }
}

}  // namespace backward::tc
