#include "common/host/forward_check.h"

#include <algorithm>
#include <cmath>

namespace fa {

std::string ForwardCheck::summary() const {
  std::string s = o.summary() + "\n" + lse.summary();
  if (same_precision) s += "\n" + same_precision->summary();
  return s;
}

ForwardCheck check_forward(const Problem& p, const HostInputs& in, const std::vector<std::uint8_t>& o_bytes,
                           const std::vector<std::uint8_t>& lse_bytes, const ScoreOptions& options) {
  const ReferenceForward ref = reference_forward(p, in.q, in.k, in.v, {}, options);
  // Every dtype, f32 included: a plain implementation in the same precision shows how much error
  // the inputs themselves force; the kernel may have at most about twice that (compare.h).
  const ReferenceForward plain = same_precision_forward(p, in.q, in.k, in.v, {}, options);
  double baseline = 0, lse_baseline = 0;
  for (std::size_t n = 0; n < ref.o.size(); ++n) baseline = std::max(baseline, std::abs(plain.o[n] - ref.o[n]));
  for (std::size_t n = 0; n < ref.lse.size(); ++n)
    if (std::isfinite(ref.lse[n])) lse_baseline = std::max(lse_baseline, std::abs(plain.lse[n] - ref.lse[n]));
  const SamePrecisionCheck rule{0.0, baseline, score_rounding(p, in.q, in.k)};
  // The element-wise tolerance is a ceiling for standard-normal data. Where the plain
  // implementation itself does not stay under it -- f32 at scores of size ~100, where the scores'
  // own fp32 rounding (~1e-4) reaches P wherever two keys compete -- no kernel in that precision
  // could, and the ceiling's absolute part becomes the rule's bound (twice the plain error). On
  // standard-normal inputs the plain error is far below it and nothing changes.
  Tolerance o_tol = output_tolerance(p.dtype);
  o_tol.atol = std::max(o_tol.atol, rule.bound());
  ForwardCheck c{compare("O", o_bytes, p.dtype, ref.o, {p.batch, p.heads, p.seqlen_q, p.dv()}, o_tol),
                 compare("LSE", lse_bytes, Dtype::f32, ref.lse, {p.batch, p.heads, p.seqlen_q, 1},
                         lse_tolerance(lse_baseline)),
                 std::nullopt};
  c.same_precision = SamePrecisionCheck{c.o.max_abs, baseline, rule.score_rounding};
  return c;
}

}  // namespace fa
