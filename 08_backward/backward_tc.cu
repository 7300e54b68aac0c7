// Chapter 08, part 2 -- the same backward (FlashAttention-2, Algorithm 2) on the tensor cores:
// fp16 / bf16 in, fp32 accumulate.
//
// New since backward.cu (the fp32 version) and 06_tensor_core (whose pieces it reuses):
//   * All five products are mma.sync.m16n8k16 (06's mma.cuh). Each warp owns 16 keys of K_j, the
//     rows (M) of S_ij^T = K_j Q_i^T and dP_ij^T = V_j dO_i^T, so their fp32 accumulators are,
//     packed to T, the A fragments of dV_j += P_ij^T dO_i and dK_j += dS_ij^T Q_i (06's P trick).
//   * Which operand needs which transpose (README: Tensor-core backward). Tiles sit row-major in
//     shared memory as they are in global memory: K_j, V_j (keys, d), Q_i, dO_i (rows, d).
//       S^T = K_j Q_i^T, dP^T = V_j dO_i^T: A = K_j / V_j, B = Q_i / dO_i    ldmatrix (as 06's Q, K)
//       dV += P^T dO_i, dK += dS^T Q_i:     B = dO_i / Q_i (k = query rows)  ldmatrix.trans (06's V)
//       dQ_i += dS K_j:  A = dS from the (keys, rows) tile dS^T in smem     ldmatrix.trans
//                        B = K_j (k = keys)                                 ldmatrix.trans
//   * dQ_i sums over keys, which are spread over the 8 warps: dS_ij^T goes through shared memory
//     (T, swizzled), and the block adds its dQ_i part with fp32 atomics into a workspace
//     dQ_accum [B, H, Sq, D]; a last kernel converts dQ_accum * scale to T.
//   * Deterministic mode: key tiles take turns per query tile (a counter per (b, h, i) in the
//     workspace): tile j adds its part after tile j-1, so every dQ element sees the same order of
//     additions on every run.
//   * Q_i, dO_i, LSE_i, D_i are double buffered with cp.async: step n+1's tiles fly while step n
//     is computed. K_j, V_j are loaded once per block. All tiles XOR-swizzled (06's swizzle.h).
// Configuration (FlashAttention-2's sm80 backward for D = 64 / 128): Br = 64 query rows, Bc = 128
// keys, 8 warps, one block per SM (shared memory 145 KiB at D = 128, and dK_j, dV_j take D
// registers per thread).
// Expected effect: per step a warp issues 5 * (Br/16) * (D/8) mmas against 184 (D = 128) LDSM.x4,
// so both the tensor cores and shared-memory bandwidth are busy; with 8 warps per SM, hiding the
// exp2, the dS round trip and two barriers per step decides how close it gets to FlashAttention-2's
// backward (README: Tensor-core backward).
// Run:  ./build/08_backward/08_backward --seqlen 4096 --head-dim 128 --dtype bf16 [--deterministic]

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <initializer_list>
#include <limits>
#include <stdexcept>
#include <string>

#include "05_flash_v2/cp_async.cuh"
#include "06_tensor_core/tensor_core.cuh"  // copy_tile, mma_16816, ldmatrix_x4(_trans), pack2
#include "08_backward/backward.h"
#include "08_backward/tiles.h"
#include "common/cuda_check.h"
#include "common/device_memory.h"
#include "common/warp_reduce.cuh"

