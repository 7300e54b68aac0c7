// Chapter 03: one fused kernel; the softmax is computed online, so S and P never exist.
#pragma once

#include "common/harness/chapter.h"

namespace online_softmax {

// q: [B, H, Sq, D]   k, v: [B, Hkv, Sk, D]   o: [B, H, Sq, D]   (float, device)
// lse: [B, H, Sq] (float, device). Any head_dim 1..256. Needs no scratch memory.
void forward(const fa::Problem& p, const void* q, const void* k, const void* v, void* o, float* lse,
             cudaStream_t stream);

const fa::Chapter& chapter();

}  // namespace online_softmax
