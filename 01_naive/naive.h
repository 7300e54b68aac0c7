// Chapter 01: attention as three kernels, S and P in global memory.
#pragma once

#include "common/harness/chapter.h"

namespace naive {

// q: [B, H, Sq, D]   k, v: [B, Hkv, Sk, D]   o: [B, H, Sq, D]   (float, device)
// lse: [B, H, Sq] (float, device). Needs B*H*Sq*Sk*4 bytes of scratch for S (and P, in place).
void forward(const fa::Problem& p, const void* q, const void* k, const void* v, void* o, float* lse,
             cudaStream_t stream);

const fa::Chapter& chapter();

}  // namespace naive
