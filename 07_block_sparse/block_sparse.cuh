// Chapter 07 -- block-sparse attention: chapter 06's kernel, walking a list of active key blocks.
//
// New since 06 (diff -u 06_tensor_core/tensor_core.cuh 07_block_sparse/block_sparse.cuh):
//   * A block mask says, per (batch, head, query block of Br = 128 rows), which key blocks of
//     64 or 128 keys are active. The host stores it CSR-style (block_mask.h): row_offsets[row] ..
//     row_offsets[row + 1] index the row's active key blocks in col_indices, ascending.
//   * The key loop walks that list instead of 0 .. Tc_end - 1: step n is kernel tile
//     walk_tile(cols, n) (a 128-key block is two 64-key tiles). K and V of an inactive block are
//     never loaded, and no mma runs for it.
//   * Causal masking and the last partial key tile cut the walk (walk_length, sparse_tiles.h):
//     the list is sorted, so the tiles a row can see are a prefix of it. Diagonal tiles keep the
//     element mask, as before; a block mask needs none, because its blocks are whole tiles.
//   * The prefetch follows the list: the K_j, V_j in flight during a tile are the next *active*
//     tile's.
//   * 06's lazy rescale at D = 128 (kLazyRescale): O_i *= alpha only when some row's max grew.
//     06 now keeps its tile math in device functions; this kernel still has its own copy of the
//     loop body, so `diff -u` shows that move too.
// Expected effect: the time of a query block is proportional to its active tiles: density 1.0
// runs like 06, density 0.1 about 10x faster (README: Results).
// Run:  ./build/07_block_sparse/07_block_sparse --seqlen 8192 --head-dim 128 --pattern random --density 0.25

#pragma once

#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>

#include "05_flash_v2/cp_async.cuh"
#include "05_flash_v2/tiles.h"
#include "06_tensor_core/mma.cuh"
#include "06_tensor_core/swizzle.h"
#include "07_block_sparse/sparse_tiles.h"
#include "common/cuda_check.h"
#include "common/device/grid.cuh"
#include "common/problem.h"

namespace block_sparse {

// 06's instruction wrappers and shared-memory layout, unchanged.
using namespace tensor_core;
using flash_v2::ceil_div;
using flash_v2::cp_async_commit;
using flash_v2::cp_async_wait;
using flash_v2::fast_exp2;
using flash_v2::key_tile_end;
using flash_v2::needs_mask;

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
  const int* row_offsets;  // [B * H * Tr + 1] the block mask's CSR rows (Tr = ceil(Sq / Br))
  const int* col_indices;  // [nnz] each row's active key blocks, ascending
};

// Tile sizes and switches. The step-by-step versions of the README are this kernel with some
// switches off (steps.cu); the chapter's choice per head dim is ChapterConfig below.
template <class T_, int kD_, int kBc, int kMTiles_, int kStages_ = 2, bool kSwizzle_ = true,
          bool kQInRegs_ = false, bool kLazyRescale_ = false>
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
  static constexpr bool kLazyRescale = kLazyRescale_;  // O_i *= alpha only when some row's max grew (06)
  static constexpr int kSmemBytes = (Br + 2 * kStages * Bc) * kCols * 2;
  static_assert(kD % 16 == 0 && Bc % 16 == 0 && kStages >= 1 && kStages <= 2);
};

// The chapter's choice (README: "Choosing the tiles"). D <= 128: Br = 128 (32 rows per warp),
// FlashAttention-2's blocks, with Bc = 128 at D = 64 (measured faster than Bc = 64 with Q_i in
// registers, step v4) and Bc = 64 above; D = 256: 16 rows per warp, or O_i alone would take
// 256 registers. Only D = 32 has registers left for Q_i's fragments. 06's lazy rescale at D = 128.
template <class T, int kD>
using ChapterConfig = Config<T, kD, /*Bc=*/kD == 64 ? 128 : (kD <= 128 ? 64 : 32),
                             /*kMTiles=*/kD <= 128 ? 2 : 1, /*kStages=*/2, /*kSwizzle=*/true,
                             /*kQInRegs=*/kD <= 32, /*kLazyRescale=*/kD == 128>;

