// Chapter 06 -- FlashAttention-2's forward on the tensor cores: fp16 / bf16 in, fp32 accumulate.
//
// New since 05 (diff -u 05_flash_v2/flash_v2.cu 06_tensor_core/tensor_core.cuh):
//   * Both products run on the tensor cores: mma.sync.m16n8k16 (HMMA.16816.F32) takes 16x16 and
//     16x8 tiles of fp16/bf16 and accumulates in fp32. S_ij, O_i, m_i, l_i stay fp32.
//   * Operands reach registers through ldmatrix.x4 (LDSM): 4 8x8 matrices per instruction, laid
//     out as the mma wants them (common/device/mma.cuh). K_j is read as is: a row-major (Bc, d) tile is the
//     column-major B that S = Q K^T needs. V_j is read with .trans for O += P V.
//   * P never touches shared memory: the fp32 accumulators of two adjacent 8-key n-tiles of S_ij
//     are, element for element, the A fragment of a 16-key k-step of P V (README: Walkthrough).
//   * Shared tiles are XOR-swizzled (common/device/swizzle.h): the 16-byte cp.async stores and the ldmatrix
//     reads are both conflict free, with no padding.
//   * K_j and V_j are double buffered: K_{j+1}, V_{j+1} are in flight during all of tile j, and
//     one __syncthreads per tile both publishes a stage and frees the other. On sm_90, in the 64
//     and 128 tiles ([B, H, S, D]), the copy engine brings them (Config::kTmaKV): thread 0 issues the
//     tile's TMA loads, an mbarrier per stage says when they have landed (README: The pipeline).
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
// Layout: this file is the chapter's kernel; tile_math.cuh holds its arguments, tile sizes and the
// steps of one key tile (copy_tile, tile_scores, mask_scores, softmax_step, accumulate_pv,
// write_rows); steps/ holds the step-by-step versions and the ping-pong experiment.
// Run:  ./build/06_tensor_core/06_tensor_core --seqlen 4096 --head-dim 128 --dtype bf16

#pragma once

#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "06_tensor_core/tile_math.cuh"  // Params, Config and the steps of one key tile
#include "common/cuda/cuda_check.h"
#include "common/device/grid.cuh"
#include "common/device/launch.h"
#include "common/host/problem.h"

