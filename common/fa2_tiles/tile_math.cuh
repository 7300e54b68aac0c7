// FlashAttention-2's forward on the tensor cores, one key tile at a time: the kernel's arguments
// and tile sizes, and the named steps of one key tile (copy_tile, tile_scores, mask_scores,
// softmax_step, accumulate_pv, write_rows). Chapter 06 teaches them and writes its kernel in them
// (06_tensor_core/tensor_core.cuh, README: Walkthrough); 07, 08, 09 and 10 call them too.
#pragma once

#include <cstdint>
#include <limits>

#include "common/device/math.cuh"
#include "common/device/mma.cuh"
#include "common/device/swizzle.h"
#include "common/device/tile_copy.cuh"  // copy_tile
#include "common/device/tiles.h"
#include "common/host/problem.h"

namespace fa2 {

// The device vocabulary (common/device/): cp.async and tile math from 05, mma.sync, ldmatrix, the
// swizzle and the swizzled tile copy (copy_tile) taught here.
using namespace fa::cuda;

struct Params {
  const void* q;  // [B, H, Sq, D] global, fp16 / bf16 ([B, Sq, H, D] under Layout::bshd)
  const void* k;  // [B, Hkv, Sk, D] global ([B, Sk, Hkv, D])
  const void* v;  // [B, Hkv, Sk, D] global ([B, Sk, Hkv, D])
  void* o;        // [B, H, Sq, D] global ([B, Sq, H, D])
  float* lse;     // [B, H, Sq] global, natural log
  std::int64_t batch_heads;  // B * H: the grid's rows (common/device/grid.cuh)
  int seqlen_q, seqlen_k;
  int group_size;  // H / Hkv: query heads per KV head
  bool causal;
  float scale_log2;  // softmax scale * log2(e)
  int head_dim;      // D: the rows' length in global memory, a multiple of 8 up to the tile's kD
  // [B, S, H, D] tensors (Layout::bshd; only the chapter's kernel takes them, instantiated with
  // kBshd): the element strides between batches, heads and rows (positions) of Q and O, and of K
  // and V (common/host/problem.h: Strides). A kernel for [B, H, S, D] does not read them: its rows are
  // the constant D apart there, and its code stays what it was before the strides came.
  fa::Strides q_strides, kv_strides;
  int heads;  // H: slice bh is batch bh / H, head bh % H
  // A sliding window (Problem::window_left, window_right; -1: unbounded): only a kernel whose
  // chapter's Support takes one reads them (09's); mask_scores applies them wherever it is called.
  int window_left = -1, window_right = -1;
};

// Tile sizes and switches. 06's step-by-step versions are its kernel with some switches off
// (06_tensor_core/steps/steps.cu); 06's choice per head dim is ChapterConfig (block.cuh).
template <class T_, int kD_, int kBc, int kMTiles_, int kStages_ = 2, bool kSwizzle_ = true,
          bool kQInRegs_ = false, bool kLazyRescale_ = false, bool kPadded_ = false, bool kTmaKV_ = false>
struct Config {
  using T = T_;
  static constexpr int kD = kD_;
  static constexpr int kCols = smem_cols(kD);  // smem row: a power of two of chunks (swizzle.h)
  static constexpr int kWarps = 4;
  static constexpr int kThreads = 32 * kWarps;
  static constexpr int kMTiles = kMTiles_;  // 16-row mma tiles per warp
  static constexpr int Br = 16 * kMTiles * kWarps;
  static constexpr int Bc = kBc;
  static constexpr int kStages = kStages_;    // 1: load K_j, V_j, wait, compute. 2: double buffer
  static constexpr bool kSwizzle = kSwizzle_;
  static constexpr bool kQInRegs = kQInRegs_;  // Q_i's A fragments loaded once, kept in registers
  static constexpr bool kLazyRescale = kLazyRescale_;  // O_i *= alpha only when some row's max grew
  // The head dim is below kD (Params::head_dim, a multiple of 8). Without it the head dim is kD, a
  // compile-time constant: the exact tile widths keep constant strides and no column checks
  // (measured 2-3% faster at D = 128 than reading the head dim at run time).
  static constexpr bool kPadded = kPadded_;
  // 06's step v7_tma_kv only (06_tensor_core/steps/tma_kv.cuh, sm_90): K_j and V_j by the copy
  // engine, an mbarrier per stage, instead of 16 cp.async a thread and tile; they land as 64-column
  // panels (kv_ldsm_address), so the tiles start on a 1024-byte boundary (1024 bytes of room) and
  // the two mbarriers follow them.
  static constexpr bool kTmaKV = kTmaKV_;
  static constexpr int kSmemBytes = (Br + 2 * kStages * Bc) * kCols * 2 + (kTmaKV ? 1024 + 8 * kStages : 0);
  static_assert(kD % 16 == 0 && Bc % 16 == 0 && kStages >= 1 && kStages <= 2);
  static_assert(!kTmaKV || (kStages == 2 && kCols == kD && kD % 64 == 0 && kSwizzle));
};

// The head dim the kernel of C addresses global memory with: Params::head_dim for a padded tile,
// else the constant kD.
template <class C>
__device__ __forceinline__ int head_dim_of(const Params& prm) {
  return C::kPadded ? prm.head_dim : C::kD;
}

// A warp's share of O_i: 16 kMTiles rows. In mma tile mt, lane (g, t) holds rows 16 mt + g and
// 16 mt + g + 8 (h = 0, 1): of S_ij, keys 8 nt + 2t, 8 nt + 2t + 1 (nt < Bc/8); of O_i, columns
// 8 nt + 2t, +1 (nt < D/8).
template <class C>
struct WarpRows {
  float O[C::kMTiles][C::kD / 8][4];  // (16 kM, D) fp32 accumulators
  float m[C::kMTiles][2];             // running max of rows g, g + 8, times scale log2(e)
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

// The ldmatrix address of the 16x16 block at (r0, c0) of K_j or V_j: kCols-wide swizzled rows as
// copy_tile writes them, or with kTmaKV the copy engine's 64-column panels of Bc rows
// (swizzle.h: ldsm_panel_address; lane_offset then taken for 64 columns).
template <class C>
__device__ __forceinline__ int kv_ldsm_address(int lane_offset, int r0, int c0) {
  if constexpr (C::kTmaKV) return ldsm_panel_address(lane_offset, r0, c0, C::Bc);
  else return ldsm_address(lane_offset, r0, c0, C::kCols);
}

template <class C>
using ScoreTile = float[C::kMTiles][C::Bc / 8][4];  // S_ij, the warp's rows: C fragments
template <class C>
using PTile = std::uint32_t[C::kMTiles][C::Bc / 16][4];  // P_ij in T: A fragments, one per 16 keys
template <class C>
using QFrags = std::uint32_t[C::kMTiles][C::kQInRegs ? C::kD / 16 : 1][4];

// S_ij = Q_i K_j^T for the warp's rows: per 16-wide step of d, one LDSM of K feeds 2 kM mmas
// (two 8-key n-tiles). Q_w: the warp's rows of Q_i; K_j: the key tile's stage. kAccumulate: add
// to S instead (S over more head dims, held in another tile: 06_tensor_core/steps/split_d.cuh).
template <class C, bool kAccumulate = false>
__device__ __forceinline__ void tile_scores(ScoreTile<C>& S, const QFrags<C>& q_frag, std::uint32_t Q_w,
                                            std::uint32_t K_j, int lane_a, int lane_b) {
  constexpr int kM = C::kMTiles, kCols = C::kCols;
  if constexpr (!kAccumulate) {
#pragma unroll
    for (int mt = 0; mt < kM; ++mt)
#pragma unroll
      for (int nt = 0; nt < C::Bc / 8; ++nt) S[mt][nt][0] = S[mt][nt][1] = S[mt][nt][2] = S[mt][nt][3] = 0.0f;
  }
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
      ldmatrix_x4(b, K_j + kv_ldsm_address<C>(lane_b, 16 * nb, 16 * ks));
#pragma unroll
      for (int mt = 0; mt < kM; ++mt) {
        mma_16816<typename C::T>(S[mt][2 * nb], a[mt], b[0], b[1]);
        mma_16816<typename C::T>(S[mt][2 * nb + 1], a[mt], b[2], b[3]);
      }
    }
  }
}