// Stages rows [0, rows) of a row-major (rows, D) global matrix into a (kRows, kCols) smem tile
// with 16-byte cp.async; rows past `rows` are zero-filled (src-size 0: nothing is read), so a
// partial tile needs no other care. Padding columns (D = 96 in 128) are never read: not copied.
template <class C, int kRows>
__device__ __forceinline__ void copy_tile(std::uint32_t tile, const typename C::T* src, int rows) {
  constexpr int kRowChunks = C::kCols / kChunkElems;
  constexpr int kRowsPerIt = C::kThreads / kRowChunks;  // rows one pass of the block covers
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

// grid: Tr along x by B*H rows over y and z; block: 4 warps. Warp w owns rows [16 kMTiles w, 16 kMTiles (w+1)) of Q_i; in
// mma tile mt, lane (g, t) holds rows 16 mt + g and 16 mt + g + 8 (h = 0, 1) of S_ij, keys
// 8 nt + 2t, 8 nt + 2t + 1 (nt < Bc/8), and of O_i, columns 8 nt + 2t, +1 (nt < D/8).
// kTpb: kernel tiles of Bc keys per mask key block (1 or 2), a constant so that walk_tile's
// division is a shift and costs no register.
template <class C, int kTpb>
__global__ void __launch_bounds__(C::kThreads, 2) block_sparse_kernel(const Params prm) {
  using T = typename C::T;
  if (fa::cuda::grid_row() >= prm.batch_heads) return;  // a spare block of the grid
  constexpr int kD = C::kD, kCols = C::kCols, Br = C::Br, Bc = C::Bc, kM = C::kMTiles;
  constexpr float kInf = std::numeric_limits<float>::infinity();
  constexpr int kTileBytes = Bc * kCols * 2;  // one K or V stage
  extern __shared__ __align__(128) unsigned char smem[];
  const std::uint32_t Q_s = smem_u32(smem);                    // (Br, kCols) smem: Q_i
  const std::uint32_t K_s = Q_s + Br * kCols * 2;              // (kStages, Bc, kCols) smem: K_j
  const std::uint32_t V_s = K_s + C::kStages * kTileBytes;     // (kStages, Bc, kCols) smem: V_j
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int g = lane / 4, t = lane % 4;  // fragment coordinates (mma.cuh)
  const int Sq = prm.seqlen_q, Sk = prm.seqlen_k;
  // Causal: the last query tiles see the most keys, so they are launched first (less tail).
  const int i_tile = prm.causal ? gridDim.x - 1 - blockIdx.x : blockIdx.x;
  const int i0 = i_tile * Br;
  const std::int64_t bh = fa::cuda::grid_row();       // b * H + h
  const std::int64_t kv_bh = bh / prm.group_size;      // b * Hkv + h / (H / Hkv)
  const T* Q_g = static_cast<const T*>(prm.q) + (bh * Sq + i0) * kD;  // (Br, D) global: Q_i
  const T* K_g = static_cast<const T*>(prm.k) + kv_bh * Sk * kD;      // (Sk, D) global
  const T* V_g = static_cast<const T*>(prm.v) + kv_bh * Sk * kD;      // (Sk, D) global
  const int Tc_end = key_tile_end(i_tile, Br, Bc, Sq, Sk, prm.causal);
  // This query block's active key blocks, cut to the tiles before Tc_end (sparse_tiles.h).
  // BEGIN SOLUTION: cols = this block's CSR row (b, h, i_tile) of active key blocks; n_end = walk_length(...) of it before Tc_end
  // STUB: const int* cols = prm.col_indices;
  // STUB: const int n_end = 0;
  // STUB: if (n_end == 0) return;  // the stub walks nothing and writes no O, no LSE
  const std::int64_t row = bh * gridDim.x + i_tile;  // the CSR row: (b, h, query block)
  const int* cols = prm.col_indices + prm.row_offsets[row];  // [count] key blocks, ascending
  const int n_end = walk_length(cols, prm.row_offsets[row + 1] - prm.row_offsets[row], kTpb, Tc_end);
  // END SOLUTION
  const int row0 = 16 * kM * warp;  // this warp's first row of Q_i

  // Prologue: Q_i in one group, the first active K_j and V_j in the next.
  copy_tile<C, Br>(Q_s, Q_g, Sq - i0);
  cp_async_commit();
  if (n_end > 0) {
    const int j0 = walk_tile(cols, 0, kTpb) * Bc;
    copy_tile<C, Bc>(K_s, K_g + j0 * kD, Sk - j0);
    copy_tile<C, Bc>(V_s, V_g + j0 * kD, Sk - j0);
  }
  cp_async_commit();

  // ldmatrix row addresses (swizzle.h): one offset per lane and order, the rest is constant.
  const int lane_a = ldsm_lane_offset(lane, LdsmOrder::kRowsFirst, kCols, C::kSwizzle);  // Q, V
  const int lane_b = ldsm_lane_offset(lane, LdsmOrder::kColsFirst, kCols, C::kSwizzle);  // K
  const std::uint32_t Q_w = Q_s + 2 * row0 * kCols;  // this warp's rows of Q_i

  // Q_i's A fragments: loaded once if they fit in registers, else re-read at every key tile.
  std::uint32_t q_frag[kM][C::kQInRegs ? kD / 16 : 1][4];
  if constexpr (C::kQInRegs) {
    cp_async_wait<1>();  // this thread's copies of Q_i have landed (K_0, V_0 may still fly)
    __syncthreads();     // ... and everyone's
#pragma unroll
    for (int mt = 0; mt < kM; ++mt)
#pragma unroll
      for (int ks = 0; ks < kD / 16; ++ks) ldmatrix_x4(q_frag[mt][ks], Q_w + ldsm_address(lane_a, 16 * mt, 16 * ks, kCols));
  }

  float O_i[kM][kD / 8][4] = {};  // (16 kM, D) per warp, fp32 accumulators
  float m_i[kM][2], l_i[kM][2];   // rows g and g + 8 of each mma tile: running max (raw score units), sum
#pragma unroll
  for (int mt = 0; mt < kM; ++mt) m_i[mt][0] = m_i[mt][1] = -kInf, l_i[mt][0] = l_i[mt][1] = 0.0f;

  for (int n = 0; n < n_end; ++n) {
    // Step n's tile and the next one's, read from the list before the wait (after the first
    // read of a 128-byte line of it, L1 hits: cp.async.cg bypasses L1 and leaves it to us).
    const int j_tile = walk_tile(cols, n, kTpb), j0 = j_tile * Bc;
    const int j_next = n + 1 < n_end ? walk_tile(cols, n + 1, kTpb) : 0;
    if constexpr (C::kStages == 1) {
      if (n > 0) {
        __syncthreads();  // every warp is done with K_{j-1}, V_{j-1}: their buffers are free
        copy_tile<C, Bc>(K_s, K_g + j0 * kD, Sk - j0);
        copy_tile<C, Bc>(V_s, V_g + j0 * kD, Sk - j0);
        cp_async_commit();
      }
    }
    cp_async_wait<0>();  // this thread's copies of K_j, V_j (and Q_i) have landed
    __syncthreads();     // ... and everyone's; and every warp is done with tile j-1's stage
    const int stage = C::kStages == 2 ? n % 2 : 0;
    if constexpr (C::kStages == 2) {
      if (n + 1 < n_end) {  // the next active K_j, V_j fly while this tile is computed
        const std::uint32_t next = (1 - stage) * kTileBytes;
        const int j1 = j_next * Bc;
        copy_tile<C, Bc>(K_s + next, K_g + j1 * kD, Sk - j1);
        copy_tile<C, Bc>(V_s + next, V_g + j1 * kD, Sk - j1);
      }
      cp_async_commit();
    }
    const std::uint32_t K_j = K_s + stage * kTileBytes, V_j = V_s + stage * kTileBytes;

    // S_ij = Q_i K_j^T: per 16-wide step of d, one LDSM of K feeds 2 kM mmas (two 8-key n-tiles).
    float S_ij[kM][Bc / 8][4] = {};
#pragma unroll
    for (int ks = 0; ks < kD / 16; ++ks) {
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
      for (int nb = 0; nb < Bc / 16; ++nb) {
        std::uint32_t b[4];  // keys 16nb..+7: {b[0], b[1]}; keys 16nb+8..+15: {b[2], b[3]}
        ldmatrix_x4(b, K_j + ldsm_address(lane_b, 16 * nb, 16 * ks, kCols));
#pragma unroll
        for (int mt = 0; mt < kM; ++mt) {
          mma_16816<T>(S_ij[mt][2 * nb], a[mt], b[0], b[1]);
          mma_16816<T>(S_ij[mt][2 * nb + 1], a[mt], b[2], b[3]);
        }
      }
    }
    // Only the last partial key tile and the causal diagonal tiles pay for the element mask.
    if (needs_mask(i_tile, j_tile, Br, Bc, Sq, Sk, prm.causal)) {
#pragma unroll
      for (int mt = 0; mt < kM; ++mt)
#pragma unroll
        for (int nt = 0; nt < Bc / 8; ++nt)
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int i = i0 + row0 + 16 * mt + g + 8 * (e / 2), j = j0 + 8 * nt + 2 * t + e % 2;
            if (j >= Sk || (prm.causal && !fa::causal_visible(i, j, Sq, Sk))) S_ij[mt][nt][e] = -kInf;
          }
    }

    // Online softmax. A row's Bc keys sit in the 4 lanes of a quad (same g, t = 0..3), so two
    // xor-shuffles (1, 2) give its max; the sum l_i stays per thread until the end. P_ij leaves
    // in T, already as the A fragments of P V: keys 16kk..16kk+15 are S_ij's n-tiles 2kk and
    // 2kk+1, element for element (README: Walkthrough). No shuffle, no shared memory.
    // 06's lazy rescale (C::kLazyRescale): all the new maxima first, one vote, O_i *= alpha only
    // if some row of the warp grew (alpha = 1 exactly otherwise), then the exps.
    float m_scaled[kM][2], alpha[kM][2];
    bool grew = false;
#pragma unroll
    for (int mt = 0; mt < kM; ++mt) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        float m = m_i[mt][h];
#pragma unroll
        for (int nt = 0; nt < Bc / 8; ++nt) m = fmaxf(m, fmaxf(S_ij[mt][nt][2 * h], S_ij[mt][nt][2 * h + 1]));
        m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 1));
        m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 2));
        // No key seen yet (m = -inf): subtract 0 instead, so exp2(-inf - (-inf)) = NaN never happens.
        m_scaled[mt][h] = m == -kInf ? 0.0f : m * prm.scale_log2;
        alpha[mt][h] = fast_exp2(m_i[mt][h] * prm.scale_log2 - m_scaled[mt][h]);  // rescales earlier tiles
        grew |= m > m_i[mt][h];
        m_i[mt][h] = m;
      }
    }
    if (!C::kLazyRescale || __any_sync(0xffffffffu, grew)) {
#pragma unroll
      for (int mt = 0; mt < kM; ++mt)
#pragma unroll
        for (int nt = 0; nt < kD / 8; ++nt)
#pragma unroll
          for (int e = 0; e < 4; ++e) O_i[mt][nt][e] *= alpha[mt][e / 2];
    }
    std::uint32_t P_ij[kM][Bc / 16][4];  // a0: (g, 2t)  a1: (g+8, 2t)  a2: (g, 2t+8)  a3: (g+8, 2t+8)
