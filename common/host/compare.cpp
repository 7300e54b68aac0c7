#include "common/host/compare.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <sstream>
#include <stdexcept>

#include "common/host/host_data.h"

namespace fa {

// Why these numbers.
//
// f32 (chapters 01-05, all arithmetic in float32): float32 carries 24 bits, eps = 1.2e-7. An
// output element is a softmax-weighted mean of V values of size about 1 (the inputs are
// standard normal), built from two dot products and a sum over up to Sk terms; rounding errors
// of such sums grow like sqrt(n) * eps on random data, about 1.5e-5 at n = 16k, and exp/exp2 add
// a few ulp of the score (scores stay below about 10 in size, so ~1e-6). atol = rtol = 1e-4
// leaves headroom of roughly 7x over that while still catching the smallest real bug we know
// of: dropping or double-counting one key out of Sk changes the output by about 1/Sk, above
// 1e-4 for every row that sees fewer than 10k keys (and every test shape has such rows).
//
// f16 / bf16 (chapter 06 on): inputs, P and O are rounded to 11 / 8 significant bits, so a
// single rounding is worth 4.9e-4 / 3.9e-3 relative. These are the ceilings for a kernel
// that rounds P and O once each and accumulates in float32; chapter 06 additionally applies
// FlashAttention's stricter rule (at most twice the error of a plain same-precision
// implementation) on top.
Tolerance output_tolerance(Dtype dtype) {
  switch (dtype) {
    case Dtype::f32: return {1e-4, 1e-4};
    case Dtype::f16: return {2e-3, 2e-3};
    case Dtype::bf16: return {1.6e-2, 1.6e-2};
  }
  return {0, 0};
}

// LSE = m * scale + log(l) is a logarithm: its error is the relative error of l plus the
// rounding of the largest score, an absolute error whatever LSE's size. So its relative part is
// only what storing it in fp32 costs: rtol = 1e-6, about 16 float32 ulps (LSE ~ 600 is held to
// 6e-5 steps; on an H200 the chapters' LSE at scores of ~500 over 70,000 keys is within 2.4e-7
// relative), where f32's output rtol of 1e-4 would let a 1% drift of l pass at scores of ~500.
// The absolute part is f32's atol (1e-4, far above the ~1e-6 of fp32 sums on standard-normal
// data) or O's rule, twice the plain implementation's LSE error plus the slack, if larger.
Tolerance lse_tolerance(double plain_lse_error) {
  return {std::max(output_tolerance(Dtype::f32).atol, 2.0 * plain_lse_error + kSamePrecisionSlack), 1e-6};
}

std::string CompareReport::summary() const {
  std::ostringstream s;
  s.precision(3);
  s << name << ": " << (pass() ? "PASS" : "FAIL") << "  max_abs " << max_abs << "  max_rel "
    << max_rel << "  rel_fro " << rel_fro << "  (atol " << tol.atol << ", rtol " << tol.rtol
    << ")";
  if (!pass()) {
    s << "  " << bad << " of " << count << " bad (" << nans << " NaN, " << unwritten
      << " unwritten)";
    for (const Mismatch& m : first) {
      s << "\n    [b=" << m.where[0] << " h=" << m.where[1] << " i=" << m.where[2]
        << " j=" << m.where[3] << "] got " << m.got << " want " << m.want << " (" << m.why << ")";
    }
  }
  return s.str();
}

std::string SamePrecisionCheck::summary() const {
  std::ostringstream s;
  s.precision(3);
  s << "same-precision rule: " << (pass() ? "PASS" : "FAIL") << "  kernel max_abs " << kernel_max_abs
    << " <= 2 x plain " << baseline_max_abs << " + " << kSamePrecisionSlack;
  if (score_rounding > 0) s << " + scores' rounding " << score_rounding;
  s << " = " << bound();
  return s.str();
}

double score_rounding(const Problem& p, const std::vector<float>& q, const std::vector<float>& k) {
  auto largest_norm = [&](const std::vector<float>& x) {
    double largest = 0;
    for (std::size_t row = 0; row + p.head_dim <= x.size(); row += p.head_dim) {
      double sum = 0;
      for (int c = 0; c < p.head_dim; ++c) sum += double(x[row + c]) * x[row + c];
      largest = std::max(largest, sum);
    }
    return std::sqrt(largest);
  };
  return std::ldexp(double(p.scale()) * largest_norm(q) * largest_norm(k), -24);
}

CompareReport compare(const std::string& name, const std::vector<std::uint8_t>& got, Dtype dtype,
                      const std::vector<double>& want, std::array<int, 4> dims, Tolerance tol) {
  const std::size_t size = dtype_size(dtype);
  if (got.size() != want.size() * size)
    throw std::invalid_argument("compare " + name + ": result has " +
                                std::to_string(got.size() / size) + " elements, reference " +
                                std::to_string(want.size()));
  const std::vector<float> values = decode(got, dtype);
  CompareReport r;
  r.name = name;
  r.count = static_cast<std::int64_t>(want.size());
  r.tol = tol;
  double err2 = 0, ref2 = 0;
  for (std::int64_t n = 0; n < r.count; ++n) {
    const double g = values[n], w = want[n];
    const char* why = nullptr;
    if (is_poison(&got[n * size], dtype)) {
      why = "unwritten";
      ++r.unwritten;
    } else if (std::isnan(g)) {
      why = "NaN";
      ++r.nans;
    } else if (std::isinf(w) || std::isinf(g)) {
      if (g != w) why = "inf";
    } else {
      const double err = std::abs(g - w);
      r.max_abs = std::max(r.max_abs, err);
      if (std::abs(w) > tol.atol) r.max_rel = std::max(r.max_rel, err / std::abs(w));
      err2 += err * err;
      ref2 += w * w;
      if (!(err <= tol.atol + tol.rtol * std::abs(w))) why = "off";
    }
    if (why) {
      if (r.bad++ < 5) {
        std::array<int, 4> at{};
        std::int64_t rest = n;
        for (int axis = 3; axis >= 0; --axis) {
          at[axis] = static_cast<int>(rest % dims[axis]);
          rest /= dims[axis];
        }
        r.first.push_back({n, at, g, w, why});
      }
    }
  }
  r.rel_fro = ref2 > 0 ? std::sqrt(err2 / ref2) : std::sqrt(err2);
  return r;
}

}  // namespace fa
