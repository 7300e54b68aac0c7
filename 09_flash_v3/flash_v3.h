// Chapter 09: FlashAttention-3's forward on the H100 -- wgmma and TMA (sm_90a).
#pragma once

#include "common/harness/chapter.h"

namespace flash_v3 {

// q: [B, H, Sq, D]   k, v: [B, Hkv, Sk, D]   o: [B, H, Sq, D]   (p.dtype: f16 or bf16, device)
// lse: [B, H, Sq] (float, device, natural log). Head dims 64, 96, 128, 192 and 256; [B, S, H, D]
// tensors and packed batches too (p.layout, p.is_varlen()); pointers 16-byte aligned; a GPU of
// compute capability 9.0 (the kernels are built for sm_90a only). No scratch memory.
void forward(const fa::Problem& p, const void* q, const void* k, const void* v, void* o, float* lse,
             cudaStream_t stream);

const fa::Chapter& chapter();

}  // namespace flash_v3
