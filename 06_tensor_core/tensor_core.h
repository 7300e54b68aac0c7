// Chapter 06: FlashAttention-2's forward on the tensor cores -- fp16/bf16 mma.sync, ldmatrix,
// swizzled shared memory, double-buffered cp.async.
#pragma once

#include "common/harness/chapter.h"

namespace tensor_core {

// q: [B, H, Sq, D]   k, v: [B, Hkv, Sk, D]   o: [B, H, Sq, D]   (p.dtype: f16 or bf16, device)
// lse: [B, H, Sq] (float, device, natural log). Head dims 32, 64, 96, 128, 256; pointers 16-byte
// aligned; compute capability 8.0 or newer. No scratch memory.
void forward(const fa::Problem& p, const void* q, const void* k, const void* v, void* o, float* lse,
             cudaStream_t stream);

const fa::Chapter& chapter();

}  // namespace tensor_core
