// Chapter 06 -- FlashAttention-2's forward on the tensor cores: fp16 / bf16 in, fp32 accumulate.
//
// New since 05 (diff -u 05_flash_v2/flash_v2.cu 06_tensor_core/tensor_core.cuh):
//   * Both products run on the tensor cores: mma.sync.m16n8k16 (HMMA.16816.F32) takes 16x16 and
//     16x8 tiles of fp16/bf16 and accumulates in fp32. S_ij, O_i, m_i, l_i stay fp32.
//   * Operands reach registers through ldmatrix.x4 (LDSM): 4 8x8 matrices per instruction, laid
//     out as the mma wants them (mma.cuh). K_j is read as is: a row-major (Bc, d) tile is the
//     column-major B that S = Q K^T needs. V_j is read with .trans for O += P V.
//   * P never touches shared memory: the fp32 accumulators of two adjacent 8-key n-tiles of S_ij
//     are, element for element, the A fragment of a 16-key k-step of P V (README: Walkthrough).
//   * Shared tiles are XOR-swizzled (swizzle.h): the 16-byte cp.async stores and the ldmatrix
//     reads are both conflict free, with no padding.
//   * K_j and V_j are double buffered: K_{j+1}, V_{j+1} are in flight during all of tile j, and
//     one __syncthreads per tile both publishes a stage and frees the other.
//   * Each warp owns 16 x kMTiles rows (32 for D <= 128), so every K/V fragment read from shared
//     memory feeds kMTiles mmas; Br = 128 for D <= 128, as in FlashAttention-2.
//   * The scale is folded into the exponent instead of into Q: p = exp2(s * scale * log2(e) - m'),
//     one FFMA and one MUFU.EX2, because Q now stays in its 16-bit type from global to mma.
//   * At D = 128 a warp rescales O_i (128 FMULs per thread) only in key tiles where the max of
//     some of its rows grew (kLazyRescale, one vote): an unchanged max means alpha = 1 exactly,
//     and after the first few dozen tiles most tiles change no row's max.
// Expected effect: a ceiling ~10x higher than 05's (mma.sync bf16 ~645 TFLOP/s on an H100 against
// 67 for FFMA). What now decides how close we get is feeding the tensor cores: the softmax
// (MUFU.EX2 does 16 per clock per SM) and the shared-memory reads must hide behind the mmas of
// the other warps, with 8 warps per SM at most (README: Results).
// Run:  ./build/06_tensor_core/06_tensor_core --seqlen 4096 --head-dim 128 --dtype bf16

#pragma once

#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>

#include "common/cuda_check.h"
#include "common/device/cp_async.cuh"
#include "common/device/cp_async.cuh"
#include "common/device/grid.cuh"
#include "common/device/launch.h"
#include "common/device/math.cuh"
#include "common/device/mma.cuh"
#include "common/device/swizzle.h"
#include "common/device/tiles.h"
#include "common/problem.h"