#pragma unroll
    for (int mt = 0; mt < kM; ++mt) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        float sum = 0.0f;
#pragma unroll
        for (int nt = 0; nt < Bc / 8; ++nt) {
          // exp(scale (s - m)) = exp2(s * scale * log2e - m * scale * log2e): one FFMA + MUFU.EX2
          const float p0 = fast_exp2(fmaf(S_ij[mt][nt][2 * h], prm.scale_log2, -m_scaled[mt][h]));
          const float p1 = fast_exp2(fmaf(S_ij[mt][nt][2 * h + 1], prm.scale_log2, -m_scaled[mt][h]));
          sum += p0 + p1;
          P_ij[mt][nt / 2][nt % 2 * 2 + h] = pack2<T>(p0, p1);
        }
        l_i[mt][h] = l_i[mt][h] * alpha[mt][h] + sum;
      }
    }

    // O_i += P_ij V_j: one LDSM.T of V feeds 2 kM mmas.
#pragma unroll
    for (int kk = 0; kk < Bc / 16; ++kk) {
#pragma unroll
      for (int nb = 0; nb < kD / 16; ++nb) {
        std::uint32_t b[4];  // dims 16nb..+7: {b[0], b[1]}; dims 16nb+8..+15: {b[2], b[3]}
        ldmatrix_x4_trans(b, V_j + ldsm_address(lane_a, 16 * kk, 16 * nb, kCols));
#pragma unroll
        for (int mt = 0; mt < kM; ++mt) {
          mma_16816<T>(O_i[mt][2 * nb], P_ij[mt][kk], b[0], b[1]);
          mma_16816<T>(O_i[mt][2 * nb + 1], P_ij[mt][kk], b[2], b[3]);
        }
      }
    }
  }

  // Epilogue: the row sums over the quad, O_i / l_i once, LSE = m * scale + log(l) (natural log).
  T* O_g = static_cast<T*>(prm.o) + (bh * Sq + i0) * kD;  // (Br, D) global: O_i
  const float scale = prm.scale_log2 * 0.6931471805599453f;
