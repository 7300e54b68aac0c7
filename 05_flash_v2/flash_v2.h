// Chapter 05: FlashAttention-2's forward -- one block per query tile, O_i in registers, fp32: FFMA
// (the lesson), and 3xTF32 on the tensor cores up to head dim 128.
#pragma once

#include "common/harness/chapter.h"

namespace flash_v2 {

// q: [B, H, Sq, D]   k, v: [B, Hkv, Sk, D]   o: [B, H, Sq, D]   (float, device)
// lse: [B, H, Sq] (float, device). Any head_dim up to 256; no scratch memory. Head dims up to 128
// run tf32x3_forward, the rest ffma_forward (on_tensor_cores).
void forward(const fa::Problem& p, const void* q, const void* k, const void* v, void* o, float* lse,
             cudaStream_t stream);
// The FFMA kernel (flash_v2.cu), the chapter's lesson: FlashAttention-2's loop on the CUDA cores,
// any head dim up to 256.
void ffma_forward(const fa::Problem& p, const void* q, const void* k, const void* v, void* o, float* lse,
                  cudaStream_t stream);
// The same loop with both products on the tensor cores in 3xTF32 (flash_v2_tf32x3.cu), as
// PyTorch's fp32 memory-efficient backend computes: head dims up to 128. 08's fp32 backward up
// to 128 recomputes its scores bit for bit.
void tf32x3_forward(const fa::Problem& p, const void* q, const void* k, const void* v, void* o, float* lse,
                    cudaStream_t stream);
// Which kernel forward() runs: 3xTF32 at head dims up to 128 (faster there than the FFMA kernel
// and than PyTorch's efficient backend; README, fp32 on the tensor cores), FFMA above.
inline bool on_tensor_cores(const fa::Problem& p) { return p.head_dim <= 128; }

// forward(): the chapter's tests, timings and executable.
const fa::Chapter& chapter();
// ffma_forward() alone: its tests at head dims up to 128 (above, chapter() runs it), the
// 05_flash_v2_ffma rows of the benchmark, and `05_flash_v2 --ffma`.
const fa::Chapter& ffma_chapter();

// The argument checks of forward() (a clear error for what the chapter does not take), and
// whether the 16-byte copies apply (head_dim % 4 == 0, 16-byte aligned rows). The step-by-step
// versions (steps/) call it too.
bool prepare_forward(const fa::Support& support, const fa::Problem& p, const void* q, const void* k, const void* v,
                     const void* o, const float* lse);

}  // namespace flash_v2