namespace backward {
namespace {

using namespace tensor_core;  // 06: copy_tile, ldmatrix_x4, ldmatrix_x4_trans, mma_16816, pack2, swizzle.h
using flash_v2::cp_async_4;
constexpr float kLog2e = 1.4426950408889634f;

// The members copy_tile (06) reads, and the backward's tiles.
template <class T_, int kD_>
struct TcConfig {
  using T = T_;
  static constexpr int kD = kD_;
  static constexpr int kCols = smem_cols(kD);  // smem row length: kD for 64 and 128
  static constexpr bool kSwizzle = true;
  static constexpr int kWarps = 8;
  static constexpr int kThreads = 32 * kWarps;
  static constexpr int Bc = 16 * kWarps;              // keys per block: 16 per warp
  static constexpr int Br = 64;                       // query rows per step
  static constexpr int kQTiles = Br / 16;             // 16-row mma tiles of dQ_i: one per warp ...
  static constexpr int kDqCols = kD * kQTiles / kWarps;  // ... times this many columns of dQ_i
  static constexpr int kKVBytes = Bc * kCols * 2;     // K_j or V_j
  static constexpr int kRowBytes = Br * kCols * 2;    // one stage of Q_i or dO_i
  static constexpr int kDSBytes = Bc * Br * 2;        // dS_ij^T
  static constexpr int kSmemBytes = 2 * kKVBytes + 4 * kRowBytes + kDSBytes + 4 * Br * 4;
  static_assert(kD % 16 == 0 && kDqCols % 16 == 0 && kWarps % kQTiles == 0);
};

struct TcParams {
  const void* q;          // [B, H, Sq, D] global, T
  const void* k;          // [B, Hkv, Sk, D] global
  const void* v;          // [B, Hkv, Sk, D] global
  const void* dout;       // [B, H, Sq, D] global
  const float* lse;       // [B, H, Sq] global, natural log
  const float* D_row;     // [B, H, Sq] global: rowsum(dO o O)
  float* dq_accum;        // [B, H, Sq, D] global, fp32: zeroed, += by atomics
  int* dq_turn;           // [B, H, Tr] global: deterministic mode's turn counters, or null
  const int* walk_offsets;         // sparse: [B * Hkv * Tc + 1] each block's steps (sparse_walk.h)
  const std::uint32_t* walk_steps; // sparse: [n] pack_step(head in group, query tile, halves)
  const int* walk_ranks;           // sparse: [n] each step's turn in deterministic mode
  void* dk;               // [B, Hkv, Sk, D] global, T
  void* dv;               // [B, Hkv, Sk, D] global, T
  int seqlen_q, seqlen_k, group_size;
  bool causal;
  float scale, scale_log2;
};

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

// Preprocessing, one warp per row of [B*H*Sq]: D_i = rowsum(dO_i o O_i) in fp32, and dQ_accum = 0.
constexpr int kPreWarps = 8;
template <class T>
__global__ void __launch_bounds__(32 * kPreWarps)
    tc_dot_do_o_kernel(const T* __restrict__ o,       // [B, H, Sq, D] global
                       const T* __restrict__ dout,    // [B, H, Sq, D] global
                       float* __restrict__ D_row,     // [B, H, Sq] global
                       float* __restrict__ dq_accum,  // [B, H, Sq, D] global
                       std::int64_t rows, int D) {
  const std::int64_t row = blockIdx.x * std::int64_t{kPreWarps} + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= rows) return;  // the whole warp leaves: the shuffles below always see 32 lanes
  float acc = 0.0f;
  for (int c = lane; c < D; c += 32) {
    acc = fmaf(static_cast<float>(dout[row * D + c]), static_cast<float>(o[row * D + c]), acc);
    dq_accum[row * D + c] = 0.0f;
  }
  acc = fa::cuda::warp_sum(acc);
  if (lane == 0) D_row[row] = acc;
}

// dQ = scale * dQ_accum, rounded to T once, 4 elements per thread (D is a multiple of 4).
template <class T>
__global__ void tc_convert_dq_kernel(const float4* __restrict__ dq_accum,  // [B, H, Sq, D / 4] global
                                     uint2* __restrict__ dq,               // [B, H, Sq, D / 4] global, 4 T each
                                     std::int64_t quads, float scale) {
  const std::int64_t n = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x;
  if (n >= quads) return;
  const float4 a = dq_accum[n];
  dq[n] = make_uint2(pack2<T>(scale * a.x, scale * a.y), pack2<T>(scale * a.z, scale * a.w));
}

// grid: (Tc, B*Hkv); block: 8 warps. Warp w owns keys 16w .. 16w+15 of K_j: in mma fragment
// terms (mma.cuh), lane (g, t) holds of S_ij^T, dP_ij^T keys 16w + g (+8) x query rows 8nt + 2t
// (+1), nt < Br/8, and of dK_j, dV_j the same keys x columns 8nt + 2t (+1), nt < D/8. For dQ_i
// the block splits query rows and columns instead: warp w owns rows 16 (w % 4) .. +15 and
// columns kDqCols (w / 4) .. + kDqCols - 1.
//
// kSparse: the block walks the steps the host listed for its key tile (sparse_walk.h, chapter
// 07's mask transposed) instead of every query tile of every head of the group.
template <class C, bool kSparse>
__global__ void __launch_bounds__(C::kThreads, 1) backward_tc_kernel(const TcParams prm) {
  using T = typename C::T;
  constexpr int kD = C::kD, kCols = C::kCols, Br = C::Br, Bc = C::Bc;
  extern __shared__ __align__(128) unsigned char smem[];
  const std::uint32_t K_s = smem_u32(smem);              // (Bc, kCols) smem: K_j
  const std::uint32_t V_s = K_s + C::kKVBytes;           // (Bc, kCols) smem: V_j
  const std::uint32_t Q_s = V_s + C::kKVBytes;           // (2, Br, kCols) smem: Q_i, double buffered
  const std::uint32_t dO_s = Q_s + 2 * C::kRowBytes;     // (2, Br, kCols) smem: dO_i
  const std::uint32_t dS_s = dO_s + 2 * C::kRowBytes;    // (Bc, Br) smem: dS_ij^T in T
  unsigned char* dS_p = smem + (dS_s - K_s);             // the same, as a generic pointer
  float* lse_s = reinterpret_cast<float*>(dS_p + C::kDSBytes);  // (2, Br) smem: LSE_i (0 past Sq)
  float* D_s = lse_s + 2 * Br;                                  // (2, Br) smem: D_i (0 past Sq)
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int g = lane / 4, t = lane % 4;  // fragment coordinates (mma.cuh)
  const int Sq = prm.seqlen_q, Sk = prm.seqlen_k;
  const int j_tile = blockIdx.x, j0 = j_tile * Bc;
  const std::int64_t kv_bh = blockIdx.y;                   // b * Hkv + kv head
  const std::int64_t bh0 = kv_bh * prm.group_size;         // b * H + its first query head
  const T* Q_g = static_cast<const T*>(prm.q);             // [B, H, Sq, D] global
  const T* dO_g = static_cast<const T*>(prm.dout);         // [B, H, Sq, D] global
  // GQA/MQA: steps n = 0 .. group * n_tiles - 1 walk (query head bh0 + n / n_tiles, query tile
  // i_begin + n % n_tiles); causal: query tiles before i_begin see nothing of K_j.
  const int Tr = ceil_div(Sq, Br), i_begin = query_tile_begin(j_tile, Br, Bc, Sq, Sk, prm.causal);
  const int n_tiles = Tr - i_begin;
  const int key_w = 16 * warp;  // this warp's first key of the tile
  // Sparse: this block's list of steps. Dense: group_size * n_tiles steps, computed.
  const std::int64_t walk_row = kv_bh * gridDim.x + j_tile;
  const int walk_begin = kSparse ? prm.walk_offsets[walk_row] : 0;
  const int n_steps = kSparse ? prm.walk_offsets[walk_row + 1] - walk_begin : prm.group_size * n_tiles;
  // Step n: which query head and query tile, and which 64-key halves of K_j the mask keeps.
  struct Step {
    std::int64_t bh;
    int i_tile, halves;
  };
  auto step_at = [&](int n) -> Step {
    if constexpr (kSparse) {
      const std::uint32_t s = prm.walk_steps[walk_begin + n];
      return {bh0 + step_head(s), step_tile(s), step_halves(s)};
    } else {
      return {bh0 + n / n_tiles, i_begin + n % n_tiles, 3};
    }
  };

  // Q_i, dO_i, LSE_i, D_i of step n into stage `buf`, as one cp.async group with what came before.
  auto stage = [&](int n, int buf) {
    const Step st = step_at(n);
    const std::int64_t bh = st.bh;
    const int i0 = st.i_tile * Br;
    copy_tile<C, Br>(Q_s + buf * C::kRowBytes, Q_g + (bh * Sq + i0) * kD, Sq - i0);
    copy_tile<C, Br>(dO_s + buf * C::kRowBytes, dO_g + (bh * Sq + i0) * kD, Sq - i0);
    if (threadIdx.x < 2 * Br) {  // threads 0..Br-1: LSE_i, Br..2Br-1: D_i; zero past Sq
      const int r = threadIdx.x % Br, i = i0 + r;
      const float* src = (threadIdx.x < Br ? prm.lse : prm.D_row) + bh * Sq;
      cp_async_4((threadIdx.x < Br ? lse_s : D_s) + buf * Br + r, i < Sq ? src + i : src, i < Sq);
    }
  };
  copy_tile<C, Bc>(K_s, static_cast<const T*>(prm.k) + (kv_bh * Sk + j0) * kD, Sk - j0);
  copy_tile<C, Bc>(V_s, static_cast<const T*>(prm.v) + (kv_bh * Sk + j0) * kD, Sk - j0);
  if (n_steps > 0) stage(0, 0);
  cp_async_commit();

  // ldmatrix row addresses (swizzle.h): one offset per lane and order, the rest is constant.
  const int lane_rows = ldsm_lane_offset(lane, LdsmOrder::kRowsFirst, kCols, true);  // K_j, V_j as A; .trans B
  const int lane_cols = ldsm_lane_offset(lane, LdsmOrder::kColsFirst, kCols, true);  // Q_i, dO_i as B
  const int lane_dS = ldsm_lane_offset(lane, LdsmOrder::kColsFirst, Br, true);       // dS_ij as A (.trans)
  const int q_tile = warp % C::kQTiles, q_col0 = warp / C::kQTiles * C::kDqCols;    // this warp's part of dQ_i

  float dK_j[kD / 8][4] = {};  // (16 keys, D) per warp, fp32 accumulators
  float dV_j[kD / 8][4] = {};

  for (int n = 0; n < n_steps; ++n) {
    const int buf = n % 2;
    const Step st = step_at(n);
    const std::int64_t bh = st.bh;
    const int i_tile = st.i_tile, i0 = i_tile * Br;
    cp_async_wait<0>();  // this thread's copies of step n (and K_j, V_j) have landed
    __syncthreads();     // ... and everyone's; every warp is done with step n-1's stage and dS_s
    if (n + 1 < n_steps) stage(n + 1, 1 - buf);  // step n+1 flies while step n is computed
    cp_async_commit();
    const std::uint32_t Q_i = Q_s + buf * C::kRowBytes, dO_i = dO_s + buf * C::kRowBytes;
    const float* lse_i = lse_s + buf * Br;
    const float* D_i = D_s + buf * Br;

    // S_ij^T = K_j Q_i^T and dP_ij^T = V_j dO_i^T: per 16-wide step of d, one LDSM of K_j (V_j)
    // and Br/16 of Q_i (dO_i) feed Br/8 mmas. Two loops, so only one A fragment is live at a time.
    float S[Br / 8][4] = {}, dP[Br / 8][4] = {};  // (16 keys, Br rows) per warp
#pragma unroll
    for (int ks = 0; ks < kD / 16; ++ks) {
      std::uint32_t a[4];
      ldmatrix_x4(a, K_s + ldsm_address(lane_rows, key_w, 16 * ks, kCols));
#pragma unroll
      for (int nb = 0; nb < Br / 16; ++nb) {
        std::uint32_t b[4];  // rows 16nb..+7: {b[0], b[1]}; rows 16nb+8..+15: {b[2], b[3]}
        ldmatrix_x4(b, Q_i + ldsm_address(lane_cols, 16 * nb, 16 * ks, kCols));
        mma_16816<T>(S[2 * nb], a, b[0], b[1]);
        mma_16816<T>(S[2 * nb + 1], a, b[2], b[3]);
      }
    }
#pragma unroll
    for (int ks = 0; ks < kD / 16; ++ks) {
      std::uint32_t a[4];
      ldmatrix_x4(a, V_s + ldsm_address(lane_rows, key_w, 16 * ks, kCols));
#pragma unroll
      for (int nb = 0; nb < Br / 16; ++nb) {
        std::uint32_t b[4];
        ldmatrix_x4(b, dO_i + ldsm_address(lane_cols, 16 * nb, 16 * ks, kCols));
        mma_16816<T>(dP[2 * nb], a, b[0], b[1]);
        mma_16816<T>(dP[2 * nb + 1], a, b[2], b[3]);
      }
    }

    // P_ij = exp2(S scale log2(e) - LSE_i log2(e)), already normalized, and
    // dS_ij = P_ij o (dP_ij - D_i), both in fp32; then packed to T as A fragments (06's P trick:
    // n-tiles 2kk and 2kk+1 of the accumulators are the A fragment of query rows 16kk..16kk+15).
    // Masked keys get P = 0; rows with LSE = +inf get exp2(-inf) = 0, never NaN. Rows past Sq
    // have LSE = 0 (zero-filled) and P = 1, but also dO = 0 and D = 0: they add exactly 0.
    // Sparse: a 64-key half the mask turns off counts as masked (warps 0-3 hold keys 0..63).
    const bool half_on = !kSparse || (st.halves >> (key_w / 64) & 1) != 0;
    const bool mask = !half_on || needs_mask(i_tile, j_tile, Br, Bc, Sq, Sk, prm.causal);
    // BEGIN SOLUTION: per (nt, e): P = fast_exp2 (0 if masked), dS = P (dP - D_i); pack2 both into the A fragments P_a, dS_a; dS^T's 4 bytes to dS_s (tile_offset, Br, swizzled)
    // STUB: std::uint32_t P_a[Br / 16][4] = {}, dS_a[Br / 16][4] = {};
    std::uint32_t P_a[Br / 16][4], dS_a[Br / 16][4];  // a0: (g, 2t)  a1: (g+8, 2t)  a2: (g, 2t+8)  a3: (g+8, 2t+8)
#pragma unroll
    for (int nt = 0; nt < Br / 8; ++nt) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int r = 8 * nt + 2 * t + e % 2, key = j0 + key_w + g + 8 * (e / 2);
        const bool seen = !mask || (half_on && key < Sk && (!prm.causal || fa::causal_visible(i0 + r, key, Sq, Sk)));
        S[nt][e] = seen ? fast_exp2(fmaf(S[nt][e], prm.scale_log2, -lse_i[r] * kLog2e)) : 0.0f;
        dP[nt][e] = S[nt][e] * (dP[nt][e] - D_i[r]);
      }
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        P_a[nt / 2][nt % 2 * 2 + h] = pack2<T>(S[nt][2 * h], S[nt][2 * h + 1]);
        dS_a[nt / 2][nt % 2 * 2 + h] = pack2<T>(dP[nt][2 * h], dP[nt][2 * h + 1]);
        // dS_ij^T to dS_s: key row key_w + g + 8h, query rows 8nt + 2t, +1 (one 4-byte store; the
        // 8 g of a warp land in 8 different bank groups thanks to the swizzle).
        *reinterpret_cast<std::uint32_t*>(dS_p + 2 * tile_offset(key_w + g + 8 * h, 8 * nt + 2 * t, Br, true)) =
            dS_a[nt / 2][nt % 2 * 2 + h];
      }
    }
    // END SOLUTION

    // dV_j += P_ij^T dO_i and dK_j += dS_ij^T Q_i: one LDSM.T of dO_i (Q_i) feeds 2 mmas.
