// Chapter 04: FlashAttention-1 (Dao et al. 2022, Algorithm 1), one kernel, fp32.
#pragma once

#include "common/harness/chapter.h"

namespace flash_v1 {

// q: [B, H, Sq, D]   k, v: [B, Hkv, Sk, D]   o: [B, H, Sq, D]   (float, device)
// lse: [B, H, Sq] (float, device). Needs 2*B*H*Sq*4 bytes of scratch for the running row
// statistics l and m, which Algorithm 1 keeps in global memory (O(N), not O(N^2)).
void forward(const fa::Problem& p, const void* q, const void* k, const void* v, void* o, float* lse,
             cudaStream_t stream);

const fa::Chapter& chapter();

}  // namespace flash_v1
