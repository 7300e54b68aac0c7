// Chapter 08's tensor-core tile math: the backward's tile sizes and warp split (TcConfig), its
// arguments (TcParams), the two walks over query tiles (dense, and the block-sparse list), and the
// named steps of one (query tile, key tile) pair that backward_tc.cu's kernels are written in:
//   stage_rows       Q_i, dO_i, LSE_i, D_i into a shared-memory stage (cp.async)
//   tile_product     S_ij = Q_i K_j^T, dP_ij = dO_i V_j^T (mma over d)
//   probs_and_grads  P_ij from S_ij and LSE_i, dS_ij = P_ij o (dP_ij - D_i), both to shared memory
//   dq_product       dQ_i's part from this key tile: dS_ij K_j
//   add_dq           ... added into the fp32 dQ accumulator (atomics; wait_turn/pass_turn order them)
//   key_grads        dV_j += P_ij^T dO_i, dK_j += dS_ij^T Q_i (mma over the query rows)
//   write_key_grads  dK_j * scale and dV_j to global memory in T, once
#pragma once

#include <cstdint>

#include "06_tensor_core/tile_math.cuh"  // copy_tile (06), and through it common/device/
#include "08_backward/sparse_walk.h"     // step_head, step_tile, step_halves

namespace backward::tc {

using tensor_core::copy_tile;
using namespace fa::cuda;  // cp.async, ldmatrix_x4(_trans), mma_16816, pack2, the swizzle, kLog2e (common/device/)

// The members copy_tile (06) reads, the backward's tiles, and how the 8 warps split each product
// (FlashAttention-2's sm80 backward: Flash_bwd_kernel_traits<D, Br, Bc, 8, SdP, dKV, dQ>).
//   S, dP (Br x Bc):   kSdpWarpsM warps along query rows x the rest along keys
//   dV, dK (Bc x D):   4 warps along keys x 2 along d
//   dQ (Br x D):       kDqWarpsM warps along query rows x the rest along d
// D = 128: Br = 64, S tiles 32 x 32, dV/dK 32 x 64, dQ 32 x 32. D = 64: Br = 128, S tiles 32 x 64,
// dV/dK 32 x 32, dQ 32 x 32 (the block-sparse walk lists 64-row tiles: it runs Br = 64).
template <class T_, int kD_, int Br_ = 64, int kSdpWarpsM_ = 2, int kDqWarpsM_ = 2>
struct TcConfig {
  using T = T_;
  static constexpr int kD = kD_;
  static constexpr int kCols = smem_cols(kD);  // smem row length: kD for 64 and 128
  static constexpr bool kSwizzle = true;
  static constexpr int kWarps = 8;
  static constexpr int kThreads = 32 * kWarps;
  static constexpr int Bc = 128;                      // keys per block
  static constexpr int Br = Br_;                      // query rows per step
  // Warp tiles: rows x keys of S and dP, keys x columns of dV and dK, rows x columns of dQ.
  static constexpr int kSdpWarpsM = kSdpWarpsM_, kSRows = Br / kSdpWarpsM, kSKeys = Bc * kSdpWarpsM / kWarps;
  static constexpr int kKvWarpsN = 4, kVKeys = Bc / kKvWarpsN, kVCols = kD * kKvWarpsN / kWarps;
  static constexpr int kDqWarpsM = kDqWarpsM_, kQRows = Br / kDqWarpsM, kQCols = kD * kDqWarpsM / kWarps;
  static constexpr int kSM = kSRows / 16, kSN = kSKeys / 8;  // mma tiles of a warp's S, dP
  static constexpr int kVM = kVKeys / 16, kVN = kVCols / 8;  // ... of dV_j, dK_j
  static constexpr int kQM = kQRows / 16, kQN = kQCols / 8;  // ... of dQ_i
  static constexpr int kKVBytes = Bc * kCols * 2;     // K_j or V_j
  static constexpr int kRowBytes = Br * kCols * 2;    // one stage of Q_i or dO_i
  static constexpr int kPBytes = Br * Bc * 2;         // P_ij or dS_ij in T
  static constexpr int kSmemBytes = 2 * kKVBytes + 4 * kRowBytes + 2 * kPBytes + 4 * Br * 4;
  static_assert(kD % 16 == 0 && kSRows % 16 == 0 && kSKeys % 16 == 0 && kSKeys <= 64 && kVCols % 16 == 0 &&
                kQRows % 16 == 0 && kQCols % 16 == 0 && 2 * Br <= kThreads);
};

template <class C>
using ScoreTile = float[C::kSM][C::kSN][4];  // a warp's S_ij or dP_ij, fp32 (mma fragments)
template <class C>
using KeyTile = float[C::kVM][C::kVN][4];  // a warp's dV_j or dK_j, fp32, for the whole walk
template <class C>
using DqTile = float[C::kQM][C::kQN][4];  // a warp's part of dQ_i from one key tile, fp32

struct TcParams {
  const void* q;          // [B, H, Sq, D] global, T
  const void* k;          // [B, Hkv, Sk, D] global
  const void* v;          // [B, Hkv, Sk, D] global
  const void* dout;       // [B, H, Sq, D] global
  const float* lse;       // [B, H, Sq] global, natural log
  const float* D_row;     // [B, H, Sq] global: rowsum(dO o O)
  float* dq_accum;        // [B, H, Sq, D] global, fp32: zeroed, += by atomics
  int* dq_turn;           // [B, H, Tr] global: the deterministic kernels' turn counters
  const int* walk_offsets;          // sparse: [B * Hkv * Tc + 1] each block's steps (sparse_walk.h)
  const std::uint32_t* walk_steps;  // sparse: [n] pack_step(head in group, query tile, halves)
  const int* walk_ranks;            // sparse: [n] each step's turn in deterministic mode
  void* dk;               // [B, Hkv, Sk, D] global, T
  void* dv;               // [B, Hkv, Sk, D] global, T
  std::int64_t batch_kv_heads;  // B * Hkv: the grid's rows (common/device/grid.cuh)
  int seqlen_q, seqlen_k, group_size;
  bool causal;
  float scale, scale_log2;
};

// The block's shared memory, carved as the kernels use it.
template <class C>
struct SmemTiles {
  std::uint32_t K_s, V_s;  // (Bc, kCols) smem: K_j, V_j, for the whole walk
  std::uint32_t Q_s, dO_s;  // (2, Br, kCols) smem: Q_i, dO_i, double buffered
  std::uint32_t P_s, dS_s;  // (Br, Bc) smem: P_ij, dS_ij in T
  unsigned char *P_p, *dS_p;  // the same two, as generic pointers (for the stores)
  float *lse_s, *D_s;         // (2, Br) smem: LSE_i, D_i (0 past Sq)
  __device__ __forceinline__ explicit SmemTiles(unsigned char* smem) {
    K_s = smem_u32(smem);
    V_s = K_s + C::kKVBytes;
    Q_s = V_s + C::kKVBytes;
    dO_s = Q_s + 2 * C::kRowBytes;
    P_s = dO_s + 2 * C::kRowBytes;
    dS_s = P_s + C::kPBytes;
    P_p = smem + (P_s - K_s);
    dS_p = smem + (dS_s - K_s);
    lse_s = reinterpret_cast<float*>(dS_p + C::kPBytes);
    D_s = lse_s + 2 * C::Br;
  }
};

// One step of a block's walk: which query head (b * H + h) and query tile, and which 64-key
// halves of K_j the mask keeps (3: both).
struct Step {
  std::int64_t bh;
  int i_tile, halves;
};

// The dense walk of key tile j_tile: query tiles i_begin .. Tr - 1 of query head bh0, then of
// bh0 + 1, ... (GQA/MQA: group_size heads share K_j, V_j). Causal: query tiles before i_begin see
// nothing of K_j (common/device/tiles.h). In turn order a key tile's rank is its index.
struct DenseWalk {
  static constexpr bool kHalves = false;  // every step keeps both 64-key halves
  std::int64_t bh0;
  int Tr, i_begin, n_steps, rank;
  __device__ __forceinline__ Step first() const { return {bh0, i_begin, 3}; }
  __device__ __forceinline__ Step next(const Step& s, int) const {
    return s.i_tile + 1 < Tr ? Step{s.bh, s.i_tile + 1, 3} : Step{s.bh + 1, i_begin, 3};
  }
  __device__ __forceinline__ int rank_of(int) const { return rank; }
};

// The block-sparse walk: the steps the host listed for this key tile (sparse_walk.h, chapter 07's
// mask transposed). In turn order a step's rank is the number of listed key tiles before j.
struct ListedWalk {
  static constexpr bool kHalves = true;  // a step may turn a 64-key half off
  std::int64_t bh0;
  const std::uint32_t* steps;  // this block's steps
  const int* ranks;
  int n_steps;
  __device__ __forceinline__ Step at(int n) const {
    const std::uint32_t s = steps[n];
    return {bh0 + step_head(s), step_tile(s), step_halves(s)};
  }
  __device__ __forceinline__ Step first() const { return n_steps > 0 ? at(0) : Step{bh0, 0, 0}; }
  __device__ __forceinline__ Step next(const Step&, int n) const { return at(n); }
  __device__ __forceinline__ int rank_of(int n) const { return ranks[n]; }
};

// Q_i, dO_i, LSE_i, D_i of step st into stage `buf`, as one cp.async group with what came before.
template <class C>
__device__ __forceinline__ void stage_rows(const SmemTiles<C>& sm, const TcParams& prm, const Step& st, int buf) {
  using T = typename C::T;
  constexpr int Br = C::Br, kD = C::kD;
  const int Sq = prm.seqlen_q, i0 = st.i_tile * Br;
  copy_tile<C, Br>(sm.Q_s + buf * C::kRowBytes, static_cast<const T*>(prm.q) + (st.bh * Sq + i0) * kD, Sq - i0);
  copy_tile<C, Br>(sm.dO_s + buf * C::kRowBytes, static_cast<const T*>(prm.dout) + (st.bh * Sq + i0) * kD, Sq - i0);
  if (threadIdx.x < 2 * Br) {  // threads 0..Br-1: LSE_i, Br..2Br-1: D_i; zero past Sq
    const int r = threadIdx.x % Br, i = i0 + r;
    const float* src = (threadIdx.x < Br ? prm.lse : prm.D_row) + st.bh * Sq;
    cp_async_4((threadIdx.x < Br ? sm.lse_s : sm.D_s) + buf * Br + r, i < Sq ? src + i : src, i < Sq);
  }
}

// A warp's corners in each product's split, and its ldmatrix row addresses (swizzle.h): one
// offset per lane and operand, with the warp's corner folded in (ldsm_warp_offset), so that the
// loops add only constants. g, t: the lane's mma fragment coordinates (mma.cuh).
template <class C>
struct WarpTiles {
  int g, t;
  int s_row0, s_key0;  // S_ij, dP_ij: rows, keys
  int v_key0, v_col0;  // dV_j, dK_j: keys, columns
  int q_row0, q_col0;  // dQ_i: rows, columns
  int lane_s_a, lane_s_b, lane_q_a, lane_q_b, lane_v_a, lane_v_b, lane_store;
  __device__ __forceinline__ WarpTiles(int warp, int lane) : g(lane / 4), t(lane % 4) {
    constexpr int kCols = C::kCols, Bc = C::Bc;
    s_row0 = warp % C::kSdpWarpsM * C::kSRows, s_key0 = warp / C::kSdpWarpsM * C::kSKeys;
    v_key0 = warp % C::kKvWarpsN * C::kVKeys, v_col0 = warp / C::kKvWarpsN * C::kVCols;
    q_row0 = warp % C::kDqWarpsM * C::kQRows, q_col0 = warp / C::kDqWarpsM * C::kQCols;
    const int rows_k = ldsm_lane_offset(lane, LdsmOrder::kRowsFirst, kCols, true);
    const int cols_k = ldsm_lane_offset(lane, LdsmOrder::kColsFirst, kCols, true);
    lane_s_a = ldsm_warp_offset(rows_k, s_row0, 0, kCols);  // Q_i, dO_i as A of S, dP
    lane_s_b = ldsm_warp_offset(cols_k, s_key0, 0, kCols);  // K_j, V_j as B of S, dP
    lane_q_a = ldsm_warp_offset(ldsm_lane_offset(lane, LdsmOrder::kRowsFirst, Bc, true), q_row0, 0, Bc);  // dS_ij
    lane_q_b = ldsm_warp_offset(rows_k, 0, q_col0, kCols);  // K_j as B of dQ (.trans)
    lane_v_a = ldsm_warp_offset(ldsm_lane_offset(lane, LdsmOrder::kColsFirst, Bc, true), 0, v_key0, Bc);  // P^T, dS^T
    lane_v_b = ldsm_warp_offset(rows_k, 0, v_col0, kCols);  // dO_i, Q_i as B of dV, dK (.trans)
    lane_store = 2 * tile_offset(s_row0 + g, s_key0 + 2 * t, Bc, true);  // P_ij, dS_ij pairs (pair_address)
  }
};

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
template <class C>
struct RowStats {
  float lse2[C::kSM][2], D_r[C::kSM][2];
  __device__ __forceinline__ RowStats(const float* lse_i, const float* D_i, const WarpTiles<C>& w) {
#pragma unroll
    for (int mt = 0; mt < C::kSM; ++mt) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        lse2[mt][h] = lse_i[w.s_row0 + 16 * mt + w.g + 8 * h] * kLog2e;
        D_r[mt][h] = D_i[w.s_row0 + 16 * mt + w.g + 8 * h];
      }
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
  // BEGIN SOLUTION: per (mt, nt, e): P = fast_exp2(S scale_log2 - rs.lse2) (0 if masked), dS = P (dP - rs.D_r); pack2 pairs of both into sm.P_p, sm.dS_p at pair_address(w.lane_store, 16 mt + 8 h, 8 nt, Bc)
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
      ldmatrix_x4_trans(b, sm.K_s + ldsm_address(w.lane_q_b, 16 * kk, 16 * nb, C::kCols));
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
// x 8 bytes); sm_80 has only the 4-byte RED. The adds drain while the tensor cores run key_grads.
// dQ_g: (Br, D) global, fp32; rows: the query rows left in the problem.
template <class C>
__device__ __forceinline__ void add_dq(float* dQ_g, const DqTile<C>& dQ, const WarpTiles<C>& w, int rows) {
#pragma unroll
  for (int mt = 0; mt < C::kQM; ++mt) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int r = w.q_row0 + 16 * mt + w.g + 8 * h;
      if (r >= rows) continue;
#pragma unroll
      for (int nt = 0; nt < C::kQN; ++nt)
        add_pair(dQ_g + r * C::kD + w.q_col0 + 8 * nt + 2 * w.t, dQ[mt][nt][2 * h], dQ[mt][nt][2 * h + 1]);
    }
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
      ldmatrix_x4_trans(b, B_s + ldsm_address(w.lane_v_b, 16 * kk, 16 * nb, C::kCols));
#pragma unroll
      for (int mt = 0; mt < C::kVM; ++mt) {
        mma_16816<typename C::T>(acc[mt][2 * nb], a[mt], b[0], b[1]);
        mma_16816<typename C::T>(acc[mt][2 * nb + 1], a[mt], b[2], b[3]);
      }
    }
  }
}