#pragma unroll
    for (int kk = 0; kk < Br / 16; ++kk) {
#pragma unroll
      for (int nb = 0; nb < kD / 16; ++nb) {
        std::uint32_t b[4];  // dims 16nb..+7: {b[0], b[1]}; dims 16nb+8..+15: {b[2], b[3]}
        ldmatrix_x4_trans(b, dO_i + ldsm_address(lane_rows, 16 * kk, 16 * nb, kCols));
        mma_16816<T>(dV_j[2 * nb], P_a[kk], b[0], b[1]);
        mma_16816<T>(dV_j[2 * nb + 1], P_a[kk], b[2], b[3]);
        ldmatrix_x4_trans(b, Q_i + ldsm_address(lane_rows, 16 * kk, 16 * nb, kCols));
        mma_16816<T>(dK_j[2 * nb], dS_a[kk], b[0], b[1]);
        mma_16816<T>(dK_j[2 * nb + 1], dS_a[kk], b[2], b[3]);
      }
    }
    __syncthreads();  // all of dS_ij^T is in dS_s: dQ_i contracts over every warp's keys

    // dQ_i += dS_ij K_j over the tile's Bc keys. A = dS_ij (rows x keys) read from dS_ij^T with
    // .trans in "cols first" order; B = K_j (keys x d) with .trans, like 06's V_j.
    float dQ[C::kDqCols / 8][4] = {};  // (16 rows, kDqCols) per warp
