// Chapter 08: FlashAttention-2's backward pass -- one block per key tile, dK_j and dV_j in
// registers, P_ij recomputed from the forward's LSE, dQ_i accumulated with atomics. fp32 on the
// CUDA cores (backward.cu), fp16/bf16 on the tensor cores (backward_tc.cu).
#pragma once

#include "common/backward.h"

namespace backward {

struct BackwardOptions {
  // f16/bf16 only: dQ bitwise identical from run to run (key tiles add into a query tile in a
  // fixed order). dK and dV are deterministic in every mode. f32 refuses it.
  bool deterministic = false;
};

// q, o, dout, dq: [B, H, Sq, D]   k, v, dk, dv: [B, Hkv, Sk, D]   (p.dtype, device)
// lse: [B, H, Sq] (float, device) as the forward wrote it: natural log, +inf for a row that
// sees no key. dk and dv are summed over the H / Hkv query heads sharing a KV head.
// f32: any head_dim up to 128; scratch B * H * Sq floats (D_i) in fa::cuda::workspace.
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

// The forward that writes the O and LSE the backward reads: 05_flash_v2 for f32, 06_tensor_core
// for f16/bf16.
void forward(const fa::Problem& p, const void* q, const void* k, const void* v, void* o, float* lse,
             cudaStream_t stream);

// The chapter: f32, f16, bf16; its shared tests sweep head dims 64 and 128, which both kernels
// have. (fa::Support cannot say "f32: any head dim up to 128, f16/bf16: 64 and 128"; the
// tensor-core path refuses other head dims with std::invalid_argument.)
const fa::BackwardChapter& chapter();
// The fp32 kernel alone, for the tests of the head dims only it supports (7, 32, 96).
const fa::BackwardChapter& fp32_chapter();

// The tensor-core backward (backward_tc.cu), after fa::check_backward_args.
void tensor_core_backward(const fa::Problem& p, const void* q, const void* k, const void* v, const void* o,
                          const float* lse, const void* dout, void* dq, void* dk, void* dv,
                          const BackwardOptions& options, cudaStream_t stream);

}  // namespace backward