// The logit softcap (common/device/math.cuh: SoftcapConsts), on the raw scores before the mask:
// tanh bounds them to +-softcap / scale, so the softmax (scale_log2) sees softcap
// tanh(scale S / softcap).
template <class C>
__device__ __forceinline__ void cap_scores(ScoreTile<C>& S, const SoftcapConsts& cap) {
#pragma unroll
  for (int mt = 0; mt < C::kMTiles; ++mt)
#pragma unroll
    for (int nt = 0; nt < C::Bc / 8; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) S[mt][nt][e] = capped(S[mt][nt][e], cap);
}

// The keys row i sees form one range, first .. last (Problem::visible: the causal rule, the
// window's two bounds, and keys below Sk); empty when first > last. 64-bit arithmetic, so that a
// window bound near INT_MAX cannot overflow.
__device__ __forceinline__ int2 visible_keys(int i, const Params& prm) {
  const long long position = static_cast<long long>(i) + prm.seqlen_k - prm.seqlen_q;  // the row's key position
  long long last = prm.seqlen_k - 1LL;
  if (prm.causal && position < last) last = position;
  if (prm.window_right >= 0 && position + prm.window_right < last) last = position + prm.window_right;
  long long first = prm.window_left >= 0 ? position - prm.window_left : 0;
  if (first < 0) first = 0;
  if (last < first - 1) last = first - 1;  // empty: keep last + 1 - first >= 0 within int
  return make_int2(static_cast<int>(first), static_cast<int>(last));
}