#pragma unroll
    for (int kk = 0; kk < Bc / 16; ++kk) {
      std::uint32_t a[4];
      ldmatrix_x4_trans(a, dS_s + ldsm_address(lane_dS, 16 * kk, 16 * q_tile, Br));
#pragma unroll
      for (int nb = 0; nb < C::kDqCols / 16; ++nb) {
        std::uint32_t b[4];
        ldmatrix_x4_trans(b, K_s + ldsm_address(lane_rows, 16 * kk, q_col0 + 16 * nb, kCols));
        mma_16816<T>(dQ[2 * nb], a, b[0], b[1]);
        mma_16816<T>(dQ[2 * nb + 1], a, b[2], b[3]);
      }
    }

    // Deterministic mode: wait for this key tile's turn on (bh, i_tile). Dense: the key tiles
    // that see a query tile are 0 .. J, tile j's rank is j. Sparse: the rank is the number of
    // listed key tiles before j (sparse_walk.h). Each leaves the counter at rank + 1. The tiles
    // before j were launched before it (blocks start in blockIdx order), so they are running or
    // done: the wait cannot deadlock.
    int* turn = prm.dq_turn ? prm.dq_turn + bh * Tr + i_tile : nullptr;
    const int rank = kSparse && turn ? prm.walk_ranks[walk_begin + n] : j_tile;
    if (turn) {
      if (threadIdx.x == 0) {
        while (*reinterpret_cast<volatile int*>(turn) != rank) {
        }
        __threadfence();  // acquire: the previous tile's adds are ordered before ours
      }
      __syncthreads();  // nobody adds before it is this tile's turn
    }
    // Other blocks add into the same rows: atomicAdd with an unused result compiles to a
    // fire-and-forget RED, resolved in L2. The two columns 2t, 2t+1 a lane holds are adjacent:
    // sm_90 adds them with one 8-byte RED.E.ADD.F32x2, so a warp's instruction fills whole
    // 32-byte sectors (8 rows x 4 lanes x 8 bytes); sm_80 has only the 4-byte RED.
    float* dQ_g = prm.dq_accum + (bh * Sq + i0) * kD;  // (Br, D) global, fp32: dQ_accum of Q_i
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int r = 16 * q_tile + g + 8 * h;
      if (i0 + r >= Sq) continue;
