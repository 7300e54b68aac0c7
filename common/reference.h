// The CPU reference every chapter is checked against: plain attention with Eigen, float64
// throughout (inputs are widened from their float values, every product and sum is double).
#pragma once

#include <functional>
#include <vector>

#include "common/problem.h"

namespace fa {

// An extra visibility rule on top of causal masking: chapter 07 passes its block mask here,
// expanded to elements. Empty means every key is visible (subject to causal).
using VisibleFn = std::function<bool(int b, int h, int i, int j)>;

struct ReferenceForward {
  std::vector<double> o;    // [B, H, Sq, D]
  std::vector<double> lse;  // [B, H, Sq], natural log; +inf where a row sees no key
};

struct ReferenceBackward {
  std::vector<double> dq;  // [B, H, Sq, D]
  std::vector<double> dk;  // [B, Hkv, Sk, D], summed over the H / Hkv query heads sharing it
  std::vector<double> dv;  // [B, Hkv, Sk, D]
};

ReferenceForward reference_forward(const Problem& p, const std::vector<float>& q,
                                   const std::vector<float>& k, const std::vector<float>& v,
                                   const VisibleFn& visible = {});

// A plain same-precision implementation, the yardstick of FlashAttention's tolerance rule (for
// f32 rounding to p.dtype changes nothing: a plain fp32 implementation): inputs as given (already rounded to p.dtype), S and the softmax in float32, P
// rounded to p.dtype, O = P V accumulated in float32 and rounded to p.dtype. LSE is float32.
// Returned as double so it compares with the reference like a kernel's output does. `visible`
// is reference_forward's extra rule (chapter 07's block masks).
ReferenceForward same_precision_forward(const Problem& p, const std::vector<float>& q,
                                        const std::vector<float>& k, const std::vector<float>& v,
                                        const VisibleFn& visible = {});

ReferenceBackward reference_backward(const Problem& p, const std::vector<float>& q,
                                     const std::vector<float>& k, const std::vector<float>& v,
                                     const std::vector<float>& dout,
                                     const VisibleFn& visible = {});

}  // namespace fa