namespace tensor_core {

// The chapter's choice (tiles.md: "Choosing the tiles"). D <= 128: Br = 128 (32 rows per warp),
// FlashAttention-2's blocks, with Bc = 128 at D = 64 (measured faster than Bc = 64 with Q_i in
// registers, step v4) and Bc = 64 above; D = 192, 256: 16 rows per warp, or O_i alone would take
// 192 or 256 registers. Only D = 32 has registers left for Q_i's fragments. The lazy rescale (step
// v6) at D >= 128, where it measured 3-7% faster (D = 128); at D = 64 it measured 1-3% slower.
// D = 192, 256: Bc = 64 in one stage (K_j, V_j, then wait; 96 KB, still two blocks per SM, whose
// turns hide each other's copies), measured 1.04-1.10x over Bc = 32 double-buffered.
// kPadded: a head dim below kD runs in this tile (tensor_core.cu: dispatch).
// kTmaKV: on sm_90 in the 64 and 128 tiles K_j and V_j come by the copy engine (tensor_core.cu: dispatch).
template <class T, int kD, bool kPadded = false, bool kTmaKV = false>
using ChapterConfig = Config<T, kD, /*Bc=*/kD == 64 ? 128 : 64,
                             /*kMTiles=*/kD <= 128 ? 2 : 1, /*kStages=*/(kD > 128 ? 1 : 2), /*kSwizzle=*/true,
                             /*kQInRegs=*/kD <= 32, /*kLazyRescale=*/(kD >= 128), kPadded, kTmaKV>;

// The tile that runs head dim d (a multiple of 8 up to 256): the next of the six widths, padded
// unless d is the width itself. Calls f(std::integral_constant<int, kD>, std::bool_constant<kPadded>);
// 06's forward and 07's launch through it (tiles.md: "Every head dim"), 08's tensor-core backward
// with kMinWidth = 64 (it has no 32 tile: head dims below 64 run in the 64 tile).
template <int kMinWidth = 32, class F>
void with_tile(int d, F&& f) {
  static_assert(kMinWidth == 32 || kMinWidth == 64);
  auto tile = [&](auto kd) {
    if (d == decltype(kd)::value) return f(kd, std::false_type{});  // the head dim a constant
    f(kd, std::true_type{});
  };
  if constexpr (kMinWidth == 32) {
    if (d <= 32) return tile(std::integral_constant<int, 32>{});
  }
  if (d <= 64) return tile(std::integral_constant<int, 64>{});
  if (d <= 96) return tile(std::integral_constant<int, 96>{});
  if (d <= 128) return tile(std::integral_constant<int, 128>{});
  if (d <= 192) return tile(std::integral_constant<int, 192>{});
  tile(std::integral_constant<int, 256>{});
}

// One (query tile, head) block's view of global memory. kBshd: the tensors are [B, S, H, D], so
// a slice starts at b · batch + h · head and its rows lie q_row (H D) or kv_row (Hkv D) elements
// apart (Params' strides); else [B, H, S, D], rows D apart. copy_q and copy_kv stage tiles of it
// (copy_tile), so that the kernel reads the same in both layouts.
template <class C, bool kBshd = false>
struct BlockInputs {
  using T = typename C::T;
  std::int64_t bh;  // b * H + h
  const T* Q;       // (Br, D) global: Q_i
  const T* K;       // (Sk, D) global
  const T* V;       // (Sk, D) global
  std::int64_t q_row = 0, kv_row = 0;  // kBshd only
  __device__ __forceinline__ BlockInputs(const Params& prm, int i0) : bh(fa::cuda::grid_row()) {
    if constexpr (kBshd) {
      const std::int64_t b = bh / prm.heads, h = bh % prm.heads, kv_h = h / prm.group_size;  // GQA: h / (H / Hkv)
      const fa::Strides &qs = prm.q_strides, &kvs = prm.kv_strides;
      q_row = qs.row, kv_row = kvs.row;
      Q = static_cast<const T*>(prm.q) + b * qs.batch + h * qs.head + i0 * q_row;
      K = static_cast<const T*>(prm.k) + b * kvs.batch + kv_h * kvs.head;
      V = static_cast<const T*>(prm.v) + b * kvs.batch + kv_h * kvs.head;
    } else {
      const std::int64_t kv_bh = bh / prm.group_size;  // b * Hkv + h / (H / Hkv)
      const int D = head_dim_of<C>(prm);
      Q = static_cast<const T*>(prm.q) + (bh * prm.seqlen_q + i0) * D;
      K = static_cast<const T*>(prm.k) + kv_bh * prm.seqlen_k * D;
      V = static_cast<const T*>(prm.v) + kv_bh * prm.seqlen_k * D;
    }
  }
  // Q_i (rows_left = Sq - i0 of them exist) into Q_dst.
  __device__ __forceinline__ void copy_q(std::uint32_t Q_dst, int rows_left, int D) const {
    if constexpr (kBshd) copy_tile<C, C::Br>(Q_dst, Q, rows_left, D, q_row);
    else copy_tile<C, C::Br>(Q_dst, Q, rows_left, D);
  }
  // K_j and V_j, keys j0 .. j0 + Bc - 1 (rows_left = Sk - j0 of them exist), into K_dst and V_dst.
  __device__ __forceinline__ void copy_kv(std::uint32_t K_dst, std::uint32_t V_dst, int j0, int rows_left, int D) const {
    if constexpr (kBshd) {
      copy_tile<C, C::Bc>(K_dst, K + j0 * kv_row, rows_left, D, kv_row);
      copy_tile<C, C::Bc>(V_dst, V + j0 * kv_row, rows_left, D, kv_row);
    } else {
      copy_tile<C, C::Bc>(K_dst, K + j0 * D, rows_left, D);
      copy_tile<C, C::Bc>(V_dst, V + j0 * D, rows_left, D);
    }
  }
};

// Causal: the last query tiles see the most keys, so they are launched first (less tail).
__device__ __forceinline__ int query_tile(const Params& prm) {
  return prm.causal ? gridDim.x - 1 - blockIdx.x : blockIdx.x;
}

// grid: Tr along x by B*H rows over y and z; block: 4 warps. Warp w owns rows
// [16 kMTiles w, 16 kMTiles (w+1)) of Q_i. kBshd: [B, S, H, D] tensors (BlockInputs).
template <class C, bool kBshd = false>
__global__ void __launch_bounds__(C::kThreads, 2) tensor_core_kernel(const Params prm, const __grid_constant__ KVMaps maps) {
  if (fa::cuda::grid_row() >= prm.batch_heads) return;  // a spare block of the grid
  constexpr int kCols = C::kCols, Br = C::Br, Bc = C::Bc, kD = C::kD;
  constexpr int kTileBytes = Bc * kCols * 2;  // one K or V stage
  extern __shared__ __align__(128) unsigned char smem[];
  const std::uint32_t Q_s = C::kTmaKV ? (smem_u32(smem) + 1023u) & ~1023u : smem_u32(smem);  // (Br, kCols) smem: Q_i
  const std::uint32_t K_s = Q_s + Br * kCols * 2;              // (kStages, Bc, kCols) smem: K_j
  const std::uint32_t V_s = K_s + C::kStages * kTileBytes;     // (kStages, Bc, kCols) smem: V_j
  const std::uint32_t full = V_s + C::kStages * kTileBytes;    // kTmaKV: one mbarrier per stage
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int g = lane / 4, t = lane % 4;  // fragment coordinates (mma.cuh)
  const int i_tile = query_tile(prm), i0 = i_tile * Br;
  const BlockInputs<C, kBshd> in(prm, i0);
  const int Sq = prm.seqlen_q, Sk = prm.seqlen_k, D = head_dim_of<C>(prm);  // D <= kD: the tile is zero-padded

  const int Tc_end = key_tile_end(i_tile, Br, Bc, Sq, Sk, prm.causal);
  const int row0 = 16 * C::kMTiles * warp;  // this warp's first row of Q_i

  // Prologue: Q_i in one group, K_0 and V_0 in the next (kTmaKV: by the copy engine).
  const std::int64_t kv_bh = in.bh / prm.group_size;  // kTmaKV: the matrix of K and V
  in.copy_q(Q_s, Sq - i0, D);
  cp_async_commit();
  if constexpr (C::kTmaKV) {
    if (threadIdx.x == 0) mbarrier_init_stages(full, 2);  // tma.cuh: one per stage
    __syncthreads();  // the barriers are set up before anyone waits on them
    if (threadIdx.x == 0 && Tc_end > 0) copy_kv_tma<C>(maps, K_s, V_s, full, 0, kv_bh);
    cp_async_wait<0>();  // this thread's copies of Q_i (the loop's first barrier publishes them)
  } else {
    if (Tc_end > 0) in.copy_kv(K_s, V_s, 0, Sk, D);
    cp_async_commit();
  }

  // ldmatrix row addresses (swizzle.h): one offset per lane and order, the rest is constant.
  // kTmaKV: K's and V's for the copy engine's 64-column panels (kv_ldsm_address).
  constexpr int kKVCols = C::kTmaKV ? 64 : kCols;
  const int lane_a = ldsm_lane_offset(lane, LdsmOrder::kRowsFirst, kCols, C::kSwizzle);  // Q
  const int lane_v = ldsm_lane_offset(lane, LdsmOrder::kRowsFirst, kKVCols, C::kSwizzle);  // V
  const int lane_b = ldsm_lane_offset(lane, LdsmOrder::kColsFirst, kKVCols, C::kSwizzle);  // K
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
        in.copy_kv(K_s, V_s, j0, Sk - j0, D);
        cp_async_commit();
      }
    }
    const int stage = C::kStages == 2 ? j_tile % 2 : 0;
    if constexpr (C::kTmaKV) {
      __syncthreads();  // every warp is done with tile j-1's stage, which K_{j+1}, V_{j+1} overwrite
      if (threadIdx.x == 0 && j_tile + 1 < Tc_end)
        copy_kv_tma<C>(maps, K_s + (1 - stage) * kTileBytes, V_s + (1 - stage) * kTileBytes, full + 8 * (1 - stage),
                       j0 + Bc, kv_bh);
      mbarrier_wait(full + 8 * stage, j_tile / 2 % 2);  // K_j, V_j have landed (the stage's use j_tile / 2)
    } else {
      cp_async_wait<0>();  // this thread's copies of K_j, V_j (and Q_i) have landed
      __syncthreads();     // ... and everyone's; and every warp is done with tile j-1's stage
    }
    if constexpr (C::kStages == 2 && !C::kTmaKV) {
      if (j_tile + 1 < Tc_end) {  // K_{j+1}, V_{j+1} fly while tile j is computed
        const std::uint32_t next = (1 - stage) * kTileBytes;
        in.copy_kv(K_s + next, V_s + next, j0 + Bc, Sk - j0 - Bc, D);
      }
      cp_async_commit();
    }
    ScoreTile<C> S_ij;
    tile_scores<C>(S_ij, q_frag, Q_w, K_s + stage * kTileBytes, lane_a, lane_b);
    // Only the last partial key tile and the causal diagonal tiles pay for the element mask.
    if (needs_mask(i_tile, j_tile, Br, Bc, Sq, Sk, prm.causal)) mask_scores<C>(S_ij, i0 + row0 + g, j0, t, prm);
    PTile<C> P_ij;
    softmax_step<C>(S_ij, P_ij, w, prm.scale_log2);
    accumulate_pv<C>(w, P_ij, V_s + stage * kTileBytes, lane_v);
  }
  write_rows<C, kBshd>(w, prm, in.bh, i0 + row0 + g, t);
}