#pragma unroll
      for (int nt = 0; nt < C::kDqCols / 8; ++nt) add_pair(dQ_g + r * kD + q_col0 + 8 * nt + 2 * t, dQ[nt][2 * h], dQ[nt][2 * h + 1]);
    }
    if (turn) {
      __threadfence();  // release: this thread's adds are visible device-wide before the turn passes
      __syncthreads();  // ... for every thread of the block
      if (threadIdx.x == 0) atomicExch(turn, rank + 1);
    }
  }

  cp_async_wait<0>();  // a block with no query tile to visit still has K_j, V_j in flight

  // Epilogue: dK_j * scale and dV_j, written once in T, after every query head of the group.
  T* dK_g = static_cast<T*>(prm.dk) + (kv_bh * Sk + j0) * kD;  // (Bc, D) global: dK_j
  T* dV_g = static_cast<T*>(prm.dv) + (kv_bh * Sk + j0) * kD;  // (Bc, D) global: dV_j
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int key = key_w + g + 8 * h;
    if (j0 + key >= Sk) continue;
#pragma unroll
    for (int nt = 0; nt < kD / 8; ++nt) {  // a quad writes 16 contiguous bytes
      *reinterpret_cast<std::uint32_t*>(dK_g + key * kD + 8 * nt + 2 * t) =
          pack2<T>(prm.scale * dK_j[nt][2 * h], prm.scale * dK_j[nt][2 * h + 1]);
      *reinterpret_cast<std::uint32_t*>(dV_g + key * kD + 8 * nt + 2 * t) =
          pack2<T>(dV_j[nt][2 * h], dV_j[nt][2 * h + 1]);
    }
  }
}

