#include "common/forward_check.h"

#include <cmath>

namespace fa {

std::string ForwardCheck::summary() const {
  std::string s = o.summary() + "\n" + lse.summary();
  if (same_precision) s += "\n" + same_precision->summary();
  return s;
}

ForwardCheck check_forward(const Problem& p, const HostInputs& in, const std::vector<std::uint8_t>& o_bytes,
                           const std::vector<std::uint8_t>& lse_bytes) {
  const ReferenceForward ref = reference_forward(p, in.q, in.k, in.v);
  ForwardCheck c{compare("O", o_bytes, p.dtype, ref.o, {p.batch, p.heads, p.seqlen_q, p.head_dim},
                         output_tolerance(p.dtype)),
                 compare("LSE", lse_bytes, Dtype::f32, ref.lse, {p.batch, p.heads, p.seqlen_q, 1},
                         output_tolerance(Dtype::f32)),
                 std::nullopt};
  // Every dtype, f32 included: a plain implementation in the same precision shows how much error
  // the inputs themselves force (at scores of size ~100 fp32 alone costs ~1e-5); the kernel may
  // have at most about twice that (compare.h).
  const ReferenceForward plain = same_precision_forward(p, in.q, in.k, in.v);
  double baseline = 0;
  for (std::size_t n = 0; n < ref.o.size(); ++n) baseline = std::max(baseline, std::abs(plain.o[n] - ref.o[n]));
  c.same_precision = SamePrecisionCheck{c.o.max_abs, baseline};
  return c;
}

}  // namespace fa