#pragma unroll
  for (int mt = 0; mt < kM; ++mt) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float l = l_i[mt][h];
      l += __shfl_xor_sync(0xffffffffu, l, 1);
      l += __shfl_xor_sync(0xffffffffu, l, 2);
      const int r = row0 + 16 * mt + g + 8 * h;
      if (i0 + r >= Sq) continue;
      const float inv_l = l > 0.0f ? 1.0f / l : 0.0f;  // a row that sees no key: O = 0
#pragma unroll
      for (int nt = 0; nt < kD / 8; ++nt)  // a quad writes 16 contiguous bytes
        *reinterpret_cast<std::uint32_t*>(O_g + r * kD + 8 * nt + 2 * t) =
            pack2<T>(O_i[mt][nt][2 * h] * inv_l, O_i[mt][nt][2 * h + 1] * inv_l);
      if (t == 0) prm.lse[bh * Sq + i0 + r] = l > 0.0f ? m_i[mt][h] * scale + logf(l) : kInf;
    }
  }
}

// The kernel's arguments, after the checks that go beyond fa::check_forward_args.
inline Params make_params(const fa::Problem& p, const void* q, const void* k, const void* v, void* o,
                          float* lse, const int* row_offsets, const int* col_indices,
                          const char* chapter) {
  fa::cuda::require_compute_capability(80, chapter, "it uses bf16 mma.sync, ldmatrix and cp.async");
  // Every row starts on a 16-byte boundary (D * 2 bytes is a multiple of 16), so 16-byte aligned
  // base pointers are all that the 16-byte copies need.
  auto aligned16 = [](const void* ptr) { return reinterpret_cast<std::uintptr_t>(ptr) % 16 == 0; };
  if (!aligned16(q) || !aligned16(k) || !aligned16(v) || !aligned16(o))
    throw std::invalid_argument(std::string(chapter) + ": q, k, v and o must be 16-byte aligned");
  return {q, k, v, o, lse, std::int64_t{p.batch} * p.heads, p.seqlen_q, p.seqlen_k, p.group_size(), p.causal, p.scale() * 1.4426950408889634f,
          row_offsets, col_indices};
}

template <class C, int kTpb>
void launch(const Params& prm, cudaStream_t stream) {
  // Above 48 KB of shared memory a kernel must opt in, once per configuration.
  static const bool opted_in = [] {
    FA_CUDA_CHECK(cudaFuncSetAttribute(block_sparse_kernel<C, kTpb>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       C::kSmemBytes));
    return true;
  }();
  (void)opted_in;
  const dim3 grid = fa::cuda::tiles_by_rows(ceil_div(prm.seqlen_q, C::Br), prm.batch_heads, "07_block_sparse");
  block_sparse_kernel<C, kTpb><<<grid, C::kThreads, C::kSmemBytes, stream>>>(prm);
  FA_CHECK_LAUNCH();
}

}  // namespace block_sparse
