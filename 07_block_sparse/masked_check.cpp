#include "07_block_sparse/masked_check.h"

#include <algorithm>
#include <cmath>

namespace fa {

ForwardCheck check_forward_masked(const Problem& p, const HostInputs& in, const std::vector<std::uint8_t>& o_bytes,
                                  const std::vector<std::uint8_t>& lse_bytes, const VisibleFn& visible) {
  const ReferenceForward ref = reference_forward(p, in.q, in.k, in.v, visible);
  ForwardCheck c{compare("O", o_bytes, p.dtype, ref.o, {p.batch, p.heads, p.seqlen_q, p.dv()},
                         output_tolerance(p.dtype)),
                 compare("LSE", lse_bytes, Dtype::f32, ref.lse, {p.batch, p.heads, p.seqlen_q, 1}, lse_tolerance(0.0)),
                 std::nullopt};
  if (p.dtype != Dtype::f32) {
    const ReferenceForward plain = same_precision_forward(p, in.q, in.k, in.v, visible);
    double baseline = 0;
    for (std::size_t n = 0; n < ref.o.size(); ++n) baseline = std::max(baseline, std::abs(plain.o[n] - ref.o[n]));
    c.same_precision = SamePrecisionCheck{c.o.max_abs, baseline, score_rounding(p, in.q, in.k)};
  }
  return c;
}

}  // namespace fa
