#include "common/host/forward_check.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "common/host/fp8.h"

namespace fa {

std::string ForwardCheck::summary() const {
  std::string s = o.summary() + "\n" + lse.summary();
  if (same_precision) s += "\n" + same_precision->summary();
  return s;
}

namespace {

// The verdict against the float64 reference `ref`, with `plain` as the same-precision rule's
// yardstick (compare.h): check_forward's and check_forward_fp8's.
// score_error: how far the kernel's scores may stand from exact ones (compare.h: score_rounding),
// which the plain implementation does not show; it also bounds LSE's error (a change of every
// score by at most e moves LSE by at most e).
ForwardCheck verdict(const Problem& p, const ReferenceForward& ref, const ReferenceForward& plain, double score_error,
                     const std::vector<std::uint8_t>& o_bytes, const std::vector<std::uint8_t>& lse_bytes,
                     bool score_error_in_lse) {
  double baseline = 0, lse_baseline = 0;
  for (std::size_t n = 0; n < ref.o.size(); ++n) baseline = std::max(baseline, std::abs(plain.o[n] - ref.o[n]));
  for (std::size_t n = 0; n < ref.lse.size(); ++n)
    if (std::isfinite(ref.lse[n])) lse_baseline = std::max(lse_baseline, std::abs(plain.lse[n] - ref.lse[n]));
  const SamePrecisionCheck rule{0.0, baseline, score_error};
  Tolerance lse_tol = lse_tolerance(lse_baseline);
  if (score_error_in_lse) lse_tol.atol = std::max(lse_tol.atol, score_error);
  // The element-wise tolerance is a ceiling for standard-normal data. Where the plain
  // implementation itself does not stay under it -- f32 at scores of size ~100, where the scores'
  // own fp32 rounding (~1e-4) reaches P wherever two keys compete; FP8's P of three mantissa bits
  // everywhere -- no kernel in that precision could, and the ceiling's absolute part becomes the
  // rule's bound (twice the plain error). On standard-normal inputs in f16, bf16 and f32 the plain
  // error is far below it and nothing changes.
  Tolerance o_tol = output_tolerance(p.dtype);
  o_tol.atol = std::max(o_tol.atol, rule.bound());
  ForwardCheck c{compare("O", o_bytes, p.dtype, ref.o, {p.batch, p.heads, p.seqlen_q, p.dv()}, o_tol),
                 compare("LSE", lse_bytes, Dtype::f32, ref.lse, {p.batch, p.heads, p.seqlen_q, 1}, lse_tol),
                 std::nullopt};
  c.same_precision = SamePrecisionCheck{c.o.max_abs, baseline, rule.score_rounding};
  return c;
}

}  // namespace

ForwardCheck check_forward(const Problem& p, const HostInputs& in, const std::vector<std::uint8_t>& o_bytes,
                           const std::vector<std::uint8_t>& lse_bytes, const ScoreOptions& options) {
  // Every dtype, f32 included: a plain implementation in the same precision shows how much error
  // the inputs themselves force; the kernel may have at most about twice that (compare.h).
  return verdict(p, reference_forward(p, in.q, in.k, in.v, {}, options),
                 same_precision_forward(p, in.q, in.k, in.v, {}, options), score_rounding(p, in.q, in.k), o_bytes,
                 lse_bytes, /*score_error_in_lse=*/false);
}

ForwardCheck check_forward_fp8(const Problem& p, const HostInputs& in, const std::vector<std::uint8_t>& o_bytes,
                               const std::vector<std::uint8_t>& lse_bytes) {
  if (p.dtype != Dtype::f16) throw std::invalid_argument("check_forward_fp8: O is f16, got " + p.describe());
  // The FP8 tensor cores do not sum S's products in fp32: they keep about 14 bits of the running
  // sum (DeepSeek-V3's report measured it on the H800), so a score errs by up to ~2^-13 of the
  // magnitudes summed, where an fp32 sum errs by 2^-24. The plain implementation sums in float and
  // does not show it; the bound takes it as 2^-12 scale |q_i| |k_j| (score_rounding's 2^-24, 2^12
  // times). It is what LSE may err by (LSE moves by at most the largest change of a score), and
  // it joins O's rule as score_rounding does.
  return verdict(p, reference_forward(p, in.q, in.k, in.v), fp8_plain_forward(p, in.q, in.k, in.v),
                 score_rounding(p, in.q, in.k) * 0x1p12, o_bytes, lse_bytes, /*score_error_in_lse=*/true);
}

}  // namespace fa