namespace tensor_core {

// The device vocabulary (common/device/): cp.async and tile math from 05, mma.sync, ldmatrix and
// the swizzle taught here.
using namespace fa::cuda;

struct Params {
  const void* q;  // [B, H, Sq, D] global, fp16 / bf16
  const void* k;  // [B, Hkv, Sk, D] global
  const void* v;  // [B, Hkv, Sk, D] global
  void* o;        // [B, H, Sq, D] global
  float* lse;     // [B, H, Sq] global, natural log
  std::int64_t batch_heads;  // B * H: the grid's rows (common/device/grid.cuh)
  int seqlen_q, seqlen_k;
  int group_size;  // H / Hkv: query heads per KV head
  bool causal;
  float scale_log2;  // softmax scale * log2(e)
};

// Tile sizes and switches. The step-by-step versions of the README are this kernel with some
// switches off (steps.cu); the chapter's choice per head dim is ChapterConfig below.
template <class T_, int kD_, int kBc, int kMTiles_, int kStages_ = 2, bool kSwizzle_ = true,
          bool kQInRegs_ = false, bool kPingPong_ = false, bool kLazyRescale_ = false>
struct Config {
  using T = T_;
  static constexpr int kD = kD_;
  static constexpr int kCols = smem_cols(kD);  // smem row: a power of two of chunks (swizzle.h)
  static constexpr bool kPingPong = kPingPong_;  // two groups of 4 warps take turns (pingpong_kernel)
  static constexpr int kWarps = kPingPong ? 8 : 4;
  static constexpr int kThreads = 32 * kWarps;
  static constexpr int kMTiles = kMTiles_;  // 16-row mma tiles per warp
  static constexpr int Br = 16 * kMTiles * kWarps;
  static constexpr int Bc = kBc;
  static constexpr int kStages = kStages_;    // 1: load K_j, V_j, wait, compute. 2: double buffer
  static constexpr bool kSwizzle = kSwizzle_;
  static constexpr bool kQInRegs = kQInRegs_;  // Q_i's A fragments loaded once, kept in registers
  static constexpr bool kLazyRescale = kLazyRescale_;  // O_i *= alpha only when some row's max grew
  static constexpr int kSmemBytes = (Br + 2 * kStages * Bc) * kCols * 2;
  static_assert(kD % 16 == 0 && Bc % 16 == 0 && kStages >= 1 && kStages <= 2);
  static_assert(!kPingPong || (kStages == 2 && kSwizzle && !kQInRegs));
};

// The chapter's choice (README: "Choosing the tiles"). D <= 128: Br = 128 (32 rows per warp),
// FlashAttention-2's blocks, with Bc = 128 at D = 64 (measured faster than Bc = 64 with Q_i in
// registers, step v4) and Bc = 64 above; D = 256: 16 rows per warp, or O_i alone would take
// 256 registers. Only D = 32 has registers left for Q_i's fragments. The lazy rescale (step v6)
// at D = 128, where it measured 3-7% faster; at D = 64 it measured 1-3% slower.
template <class T, int kD>
using ChapterConfig = Config<T, kD, /*Bc=*/kD == 64 ? 128 : (kD <= 128 ? 64 : 32),
                             /*kMTiles=*/kD <= 128 ? 2 : 1, /*kStages=*/2, /*kSwizzle=*/true,
                             /*kQInRegs=*/kD <= 32, /*kPingPong=*/false, /*kLazyRescale=*/kD == 128>;

// Stages rows [0, rows) of a row-major (rows, D) global matrix into a (kRows, kCols) smem tile
// with 16-byte cp.async; rows past `rows` are zero-filled (src-size 0: nothing is read), so a
// partial tile needs no other care. Padding columns (D = 96 in 128) are never read: not copied.
// kThreads: how many threads (0 .. kThreads - 1) share the copy.
template <class C, int kRows, int kThreads = C::kThreads>
__device__ __forceinline__ void copy_tile(std::uint32_t tile, const typename C::T* src, int rows) {
  constexpr int kRowChunks = C::kCols / kChunkElems;
  constexpr int kRowsPerIt = kThreads / kRowChunks;  // rows one pass of the threads covers
  static_assert(kRows % kRowsPerIt == 0);
  const int r_t = copy_row(threadIdx.x, kRowChunks), c = copy_chunk(threadIdx.x, kRowChunks) * kChunkElems;
  if (c >= C::kD) return;
  const typename C::T* src_t = src + r_t * C::kD + c;  // this thread's first chunk
  // The swizzle key repeats every 8 rows (swizzle.h): when a pass covers a multiple of 8 rows,
  // the thread's smem offset moves by whole rows, and every copy takes immediate offsets.
  auto dst = [&](int it) {
    const int offset = kRowsPerIt % 8 == 0
                           ? tile_offset(r_t, c, C::kCols, C::kSwizzle) + it * kRowsPerIt * C::kCols
                           : tile_offset(r_t + it * kRowsPerIt, c, C::kCols, C::kSwizzle);
    return tile + 2 * offset;
  };
  if (rows >= kRows) {  // a whole tile: no predicates
#pragma unroll
    for (int it = 0; it < kRows / kRowsPerIt; ++it) cp_async_16(dst(it), src_t + it * kRowsPerIt * C::kD, true);
  } else {
#pragma unroll
    for (int it = 0; it < kRows / kRowsPerIt; ++it) {
      const bool inside = r_t + it * kRowsPerIt < rows;
      cp_async_16(dst(it), inside ? src_t + it * kRowsPerIt * C::kD : src, inside);
    }
  }
}

// A warp's share of O_i: 16 kMTiles rows. In mma tile mt, lane (g, t) holds rows 16 mt + g and
// 16 mt + g + 8 (h = 0, 1): of S_ij, keys 8 nt + 2t, 8 nt + 2t + 1 (nt < Bc/8); of O_i, columns
// 8 nt + 2t, +1 (nt < D/8).
template <class C>
struct WarpRows {
  float O[C::kMTiles][C::kD / 8][4];  // (16 kM, D) fp32 accumulators
  float m[C::kMTiles][2];             // running max of rows g, g + 8 (raw score units)
  float l[C::kMTiles][2];             // running sum over this thread's keys (the quad's: at the end)
  __device__ __forceinline__ WarpRows() {
#pragma unroll
    for (int mt = 0; mt < C::kMTiles; ++mt) {
#pragma unroll
      for (int nt = 0; nt < C::kD / 8; ++nt) O[mt][nt][0] = O[mt][nt][1] = O[mt][nt][2] = O[mt][nt][3] = 0.0f;
      m[mt][0] = m[mt][1] = -std::numeric_limits<float>::infinity();
      l[mt][0] = l[mt][1] = 0.0f;
    }
  }
};

template <class C>
using ScoreTile = float[C::kMTiles][C::Bc / 8][4];  // S_ij, the warp's rows: C fragments
template <class C>
using PTile = std::uint32_t[C::kMTiles][C::Bc / 16][4];  // P_ij in T: A fragments, one per 16 keys
template <class C>
using QFrags = std::uint32_t[C::kMTiles][C::kQInRegs ? C::kD / 16 : 1][4];

// S_ij = Q_i K_j^T for the warp's rows: per 16-wide step of d, one LDSM of K feeds 2 kM mmas
// (two 8-key n-tiles). Q_w: the warp's rows of Q_i; K_j: the key tile's stage.
template <class C>
__device__ __forceinline__ void tile_scores(ScoreTile<C>& S, const QFrags<C>& q_frag, std::uint32_t Q_w,
                                            std::uint32_t K_j, int lane_a, int lane_b) {
  constexpr int kM = C::kMTiles, kCols = C::kCols;
#pragma unroll
  for (int mt = 0; mt < kM; ++mt)
#pragma unroll
    for (int nt = 0; nt < C::Bc / 8; ++nt) S[mt][nt][0] = S[mt][nt][1] = S[mt][nt][2] = S[mt][nt][3] = 0.0f;
#pragma unroll
  for (int ks = 0; ks < C::kD / 16; ++ks) {
    std::uint32_t a[kM][4];
#pragma unroll
    for (int mt = 0; mt < kM; ++mt) {
      if constexpr (C::kQInRegs) {
#pragma unroll
        for (int r = 0; r < 4; ++r) a[mt][r] = q_frag[mt][ks][r];
      } else {
        ldmatrix_x4(a[mt], Q_w + ldsm_address(lane_a, 16 * mt, 16 * ks, kCols));
      }
    }
#pragma unroll
    for (int nb = 0; nb < C::Bc / 16; ++nb) {
      std::uint32_t b[4];  // keys 16nb..+7: {b[0], b[1]}; keys 16nb+8..+15: {b[2], b[3]}
      ldmatrix_x4(b, K_j + ldsm_address(lane_b, 16 * nb, 16 * ks, kCols));
#pragma unroll
      for (int mt = 0; mt < kM; ++mt) {
        mma_16816<typename C::T>(S[mt][2 * nb], a[mt], b[0], b[1]);
        mma_16816<typename C::T>(S[mt][2 * nb + 1], a[mt], b[2], b[3]);
      }
    }
  }
}

// The element mask, for the tiles needs_mask picks: -inf where the key is past Sk or causally
// hidden. row: the query row of this lane's first element (mt = 0, h = 0); j0: the tile's first key.
template <class C>
__device__ __forceinline__ void mask_scores(ScoreTile<C>& S, int row, int j0, int t, const Params& prm) {
#pragma unroll
  for (int mt = 0; mt < C::kMTiles; ++mt)
#pragma unroll
    for (int nt = 0; nt < C::Bc / 8; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int i = row + 16 * mt + 8 * (e / 2), j = j0 + 8 * nt + 2 * t + e % 2;
        if (j >= prm.seqlen_k || (prm.causal && !fa::causal_visible(i, j, prm.seqlen_q, prm.seqlen_k)))
          S[mt][nt][e] = -std::numeric_limits<float>::infinity();
      }
}

// Online softmax. A row's Bc keys sit in the 4 lanes of a quad (same g, t = 0..3), so two
// xor-shuffles (1, 2) give its max; the sum l stays per thread until the end. P_ij leaves in T,
// already as the A fragments of P V: keys 16kk..16kk+15 are S_ij's n-tiles 2kk and 2kk+1,
// element for element (README: Walkthrough). No shuffle, no shared memory.
template <class C>
__device__ __forceinline__ void softmax_step(const ScoreTile<C>& S_ij, PTile<C>& P_ij, WarpRows<C>& w,
                                             float scale_log2) {
  // BEGIN SOLUTION: per row (mt, h): m = quad max (xor 1, 2) of w.m and S_ij, m' = m * scale_log2 (0 if -inf), alpha = fast_exp2(w.m scale_log2 - m'); w.O *= alpha (kLazyRescale: only if some row's max grew, __any_sync); P = fast_exp2(S scale_log2 - m') -> P_ij A fragments (pack2); w.m = m, w.l = w.l alpha + sum P
  constexpr float kInf = std::numeric_limits<float>::infinity();
  float m_scaled[C::kMTiles][2], alpha[C::kMTiles][2];
  bool grew = false;  // did the max of any of this thread's rows grow?
#pragma unroll
  for (int mt = 0; mt < C::kMTiles; ++mt) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float m = w.m[mt][h];
#pragma unroll
      for (int nt = 0; nt < C::Bc / 8; ++nt) m = fmaxf(m, fmaxf(S_ij[mt][nt][2 * h], S_ij[mt][nt][2 * h + 1]));
      m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 1));
      m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 2));
      // No key seen yet (m = -inf): subtract 0 instead, so exp2(-inf - (-inf)) = NaN never happens.
      m_scaled[mt][h] = m == -kInf ? 0.0f : m * scale_log2;
      alpha[mt][h] = fast_exp2(w.m[mt][h] * scale_log2 - m_scaled[mt][h]);  // rescales earlier tiles
      grew |= m > w.m[mt][h];
      w.m[mt][h] = m;
    }
  }
  // An unchanged max gives alpha = exp2(0) = 1 exactly: skipping O *= 1 changes no bit. With
  // kLazyRescale the warp skips the kMTiles * D / 2 FMULs per thread (128 at D = 128) when none
  // of its 16 kMTiles rows grew (one vote).
  if (!C::kLazyRescale || __any_sync(0xffffffffu, grew)) {
#pragma unroll
    for (int mt = 0; mt < C::kMTiles; ++mt)
#pragma unroll
      for (int nt = 0; nt < C::kD / 8; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) w.O[mt][nt][e] *= alpha[mt][e / 2];
  }
  // a0: (g, 2t)  a1: (g+8, 2t)  a2: (g, 2t+8)  a3: (g+8, 2t+8)
