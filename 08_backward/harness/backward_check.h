// The whole verdict on one backward pass, shared by the backward runner, the backward test
// harness and the CPU model's tests: dQ, dK and dV against the float64 reference_backward.
// Plain C++ (no CUDA), like forward_check.h, so the CPU tests can use it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/host/compare.h"
#include "common/host/host_data.h"
#include "common/host/reference.h"

namespace fa {

// The upstream gradient dO [B, H, Sq, D] (a varlen problem's: [1, H, total_q, D]), seeded like
// make_inputs (host_data.h) but from its own stream, so a failing case can be replayed.
std::vector<float> make_dout(const Problem& p, std::uint64_t seed);

// The tolerance for one gradient tensor (dQ, dK or dV) in a given dtype, scaled to the tensor's
// largest reference value. The reasoning is written where it is defined, in backward_check.cpp.
Tolerance gradient_tolerance(Dtype dtype, const std::vector<double>& want);

// A plain same-precision backward, the yardstick of FlashAttention's rule (every dtype; for f32
// rounding to p.dtype changes nothing and it is a plain fp32 backward)
// gradients: inputs as given (already rounded to p.dtype); S, LSE and O in float32 as
// same_precision_forward (O rounded to p.dtype), and P recomputed as exp(S - LSE) from the float32
// LSE, as the backward API receives it; D_i = rowsum(dO_i o O_i), dP = dO V^T and
// dS = P o (dP - D) in float32, times 1 - tanh(x / softcap)^2 under a softcap (Problem::softcap:
// S = softcap tanh(x / softcap), x = scale Q.K, in float32 as same_precision_forward forms it);
// P and dS rounded to p.dtype where they feed a product
// (dV = P^T dO, dK = scale dS^T Q, dQ = scale dS K), those sums accumulated in float32 and the
// gradients rounded to p.dtype. Returned as double, like the reference. `visible`, when given,
// hides pairs on top of causal masking, as in reference_backward (07's block masks). A varlen
// problem runs sequence by sequence (reference.h: varlen_backward), as reference_backward does.
ReferenceBackward same_precision_backward(const Problem& p, const std::vector<float>& q, const std::vector<float>& k,
                                          const std::vector<float>& v, const std::vector<float>& dout,
                                          const VisibleFn& visible = {});

// FlashAttention's rule per gradient (compare.h: SamePrecisionCheck), with the slack scaled to
// the gradients' size (backward_check.cpp says why).
struct GradientRule {
  std::string name;
  double kernel_max_abs;
  double baseline_max_abs;
  double slack;
  double bound() const { return 2.0 * baseline_max_abs + slack; }
  bool pass() const { return kernel_max_abs <= bound(); }
  std::string summary() const;
};

struct BackwardCheck {
  CompareReport dq;
  CompareReport dk;
  CompareReport dv;
  std::vector<GradientRule> same_precision;  // dQ, dK, dV

  bool pass() const {
    bool rules = true;
    for (const GradientRule& r : same_precision) rules = rules && r.pass();
    return dq.pass() && dk.pass() && dv.pass() && rules;
  }
  std::string summary() const;  // six lines
};

// `dq_bytes`, `dk_bytes`, `dv_bytes` are the device's gradients as raw bytes (in p.dtype).
// `visible`: an extra mask both yardsticks apply (reference.h), for the block-sparse backward.
BackwardCheck check_backward(const Problem& p, const HostInputs& in, const std::vector<float>& dout,
                             const std::vector<std::uint8_t>& dq_bytes,
                             const std::vector<std::uint8_t>& dk_bytes,
                             const std::vector<std::uint8_t>& dv_bytes, const VisibleFn& visible = {});

// The same verdict in two halves, for a caller that judges several runs of one problem (the test
// harness: the default and the deterministic mode): the float64 reference, the plain
// same-precision backward and the scores' rounding (compare.h) once, then each run against them.
struct BackwardYardsticks {
  ReferenceBackward ref;
  ReferenceBackward plain;
  double score_rounding;
};
BackwardYardsticks backward_yardsticks(const Problem& p, const HostInputs& in, const std::vector<float>& dout,
                                       const VisibleFn& visible = {});
BackwardCheck check_backward(const Problem& p, const BackwardYardsticks& y, const std::vector<std::uint8_t>& dq_bytes,
                             const std::vector<std::uint8_t>& dk_bytes, const std::vector<std::uint8_t>& dv_bytes);

}  // namespace fa