constexpr std::size_t align256(std::size_t bytes) { return (bytes + 255) / 256 * 256; }

template <class C, bool kSparse>
void launch(const TcParams& prm, dim3 grid, cudaStream_t stream) {
  // Above 48 KB of shared memory a kernel must opt in, once per configuration.
  static const bool opted_in = [] {
    FA_CUDA_CHECK(cudaFuncSetAttribute(backward_tc_kernel<C, kSparse>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       C::kSmemBytes));
    return true;
  }();
  (void)opted_in;
  backward_tc_kernel<C, kSparse><<<grid, C::kThreads, C::kSmemBytes, stream>>>(prm);
  FA_CHECK_LAUNCH();
}

template <class T, int kD>
void run(const fa::Problem& p, const void* q, const void* k, const void* v, const void* o, const float* lse,
         const void* dout, void* dq, void* dk, void* dv, bool deterministic, const DeviceSparseWalk* walk,
         cudaStream_t stream) {
  using C = TcConfig<T, kD>;
  static_assert(C::Br == kSparseBr && C::Bc == kSparseBc, "the sparse walk is listed in the kernel's tiles");
  const int Tr = ceil_div(p.seqlen_q, C::Br);
  // Workspace: D_i [B, H, Sq] and dQ_accum [B, H, Sq, D] in fp32; deterministic mode adds one
  // turn counter per query tile [B, H, Tr].
  const std::size_t d_bytes = align256(p.lse_elems() * sizeof(float));
  const std::size_t acc_bytes = align256(p.q_elems() * sizeof(float));
  const std::size_t turn_bytes = deterministic ? align256(std::size_t(p.batch) * p.heads * Tr * sizeof(int)) : 0;
  auto* ws = static_cast<unsigned char*>(
      fa::cuda::workspace(d_bytes + acc_bytes + turn_bytes, "08_backward's D_i, fp32 dQ accumulator and turns"));
  auto* D_row = reinterpret_cast<float*>(ws);
  auto* dq_accum = reinterpret_cast<float*>(ws + d_bytes);
  int* dq_turn = deterministic ? reinterpret_cast<int*>(ws + d_bytes + acc_bytes) : nullptr;
  if (dq_turn) FA_CUDA_CHECK(cudaMemsetAsync(dq_turn, 0, turn_bytes, stream));

  const std::int64_t rows = p.lse_elems();
  tc_dot_do_o_kernel<T><<<static_cast<unsigned>((rows + kPreWarps - 1) / kPreWarps), 32 * kPreWarps, 0, stream>>>(
      static_cast<const T*>(o), static_cast<const T*>(dout), D_row, dq_accum, rows, kD);
  FA_CHECK_LAUNCH();

  const TcParams prm{q,
                     k,
                     v,
                     dout,
                     lse,
                     D_row,
                     dq_accum,
                     dq_turn,
                     walk ? walk->offsets() : nullptr,
                     walk ? walk->steps() : nullptr,
                     walk ? walk->ranks() : nullptr,
                     dk,
                     dv,
                     p.seqlen_q,
                     p.seqlen_k,
                     p.group_size(),
                     p.causal,
                     p.scale(),
                     p.scale() * kLog2e};
  const dim3 grid(ceil_div(p.seqlen_k, C::Bc), p.batch * p.kv_heads);
  if (walk) launch<C, true>(prm, grid, stream);
  else launch<C, false>(prm, grid, stream);

  const std::int64_t quads = p.q_elems() / 4;
  tc_convert_dq_kernel<T><<<static_cast<unsigned>((quads + 255) / 256), 256, 0, stream>>>(
      reinterpret_cast<const float4*>(dq_accum), static_cast<uint2*>(dq), quads, p.scale());
  FA_CHECK_LAUNCH();
}

}  // namespace