#pragma unroll
  for (int mt = 0; mt < C::kMTiles; ++mt) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float sum = 0.0f;
#pragma unroll
      for (int nt = 0; nt < C::Bc / 8; ++nt) {
        // exp(scale (s - m)) = exp2(s * scale * log2e - m * scale * log2e): one FFMA + MUFU.EX2
        const float p0 = fast_exp2(fmaf(S_ij[mt][nt][2 * h], scale_log2, -m_scaled[mt][h]));
        const float p1 = fast_exp2(fmaf(S_ij[mt][nt][2 * h + 1], scale_log2, -m_scaled[mt][h]));
        sum += p0 + p1;
        P_ij[mt][nt / 2][nt % 2 * 2 + h] = pack2<typename C::T>(p0, p1);
      }
      w.l[mt][h] = w.l[mt][h] * alpha[mt][h] + sum;
    }
  }
  // END SOLUTION
}

// O_i += P_ij V_j: one LDSM.T of V feeds 2 kM mmas.
template <class C>
__device__ __forceinline__ void accumulate_pv(WarpRows<C>& w, const PTile<C>& P_ij, std::uint32_t V_j, int lane_a) {
  // BEGIN SOLUTION: w.O += P_ij V_j: per 16-key step kk and 16 dims nb, one ldmatrix_x4_trans of V_j, two mma_16816 per mt with A = P_ij[mt][kk]
#pragma unroll
  for (int kk = 0; kk < C::Bc / 16; ++kk) {
#pragma unroll
    for (int nb = 0; nb < C::kD / 16; ++nb) {
      std::uint32_t b[4];  // dims 16nb..+7: {b[0], b[1]}; dims 16nb+8..+15: {b[2], b[3]}
      ldmatrix_x4_trans(b, V_j + ldsm_address(lane_a, 16 * kk, 16 * nb, C::kCols));
#pragma unroll
      for (int mt = 0; mt < C::kMTiles; ++mt) {
        mma_16816<typename C::T>(w.O[mt][2 * nb], P_ij[mt][kk], b[0], b[1]);
        mma_16816<typename C::T>(w.O[mt][2 * nb + 1], P_ij[mt][kk], b[2], b[3]);
      }
    }
  }
  // END SOLUTION
}

