// Chapter 05: FlashAttention-2's forward -- one block per query tile, O_i in registers, fp32 FFMA.
#pragma once

#include "common/chapter.h"

namespace flash_v2 {

// q: [B, H, Sq, D]   k, v: [B, Hkv, Sk, D]   o: [B, H, Sq, D]   (float, device)
// lse: [B, H, Sq] (float, device). Any head_dim up to 256; no scratch memory.
void forward(const fa::Problem& p, const void* q, const void* k, const void* v, void* o, float* lse,
             cudaStream_t stream);

const fa::Chapter& chapter();

// The argument checks of forward() (a clear error for what the chapter does not take), and
// whether the 16-byte copies apply (head_dim % 4 == 0, 16-byte aligned rows). The step-by-step
// versions (steps/) call it too.
bool prepare_forward(const fa::Support& support, const fa::Problem& p, const void* q, const void* k, const void* v,
                     const void* o, const float* lse);

}  // namespace flash_v2