void tensor_core_backward(const fa::Problem& p, const void* q, const void* k, const void* v, const void* o,
                          const float* lse, const void* dout, void* dq, void* dk, void* dv,
                          const BackwardOptions& options, cudaStream_t stream, const DeviceSparseWalk* walk) {
  // Checks that need no GPU come first, so the refusal tests run anywhere.
  if (p.head_dim != 64 && p.head_dim != 128)
    throw std::invalid_argument("08_backward: the tensor-core backward (f16/bf16) supports head_dim 64 and 128, not " +
                                std::to_string(p.head_dim));
  if (std::int64_t{p.batch} * p.kv_heads > 65535)
    throw std::invalid_argument("08_backward: batch * kv_heads must stay <= 65535 (grid limit)");
  auto aligned16 = [](const void* ptr) { return reinterpret_cast<std::uintptr_t>(ptr) % 16 == 0; };
  for (const void* ptr : std::initializer_list<const void*>{q, k, v, o, dout, dq, dk, dv})
    if (!aligned16(ptr)) throw std::invalid_argument("08_backward: every tensor must be 16-byte aligned (f16/bf16)");
  fa::cuda::require_compute_capability(80, "08_backward", "its f16/bf16 path uses mma.sync, ldmatrix and cp.async");
  const bool det = options.deterministic;
  if (p.dtype == fa::Dtype::bf16) {
    if (p.head_dim == 64) run<__nv_bfloat16, 64>(p, q, k, v, o, lse, dout, dq, dk, dv, det, walk, stream);
    else run<__nv_bfloat16, 128>(p, q, k, v, o, lse, dout, dq, dk, dv, det, walk, stream);
  } else {
    if (p.head_dim == 64) run<__half, 64>(p, q, k, v, o, lse, dout, dq, dk, dv, det, walk, stream);
    else run<__half, 128>(p, q, k, v, o, lse, dout, dq, dk, dv, det, walk, stream);
  }
}