// dK_j * scale and dV_j, written once in T after the whole walk. dK_g, dV_g: (Bc, D) global;
// keys: the keys left in the problem.
template <class C>
__device__ __forceinline__ void write_key_grads(typename C::T* dK_g, typename C::T* dV_g, const KeyTile<C>& dK_j,
                                                const KeyTile<C>& dV_j, const WarpTiles<C>& w, int keys, float scale) {
  using T = typename C::T;
#pragma unroll
  for (int mt = 0; mt < C::kVM; ++mt) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int key = w.v_key0 + 16 * mt + w.g + 8 * h;
      if (key >= keys) continue;
#pragma unroll
      for (int nt = 0; nt < C::kVN; ++nt) {  // a quad writes 16 contiguous bytes
        const int col = w.v_col0 + 8 * nt + 2 * w.t;
        *reinterpret_cast<std::uint32_t*>(dK_g + key * C::kD + col) =
            pack2<T>(scale * dK_j[mt][nt][2 * h], scale * dK_j[mt][nt][2 * h + 1]);
        *reinterpret_cast<std::uint32_t*>(dV_g + key * C::kD + col) = pack2<T>(dV_j[mt][nt][2 * h], dV_j[mt][nt][2 * h + 1]);
      }
    }
  }
}

}  // namespace backward::tc