// Epilogue: the row sums over the quad, O_i / l_i once, LSE = m * scale + log(l) (natural log).
// row: the query row of this lane's first element (mt = 0, h = 0); rows past Sq are not written.
template <class C>
__device__ __forceinline__ void write_rows(const WarpRows<C>& w, const Params& prm, std::int64_t bh, int row, int t) {
  using T = typename C::T;
  constexpr int kD = C::kD;
  T* O_g = static_cast<T*>(prm.o) + bh * prm.seqlen_q * kD;  // (Sq, D) global
  const float scale = prm.scale_log2 * kLn2;
#pragma unroll
  for (int mt = 0; mt < C::kMTiles; ++mt) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float l = w.l[mt][h];
      l += __shfl_xor_sync(0xffffffffu, l, 1);
      l += __shfl_xor_sync(0xffffffffu, l, 2);
      const int r = row + 16 * mt + 8 * h;
      if (r >= prm.seqlen_q) continue;
      const float inv_l = l > 0.0f ? 1.0f / l : 0.0f;  // a row that sees no key: O = 0
#pragma unroll
      for (int nt = 0; nt < kD / 8; ++nt)  // a quad writes 16 contiguous bytes
        *reinterpret_cast<std::uint32_t*>(O_g + std::int64_t{r} * kD + 8 * nt + 2 * t) =
            pack2<T>(w.O[mt][nt][2 * h] * inv_l, w.O[mt][nt][2 * h + 1] * inv_l);
      if (t == 0)
        prm.lse[bh * prm.seqlen_q + r] = l > 0.0f ? w.m[mt][h] * scale + logf(l) : std::numeric_limits<float>::infinity();
    }
  }
}