// The element mask, for the tiles needs_mask picks: -inf where the key is past Sk, causally
// hidden or outside the sliding window. row: the query row of this lane's first element (mt = 0,
// h = 0); j0: the tile's first key. Each of the lane's rows gets its range of visible keys once
// (visible_keys), and an element is two comparisons and a select against it, without a branch.
// One condition per element with || around function calls compiles to a convergence barrier and
// two branches for each of a thread's 64 scores, which makes a masked tile cost 09 several
// unmasked ones (09's README: Pitfalls).
template <class C>
__device__ __forceinline__ void mask_scores(ScoreTile<C>& S, int row, int j0, int t, const Params& prm) {
#pragma unroll
  for (int mt = 0; mt < C::kMTiles; ++mt)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int2 keys = visible_keys(row + 16 * mt + 8 * h, prm);
      // key j = j0 + 2t + c, c = 8 nt + e % 2: visible iff first - (j0 + 2t) <= c <= last - (j0 + 2t)
      const int lo = keys.x - (j0 + 2 * t), hi = keys.y - (j0 + 2 * t);
#pragma unroll
      for (int nt = 0; nt < C::Bc / 8; ++nt)
#pragma unroll
        for (int e = 2 * h; e < 2 * h + 2; ++e) {
          const int c = 8 * nt + e % 2;
          const bool hidden = (c < lo) | (c > hi);
          S[mt][nt][e] = hidden ? -std::numeric_limits<float>::infinity() : S[mt][nt][e];
        }
    }
}

// Online softmax. A row's Bc keys sit in the 4 lanes of a quad (same g, t = 0..3), so two
// xor-shuffles (1, 2) give its max; the sum l stays per thread until the end. P_ij leaves in T,
// already as the A fragments of P V: keys 16kk..16kk+15 are S_ij's n-tiles 2kk and 2kk+1,
// element for element (06 README: Walkthrough). No shuffle, no shared memory.
template <class C>
__device__ __forceinline__ void softmax_step(const ScoreTile<C>& S_ij, PTile<C>& P_ij, WarpRows<C>& w,
                                             float scale_log2) {
  // BEGIN SOLUTION: 05's online softmax on the mma fragments: a row's keys sit in one quad; P_ij leaves as the A fragments of P V without touching shared memory; the lazy rescale may skip O only where alpha is exactly 1 (06 README: Algorithm, The fragments, The lazy rescale, Pitfalls)
  constexpr float kInf = std::numeric_limits<float>::infinity();
  float m_scaled[C::kMTiles][2], alpha[C::kMTiles][2];
  bool grew = false;  // did the max of any of this thread's rows grow?
#pragma unroll
  for (int mt = 0; mt < C::kMTiles; ++mt) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float m = fmaxf(S_ij[mt][0][2 * h], S_ij[mt][0][2 * h + 1]);  // this tile's max, raw units
#pragma unroll
      for (int nt = 1; nt < C::Bc / 8; ++nt) m = fmaxf(m, fmaxf(S_ij[mt][nt][2 * h], S_ij[mt][nt][2 * h + 1]));
      m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 1));
      m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 2));
      // The running max lives in exp2 units, m * scale_log2 rounded once (__fmul_rn, never fused
      // into an FFMA; rounding is monotonic, so the max of rounded values is the rounded max). An
      // unchanged max therefore subtracts the very same float and alpha = exp2(0) = 1 exactly.
      // Recomputed from raw units at every tile, w.m * scale_log2 - m' would fuse into an FFMA
      // whose result is the rounding error of m' (up to 3e-5 at logits ~500): l_i would drift by
      // that factor at every key tile, and over 70k keys LSE (and, with the lazy rescale, O)
      // would be off by ~2%.
      const float m_new = fmaxf(w.m[mt][h], __fmul_rn(m, scale_log2));
      // No key seen yet (m_new = -inf): subtract 0 instead, so exp2(-inf - (-inf)) = NaN never happens.
      m_scaled[mt][h] = m_new == -kInf ? 0.0f : m_new;
      alpha[mt][h] = fast_exp2(w.m[mt][h] - m_scaled[mt][h]);  // rescales earlier tiles
      grew |= m_new > w.m[mt][h];
      w.m[mt][h] = m_new;
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
  // BEGIN SOLUTION: w.O += P_ij V_j on the tensor cores: V_j is row-major in shared memory but the mma wants it as B, and one load should feed every m-tile of the warp (06 README: ldmatrix: two orders and a transpose)
