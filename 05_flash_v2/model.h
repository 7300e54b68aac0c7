// A CPU model of FlashAttention-2's forward (Dao 2023, Algorithm 1), with the block structure
// and loop order of flash_v2.cu: read the two side by side.
#pragma once

#include <vector>

#include "common/host/problem.h"

namespace flash_v2::model {

// q: [B, H, Sq, D]   k, v: [B, Hkv, Sk, D]   o: [B, H, Sq, D]   lse: [B, H, Sq] (natural log)
// o and lse are resized. Br query rows and Bc keys per tile, any values >= 1.
void forward(const fa::Problem& p, const std::vector<float>& q, const std::vector<float>& k,
             const std::vector<float>& v, std::vector<float>& o, std::vector<float>& lse, int Br,
             int Bc);

}  // namespace flash_v2::model
