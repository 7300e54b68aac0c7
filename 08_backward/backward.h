// Chapter 08: FlashAttention-2's backward pass -- one block per key tile, dK_j and dV_j in
// registers, P_ij recomputed from the forward's LSE, dQ_i accumulated with atomics. fp32 on the
// CUDA cores (backward.cu, the lesson) and on the tensor cores in 3xTF32 up to head dim 128
// (backward_tf32x3.cu), fp16/bf16 on the tensor cores (backward_tc.cu).
#pragma once

#include "05_flash_v2/flash_v2.h"  // on_tensor_cores: which fp32 forward runs
#include "08_backward/sparse_walk.h"
#include "08_backward/harness/backward.h"
#include "common/cuda/device_memory.h"

namespace backward {

struct BackwardOptions {
  // f16/bf16 only: dQ bitwise identical from run to run (key tiles add into a query tile in a
  // fixed order). dK and dV are deterministic in every mode. f32 refuses it.
  bool deterministic = false;
};

// q, o, dout, dq: [B, H, Sq, D]   k, v, dk, dv: [B, Hkv, Sk, D]   (p.dtype, device); f16/bf16
// also [B, Sq, H, D] and [B, Sk, Hkv, D] where p.layout is bshd (not the block-sparse walk).
// lse: [B, H, Sq] (float, device) as the forward wrote it: natural log, +inf for a row that
// sees no key. dk and dv are summed over the H / Hkv query heads sharing a KV head.
// f32: any head_dim up to 256; scratch B * H * Sq floats (D_i) in fa::cuda::workspace.
// f16/bf16: head_dim 64 or 128, 16-byte aligned pointers, sm_80+; scratch D_i and an fp32 dQ
// accumulator (B * H * Sq * (D + 1) floats), plus B * H * ceil(Sq / 64) ints when deterministic.
void backward(const fa::Problem& p, const void* q, const void* k, const void* v, const void* o,
              const float* lse, const void* dout, void* dq, void* dk, void* dv, cudaStream_t stream);
void backward(const fa::Problem& p, const void* q, const void* k, const void* v, const void* o,
              const float* lse, const void* dout, void* dq, void* dk, void* dv, cudaStream_t stream,
              const BackwardOptions& options);
// backward(..., {deterministic = true}) with the BackwardFn signature (the runner's --deterministic).
void backward_deterministic(const fa::Problem& p, const void* q, const void* k, const void* v, const void* o,
                            const float* lse, const void* dout, void* dq, void* dk, void* dv,
                            cudaStream_t stream);

// The block-sparse backward's walk (sparse_walk.h) on the device: chapter 07's mask transposed
// for one problem, uploaded once, reusable by any number of backward calls of that problem.
class DeviceSparseWalk {
 public:
  // Throws std::invalid_argument when the mask does not fit p (transpose_mask).
  DeviceSparseWalk(const fa::Problem& p, const block_sparse::BlockMask& mask);

  void check_fits(const fa::Problem& p, const std::string& who) const { shape_.check_fits(p, who); }
  std::int64_t size() const { return size_; }                             // steps, all blocks
  const int* offsets() const { return offsets_.as<int>(); }                // [B * Hkv * Tc + 1] device
  const std::uint32_t* steps() const { return steps_.as<std::uint32_t>(); }  // [size] device
  const int* ranks() const { return ranks_.as<int>(); }                    // [size] device

 private:
  SparseWalk shape_;  // the problem it fits (its lists are on the device only)
  std::int64_t size_;
  fa::cuda::DeviceBuffer offsets_, steps_, ranks_;
};

// The block-sparse backward: only the (query tile, key tile) pairs the mask of `walk` keeps,
// with the O and LSE of chapter 07's forward under the same mask. f16/bf16, head_dim 64 and 128,
// deterministic mode available; the rest as the dense backward. Rows that see no key get zero
// gradients; keys no row sees get dK = dV = 0.
void backward(const fa::Problem& p, const DeviceSparseWalk& walk, const void* q, const void* k, const void* v,
              const void* o, const float* lse, const void* dout, void* dq, void* dk, void* dv, cudaStream_t stream,
              const BackwardOptions& options = {});

// The forward that writes the O and LSE the backward reads: for f32 05's chapter forward (its
// 3xTF32 kernel up to head dim 128, its FFMA kernel above: fp32_on_tensor_cores), 06_tensor_core
// for f16/bf16.
void forward(const fa::Problem& p, const void* q, const void* k, const void* v, void* o, float* lse,
             cudaStream_t stream);

// The chapter: f32, f16, bf16; its shared tests sweep head dims 8 .. 256 (multiples of 8), which
// both kernels have. (One fa::Support cannot say "f32: any head dim up to 256, f16/bf16: multiples
// of 8 up to 256"; the tensor-core path refuses other head dims with std::invalid_argument. The
// executable checks and lists the two tables below, fp32_chapter().support and
// tensor_core_support().)
const fa::BackwardChapter& chapter();
// The FFMA kernel alone (backward.cu), the chapter's lesson, at every head dim up to 256, with
// 05's FFMA kernel as its forward: its tests (7, 32, 64, 96, 128, 160, 256) and its timings.
const fa::BackwardChapter& fp32_chapter();
// The 3xTF32 kernel alone (backward_tf32x3.cu) with 05's 3xTF32 forward, whose scores it
// recomputes bit for bit: f32, any head dim up to 128 (its tests: 37 and 100, the rest through
// chapter()).
const fa::BackwardChapter& tf32x3_chapter();
// Which fp32 pair chapter() runs: where 05's forward runs its 3xTF32 kernel (head dims up to
// 128, flash_v2::on_tensor_cores), the backward is backward_tf32x3.cu, as PyTorch's fp32
// memory-efficient backend computes; above 128, 05's and this chapter's FFMA kernels. A backward
// must recompute the scores its forward's LSE came from (README, Pitfalls): pair them this way.
inline bool fp32_on_tensor_cores(const fa::Problem& p) {
  return p.dtype == fa::Dtype::f32 && flash_v2::on_tensor_cores(p);
}
// What the tensor-core backward supports: f16 and bf16, every head dim that is a multiple of 8 up
// to 256 (tile widths 64, 96, 128, 192, 256; the block-sparse walk up to 128).
inline const fa::Support& tensor_core_support() {
  static const fa::Support s{.chapter = "08_backward",
                             .dtypes = {fa::Dtype::f16, fa::Dtype::bf16},
                             .head_dims = {},
                             .max_head_dim = 256,
                             .head_dim_multiple = 8,
                             .bshd_dtypes = {fa::Dtype::f16, fa::Dtype::bf16}};
  return s;
}

// The tensor-core backward (backward_tc.cu), after fa::check_backward_args.
// `walk`: null for the dense backward.
void tensor_core_backward(const fa::Problem& p, const void* q, const void* k, const void* v, const void* o,
                          const float* lse, const void* dout, void* dq, void* dk, void* dv,
                          const BackwardOptions& options, cudaStream_t stream, const DeviceSparseWalk* walk = nullptr);

}  // namespace backward
