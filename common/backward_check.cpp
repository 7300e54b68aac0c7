#include "common/backward_check.h"

#include <algorithm>
#include <cmath>

#include "common/reference.h"

namespace fa {

std::vector<float> make_dout(const Problem& p, std::uint64_t seed) {
  // make_inputs draws Q, K, V from streams 3 seed + 0, 1, 2; dO takes a fourth, far from those.
  return random_normal(p.o_elems(), seed * 3 + 0x9E3779B97F4A7C15ull, p.dtype);
}

// Why this tolerance.
//
// The forward's outputs are softmax-weighted means of V, about 1 in size whatever the shape. The
// gradients are sums: dV_j = sum_i P_ij dO_i and dK_j = scale sum_i dS_ij Q_i run over up to
// (H / Hkv) * Sq query rows, dQ_i = scale sum_j dS_ij K_j over up to Sk keys. Their size follows
// the shape: with standard-normal inputs they are 0.1..3 for Sq = Sk, but dV reaches ~80 when
// 1013 query rows all attend to one key (Sk = 1, every P_ij = 1). A float sum's rounding error is
// relative to its partial sums, not to its final value: an element that cancels to almost 0 in a
// tensor of 80s still carries an error of order u * 80 * sqrt(n) (u = 2^-24). So the absolute
// floor scales with the tensor:
//
//     |got - want| <= atol * max(1, max|want|) + rtol * |want|,    atol = rtol = 1e-4 (f32),
//
// which is the forward's rule (compare.cpp) for gradients of size up to 1, and the same rule in
// units of the largest element above that.
// Measured on the CPU model (model.cpp: fp32, straight sums, O and LSE exact) against the float64
// reference -- B=1 H=2 Sq=Sk=1013 D=64 and 128 (causal), Sq=1013 Sk=1, MQA with 4 x 512 rows onto
// 16 keys, Sq=127 Sk=17 causal -- the largest error is 2e-6 of max|want| (5.7e-5 absolute where
// dV reaches 79). The 50x headroom covers the GPU's other summation order, its approximate exp2
// (2^-22 relative) and the fp32 error of the forward's O and LSE (~1e-6, which reaches dS through
// D_i and P). A real bug -- a skipped tile, a query head of a group left out, a missing scale --
// moves gradients by their own size, 1e-2 to 1 of max|want|.
// f16/bf16: the forward's ceilings, scaled the same way, until the tensor-core backward gives
// them a same-precision rule like the forward's (compare.h).
Tolerance gradient_tolerance(Dtype dtype, const std::vector<double>& want) {
  double largest = 0;
  for (double w : want) largest = std::max(largest, std::abs(w));
  const Tolerance t = output_tolerance(dtype);
  return {t.atol * std::max(1.0, largest), t.rtol};
}

std::string BackwardCheck::summary() const { return dq.summary() + "\n" + dk.summary() + "\n" + dv.summary(); }

BackwardCheck check_backward(const Problem& p, const HostInputs& in, const std::vector<float>& dout,
                             const std::vector<std::uint8_t>& dq_bytes,
                             const std::vector<std::uint8_t>& dk_bytes,
                             const std::vector<std::uint8_t>& dv_bytes) {
  const ReferenceBackward ref = reference_backward(p, in.q, in.k, in.v, dout);
  const std::array<int, 4> q_dims{p.batch, p.heads, p.seqlen_q, p.head_dim};
  const std::array<int, 4> kv_dims{p.batch, p.kv_heads, p.seqlen_k, p.head_dim};
  return {compare("dQ", dq_bytes, p.dtype, ref.dq, q_dims, gradient_tolerance(p.dtype, ref.dq)),
          compare("dK", dk_bytes, p.dtype, ref.dk, kv_dims, gradient_tolerance(p.dtype, ref.dk)),
          compare("dV", dv_bytes, p.dtype, ref.dv, kv_dims, gradient_tolerance(p.dtype, ref.dv))};
}

}  // namespace fa
