// Chapter 04's CPU model: Algorithm 1 of FlashAttention-1 on the host, with the kernel's tiles
// and loop order, so the algorithm can be read, stepped through and tested without a GPU.
#pragma once

#include <vector>

#include "common/host/problem.h"

namespace flash_v1::model {

// q: [B, H, Sq, D]   k, v: [B, Hkv, Sk, D]   o: [B, H, Sq, D] (resized)   lse: [B, H, Sq] (resized)
// Br, Bc: any positive tile sizes (they need not divide the sequence lengths, nor be equal).
void forward(const fa::Problem& p, const std::vector<float>& q, const std::vector<float>& k,
             const std::vector<float>& v, std::vector<float>& o, std::vector<float>& lse, int Br,
             int Bc);

}  // namespace flash_v1::model