// One (query tile, head) block's view of global memory.
template <class C>
struct BlockInputs {
  std::int64_t bh;         // b * H + h
  const typename C::T* Q;  // (Br, D) global: Q_i
  const typename C::T* K;  // (Sk, D) global
  const typename C::T* V;  // (Sk, D) global
  __device__ __forceinline__ BlockInputs(const Params& prm, int i0) : bh(fa::cuda::grid_row()) {
    using T = typename C::T;
    const std::int64_t kv_bh = bh / prm.group_size;  // b * Hkv + h / (H / Hkv)
    Q = static_cast<const T*>(prm.q) + (bh * prm.seqlen_q + i0) * C::kD;
    K = static_cast<const T*>(prm.k) + kv_bh * prm.seqlen_k * C::kD;
    V = static_cast<const T*>(prm.v) + kv_bh * prm.seqlen_k * C::kD;
  }
};

// Causal: the last query tiles see the most keys, so they are launched first (less tail).
__device__ __forceinline__ int query_tile(const Params& prm) {
  return prm.causal ? gridDim.x - 1 - blockIdx.x : blockIdx.x;
}

// grid: Tr along x by B*H rows over y and z; block: 4 warps. Warp w owns rows
// [16 kMTiles w, 16 kMTiles (w+1)) of Q_i.
template <class C>
__global__ void __launch_bounds__(C::kThreads, 2) tensor_core_kernel(const Params prm) {
  static_assert(!C::kPingPong);
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
  const BlockInputs<C> in(prm, i0);
  const int Sq = prm.seqlen_q, Sk = prm.seqlen_k;
  const int Tc_end = key_tile_end(i_tile, Br, Bc, Sq, Sk, prm.causal);
  const int row0 = 16 * C::kMTiles * warp;  // this warp's first row of Q_i

  // Prologue: Q_i in one group, K_0 and V_0 in the next.
  copy_tile<C, Br>(Q_s, in.Q, Sq - i0);
  cp_async_commit();
  if (Tc_end > 0) {
    copy_tile<C, Bc>(K_s, in.K, Sk);
    copy_tile<C, Bc>(V_s, in.V, Sk);
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
  for (int j_tile = 0; j_tile < Tc_end; ++j_tile) {
    const int j0 = j_tile * Bc;
    if constexpr (C::kStages == 1) {
      if (j_tile > 0) {
        __syncthreads();  // every warp is done with K_{j-1}, V_{j-1}: their buffers are free
        copy_tile<C, Bc>(K_s, in.K + j0 * kD, Sk - j0);
        copy_tile<C, Bc>(V_s, in.V + j0 * kD, Sk - j0);
        cp_async_commit();
      }
    }
    cp_async_wait<0>();  // this thread's copies of K_j, V_j (and Q_i) have landed
    __syncthreads();     // ... and everyone's; and every warp is done with tile j-1's stage
    const int stage = C::kStages == 2 ? j_tile % 2 : 0;
    if constexpr (C::kStages == 2) {
      if (j_tile + 1 < Tc_end) {  // K_{j+1}, V_{j+1} fly while tile j is computed
        const std::uint32_t next = (1 - stage) * kTileBytes;
        copy_tile<C, Bc>(K_s + next, in.K + (j0 + Bc) * kD, Sk - j0 - Bc);
        copy_tile<C, Bc>(V_s + next, in.V + (j0 + Bc) * kD, Sk - j0 - Bc);
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
  write_rows<C>(w, prm, in.bh, i0 + row0 + g, t);
}

// Ping-pong (README: "Two groups take turns"): 8 warps, two groups of 4 with 128 rows of Q_i
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
  static_assert(C::kPingPong && C::kWarps == 8);
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

// The kernel's arguments, after the checks that go beyond fa::check_forward_args.
inline Params make_params(const fa::Problem& p, const void* q, const void* k, const void* v, void* o,
                          float* lse, const char* chapter) {
  fa::cuda::require_compute_capability(80, chapter, "it uses bf16 mma.sync, ldmatrix and cp.async");
  // Every row starts on a 16-byte boundary (D * 2 bytes is a multiple of 16), so 16-byte aligned
  // base pointers are all that the 16-byte copies need.
  if (!aligned16(q) || !aligned16(k) || !aligned16(v) || !aligned16(o))
    throw std::invalid_argument(std::string(chapter) + ": q, k, v and o must be 16-byte aligned");
  return {q, k, v, o, lse, std::int64_t{p.batch} * p.heads, p.seqlen_q, p.seqlen_k, p.group_size(), p.causal, p.scale() * kLog2e};
}

template <class C>
void launch(const Params& prm, cudaStream_t stream) {
  // Above 48 KB of shared memory a kernel must opt in, once per configuration.
  static const bool opted_in = [] {
    if constexpr (C::kPingPong) allow_shared_memory(pingpong_kernel<C>, C::kSmemBytes);
    else allow_shared_memory(tensor_core_kernel<C>, C::kSmemBytes);
    return true;
  }();
  (void)opted_in;
  const dim3 grid = fa::cuda::tiles_by_rows(ceil_div(prm.seqlen_q, C::Br), prm.batch_heads, "06_tensor_core");
  if constexpr (C::kPingPong) pingpong_kernel<C><<<grid, C::kThreads, C::kSmemBytes, stream>>>(prm);
  else tensor_core_kernel<C><<<grid, C::kThreads, C::kSmemBytes, stream>>>(prm);
  FA_CHECK_LAUNCH();
}

}  // namespace tensor_core