// The kernel's arguments, after the checks that go beyond fa::check_forward_args.
inline Params make_params(const fa::Problem& p, const void* q, const void* k, const void* v, void* o,
                          float* lse, const char* chapter) {
  fa::cuda::require_compute_capability(80, chapter, "it uses bf16 mma.sync, ldmatrix and cp.async");
  // Every row starts on a 16-byte boundary (D * 2 bytes is a multiple of 16), so 16-byte aligned
  // base pointers are all that the 16-byte copies need.
  if (!aligned16(q) || !aligned16(k) || !aligned16(v) || !aligned16(o))
    throw std::invalid_argument(std::string(chapter) + ": q, k, v and o must be 16-byte aligned");
  return {q,          k,           v,         o, lse, std::int64_t{p.batch} * p.heads, p.seqlen_q, p.seqlen_k,
          p.group_size(), p.causal, p.scale() * kLog2e, p.head_dim, p.q_strides(), p.kv_strides(), p.heads};
}

// Launches kKernel (a kernel of configuration C taking P) on the grid of query tiles: Tr along x,
// B*H rows over y and z. 07's kernel and 06's ping-pong step launch through it too.
template <class C, auto kKernel, class P, class... Extra>
void launch_on_grid(const P& prm, cudaStream_t stream, const char* chapter, const Extra&... extra) {
  static const bool opted_in = [] {  // above 48 KB of shared memory a kernel must opt in, once
    allow_shared_memory(kKernel, C::kSmemBytes);
    return true;
  }();
  (void)opted_in;
  const dim3 grid = fa::cuda::tiles_by_rows(ceil_div(prm.seqlen_q, C::Br), prm.batch_heads, chapter);
  kKernel<<<grid, C::kThreads, C::kSmemBytes, stream>>>(prm, extra...);
  FA_CHECK_LAUNCH();
}

template <class C, bool kBshd = false>
void launch(const Params& prm, cudaStream_t stream, const KVMaps& maps = {}) {
  launch_on_grid<C, tensor_core_kernel<C, kBshd>>(prm, stream, "06_tensor_core", maps);
}

}  // namespace tensor_core
