// The yardstick of the f16/bf16 tolerance rule (same_precision_forward), the rule itself, and
// check_forward's verdict on a softcap problem.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <utility>
#include <vector>

#include "common/host/compare.h"
#include "common/host/forward_check.h"
#include "common/host/host_data.h"
#include "common/host/reference.h"

namespace fa {
namespace {

Problem shape(Dtype dtype, bool causal, int sq, int sk) {
  Problem p;
  p.batch = 1;
  p.heads = 2;
  p.kv_heads = 1;
  p.seqlen_q = sq;
  p.seqlen_k = sk;
  p.head_dim = 32;
  p.causal = causal;
  p.dtype = dtype;
  return p;
}

double max_abs_diff(const std::vector<double>& a, const std::vector<double>& b) {
  double m = 0;
  for (std::size_t n = 0; n < a.size(); ++n)
    if (std::isfinite(b[n])) m = std::max(m, std::abs(a[n] - b[n]));
  return m;
}

TEST(SamePrecision, InFloat32ItIsTheReferenceUpToFloatRounding) {
  const Problem p = shape(Dtype::f32, true, 40, 57);
  const HostInputs in = make_inputs(p, 7);
  const ReferenceForward ref = reference_forward(p, in.q, in.k, in.v);
  const ReferenceForward plain = same_precision_forward(p, in.q, in.k, in.v);
  // float32 sums of 57 terms of size ~1: far below 1e-5.
  EXPECT_LT(max_abs_diff(plain.o, ref.o), 1e-5);
  EXPECT_LT(max_abs_diff(plain.lse, ref.lse), 1e-5);
}

TEST(SamePrecision, Bf16RoundsPAndOAndStaysWithinOneRoundingOfTheOutputs) {
  const Problem p = shape(Dtype::bf16, false, 33, 200);
  const HostInputs in = make_inputs(p, 8);
  const ReferenceForward ref = reference_forward(p, in.q, in.k, in.v);
  const ReferenceForward plain = same_precision_forward(p, in.q, in.k, in.v);
  const double err = max_abs_diff(plain.o, ref.o);
  EXPECT_GT(err, 1e-4);  // rounding happened: bf16 has 8 significant bits
  EXPECT_LT(err, output_tolerance(Dtype::bf16).atol);
  for (double o : plain.o) EXPECT_EQ(o, round_to_dtype(static_cast<float>(o), Dtype::bf16));
}

TEST(SamePrecision, RowsThatSeeNoKeyGetZeroAndInfiniteLse) {
  const Problem p = shape(Dtype::f16, true, 9, 4);  // rows 0..4 see no key
  const HostInputs in = make_inputs(p, 9);
  const ReferenceForward plain = same_precision_forward(p, in.q, in.k, in.v);
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(plain.lse[i], std::numeric_limits<double>::infinity());
    for (int c = 0; c < p.head_dim; ++c) EXPECT_EQ(plain.o[i * p.head_dim + c], 0.0);
  }
  EXPECT_TRUE(std::isfinite(plain.lse[5]));
}

// The score options (reference.h) in float: softcap, ALiBi and sinks together, on a causal problem
// with Sq != Sk and rows that see no key (which then get LSE = the sink, O = 0).
TEST(SamePrecision, ScoreOptionsFollowTheReference) {
  Problem p = shape(Dtype::f32, true, 9, 6);  // rows 0..2 see no key
  p.softmax_scale = 3.0f;                     // large scores, so that the softcap bites
  const HostInputs in = make_inputs(p, 10);
  ScoreOptions opt;
  opt.softcap = 5.0;
  opt.alibi_slopes = {0.5f, 0.125f};
  opt.sink_logits = {1.5f, -0.75f};
  const ReferenceForward ref = reference_forward(p, in.q, in.k, in.v, {}, opt);
  const ReferenceForward plain = same_precision_forward(p, in.q, in.k, in.v, {}, opt);
  EXPECT_LT(max_abs_diff(plain.o, ref.o), 1e-5);
  EXPECT_LT(max_abs_diff(plain.lse, ref.lse), 1e-5);
  for (int h = 0; h < p.heads; ++h)
    for (int i = 0; i < 3; ++i) {
      EXPECT_FLOAT_EQ(plain.lse[h * p.seqlen_q + i], opt.sink_logits[h]);
      for (int c = 0; c < p.head_dim; ++c) EXPECT_EQ(plain.o[(h * p.seqlen_q + i) * p.head_dim + c], 0.0);
    }
  // The options changed the result (so the test above compares something).
  const ReferenceForward off = same_precision_forward(p, in.q, in.k, in.v);
  EXPECT_GT(max_abs_diff(plain.o, off.o), 1e-2);
  // In bf16 the yardstick stays within the output tolerance of the options' reference.
  p.dtype = Dtype::bf16;
  const HostInputs in16 = make_inputs(p, 11);
  const double err = max_abs_diff(same_precision_forward(p, in16.q, in16.k, in16.v, {}, opt).o,
                                  reference_forward(p, in16.q, in16.k, in16.v, {}, opt).o);
  EXPECT_GT(err, 0.0);
  EXPECT_LT(err, output_tolerance(Dtype::bf16).atol);
}

TEST(SamePrecision, OptionsAreChecked) {
  const Problem p = shape(Dtype::f32, false, 4, 4);
  const HostInputs in = make_inputs(p, 12);
  ScoreOptions bad;
  bad.alibi_slopes = {0.5f};  // one slope for two heads
  EXPECT_THROW(same_precision_forward(p, in.q, in.k, in.v, {}, bad), std::invalid_argument);
}

// A softcap problem (Problem::softcap) is judged against the softcapped yardsticks: the plain
// same-precision forward of the problem passes in every dtype, and the same outputs without the
// cap fail.
TEST(ForwardCheck, JudgesASoftcapProblemWithTheSoftcap) {
  for (Dtype dtype : {Dtype::f32, Dtype::f16, Dtype::bf16}) {
    Problem p = shape(dtype, true, 77, 61);
    p.softcap = 5.0f;
    p.softmax_scale = 1.0f;  // scores ~+-6: the cap bends them by a third
    SCOPED_TRACE(p.describe());
    const HostInputs in = make_inputs(p, 13);
    auto outputs_of = [&](const Problem& q) {
      const ReferenceForward f = same_precision_forward(q, in.q, in.k, in.v);
      return std::pair{encode(std::vector<float>(f.o.begin(), f.o.end()), dtype),
                       encode(std::vector<float>(f.lse.begin(), f.lse.end()), Dtype::f32)};
    };
    const auto [o, lse] = outputs_of(p);
    const ForwardCheck capped = check_forward(p, in, o, lse);
    EXPECT_TRUE(capped.pass()) << capped.summary();
    Problem uncapped = p;
    uncapped.softcap = 0.0f;
    const auto [o_off, lse_off] = outputs_of(uncapped);
    EXPECT_FALSE(check_forward(p, in, o_off, lse_off).pass()) << "outputs without the cap pass a softcap problem";
  }
}

TEST(SamePrecisionRule, BoundIsTwiceTheBaselinePlusSlack) {
  const SamePrecisionCheck ok{2e-3, 1e-3};
  EXPECT_DOUBLE_EQ(ok.bound(), 2e-3 + kSamePrecisionSlack);
  EXPECT_TRUE(ok.pass());
  EXPECT_FALSE((SamePrecisionCheck{2.1e-3, 1e-3}.pass()));
  EXPECT_TRUE((SamePrecisionCheck{0.0, 0.0}.pass()));
  EXPECT_FALSE((SamePrecisionCheck{std::nan(""), 1e-3}.pass()));  // NaN never passes
  EXPECT_NE(ok.summary().find("PASS"), std::string::npos);
}

}  // namespace
}  // namespace fa
