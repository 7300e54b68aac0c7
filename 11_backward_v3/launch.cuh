// Chapter 11's host side as templates, for the chapter (backward_v3.cu) and its steps (steps/):
// the launches of the preparation kernel, the main kernel (backward_v3.cuh) and the conversion of
// the fp32 dQ accumulator (both in prepare_convert.cuh).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "09_flash_v3/launch.cuh"  // make_maps, o_map_of: 4-D tensor maps in the layout's strides
#include "11_backward_v3/backward_v3.cuh"
#include "11_backward_v3/prepare_convert.cuh"  // prepare_kernel, convert_dq_kernel
#include "11_backward_v3/wide.cuh"  // head dims 192 and 256
#include "common/cuda/cuda_check.h"
#include "common/cuda/device_memory.h"
#include "common/device/grid.cuh"
#include "common/device/constants.h"  // kLog2e
#include "common/device/launch.h"
#include "08_backward/backward.h"          // DeviceSparseWalk (the block-sparse step)
#include "08_backward/harness/backward.h"  // check_backward_args
#include "common/host/problem.h"

namespace backward_v3 {

namespace detail {

// The three kernels on `stream`, for configuration C (Bshd<...> on [B, S, H, D] tensors); kTurns:
// the deterministic mode. sparse: the block-sparse step's walk, for a configuration whose Walk is
// 08's ListedWalk.
template <class C, bool kTurns>
void run_layout(const fa::Problem& p, const void* q, const void* k, const void* v, const void* o, const float* lse,
         const void* dout, void* dq, void* dk, void* dv, cudaStream_t stream,
         const backward::DeviceSparseWalk* sparse = nullptr) {
  static_assert(!(kTurns && C::Walk::kHalves), "the block-sparse step has no deterministic mode");
  static_assert(!C::Walk::kHalves || (C::Br == backward::kSparseBr && C::Bc == backward::kSparseBc),
                "08's transposed walk lists tiles of kSparseBr query rows and kSparseBc keys");
  if (C::Walk::kHalves != (sparse != nullptr))
    throw std::logic_error("11_backward_v3: a block-sparse configuration runs with a walk, a dense one without");
  using T = typename C::T;
  constexpr int kD = C::kD;
  // The scratch's extent: B H slices of Tr query tiles and B Hkv of Tc key tiles, or for a packed
  // batch (C::kVarlen) each sequence's own tiles (VarlenSeqs): H sum_b Tr_b and Hkv sum_b Tc_b.
  // walk_tiles: the most query tiles a key tile's block walks over per query head.
  std::vector<int> tables;  // a packed batch: cu_seqlens_q, cu_seqlens_k, query tiles, key tiles
  int Tr = ceil_div(p.seqlen_q, C::Br), walk_tiles = Tr;
  std::int64_t query_tiles = std::int64_t{p.batch} * p.heads * Tr;
  std::int64_t key_tiles = std::int64_t{p.batch} * p.kv_heads * ceil_div(p.seqlen_k, C::Bc);
  int grid_tiles = ceil_div(p.seqlen_k, C::Bc);  // the grid's x: a slice's key tiles
  if constexpr (C::kVarlen) {
    const std::size_t n = p.cu_seqlens_q.size();
    tables.resize(4 * n);
    std::copy(p.cu_seqlens_q.begin(), p.cu_seqlens_q.end(), tables.begin());
    std::copy(p.cu_seqlens_k.begin(), p.cu_seqlens_k.end(), tables.begin() + n);
    walk_tiles = 0;
    for (std::size_t b = 0; b + 1 < n; ++b) {
      const int tr = ceil_div(p.cu_seqlens_q[b + 1] - p.cu_seqlens_q[b], C::Br);
      tables[2 * n + b + 1] = tables[2 * n + b] + tr;
      tables[3 * n + b + 1] = tables[3 * n + b] + ceil_div(p.cu_seqlens_k[b + 1] - p.cu_seqlens_k[b], C::Bc);
      walk_tiles = std::max(walk_tiles, tr);
    }
    grid_tiles = tables[4 * n - 1];
    query_tiles = std::int64_t{p.heads} * tables[3 * n - 1];
    key_tiles = std::int64_t{p.kv_heads} * grid_tiles;
  }
  const std::int64_t padded_rows = query_tiles * C::Br;
  const std::size_t vec_bytes = fa::cuda::workspace_part(padded_rows * sizeof(float));
  const std::size_t acc_bytes = fa::cuda::workspace_part(padded_rows * kD * sizeof(float));
  const std::size_t turn_bytes = kTurns ? fa::cuda::workspace_part(query_tiles * C::kChunks * sizeof(int)) : 0;
  // dK and dV sums for walks longer than kFlushSteps (the longest: a KV head's group of query
  // heads over every query tile): 2 x 128 kD floats a key tile.
  const bool long_walks = std::int64_t{p.group_size()} * walk_tiles > C::kFlushSteps;
  const std::size_t partial_bytes =
      long_walks ? fa::cuda::workspace_part(key_tiles * 2 * 128 * kD * sizeof(float)) : 0;  // key_grad_sums
  const std::size_t table_bytes = tables.size() * sizeof(int);
  auto* ws = static_cast<unsigned char*>(fa::cuda::workspace(
      2 * vec_bytes + acc_bytes + turn_bytes + partial_bytes + table_bytes,
      "11_backward_v3's LSE, D_i, fp32 dQ accumulator, dQ turns, dK/dV sums and sequences"));
  auto* lse2 = reinterpret_cast<float*>(ws);
  auto* D_row = reinterpret_cast<float*>(ws + vec_bytes);
  auto* dq_accum = reinterpret_cast<float*>(ws + 2 * vec_bytes);
  int* dq_turn = kTurns ? reinterpret_cast<int*>(ws + 2 * vec_bytes + acc_bytes) : nullptr;
  float* kv_partial = long_walks ? reinterpret_cast<float*>(ws + 2 * vec_bytes + acc_bytes + turn_bytes) : nullptr;
  VarlenSeqs seqs{};
  if constexpr (C::kVarlen) {  // the sequences' tables, one copy
    const int n = static_cast<int>(p.cu_seqlens_q.size());
    const int* dev = reinterpret_cast<const int*>(ws + 2 * vec_bytes + acc_bytes + turn_bytes + partial_bytes);
    FA_CUDA_CHECK(cudaMemcpyAsync(const_cast<int*>(dev), tables.data(), table_bytes, cudaMemcpyHostToDevice, stream));
    seqs = {.cu_seqlens_q = dev, .cu_seqlens_k = dev + n, .query_tiles = dev + 2 * n, .key_tiles = dev + 3 * n,
            .batch = n - 1};
  }

  if (reinterpret_cast<std::uintptr_t>(o) % 16 != 0)
    throw std::invalid_argument("11_backward_v3: O must be 16-byte aligned (the preparation kernel reads it in 16-byte loads)");
  if (kTurns) FA_CUDA_CHECK(cudaMemsetAsync(dq_turn, 0, query_tiles * C::kChunks * sizeof(int), stream));
  // A packed batch's sequences may all be without queries (no padded rows) or keys (no key tiles).
  if (padded_rows > 0) {
    prepare_kernel<T, kD, C::kBshd, C::kVarlen>
      <<<fa::cuda::blocks_1d(padded_rows / kPrepRows, "11_backward_v3"), 8 * kPrepRows, 0, stream>>>(
          static_cast<const T*>(o), static_cast<const T*>(dout), lse, lse2, D_row, reinterpret_cast<float4*>(dq_accum),
          padded_rows, C::kVarlen ? C::Br : Tr * C::Br, p.seqlen_q, p.head_dim, p.o_strides(), p.heads, seqs);
    FA_CHECK_LAUNCH();
  }

  constexpr auto kernel = [] {
    if constexpr (C::kWide) return backward_v3_wide_kernel<C, kTurns>;
    else return backward_v3_kernel<C, kTurns>;
  }();
  allow_shared_memory_once(kernel, C::kSmemBytes);  // above 48 KB of shared memory a kernel must opt in
  const flash_v3::Maps maps = flash_v3::make_maps(p, q, k, v, C::Br, C::Bc);
  // The longest-first order's sections (Config::kLongestFirst): as many (batch, KV head) rows as
  // keep their Q and dO and the fp32 dQ sums within 40 MiB of L2, a power of two (FlashAttention-3's
  // choice for its backward under a causal mask).
  int lpt_section = 1;
  if constexpr (C::kLongestFirst) {
    const std::int64_t row_bytes = std::int64_t{p.group_size()} * p.seqlen_q * kD * (2 * sizeof(T) + sizeof(float));
    while (2 * lpt_section * row_bytes <= (std::int64_t{40} << 20) && lpt_section < (1 << 20)) lpt_section *= 2;
  }
  // At D = 96 on the kD = 128 kernel, the second 64-column box of a row reaches past the tensor:
  // TMA fills columns 96-127 with zeros, which add nothing to S^T, dP^T or dQ.
  const CUtensorMap do_map = flash_v3::o_map_of(dout, p, C::Br);  // dO lies as O
  const Params prm{.lse2 = lse2, .D_row = D_row, .dq_accum = dq_accum, .dq_turn = dq_turn, .kv_partial = kv_partial,
                   .walk_offsets = sparse ? sparse->offsets() : nullptr,
                   .walk_steps = sparse ? sparse->steps() : nullptr, .dk = dk, .dv = dv,
                   .batch_kv_heads = std::int64_t{p.batch} * p.kv_heads,
                   .seqlen_q = p.seqlen_q, .seqlen_k = p.seqlen_k, .group_size = p.group_size(), .Tr = Tr,
                   .head_dim = p.head_dim,
                   .causal = p.causal, .scale = p.scale(), .scale_log2 = p.scale() * kLog2e,
                   .window_left = p.window_left, .window_right = p.window_right, .lpt_section = lpt_section};
  LayoutParams<C> lp;
  if constexpr (C::kVarlen) lp = VarlenParams{{prm, p.heads, p.kv_strides(), p.v_strides()}, seqs};
  else if constexpr (C::kBshd)
    lp = BshdParams{prm, p.heads, p.kv_strides(), p.v_strides(),
                    fa::cuda::LongestFirstPow2::of(prm.batch_kv_heads, lpt_section)};
  else lp = prm;
  KernelParams<C> kp;
  if constexpr (C::kSoftcap)
    kp = SoftcapParams<LayoutParams<C>>{lp, fa::cuda::SoftcapConsts::of(p.scale(), p.softcap)};
  else kp = lp;
  if (grid_tiles > 0) {
    const dim3 grid = tiles_by_rows(grid_tiles, prm.batch_kv_heads, "11_backward_v3");
    kernel<<<grid, C::kThreads, C::kSmemBytes, stream>>>(maps.q, maps.k, maps.v, do_map, kp);
    FA_CHECK_LAUNCH();
  }

  const std::int64_t quads = padded_rows * kD / 4;
  if (quads == 0) return;
  convert_dq_kernel<GradT<C>, kD, C::Br, C::kBshd, C::kVarlen>
      <<<fa::cuda::blocks_1d((quads + 255) / 256, "11_backward_v3"), 256, 0, stream>>>(
          reinterpret_cast<const float4*>(dq_accum), static_cast<GradT<C>*>(dq), quads, p.seqlen_q, Tr, p.head_dim, p.scale(),
          p.q_strides(), p.heads, seqs);
  FA_CHECK_LAUNCH();
}

// run_layout for the problem's layout: C, or Bshd<C> on [B, S, H, D] tensors, or where kPacked
// (the chapter's entry points) Varlen<C> on a packed batch of sequences and Softcap<C> (or
// Bshd<Softcap<C>>) under a logit softcap.
template <class C, bool kTurns, bool kPacked>
void run(const fa::Problem& p, const void* q, const void* k, const void* v, const void* o, const float* lse,
         const void* dout, void* dq, void* dk, void* dv, cudaStream_t stream,
         const backward::DeviceSparseWalk* sparse = nullptr) {
  if constexpr (kPacked) {
    if (p.has_softcap()) {  // the softcap's kernels, Softcap<C>
      if (p.is_varlen())
        throw std::invalid_argument("11_backward_v3: a logit softcap on a packed batch of sequences is not supported");
      if (p.layout == fa::Layout::bshd)
        return run_layout<Bshd<Softcap<C>>, kTurns>(p, q, k, v, o, lse, dout, dq, dk, dv, stream, sparse);
      return run_layout<Softcap<C>, kTurns>(p, q, k, v, o, lse, dout, dq, dk, dv, stream, sparse);
    }
    if (p.is_varlen()) return run_layout<Varlen<C>, kTurns>(p, q, k, v, o, lse, dout, dq, dk, dv, stream, sparse);
  }
  if (p.layout == fa::Layout::bshd) run_layout<Bshd<C>, kTurns>(p, q, k, v, o, lse, dout, dq, dk, dv, stream, sparse);
  else run_layout<C, kTurns>(p, q, k, v, o, lse, dout, dq, dk, dv, stream, sparse);
}

}  // namespace detail

using detail::run;

// The chapter's kernel: at D = 96 and 128 a causal grid goes longest first (the step
// v6_longest_first, 1.03-1.10x the row order on an H200); at D = 64, where the row order measured
// the same within 2%, it keeps the row order (the step v3_tall_d64). Every head dim issues a step's
// dQ product before dK's (the step v7_dq_first).
template <class T, int kD>
using ChapterConfig = Config<T, kD, (kD == 64 ? 128 : 64), true, backward::tc::DenseWalk, /*kLongestFirst=*/kD != 64,
                             /*kDqFirst=*/true>;

// An entry point of the chapter or of a step: the checks every backward makes, then run() for the
// problem's dtype and head dim with configuration Cfg<T, D>. kTurns: the deterministic mode.
// sparse: the block-sparse step's walk (a configuration with 08's ListedWalk). kPacked: whether
// it has kernels for a packed batch of sequences and the softcap (the chapter's; its Support says
// varlen and softcap).
template <template <class, int> class Cfg, bool kTurns, bool kPacked = false>
void backward_with(const fa::Support& support, const fa::Problem& p, const void* q, const void* k, const void* v,
                   const void* o, const float* lse, const void* dout, void* dq, void* dk, void* dv,
                   cudaStream_t stream, const backward::DeviceSparseWalk* sparse = nullptr) {
  fa::check_backward_args(support, p, q, k, v, o, lse, dout, dq, dk, dv);
  if (sparse) sparse->check_fits(p, support.chapter);
  // wgmma and TMA exist on sm_90 only, and the kernels are built for sm_90a.
  if (fa::cuda::compute_capability() != 90)
    throw std::invalid_argument(std::string(support.chapter) +
                                ": needs a Hopper GPU (compute capability 9.0: wgmma, TMA); this one is " +
                                std::to_string(fa::cuda::compute_capability()));
  auto dtype = [&](auto type) {
    using T = decltype(type);
    // D = 96: the D = 128 kernel on zero-filled columns (README: Head dims); 192 and 256: the wide
    // kernel (wide.cuh), the same for every step.
    if (p.head_dim == 64) run<Cfg<T, 64>, kTurns, kPacked>(p, q, k, v, o, lse, dout, dq, dk, dv, stream, sparse);
    else if (p.head_dim <= 128) run<Cfg<T, 128>, kTurns, kPacked>(p, q, k, v, o, lse, dout, dq, dk, dv, stream, sparse);
    else if (p.head_dim == 192)
      run<WideConfig<T, 192>, kTurns, kPacked>(p, q, k, v, o, lse, dout, dq, dk, dv, stream, sparse);
    else run<WideConfig<T, 256>, kTurns, kPacked>(p, q, k, v, o, lse, dout, dq, dk, dv, stream, sparse);
  };
  if (p.dtype == fa::Dtype::bf16) dtype(__nv_bfloat16{});
  else dtype(__half{});
}

}  // namespace backward_v3