#pragma unroll
  for (int kk = 0; kk < C::Bc / 16; ++kk) {
#pragma unroll
    for (int nb = 0; nb < C::kD / 16; ++nb) {
      std::uint32_t b[4];  // dims 16nb..+7: {b[0], b[1]}; dims 16nb+8..+15: {b[2], b[3]}
      ldmatrix_x4_trans(b, V_j + kv_ldsm_address<C>(lane_a, 16 * kk, 16 * nb));
#pragma unroll
      for (int mt = 0; mt < C::kMTiles; ++mt) {
        mma_16816<typename C::T>(w.O[mt][2 * nb], P_ij[mt][kk], b[0], b[1]);
        mma_16816<typename C::T>(w.O[mt][2 * nb + 1], P_ij[mt][kk], b[2], b[3]);
      }
    }
  }
  // END SOLUTION
}

// The end of the lane's row 16 mt + 8 h: its sum l over the quad's keys (every lane of the quad
// takes part: the shuffles), and from it LSE = m ln 2 + log(l) (natural log; m is in exp2 units),
// +inf for a row that sees no key (l = 0, O = 0).
template <class C>
__device__ __forceinline__ float row_sum(const WarpRows<C>& w, int mt, int h) {
  float l = w.l[mt][h];
  l += __shfl_xor_sync(0xffffffffu, l, 1);
  l += __shfl_xor_sync(0xffffffffu, l, 2);
  return l;
}
template <class C>
__device__ __forceinline__ float row_lse(const WarpRows<C>& w, int mt, int h, float l) {
  return l > 0.0f ? w.m[mt][h] * kLn2 + logf(l) : std::numeric_limits<float>::infinity();
}

// Epilogue: O_i / l_i once, and LSE. row: the query row of this lane's first element (mt = 0,
// h = 0); rows past Sq are not written.
template <class C, bool kBshd = false>
__device__ __forceinline__ void write_rows(const WarpRows<C>& w, const Params& prm, std::int64_t bh, int row, int t) {
  using T = typename C::T;
  const int D = head_dim_of<C>(prm);  // <= C::kD: columns past D are not written
  const fa::Strides& os = prm.q_strides;  // kBshd: O lies as Q does, rows os.row apart
  T* O_g = kBshd ? static_cast<T*>(prm.o) + bh / prm.heads * os.batch + bh % prm.heads * os.head
                 : static_cast<T*>(prm.o) + bh * prm.seqlen_q * D;  // (Sq, D) global
#pragma unroll
  for (int mt = 0; mt < C::kMTiles; ++mt) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const float l = row_sum(w, mt, h);
      const int r = row + 16 * mt + 8 * h;
      if (r >= prm.seqlen_q) continue;
      const float inv_l = l > 0.0f ? 1.0f / l : 0.0f;  // a row that sees no key: O = 0
#pragma unroll
      for (int nt = 0; nt < C::kD / 8; ++nt)  // a quad writes 16 contiguous bytes
        if (!C::kPadded || 8 * nt < D)
          *reinterpret_cast<std::uint32_t*>(O_g + (kBshd ? r * os.row : std::int64_t{r} * D) + 8 * nt + 2 * t) =
              pack2<T>(w.O[mt][nt][2 * h] * inv_l, w.O[mt][nt][2 * h + 1] * inv_l);
      if (t == 0) prm.lse[bh * prm.seqlen_q + r] = row_lse(w, mt, h, l);
    }
  }
}

}  // namespace fa2
