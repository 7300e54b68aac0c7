// Chapter 05: FlashAttention-2's forward -- one block per query tile, O_i in registers, fp32 FFMA.
#pragma once

#include "common/chapter.h"

namespace flash_v2 {

// q: [B, H, Sq, D]   k, v: [B, Hkv, Sk, D]   o: [B, H, Sq, D]   (float, device)
// lse: [B, H, Sq] (float, device). Any head_dim up to 128; no scratch memory.
void forward(const fa::Problem& p, const void* q, const void* k, const void* v, void* o, float* lse,
             cudaStream_t stream);

const fa::Chapter& chapter();

}  // namespace flash_v2
