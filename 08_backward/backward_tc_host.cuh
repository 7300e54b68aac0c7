// The host side of 08's tensor-core backward for one dtype (backward_tc.cu does the checks and
// picks the dtype): the tiles for a head dim, the workspace (D_i, the fp32 dQ accumulator, the
// turn counters), the preprocessing, the launch of the dense, deterministic or block-sparse kernel
// (backward_tc.cuh), and the conversion of dQ. Its instantiations are compiled in two files,
// backward_tc_bf16.cu and backward_tc_f16.cu, so that a parallel build compiles the two halves of
// the chapter's kernels at once (they are its longest compiles).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <stdexcept>
#include <string>

#include "common/fa2_tiles/block.cuh"  // with_tile: the tile width for a head dim
#include "08_backward/backward.h"
#include "08_backward/backward_tc.cuh"  // the kernels
#include "08_backward/dot_do_o.cuh"
#include "common/cuda/cuda_check.h"
#include "common/device/grid.cuh"
#include "common/device/launch.h"
#include "common/cuda/device_memory.h"

namespace backward {
namespace tc_host {

using namespace tc;

// The block's shared memory: the tiles, and the dQ tile of kBulkDq where the GPU runs the sm_90
// code that uses it (an A100's 164 KiB would not take it; its sm_80 code keeps the REDs).
template <class C>
int tc_smem_bytes() {
  static const int bytes = C::kSmemBytes + (C::kBulkDq && fa::cuda::compute_capability() >= 90 ? C::kDqBytes : 0);
  return bytes;
}

template <class C, auto kKernel>
void launch(const TcParams& prm, dim3 grid, cudaStream_t stream) {
  allow_shared_memory_once(kKernel, tc_smem_bytes<C>());  // above 48 KB of shared memory a kernel must opt in
  kKernel<<<grid, C::kThreads, tc_smem_bytes<C>(), stream>>>(prm);
  FA_CHECK_LAUNCH();
}

template <class T, int kD, bool kPadded>
void run(const fa::Problem& p, const void* q, const void* k, const void* v, const void* o, const float* lse,
         const void* dout, void* dq, void* dk, void* dv, bool deterministic, const DeviceSparseWalk* walk,
         cudaStream_t stream) {
  // Dense: FlashAttention-2's tiles for kD (TcConfig). Sparse: the walk's 64-row query tiles. At
  // kD = 96 a warp's dQ tile of 32 x 24 would not be whole 16-column ldmatrix steps: 4 warps split
  // the rows instead of 2 (16 x 48; 48 columns: WarpTiles adds the corner per ldmatrix).
  // Above kD = 128, Bc = 64 keys a block: K_j, V_j and two stages of Q_i, dO_i of 256 columns take
  // 192 KiB, and dK_j, dV_j of 64 x 256 take 128 fp32 registers a thread (FlashAttention-2's sm80
  // hdim256 backward: Br = Bc = 64, 8 warps). The block-sparse walk lists 128-key tiles: dense only.
  constexpr bool kWide = kD > 128;
  using Dense = TcConfig<T, kD, kD == 64 ? 128 : 64, 2, kD == 128 || kWide ? 2 : 4, kPadded, kWide ? 64 : 128>;
  using Sparse = TcConfig<T, kD, 64, 2, kD == 96 ? 4 : 2, kPadded>;
  static_assert(kWide || (Sparse::Br == kSparseBr && Sparse::Bc == kSparseBc), "the sparse walk is listed in the kernel's tiles");
  static_assert(kWide || (Dense::Bc == Sparse::Bc && Dense::Br >= Sparse::Br));
  const int Tr = ceil_div(p.seqlen_q, Sparse::Br);  // the most query tiles either kernel walks
  // Workspace: D_i [B, H, Sq] and dQ_accum [B, H, dq_rows, D] in fp32 (whole query tiles of the
  // larger Br, so neither kernel's add_dq checks a row); deterministic mode adds one turn counter
  // per query tile [B, H, Tr].
  const int dq_rows = ceil_div(p.seqlen_q, Dense::Br) * Dense::Br;
  const std::size_t d_bytes = fa::cuda::workspace_part(p.lse_elems() * sizeof(float));
  const std::size_t acc_bytes = fa::cuda::workspace_part(std::size_t(p.batch) * p.heads * dq_rows * kD * sizeof(float));
  const std::size_t turn_bytes = deterministic ? fa::cuda::workspace_part(std::size_t(p.batch) * p.heads * Tr * sizeof(int)) : 0;
  auto* ws = static_cast<unsigned char*>(
      fa::cuda::workspace(d_bytes + acc_bytes + turn_bytes, "08_backward's D_i, fp32 dQ accumulator and turns"));
  auto* D_row = reinterpret_cast<float*>(ws);
  auto* dq_accum = reinterpret_cast<float*>(ws + d_bytes);
  int* dq_turn = deterministic ? reinterpret_cast<int*>(ws + d_bytes + acc_bytes) : nullptr;
  if (dq_turn) FA_CUDA_CHECK(cudaMemsetAsync(dq_turn, 0, turn_bytes, stream));

  const bool bshd = p.layout == fa::Layout::bshd;  // Q, O, dO, dQ and K, V, dK, dV as [B, S, H, D]
  const fa::Strides q_strides = p.q_strides(), kv_strides = p.kv_strides();
  const std::int64_t rows = p.lse_elems();
  dot_do_o(static_cast<const T*>(o), static_cast<const T*>(dout), D_row, dq_accum, rows, p.head_dim, kD, p.seqlen_q, dq_rows,
           stream, bshd ? &q_strides : nullptr, p.heads);

  CUtensorMap dq_map{};  // kDqInStage: dq_accum for the copy engine's adds (sm_90 code only)
  if constexpr (Dense::kDqInStage) {
    if (fa::cuda::compute_capability() >= 90)
      dq_map = fa::cuda::make_tma_f32(dq_accum, std::uint64_t(p.batch) * p.heads, dq_rows, kD, Dense::Br, 32);
  }
  const TcParams prm{.q = q, .k = k, .v = v, .dout = dout, .lse = lse, .D_row = D_row,
                     .dq_accum = dq_accum, .dq_turn = dq_turn,
                     .walk_offsets = walk ? walk->offsets() : nullptr,
                     .walk_steps = walk ? walk->steps() : nullptr,
                     .walk_ranks = walk ? walk->ranks() : nullptr,
                     .dk = dk, .dv = dv,
                     .batch_kv_heads = std::int64_t{p.batch} * p.kv_heads,
                     .seqlen_q = p.seqlen_q, .seqlen_k = p.seqlen_k, .group_size = p.group_size(),
                     .dq_rows = dq_rows, .head_dim = p.head_dim, .causal = p.causal,
                     .scale = p.scale(), .scale_log2 = p.scale() * kLog2e,
                     .dq_map = dq_map,
                     .q_strides = q_strides, .kv_strides = kv_strides, .heads = p.heads, .kv_heads = p.kv_heads};
  const dim3 grid =
      fa::cuda::tiles_by_rows(ceil_div(p.seqlen_k, Dense::Bc), std::int64_t{p.batch} * p.kv_heads, "08_backward");
  const auto dense = [&] {
    if (deterministic && bshd) launch<Dense, backward_tc_deterministic_kernel<Dense, true>>(prm, grid, stream);
    else if (deterministic) launch<Dense, backward_tc_deterministic_kernel<Dense>>(prm, grid, stream);
    else if (bshd) launch<Dense, backward_tc_kernel<Dense, true>>(prm, grid, stream);
    else launch<Dense, backward_tc_kernel<Dense>>(prm, grid, stream);
  };
  if constexpr (kWide) {
    dense();  // tensor_core_backward refused a walk above kD = 128
  } else {
    if (walk && deterministic) launch<Sparse, backward_tc_sparse_kernel<Sparse, true>>(prm, grid, stream);
    else if (walk) launch<Sparse, backward_tc_sparse_kernel<Sparse, false>>(prm, grid, stream);
    else dense();
  }

  const std::int64_t quads = p.q_elems() / 4;
  const unsigned blocks = fa::cuda::blocks_1d((quads + 255) / 256, "08_backward");
  const auto convert = bshd ? tc_convert_dq_kernel<T, true> : tc_convert_dq_kernel<T, false>;
  convert<<<blocks, 256, 0, stream>>>(reinterpret_cast<const float4*>(dq_accum), static_cast<uint2*>(dq), quads,
                                      p.head_dim / 4, kD / 4, p.seqlen_q, dq_rows, p.scale(), q_strides, p.heads);
  FA_CHECK_LAUNCH();
}

// One dtype's backward: the head dim's tile width from 06's ladder (64, 96, 128, 192, 256;
// columns past the head dim zero-filled, never written), whose kernels are compiled for it
// (TcConfig::kPadded).
template <class T>
void run_dtype(const fa::Problem& p, const void* q, const void* k, const void* v, const void* o, const float* lse,
               const void* dout, void* dq, void* dk, void* dv, bool deterministic, const DeviceSparseWalk* walk,
               cudaStream_t stream) {
  fa2::with_tile<64>(p.head_dim, [&](auto kd, auto padded) {
    run<T, decltype(kd)::value, decltype(padded)::value>(p, q, k, v, o, lse, dout, dq, dk, dv, deterministic, walk,
                                                         stream);
  });
}

// The entry points of the two files.
void run_bf16(const fa::Problem& p, const void* q, const void* k, const void* v, const void* o, const float* lse,
              const void* dout, void* dq, void* dk, void* dv, bool deterministic, const DeviceSparseWalk* walk,
              cudaStream_t stream);
void run_f16(const fa::Problem& p, const void* q, const void* k, const void* v, const void* o, const float* lse,
             const void* dout, void* dq, void* dk, void* dv, bool deterministic, const DeviceSparseWalk* walk,
             cudaStream_t stream);

}  // namespace tc_host
}  // namespace backward