DeviceSparseWalk::DeviceSparseWalk(const fa::Problem& p, const block_sparse::BlockMask& mask)
    : shape_(transpose_mask(p, mask)), size_(shape_.size()) {
  auto upload = [](fa::cuda::DeviceBuffer& buffer, const auto& values) {
    const std::size_t bytes = values.size() * sizeof(values[0]);
    buffer = fa::cuda::DeviceBuffer(bytes);
    if (bytes > 0) FA_CUDA_CHECK(cudaMemcpy(buffer.get(), values.data(), bytes, cudaMemcpyHostToDevice));
  };
  upload(offsets_, shape_.row_offsets);
  upload(steps_, shape_.steps);
  upload(ranks_, shape_.ranks);
  shape_.row_offsets.clear();  // the device has them; the host keeps the problem it fits
  shape_.steps.clear();
  shape_.ranks.clear();
}

void backward(const fa::Problem& p, const DeviceSparseWalk& walk, const void* q, const void* k, const void* v,
              const void* o, const float* lse, const void* dout, void* dq, void* dk, void* dv, cudaStream_t stream,
              const BackwardOptions& options) {
  fa::check_backward_args(chapter().support, p, q, k, v, o, lse, dout, dq, dk, dv);
  if (p.dtype == fa::Dtype::f32)
    throw std::invalid_argument("08_backward: the block-sparse backward is the tensor-core one (f16/bf16), not f32");
  walk.check_fits(p, "08_backward");
  tensor_core_backward(p, q, k, v, o, lse, dout, dq, dk, dv, options, stream, &walk);
}

}  // namespace backward
