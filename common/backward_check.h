// The whole verdict on one backward pass, shared by the backward runner, the backward test
// harness and the CPU model's tests: dQ, dK and dV against the float64 reference_backward.
// Plain C++ (no CUDA), like forward_check.h, so the CPU tests can use it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/compare.h"
#include "common/host_data.h"

namespace fa {

// The upstream gradient dO [B, H, Sq, D], seeded like make_inputs (host_data.h) but from its own
// stream, so a failing case can be replayed.
std::vector<float> make_dout(const Problem& p, std::uint64_t seed);

// The tolerance for one gradient tensor (dQ, dK or dV) in a given dtype, scaled to the tensor's
// largest reference value. The reasoning is written where it is defined, in backward_check.cpp.
Tolerance gradient_tolerance(Dtype dtype, const std::vector<double>& want);

struct BackwardCheck {
  CompareReport dq;
  CompareReport dk;
  CompareReport dv;

  bool pass() const { return dq.pass() && dk.pass() && dv.pass(); }
  std::string summary() const;  // three lines
};

// `dq_bytes`, `dk_bytes`, `dv_bytes` are the device's gradients as raw bytes (in p.dtype).
BackwardCheck check_backward(const Problem& p, const HostInputs& in, const std::vector<float>& dout,
                             const std::vector<std::uint8_t>& dq_bytes,
                             const std::vector<std::uint8_t>& dk_bytes,
                             const std::vector<std::uint8_t>& dv_bytes);

}  // namespace fa
