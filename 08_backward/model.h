// A CPU model of FlashAttention-2's backward pass (Dao 2023, Algorithm 2), with the block
// structure and loop order of backward.cu: read the two side by side.
#pragma once

#include <vector>

#include "common/host/problem.h"

namespace backward::model {

// q: [B, H, Sq, D]   k, v: [B, Hkv, Sk, D]   o, dout: [B, H, Sq, D]
// lse: [B, H, Sq] as the forward wrote it (natural log, +inf for a row that sees no key).
// dq: [B, H, Sq, D] and dk, dv: [B, Hkv, Sk, D] are resized; dk and dv are summed over the
// H / Hkv query heads that share a KV head. Br query rows and Bc keys per tile, any values >= 1.
void backward(const fa::Problem& p, const std::vector<float>& q, const std::vector<float>& k,
              const std::vector<float>& v, const std::vector<float>& o, const std::vector<float>& lse,
              const std::vector<float>& dout, std::vector<float>& dq, std::vector<float>& dk,
              std::vector<float>& dv, int Br, int Bc);

}  // namespace backward::model
