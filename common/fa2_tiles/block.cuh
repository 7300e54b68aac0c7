// One block of FlashAttention-2's forward on the tensor cores, the host side and the block's view
// of global memory: the tiles chapter 06 chose per head dim (ChapterConfig, with_tile), the
// block's inputs in either layout (BlockInputs), its query tile (query_tile), the kernel's
// arguments (make_params) and the launch on the grid of query tiles (launch_on_grid). Chapter 06
// teaches them with its kernel (06_tensor_core/tensor_core.cuh); 07, 08, 09 and 10 build on them.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "common/cuda/cuda_check.h"
#include "common/device/grid.cuh"
#include "common/device/launch.h"
#include "common/fa2_tiles/tile_math.cuh"  // Params, Config and the steps of one key tile
#include "common/host/problem.h"

namespace fa2 {

// Chapter 06's tiles per head dim, which 07 runs too (06_tensor_core/tiles.md: "Choosing the
// tiles"). D <= 128: Br = 128 (32 rows per warp), FlashAttention-2's blocks, with Bc = 128 at
// D = 64 (measured faster than Bc = 64 with Q_i in registers, step v4) and Bc = 64 above;
// D = 192, 256: 16 rows per warp, or O_i alone would take 192 or 256 registers. Only D = 32 has
// registers left for Q_i's fragments. The lazy rescale (step v6) at D >= 128, where it measured
// 3-7% faster (D = 128); at D = 64 it measured 1-3% slower. D = 192, 256: Bc = 64 in one stage
// (K_j, V_j, then wait; 96 KB, still two blocks per SM, whose turns hide each other's copies),
// measured 1.04-1.10x over Bc = 32 double-buffered.
// kPadded: a head dim below kD runs in this tile (06_tensor_core/tensor_core.cu: dispatch).
template <class T, int kD, bool kPadded = false>
using ChapterConfig = Config<T, kD, /*Bc=*/kD == 64 ? 128 : 64,
                             /*kMTiles=*/kD <= 128 ? 2 : 1, /*kStages=*/(kD > 128 ? 1 : 2), /*kSwizzle=*/true,
                             /*kQInRegs=*/kD <= 32, /*kLazyRescale=*/(kD >= 128), kPadded>;

// The tile that runs head dim d (a multiple of 8 up to 256): the next of the six widths, padded
// unless d is the width itself. Calls f(std::integral_constant<int, kD>, std::bool_constant<kPadded>);
// 06's forward and 07's launch through it (06_tensor_core/tiles.md: "Every head dim"), 08's
// tensor-core backward with kMinWidth = 64 (it has no 32 tile: head dims below 64 run in the 64
// tile).
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

// The kernel's arguments, after the checks that go beyond fa::check_forward_args.
inline Params make_params(const fa::Problem& p, const void* q, const void* k, const void* v, void* o,
                          float* lse, const char* chapter) {
  fa::cuda::require_compute_capability(80, chapter, "it uses bf16 mma.sync, ldmatrix and cp.async");
  // Every row starts on a 16-byte boundary (D * 2 bytes is a multiple of 16), so 16-byte aligned
  // base pointers are all that the 16-byte copies need.
  if (!aligned16(q) || !aligned16(k) || !aligned16(v) || !aligned16(o))
    throw std::invalid_argument(std::string(chapter) + ": q, k, v and o must be 16-byte aligned");
  return {q,          k,           v,         o, lse, std::int64_t{p.batch} * p.heads, p.seqlen_q, p.seqlen_k,
          p.group_size(), p.causal, p.scale() * kLog2e, p.head_dim, p.q_strides(), p.kv_strides(), p.heads,
          p.window_left, p.window_right};
}

// Launches kKernel (a kernel of configuration C taking P) on the grid of query tiles: Tr along x,
// B*H rows over y and z. 06's kernel and ping-pong step and 07's kernel launch through it.
template <class C, auto kKernel, class P, class... Extra>
void launch_on_grid(const P& prm, cudaStream_t stream, const char* chapter, const Extra&... extra) {
  allow_shared_memory_once(kKernel, C::kSmemBytes);  // above 48 KB of shared memory a kernel must opt in
  const dim3 grid = fa::cuda::tiles_by_rows(ceil_div(prm.seqlen_q, C::Br), prm.batch_heads, chapter);
  kKernel<<<grid, C::kThreads, C::kSmemBytes, stream>>>(prm, extra...);
  FA_CHECK_LAUNCH();
}

}  // namespace fa2
