// Tests of common/host/reference.h, the float64 Eigen reference every chapter is checked against:
//   (a) a case small enough to work out by hand,
//   (b) agreement with a plain triple loop written here (causal, GQA/MQA, empty rows),
//   (c) properties attention must have whatever the implementation,
//   (d) the backward pass against central finite differences of the forward,
//   (e) fp32_score_forward, and the score options (softcap, ALiBi, sinks; Problem::softcap) against
//       their definitions written out in a loop, by hand, and by their properties,
//   (f) a packed varlen batch, forward and backward, against each sequence's reference called on
//       its rows by hand.
//
//   ./build/common/common_cpu_tests --gtest_filter='Reference*'
#include "common/host/reference.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <stdexcept>
#include <limits>
#include <string>
#include <vector>

#include "common/host/host_data.h"

namespace fa {
namespace {

using Tensor = std::vector<double>;
constexpr double kInf = std::numeric_limits<double>::infinity();

// Two float64 computations of the same sums in a different order differ by a few ulp of the
// largest term (~1e-15 here: values are O(1), rows have at most 17 terms). 1e-12 leaves 1000x
// headroom and is still a billion times smaller than any real masking or indexing error.
constexpr double kTight = 1e-12;

Problem make_problem(int batch, int heads, int kv_heads, int seqlen_q, int seqlen_k, int head_dim,
                     bool causal) {
  Problem p;
  p.batch = batch;
  p.heads = heads;
  p.kv_heads = kv_heads;
  p.seqlen_q = seqlen_q;
  p.seqlen_k = seqlen_k;
  p.head_dim = head_dim;
  p.causal = causal;
  return p;
}

// Row (b, h, i) of a contiguous [B, heads, rows, ...] tensor.
std::size_t row_index(int heads, int rows, int b, int h, int i) {
  return (static_cast<std::size_t>(b) * heads + h) * rows + i;
}

Tensor widen(const std::vector<float>& t) { return Tensor(t.begin(), t.end()); }

double dot(const Tensor& a, const Tensor& b) {
  double sum = 0;
  for (std::size_t n = 0; n < a.size(); ++n) sum += a[n] * b[n];
  return sum;
}

bool sees(const Problem& p, const VisibleFn& visible, int b, int h, int i, int j) {
  return (!p.causal || causal_visible(i, j, p.seqlen_q, p.seqlen_k)) &&
         (!visible || visible(b, h, i, j));
}

struct Naive {
  Tensor o;    // [B, H, Sq, D]
  Tensor lse;  // [B, H, Sq]
};

// Attention straight from the definition, one query row at a time, float64 throughout, written
// without the reference's tricks (no max subtraction: the test scores are small, so exp cannot
// overflow). A row that sees no key keeps O = 0 and LSE = +inf (problem.h's convention), or
// LSE = sigma_h with a sink. The score options (reference.h) as their definitions state them, the
// softcap the problem's own (Problem::softcap) where `o` names none.
Naive naive_forward(const Problem& p, const Tensor& q, const Tensor& k, const Tensor& v,
                    const VisibleFn& visible = {}, const ScoreOptions& o = {}) {
  const int d = p.head_dim, dv = p.dv();
  const double scale = p.scale();
  const double softcap = o.softcap > 0 ? o.softcap : static_cast<double>(p.softcap);
  Naive out{Tensor(p.o_elems(), 0.0), Tensor(p.lse_elems(), kInf)};
  for (int b = 0; b < p.batch; ++b) {
    for (int h = 0; h < p.heads; ++h) {
      const int kvh = h / p.group_size();
      for (int i = 0; i < p.seqlen_q; ++i) {
        const std::size_t qi = row_index(p.heads, p.seqlen_q, b, h, i);
        double l = o.sink_logits.empty() ? 0.0 : std::exp(static_cast<double>(o.sink_logits[h]));
        Tensor acc(dv, 0.0);
        for (int j = 0; j < p.seqlen_k; ++j) {
          if (!sees(p, visible, b, h, i, j)) continue;
          const std::size_t kj = row_index(p.kv_heads, p.seqlen_k, b, kvh, j);
          double s = 0;
          for (int c = 0; c < d; ++c) s += q[qi * d + c] * k[kj * d + c];
          s *= scale;
          if (softcap > 0) s = softcap * std::tanh(s / softcap);
          if (!o.alibi_slopes.empty()) s += o.alibi_slopes[h] * (j - i - (p.seqlen_k - p.seqlen_q));
          const double e = std::exp(s);
          l += e;
          for (int c = 0; c < dv; ++c) acc[c] += e * v[kj * dv + c];
        }
        if (l == 0) continue;
        for (int c = 0; c < dv; ++c) out.o[qi * dv + c] = acc[c] / l;
        out.lse[qi] = std::log(l);
      }
    }
  }
  return out;
}

// Element-wise |got - want| <= tol; an infinite `want` must be matched exactly.
void expect_close(const Tensor& got, const Tensor& want, double tol, const char* what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (std::size_t n = 0; n < want.size(); ++n) {
    const bool ok = std::isinf(want[n]) ? got[n] == want[n] : std::abs(got[n] - want[n]) <= tol;
    if (!ok) {
      ADD_FAILURE() << what << "[" << n << "]: got " << got[n] << ", want " << want[n]
                    << " (tolerance " << tol << ")";
      return;
    }
  }
}

struct Inputs {
  std::vector<float> q, k, v;
};

Inputs inputs_for(const Problem& p, std::uint64_t seed) {
  HostInputs in = make_inputs(p, seed);
  return {std::move(in.q), std::move(in.k), std::move(in.v)};
}

// ---------------------------------------------------------------------------------------------
// (a) By hand.

TEST(ReferenceByHand, OneQueryTwoKeys) {
  Problem p = make_problem(1, 1, 1, 1, 2, 1, false);
  p.softmax_scale = 0.5f;
  const std::vector<float> q{2.0f}, k{1.0f, -0.5f}, v{3.0f, -1.0f}, dout{1.0f};
  // S   = 0.5 * 2 * [1, -0.5]                 = [1, -0.5]
  // l   = e^1 + e^-0.5 = 2.718281828 + 0.606530660 = 3.324812488
  // P   = [e^1, e^-0.5] / l                   = [0.817574476, 0.182425524]
  // O   = 3 * P0 + (-1) * P1                  = 2.270297905
  // LSE = log(l)                              = 1.201413278
  const double l = std::exp(1.0) + std::exp(-0.5);
  const double p0 = std::exp(1.0) / l, p1 = std::exp(-0.5) / l;
  const ReferenceForward f = reference_forward(p, q, k, v);
  EXPECT_NEAR(f.o[0], 3 * p0 - p1, kTight);
  EXPECT_NEAR(f.lse[0], std::log(l), kTight);
  EXPECT_NEAR(f.o[0], 2.270297905, 1e-9);  // the decimals above, to the digits written
  EXPECT_NEAR(f.lse[0], 1.201413278, 1e-9);

  // Backward with dO = 1: dV_j = P_j; dP_j = v_j; Delta = dO * O; dS_j = P_j (dP_j - Delta),
  // which here is [a, -a] with a = P0 P1 (v0 - v1) = 4 P0 P1 = 0.596585808.
  // dQ = scale * (dS0 k0 + dS1 k1) = 0.5 * (a + 0.5 a) = 0.75 a.
  // dK_j = scale * dS_j * q = 0.5 * 2 * [a, -a] = [a, -a].
  const double a = 4 * p0 * p1;
  const ReferenceBackward g = reference_backward(p, q, k, v, dout);
  expect_close(g.dv, {p0, p1}, kTight, "dv");
  expect_close(g.dq, {0.75 * a}, kTight, "dq");
  expect_close(g.dk, {a, -a}, kTight, "dk");
}

// ---------------------------------------------------------------------------------------------
// (b) Against the triple loop.

std::vector<Problem> loop_shapes() {
  std::vector<Problem> shapes = {
      make_problem(2, 3, 3, 5, 7, 4, false),   // MHA, Sq < Sk
      make_problem(1, 4, 2, 6, 6, 8, true),    // GQA, causal square
      make_problem(2, 4, 1, 3, 9, 5, true),    // MQA, causal Sq < Sk
      make_problem(1, 2, 1, 7, 3, 4, true),    // causal Sq > Sk: rows 0..3 see no key
      make_problem(1, 2, 2, 17, 1, 3, true),   // one key: only the last row sees it
      make_problem(1, 6, 3, 13, 11, 8, false), // GQA, Sq > Sk
      make_problem(1, 1, 1, 1, 17, 16, false), // one query
  };
  shapes.back().softmax_scale = 0.3f;
  return shapes;
}

TEST(ReferenceForward, MatchesTripleLoop) {
  for (const Problem& p : loop_shapes()) {
    SCOPED_TRACE(p.describe());
    const Inputs in = inputs_for(p, 1);
    const ReferenceForward ref = reference_forward(p, in.q, in.k, in.v);
    const Naive want = naive_forward(p, widen(in.q), widen(in.k), widen(in.v));
    expect_close(ref.o, want.o, kTight, "O");
    expect_close(ref.lse, want.lse, kTight, "LSE");
  }
}

// V's head dim apart from Q and K's (MLA's 576 / 512, small here): the reference and the
// same-precision yardstick against the triple loop; the backward refuses it.
TEST(ReferenceForward, SeparateVHeadDim) {
  for (bool causal : {false, true}) {
    Problem p = make_problem(2, 4, 2, 13, 9, 12, causal);  // causal: rows 0..3 see no key
    p.head_dim_v = 5;
    SCOPED_TRACE(p.describe());
    const Inputs in = inputs_for(p, 21);
    ASSERT_EQ(in.v.size(), static_cast<std::size_t>(p.v_elems()));
    const Naive want = naive_forward(p, widen(in.q), widen(in.k), widen(in.v));
    const ReferenceForward got = reference_forward(p, in.q, in.k, in.v);
    ASSERT_EQ(got.o.size(), static_cast<std::size_t>(p.o_elems()));
    expect_close(got.o, want.o, kTight, "O");
    expect_close(got.lse, want.lse, kTight, "LSE");
    const ReferenceForward plain = same_precision_forward(p, in.q, in.k, in.v);
    expect_close(plain.o, want.o, 1e-5, "same-precision O");
    const ReferenceForward fp32 = fp32_score_forward(p, in.q, in.k, in.v);
    expect_close(fp32.o, want.o, 1e-5, "fp32-score O");
    const std::vector<float> dout(p.o_elems(), 1.0f);
    EXPECT_THROW(reference_backward(p, in.q, in.k, in.v, dout), std::invalid_argument);
  }
}

TEST(ReferenceForward, CausalRowsWithoutKeysAreZeroWithInfiniteLse) {
  const Problem p = make_problem(1, 2, 1, 7, 3, 4, true);  // row i sees keys j <= i - 4
  const Inputs in = inputs_for(p, 2);
  const ReferenceForward ref = reference_forward(p, in.q, in.k, in.v);
  for (int h = 0; h < p.heads; ++h) {
    for (int i = 0; i < p.seqlen_q; ++i) {
      const std::size_t row = row_index(p.heads, p.seqlen_q, 0, h, i);
      if (i < 4) {
        EXPECT_EQ(ref.lse[row], kInf) << "h=" << h << " i=" << i;
        for (int c = 0; c < p.head_dim; ++c) EXPECT_EQ(ref.o[row * p.head_dim + c], 0.0);
      } else {
        EXPECT_TRUE(std::isfinite(ref.lse[row])) << "h=" << h << " i=" << i;
      }
    }
  }
}

TEST(ReferenceForward, VisibleFnIsAppliedAtTheRightCoordinates) {
  // A pattern that depends on all four coordinates, on top of causal; head 1 row 0 sees nothing.
  const Problem p = make_problem(2, 4, 2, 6, 8, 4, true);
  const VisibleFn visible = [](int b, int h, int i, int j) {
    return (b + h + i + j) % 3 != 0 && !(h == 1 && i == 0);
  };
  const Inputs in = inputs_for(p, 3);
  const ReferenceForward ref = reference_forward(p, in.q, in.k, in.v, visible);
  const Naive want = naive_forward(p, widen(in.q), widen(in.k), widen(in.v), visible);
  expect_close(ref.o, want.o, kTight, "O");
  expect_close(ref.lse, want.lse, kTight, "LSE");
  EXPECT_EQ(ref.lse[row_index(p.heads, p.seqlen_q, 0, 1, 0)], kInf);
}

// fp32_score_forward is the float64 softmax of float32 scores (one fmaf chain per score): it
// must differ from the exact reference only by those scores' rounding, and keep its rules (masks,
// rows without keys). Scores here are O(1) with D <= 16, so a score's float error is below
// 16 * 2^-24 ~ 1e-6 and O, LSE move by less: 1e-5 bounds it, and any masking or indexing error
// (an O(0.1) change) still fails by four orders of magnitude.
TEST(Fp32ScoreForward, AgreesWithTheReferenceUpToFloatScores) {
  for (Problem p : loop_shapes()) {
    p.dtype = Dtype::f32;
    SCOPED_TRACE(p.describe());
    const Inputs in = inputs_for(p, 4);
    const VisibleFn visible = [](int b, int h, int i, int j) { return (b + 2 * h + i + j) % 5 != 1; };
    const ReferenceForward want = reference_forward(p, in.q, in.k, in.v, visible);
    const ReferenceForward got = fp32_score_forward(p, in.q, in.k, in.v, visible);
    expect_close(got.o, want.o, 1e-5, "O");
    expect_close(got.lse, want.lse, 1e-5, "LSE");
    for (std::size_t r = 0; r < want.lse.size(); ++r)
      EXPECT_EQ(std::isinf(got.lse[r]), std::isinf(want.lse[r])) << "row " << r << ": +inf exactly where no key is seen";
  }
}

// Not the exact reference: its LSE is that of the float scores, which a large-logit row shows
// (scores ~100: the float rounding of a score is ~1e-5, far above double's).
TEST(Fp32ScoreForward, UsesTheFloatScores) {
  Problem p = make_problem(1, 1, 1, 8, 64, 64, false);
  p.dtype = Dtype::f32;
  const HostInputs in = make_inputs(p, 7, InputKind::large_logits);
  const ReferenceForward exact = reference_forward(p, in.q, in.k, in.v);
  const ReferenceForward fp32 = fp32_score_forward(p, in.q, in.k, in.v);
  double largest = 0;
  for (std::size_t r = 0; r < exact.lse.size(); ++r) largest = std::max(largest, std::abs(fp32.lse[r] - exact.lse[r]));
  EXPECT_GT(largest, 1e-9) << "the LSE should carry the float scores' rounding";
  EXPECT_LT(largest, 1e-3);
  Problem bf16 = p;
  bf16.dtype = Dtype::bf16;
  EXPECT_THROW(fp32_score_forward(bf16, in.q, in.k, in.v), std::invalid_argument);
}

// Score options (ScoreOptions: softcap, ALiBi, sinks), against the definitions written out here
// one row at a time, and by hand.
ScoreOptions all_options(const Problem& p) {
  ScoreOptions o;
  o.softcap = 2.0;  // scores of size ~1 here: tanh bends them visibly
  for (int h = 0; h < p.heads; ++h) {
    o.alibi_slopes.push_back(0.5f / float(1 << h));  // ALiBi's geometric slopes
    o.sink_logits.push_back(0.25f * float(h) - 0.5f);
  }
  return o;
}

TEST(ScoreOptions, NoneIsThePlainReferenceBitForBit) {
  const Problem p = make_problem(2, 4, 2, 13, 11, 8, true);
  const Inputs in = inputs_for(p, 5);
  const ReferenceForward plain = reference_forward(p, in.q, in.k, in.v);
  const ReferenceForward none = reference_forward(p, in.q, in.k, in.v, {}, ScoreOptions{});
  EXPECT_EQ(plain.o, none.o);
  EXPECT_EQ(plain.lse, none.lse);
}

TEST(ScoreOptions, EachAndAllMatchTheDefinitions) {
  for (const Problem& p : loop_shapes()) {
    const Inputs in = inputs_for(p, 6);
    const ScoreOptions every = all_options(p);
    ScoreOptions softcap, alibi, sinks;
    softcap.softcap = every.softcap;
    alibi.alibi_slopes = every.alibi_slopes;
    sinks.sink_logits = every.sink_logits;
    for (const ScoreOptions* o : std::initializer_list<const ScoreOptions*>{&softcap, &alibi, &sinks, &every}) {
      SCOPED_TRACE(p.describe() + (o == &softcap ? " softcap" : o == &alibi ? " alibi" : o == &sinks ? " sinks" : " all"));
      const VisibleFn visible = [](int b, int h, int i, int j) { return (b + h + 2 * i + j) % 4 != 3; };
      const ReferenceForward ref = reference_forward(p, in.q, in.k, in.v, visible, *o);
      const Naive want = naive_forward(p, widen(in.q), widen(in.k), widen(in.v), visible, *o);
      expect_close(ref.o, want.o, kTight, "O");
      expect_close(ref.lse, want.lse, kTight, "LSE");
    }
  }
}

// Problem::window_left / window_right: the same numbers as the plain problem given the band,
// written out here, as a block mask (VisibleFn), forward and backward, bit for bit.
TEST(ReferenceWindow, IsTheBandAsAVisibilityRule) {
  for (bool causal : {false, true}) {
    const Problem plain = make_problem(2, 4, 2, 7, 19, 8, causal);
    Problem windowed = plain;
    windowed.window_left = 3;
    windowed.window_right = 1;
    SCOPED_TRACE(windowed.describe());
    const VisibleFn band = [&](int, int, int i, int j) {
      const int position = i + 19 - 7;
      return position - 3 <= j && j <= position + 1;
    };
    const Inputs in = inputs_for(plain, 9);
    const ReferenceForward a = reference_forward(windowed, in.q, in.k, in.v);
    const ReferenceForward b = reference_forward(plain, in.q, in.k, in.v, band);
    EXPECT_EQ(a.o, b.o);
    EXPECT_EQ(a.lse, b.lse);
    const ReferenceForward sa = same_precision_forward(windowed, in.q, in.k, in.v);
    const ReferenceForward sb = same_precision_forward(plain, in.q, in.k, in.v, band);
    EXPECT_EQ(sa.o, sb.o);
    EXPECT_EQ(sa.lse, sb.lse);
    const std::vector<float> dout = inputs_for(plain, 10).q;  // any seeded [B, H, Sq, D] tensor
    const ReferenceBackward ga = reference_backward(windowed, in.q, in.k, in.v, dout);
    const ReferenceBackward gb = reference_backward(plain, in.q, in.k, in.v, dout, band);
    EXPECT_EQ(ga.dq, gb.dq);
    EXPECT_EQ(ga.dk, gb.dk);
    EXPECT_EQ(ga.dv, gb.dv);
    // And the window changes something: row 0 of head 0 sees 5 of the 19 keys.
    EXPECT_NE(a.o, reference_forward(plain, in.q, in.k, in.v).o);
  }
}

// Problem::softcap: softcap tanh(scale q.k / softcap) as the triple loop writes it out, and the
// same numbers, bit for bit, as ScoreOptions::softcap on the plain problem, in every yardstick.
TEST(ReferenceSoftcap, IsTheScoreOptionOfTheProblem) {
  for (const Problem& plain : loop_shapes()) {
    Problem capped = plain;
    capped.softcap = 1.5f;  // scores of size ~1 here: tanh bends them visibly
    SCOPED_TRACE(capped.describe());
    ScoreOptions option;
    option.softcap = 1.5;
    EXPECT_EQ(problem_score_options(capped).softcap, 1.5);
    EXPECT_EQ(problem_score_options(plain).softcap, 0.0);
    const Inputs in = inputs_for(plain, 15);
    const ReferenceForward a = reference_forward(capped, in.q, in.k, in.v);
    const Naive want = naive_forward(capped, widen(in.q), widen(in.k), widen(in.v));
    expect_close(a.o, want.o, kTight, "O");
    expect_close(a.lse, want.lse, kTight, "LSE");
    const ReferenceForward b = reference_forward(plain, in.q, in.k, in.v, {}, option);
    EXPECT_EQ(a.o, b.o);
    EXPECT_EQ(a.lse, b.lse);
    const ReferenceForward sa = same_precision_forward(capped, in.q, in.k, in.v);
    const ReferenceForward sb = same_precision_forward(plain, in.q, in.k, in.v, {}, option);
    EXPECT_EQ(sa.o, sb.o);
    EXPECT_EQ(sa.lse, sb.lse);
    const std::vector<float> dout = random_normal(plain.o_elems(), 16, Dtype::f32);
    const ReferenceBackward ga = reference_backward(capped, in.q, in.k, in.v, dout);
    const ReferenceBackward gb = reference_backward(plain, in.q, in.k, in.v, dout, {}, option);
    EXPECT_EQ(ga.dq, gb.dq);
    EXPECT_EQ(ga.dk, gb.dk);
    EXPECT_EQ(ga.dv, gb.dv);
    // And the cap changes something: the LSE of every row that sees a key.
    EXPECT_NE(a.lse, reference_forward(plain, in.q, in.k, in.v).lse);
  }
}

// One query, keys at scores 0 and ln 3 under Problem::softcap = 1: tanh(0) = 0, tanh(ln 3) = 0.8,
// so P = (1, e^0.8) / (1 + e^0.8) and LSE = log(1 + e^0.8).
TEST(ReferenceSoftcap, ByHand) {
  Problem p = make_problem(1, 1, 1, 1, 2, 1, false);
  p.softmax_scale = 1.0f;
  p.softcap = 1.0f;
  const std::vector<float> q{1.0f}, k{0.0f, std::log(3.0f)}, v{1.0f, 2.0f};  // D = 1: O = P_0 + 2 P_1
  const double e1 = std::exp(0.8);
  const ReferenceForward r = reference_forward(p, q, k, v);
  EXPECT_NEAR(r.o[0], (1 + 2 * e1) / (1 + e1), 1e-6);  // 1.689974, to the float rounding of ln 3
  EXPECT_NEAR(r.lse[0], std::log(1 + e1), 1e-6);
  const ReferenceForward plain = same_precision_forward(p, q, k, v);
  EXPECT_NEAR(plain.o[0], (1 + 2 * e1) / (1 + e1), 1e-6);
  const ReferenceForward fp32 = fp32_score_forward(p, q, k, v);
  EXPECT_NEAR(fp32.o[0], (1 + 2 * e1) / (1 + e1), 1e-6);
}

// A softcap in the problem and one in the options: the same one is taken once, another is refused.
TEST(ReferenceSoftcap, ProblemAndOptionsMustAgree) {
  Problem p = make_problem(1, 2, 2, 3, 3, 4, false);
  p.softcap = 2.0f;
  const Inputs in = inputs_for(p, 17);
  ScoreOptions same, other;
  same.softcap = 2.0;
  other.softcap = 3.0;
  same.alibi_slopes = other.alibi_slopes = {0.5f, 0.25f};
  const ScoreOptions joined = problem_score_options(p, same);
  EXPECT_EQ(joined.softcap, 2.0);
  EXPECT_EQ(joined.alibi_slopes, same.alibi_slopes);  // the caller's other options stay
  ScoreOptions alibi_only;
  alibi_only.alibi_slopes = same.alibi_slopes;
  EXPECT_EQ(reference_forward(p, in.q, in.k, in.v, {}, same).o, reference_forward(p, in.q, in.k, in.v, {}, alibi_only).o);
  try {
    reference_forward(p, in.q, in.k, in.v, {}, other);
    ADD_FAILURE() << "accepted softcap 3 beside the problem's 2";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("softcap"), std::string::npos) << e.what();
  }
  Problem bad = p;
  bad.softcap = -1.0f;
  EXPECT_THROW(reference_forward(bad, in.q, in.k, in.v), std::invalid_argument);  // validate() names it
}

// fp32_score_forward takes the problem's softcap too: the exact softcapped reference up to the
// float scores' rounding (tanh's slope is at most 1, so AgreesWithTheReferenceUpToFloatScores' bound
// holds).
TEST(Fp32ScoreForward, TakesTheProblemsSoftcap) {
  for (Problem p : loop_shapes()) {
    p.dtype = Dtype::f32;
    p.softcap = 1.5f;
    SCOPED_TRACE(p.describe());
    const Inputs in = inputs_for(p, 18);
    const ReferenceForward want = reference_forward(p, in.q, in.k, in.v);
    const ReferenceForward got = fp32_score_forward(p, in.q, in.k, in.v);
    expect_close(got.o, want.o, 1e-5, "O");
    expect_close(got.lse, want.lse, 1e-5, "LSE");
  }
}

// One query, keys at scores 0 and ln 3 (so P = 1/4, 3/4 without options), V = (1, 0), (0, 1).
TEST(ScoreOptions, ByHand) {
  Problem p = make_problem(1, 1, 1, 1, 2, 1, false);
  p.softmax_scale = 1.0f;
  const float ln3 = std::log(3.0f);
  const std::vector<float> q{1.0f}, k{0.0f, ln3}, v{1.0f, 2.0f};  // D = 1: O = P_0 + 2 P_1
  {  // sink sigma = 0: denominators 1 + 3 + 1 = 5, O = (1 + 2 * 3) / 5, LSE = log 5
    ScoreOptions o;
    o.sink_logits = {0.0f};
    const ReferenceForward r = reference_forward(p, q, k, v, {}, o);
    EXPECT_NEAR(r.o[0], 7.0 / 5.0, 1e-6);
    EXPECT_NEAR(r.lse[0], std::log(5.0), 1e-6);
  }
  {  // ALiBi slope 1: key 0 lies one position back (bias -1), key 1 on the diagonal (bias 0)
    ScoreOptions o;
    o.alibi_slopes = {1.0f};
    const ReferenceForward r = reference_forward(p, q, k, v, {}, o);
    const double e0 = std::exp(-1.0), e1 = 3.0;
    EXPECT_NEAR(r.o[0], (e0 + 2 * e1) / (e0 + e1), 1e-6);
    EXPECT_NEAR(r.lse[0], std::log(e0 + e1), 1e-6);
  }
  {  // softcap 1: scores tanh(0) = 0 and tanh(ln 3) = 0.8
    ScoreOptions o;
    o.softcap = 1.0;
    const ReferenceForward r = reference_forward(p, q, k, v, {}, o);
    const double e1 = std::exp(std::tanh(static_cast<double>(ln3)));
    EXPECT_NEAR(std::tanh(static_cast<double>(ln3)), 0.8, 1e-6);
    EXPECT_NEAR(r.o[0], (1 + 2 * e1) / (1 + e1), 1e-6);
  }
}

// A sink keeps a row that sees no key finite: O = 0 and LSE = sigma_h.
TEST(ScoreOptions, SinkRowWithoutKeys) {
  const Problem p = make_problem(1, 2, 1, 7, 3, 4, true);  // rows i < 4 see no key
  const Inputs in = inputs_for(p, 8);
  ScoreOptions o;
  o.sink_logits = {0.5f, -1.5f};
  const ReferenceForward r = reference_forward(p, in.q, in.k, in.v, {}, o);
  for (int h = 0; h < 2; ++h)
    for (int i = 0; i < 4; ++i) {
      const std::size_t row = row_index(p.heads, p.seqlen_q, 0, h, i);
      EXPECT_EQ(r.lse[row], static_cast<double>(o.sink_logits[h]));
      for (int c = 0; c < p.head_dim; ++c) EXPECT_EQ(r.o[row * p.head_dim + c], 0.0);
    }
}

// ALiBi's bias changes only with j along a row: the same slope with the query position left out
// (a bias m_h j) is the same softmax. So ALiBi on a one-query problem equals ALiBi on the last
// row of a longer one with the same keys, wherever the query sits.
TEST(ScoreOptions, AlibiDependsOnTheDistanceOnly) {
  Problem one = make_problem(1, 1, 1, 1, 9, 8, false), many = make_problem(1, 1, 1, 5, 9, 8, false);
  const Inputs in = inputs_for(many, 9);
  const std::vector<float> last_q(in.q.end() - 8, in.q.end());
  ScoreOptions o;
  o.alibi_slopes = {0.3f};
  const ReferenceForward a = reference_forward(one, last_q, in.k, in.v, {}, o);
  const ReferenceForward b = reference_forward(many, in.q, in.k, in.v, {}, o);
  for (int c = 0; c < 8; ++c) EXPECT_NEAR(a.o[c], b.o[4 * 8 + c], kTight);
  EXPECT_NEAR(a.lse[0], b.lse[4], kTight);
}

TEST(ScoreOptions, BadOptionsAreRefused) {
  const Problem p = make_problem(1, 2, 2, 3, 3, 4, false);
  const Inputs in = inputs_for(p, 10);
  auto refused = [&](const ScoreOptions& o, const std::string& word) {
    try {
      reference_forward(p, in.q, in.k, in.v, {}, o);
      ADD_FAILURE() << "accepted options that should be refused (" << word << ")";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(word), std::string::npos) << e.what();
    }
  };
  ScoreOptions o;
  o.softcap = -1;
  refused(o, "softcap");
  o.softcap = std::numeric_limits<double>::infinity();
  refused(o, "softcap");
  o = {};
  o.alibi_slopes = {0.5f};  // one slope for two heads
  refused(o, "alibi_slopes");
  o = {};
  o.sink_logits = {0.0f, std::numeric_limits<float>::quiet_NaN()};
  refused(o, "sink_logits");
}

// ---------------------------------------------------------------------------------------------
// (c) Properties.

TEST(ReferenceProperties, WithIdentityValuesRowsAreSoftmaxRows) {
  // Sk == D and V = I in every KV head, so O_i = P_i: each row sums to 1 and
  // P_ij = exp(scale * q_i . k_j - LSE_i), which also pins down the LSE.
  for (bool causal : {false, true}) {
    const Problem p = make_problem(1, 2, 1, 4, 6, 6, causal);
    SCOPED_TRACE(p.describe());
    Inputs in = inputs_for(p, 4);
    for (int j = 0; j < p.seqlen_k; ++j)
      for (int c = 0; c < p.head_dim; ++c) in.v[j * p.head_dim + c] = j == c ? 1.0f : 0.0f;
    const ReferenceForward ref = reference_forward(p, in.q, in.k, in.v);
    for (int h = 0; h < p.heads; ++h) {
      for (int i = 0; i < p.seqlen_q; ++i) {
        const std::size_t row = row_index(p.heads, p.seqlen_q, 0, h, i);
        double sum = 0;
        for (int j = 0; j < p.seqlen_k; ++j) {
          double s = 0;
          for (int c = 0; c < p.head_dim; ++c)
            s += double{in.q[row * p.head_dim + c]} * in.k[j * p.head_dim + c];
          const bool seen = !causal || causal_visible(i, j, p.seqlen_q, p.seqlen_k);
          const double want = seen ? std::exp(double{p.scale()} * s - ref.lse[row]) : 0.0;
          EXPECT_NEAR(ref.o[row * p.head_dim + j], want, kTight) << "h=" << h << " i=" << i;
          sum += ref.o[row * p.head_dim + j];
        }
        EXPECT_NEAR(sum, 1.0, kTight) << "h=" << h << " i=" << i;
      }
    }
  }
}

TEST(ReferenceProperties, ShiftingEveryKeyByOneVector) {
  // K_j -> K_j + u changes S_ij = scale * q_i . k_j by scale * q_i . u, the same for every j of
  // row i. Softmax ignores a per-row constant, so O is unchanged and LSE_i moves by exactly
  // scale * q_i . u. Inputs are bf16-rounded (8 significant bits) and u is dyadic, so K + u is
  // exact in float and the comparison needs no slack beyond float64 rounding.
  for (bool causal : {false, true}) {
    Problem p = make_problem(1, 2, 1, 4, 5, 4, causal);
    p.dtype = Dtype::bf16;
    SCOPED_TRACE(p.describe());
    const Inputs in = inputs_for(p, 5);
    const double u[] = {0.5, -0.25, 1.0, 0.125};
    std::vector<float> shifted = in.k;
    for (std::size_t n = 0; n < shifted.size(); ++n) {
      shifted[n] = static_cast<float>(in.k[n] + u[n % 4]);
      ASSERT_EQ(double{shifted[n]}, double{in.k[n]} + u[n % 4]) << "K + u not exact";
    }
    const ReferenceForward base = reference_forward(p, in.q, in.k, in.v);
    const ReferenceForward moved = reference_forward(p, in.q, shifted, in.v);
    expect_close(moved.o, base.o, kTight, "O");
    Tensor lse_shift(p.lse_elems());
    for (std::size_t row = 0; row < lse_shift.size(); ++row) {
      double qu = 0;
      for (int c = 0; c < p.head_dim; ++c) qu += in.q[row * p.head_dim + c] * u[c];
      lse_shift[row] = base.lse[row] + double{p.scale()} * qu;
    }
    expect_close(moved.lse, lse_shift, kTight, "LSE");
  }
}

TEST(ReferenceProperties, CausalFirstRowIsFirstValueRow) {
  // With Sq == Sk, query 0 sees only key 0: P = [1, 0, ...], so O_0 = V_0 exactly and
  // LSE_0 = S_00 = scale * q_0 . k_0.
  const Problem p = make_problem(2, 4, 2, 6, 6, 8, true);
  const Inputs in = inputs_for(p, 6);
  const ReferenceForward ref = reference_forward(p, in.q, in.k, in.v);
  const int d = p.head_dim;
  for (int b = 0; b < p.batch; ++b) {
    for (int h = 0; h < p.heads; ++h) {
      const std::size_t qrow = row_index(p.heads, p.seqlen_q, b, h, 0);
      const std::size_t krow = row_index(p.kv_heads, p.seqlen_k, b, h / p.group_size(), 0);
      double s = 0;
      for (int c = 0; c < d; ++c) {
        EXPECT_EQ(ref.o[qrow * d + c], double{in.v[krow * d + c]}) << "b=" << b << " h=" << h;
        s += double{in.q[qrow * d + c]} * in.k[krow * d + c];
      }
      EXPECT_NEAR(ref.lse[qrow], double{p.scale()} * s, kTight) << "b=" << b << " h=" << h;
    }
  }
}

// Copies a [B, Hkv, Sk, D] tensor without key `drop`.
std::vector<float> without_key(const Problem& p, const std::vector<float>& t, int drop) {
  std::vector<float> out;
  for (int bh = 0; bh < p.batch * p.kv_heads; ++bh)
    for (int j = 0; j < p.seqlen_k; ++j)
      if (j != drop) {
        const auto row = t.begin() + (static_cast<std::size_t>(bh) * p.seqlen_k + j) * p.head_dim;
        out.insert(out.end(), row, row + p.head_dim);
      }
  return out;
}

TEST(ReferenceProperties, MaskingAKeyEqualsRemovingIt) {
  const Problem p = make_problem(2, 2, 1, 4, 6, 4, false);
  const int drop = 2;
  const Inputs in = inputs_for(p, 7);
  const ReferenceForward masked = reference_forward(
      p, in.q, in.k, in.v, [&](int, int, int, int j) { return j != drop; });
  Problem shorter = p;
  shorter.seqlen_k -= 1;
  const ReferenceForward removed = reference_forward(shorter, in.q, without_key(p, in.k, drop),
                                                     without_key(p, in.v, drop));
  expect_close(masked.o, removed.o, kTight, "O");
  expect_close(masked.lse, removed.lse, kTight, "LSE");
}

// ---------------------------------------------------------------------------------------------
// (d) Backward against finite differences.
//
// The reference takes float inputs, and a float cannot carry a small perturbation exactly, so
// the differences are taken on the float64 triple loop above (itself checked against the
// reference to 1e-12 in (b)), with every input widened once and perturbed in double.
// Central differences with step h have truncation error h^2/6 * |L'''| and rounding error
// about eps * |L| / h. With h = 1e-5, O(1) inputs and a few dozen terms in L both come to
// about 1e-10 (the largest difference measured on the shapes below is 9e-11); 1e-8 leaves
// 100x headroom, while a wrong factor, sign or index in a gradient shows up at order 0.1.
constexpr double kStep = 1e-5;
constexpr double kFiniteDiffTol = 1e-8;

// d loss / d x[n] for every n, by central differences; `loss` reads x.
template <typename Loss>
Tensor numeric_gradient(Tensor& x, Loss loss) {
  Tensor grad(x.size());
  for (std::size_t n = 0; n < x.size(); ++n) {
    const double x0 = x[n];
    x[n] = x0 + kStep;
    const double up = loss();
    x[n] = x0 - kStep;
    const double down = loss();
    x[n] = x0;
    grad[n] = (up - down) / (2 * kStep);
  }
  return grad;
}

// L = sum(dO * O): its gradient with respect to (q, k, v) is what reference_backward returns.
void expect_backward_matches_finite_differences(const Problem& p, const VisibleFn& visible = {},
                                                const ScoreOptions& options = {}) {
  SCOPED_TRACE(p.describe());
  const Inputs in = inputs_for(p, 8);
  const std::vector<float> dout = random_normal(p.o_elems(), 99, Dtype::f32);
  const ReferenceBackward ref = reference_backward(p, in.q, in.k, in.v, dout, visible, options);

  Tensor q = widen(in.q), k = widen(in.k), v = widen(in.v);
  const Tensor d_o = widen(dout);
  auto loss = [&] { return dot(naive_forward(p, q, k, v, visible, options).o, d_o); };
  expect_close(ref.dq, numeric_gradient(q, loss), kFiniteDiffTol, "dq");
  expect_close(ref.dk, numeric_gradient(k, loss), kFiniteDiffTol, "dk");
  expect_close(ref.dv, numeric_gradient(v, loss), kFiniteDiffTol, "dv");
}

TEST(ReferenceBackward, MatchesFiniteDifferences) {
  expect_backward_matches_finite_differences(make_problem(1, 2, 2, 3, 4, 3, false));
  expect_backward_matches_finite_differences(make_problem(2, 1, 1, 4, 4, 3, true));
}

TEST(ReferenceBackward, GqaAndMqaSumOverTheQueryHeadsOfAGroup) {
  expect_backward_matches_finite_differences(make_problem(1, 4, 2, 3, 5, 2, false));
  expect_backward_matches_finite_differences(make_problem(2, 3, 1, 4, 3, 2, true));
}

TEST(ReferenceBackward, CausalRectangularAndBlockMask) {
  expect_backward_matches_finite_differences(make_problem(1, 2, 1, 3, 5, 3, true));  // Sq < Sk
  expect_backward_matches_finite_differences(make_problem(1, 2, 1, 5, 3, 2, true));  // Sq > Sk
  const VisibleFn block_mask = [](int, int h, int i, int j) { return (h + i + j) % 3 != 1; };
  expect_backward_matches_finite_differences(make_problem(1, 2, 1, 4, 5, 2, false), block_mask);
}

TEST(ReferenceBackward, ScoreOptionsMatchFiniteDifferences) {
  for (const Problem& p : {make_problem(1, 2, 2, 3, 4, 3, false), make_problem(1, 4, 2, 4, 6, 2, true)}) {
    const ScoreOptions every = all_options(p);
    ScoreOptions softcap;
    softcap.softcap = 0.5;  // scores of size ~1 against a cap of 0.5: deep in tanh's bend
    expect_backward_matches_finite_differences(p, {}, softcap);
    expect_backward_matches_finite_differences(p, {}, every);
  }
}

// The problem's softcap (naive_forward writes it out): scores of size ~1 against a cap of 0.5, deep
// in tanh's bend; GQA under causal masking in the second shape.
TEST(ReferenceBackward, ProblemSoftcapMatchesFiniteDifferences) {
  for (Problem p : {make_problem(1, 2, 2, 3, 4, 3, false), make_problem(1, 4, 2, 4, 6, 2, true)}) {
    p.softcap = 0.5f;
    expect_backward_matches_finite_differences(p);
  }
}

TEST(ReferenceBackward, WindowIsTheBand) {
  Problem p = make_problem(1, 2, 1, 5, 8, 2, false);
  p.window_left = 2;
  p.window_right = 1;
  const VisibleFn band = [](int, int, int i, int j) { return i + 3 - 2 <= j && j <= i + 3 + 1; };
  // The finite differences of the naive forward with the band written out (it knows no window).
  const Inputs in = inputs_for(p, 8);
  const std::vector<float> dout = random_normal(p.o_elems(), 99, Dtype::f32);
  const ReferenceBackward ref = reference_backward(p, in.q, in.k, in.v, dout);
  Problem plain = p;
  plain.window_left = plain.window_right = -1;
  Tensor q = widen(in.q), k = widen(in.k), v = widen(in.v);
  const Tensor d_o = widen(dout);
  auto loss = [&] { return dot(naive_forward(plain, q, k, v, band).o, d_o); };
  expect_close(ref.dq, numeric_gradient(q, loss), kFiniteDiffTol, "dq");
  expect_close(ref.dk, numeric_gradient(k, loss), kFiniteDiffTol, "dk");
  expect_close(ref.dv, numeric_gradient(v, loss), kFiniteDiffTol, "dv");
}

TEST(ReferenceBackward, GqaEqualsMhaWithRepeatedKeysSummed) {
  // Repeat each KV head for the H / Hkv query heads that read it and solve as plain MHA: the
  // GQA dK of a KV head must be the sum of the MHA dK of its copies (same for dV), and dQ equal.
  const Problem gqa = make_problem(2, 6, 2, 5, 7, 4, true);
  Problem mha = gqa;
  mha.kv_heads = mha.heads;
  const Inputs in = inputs_for(gqa, 9);
  const std::size_t slice = static_cast<std::size_t>(gqa.seqlen_k) * gqa.head_dim;
  // Start of KV slice (b, kvh) in [B, kv_heads, Sk, D], and of the copy (b, h) in [B, H, Sk, D].
  auto kv_at = [&](int b, int h) {
    return row_index(gqa.kv_heads, 1, b, h / gqa.group_size(), 0) * slice;
  };
  auto copy_at = [&](int b, int h) { return row_index(gqa.heads, 1, b, h, 0) * slice; };

  std::vector<float> k_rep(mha.kv_elems()), v_rep(mha.kv_elems());
  for (int b = 0; b < gqa.batch; ++b)
    for (int h = 0; h < gqa.heads; ++h)
      for (std::size_t n = 0; n < slice; ++n) {
        k_rep[copy_at(b, h) + n] = in.k[kv_at(b, h) + n];
        v_rep[copy_at(b, h) + n] = in.v[kv_at(b, h) + n];
      }
  const std::vector<float> dout = random_normal(gqa.o_elems(), 10, Dtype::f32);
  const ReferenceBackward g = reference_backward(gqa, in.q, in.k, in.v, dout);
  const ReferenceBackward m = reference_backward(mha, in.q, k_rep, v_rep, dout);

  Tensor dk_sum(g.dk.size(), 0.0), dv_sum(g.dv.size(), 0.0);
  for (int b = 0; b < gqa.batch; ++b)
    for (int h = 0; h < gqa.heads; ++h)
      for (std::size_t n = 0; n < slice; ++n) {
        dk_sum[kv_at(b, h) + n] += m.dk[copy_at(b, h) + n];
        dv_sum[kv_at(b, h) + n] += m.dv[copy_at(b, h) + n];
      }
  expect_close(g.dq, m.dq, kTight, "dq");
  expect_close(g.dk, dk_sum, kTight, "dk");
  expect_close(g.dv, dv_sum, kTight, "dv");
}

TEST(ReferenceBackward, RowWithoutKeysHasZeroDqAndNoNan) {
  // Causal Sq=5, Sk=3: rows 0 and 1 see no key. Their P is exactly 0 (LSE = +inf), so they
  // contribute nothing anywhere and their dQ is exactly 0, not NaN. (Row 2 sees one key, so its
  // O = V_0 does not depend on q either; rows 3 and 4 see two and three keys.)
  const Problem p = make_problem(1, 2, 1, 5, 3, 4, true);
  const Inputs in = inputs_for(p, 11);
  const std::vector<float> dout = random_normal(p.o_elems(), 12, Dtype::f32);
  const ReferenceBackward g = reference_backward(p, in.q, in.k, in.v, dout);
  for (const Tensor* t : {&g.dq, &g.dk, &g.dv})
    for (double x : *t) ASSERT_TRUE(std::isfinite(x));
  for (int h = 0; h < p.heads; ++h)
    for (int i = 0; i < p.seqlen_q; ++i)
      for (int c = 0; c < p.head_dim; ++c) {
        const double dq = g.dq[row_index(p.heads, p.seqlen_q, 0, h, i) * p.head_dim + c];
        if (i < 2) {
          EXPECT_EQ(dq, 0.0) << "h=" << h << " i=" << i;
        } else if (i >= 3) {
          EXPECT_NE(dq, 0.0) << "h=" << h << " i=" << i;
        }
      }
}

// ---------------------------------------------------------------------------------------------
// (f) A packed varlen batch: each sequence's reference on its own rows.

// Five sequences packed in [1, H, total, D], (queries, keys): (3, 4), (0, 2) (keys, no queries),
// (2, 0) (queries, no keys), (4, 5), (1, 2).
Problem varlen_problem(bool causal) {
  Problem p = make_problem(1, 2, 1, 10, 13, 4, causal);
  p.layout = Layout::bshd;
  p.cu_seqlens_q = {0, 3, 3, 5, 9, 10};
  p.cu_seqlens_k = {0, 4, 6, 6, 11, 13};
  return p;
}

// Rows first .. first + count - 1 of every head of a [1, heads, rows, dim] tensor.
std::vector<float> rows_of(const std::vector<float>& t, int heads, int rows, int dim, int first, int count) {
  std::vector<float> out;
  for (int h = 0; h < heads; ++h)
    for (int i = first; i < first + count; ++i)
      for (int c = 0; c < dim; ++c) out.push_back(t[(static_cast<std::size_t>(h) * rows + i) * dim + c]);
  return out;
}

using ForwardOf = std::function<ReferenceForward(const Problem&, const std::vector<float>&, const std::vector<float>&,
                                                 const std::vector<float>&, int b)>;

// `packed` (a forward of varlen problem p) against `forward` called by hand on each sequence's
// rows as a plain [1, H, len, D] problem: the same bits on the sequence's rows; O = 0 and
// LSE = `no_keys_lse[h]` on the rows of a sequence without keys.
void expect_per_sequence(const Problem& p, const Inputs& in, const ReferenceForward& packed, const ForwardOf& forward,
                         const std::vector<double>& no_keys_lse) {
  ASSERT_EQ(packed.o.size(), static_cast<std::size_t>(p.o_elems()));
  ASSERT_EQ(packed.lse.size(), static_cast<std::size_t>(p.lse_elems()));
  int rows_checked = 0;
  for (int b = 0; b + 1 < static_cast<int>(p.cu_seqlens_q.size()); ++b) {
    const int q0 = p.cu_seqlens_q[b], lq = p.cu_seqlens_q[b + 1] - q0;
    const int k0 = p.cu_seqlens_k[b], lk = p.cu_seqlens_k[b + 1] - k0;
    rows_checked += lq;
    if (lq == 0) continue;
    Problem s = make_problem(1, p.heads, p.kv_heads, lq, std::max(lk, 1), p.head_dim, p.causal);
    ReferenceForward want{Tensor(s.o_elems(), 0.0), Tensor(s.lse_elems(), 0.0)};
    if (lk > 0) {
      want = forward(s, rows_of(in.q, p.heads, p.seqlen_q, p.head_dim, q0, lq),
                     rows_of(in.k, p.kv_heads, p.seqlen_k, p.head_dim, k0, lk),
                     rows_of(in.v, p.kv_heads, p.seqlen_k, p.head_dim, k0, lk), b);
    } else {
      for (int h = 0; h < p.heads; ++h) std::fill_n(want.lse.begin() + h * lq, lq, no_keys_lse[h]);
    }
    for (int h = 0; h < p.heads; ++h)
      for (int i = 0; i < lq; ++i) {
        const std::size_t got_row = row_index(p.heads, p.seqlen_q, 0, h, q0 + i), want_row = row_index(p.heads, lq, 0, h, i);
        EXPECT_EQ(packed.lse[got_row], want.lse[want_row]) << "sequence " << b << " h=" << h << " i=" << i;
        for (int c = 0; c < p.head_dim; ++c)
          EXPECT_EQ(packed.o[got_row * p.head_dim + c], want.o[want_row * p.head_dim + c])
              << "sequence " << b << " h=" << h << " i=" << i << " c=" << c;
      }
  }
  EXPECT_EQ(rows_checked, p.seqlen_q);  // every packed row belongs to one sequence
}

TEST(ReferenceVarlen, IsEachSequencesReferenceOnItsRows) {
  for (bool causal : {false, true}) {
    SCOPED_TRACE(causal ? "causal" : "not causal");
    const Problem p = varlen_problem(causal);
    const Inputs in = inputs_for(p, 11);
    const ReferenceForward packed = reference_forward(p, in.q, in.k, in.v);
    expect_per_sequence(
        p, in, packed,
        [](const Problem& s, const std::vector<float>& q, const std::vector<float>& k, const std::vector<float>& v, int) {
          return reference_forward(s, q, k, v);
        },
        {kInf, kInf});
    // Sequence (2, 0)'s rows 3 and 4: no keys, so O = 0 and LSE = +inf, whatever the other keys.
    EXPECT_EQ(packed.lse[row_index(2, 10, 0, 1, 4)], kInf);
    EXPECT_EQ(packed.o[row_index(2, 10, 0, 0, 3) * 4], 0.0);
    // Sequence (4, 5) attends to its own five keys, not to all thirteen: unpacked, its rows differ.
    Problem one = p;
    one.cu_seqlens_q.clear();
    one.cu_seqlens_k.clear();
    const ReferenceForward unpacked = reference_forward(one, in.q, in.k, in.v);
    const std::size_t row = row_index(2, 10, 0, 0, 8);
    EXPECT_GT(std::abs(unpacked.o[row * 4] - packed.o[row * 4]), 1e-6);
  }
}

// The same-precision yardstick and fp32_score_forward take a varlen problem the same way, and
// a VisibleFn sees the packed problem's coordinates.
TEST(ReferenceVarlen, YardsticksAndVisibleFnPerSequence) {
  const Problem p = varlen_problem(true);
  const Inputs in = inputs_for(p, 12);
  const VisibleFn visible = [](int b, int h, int i, int j) { return b == 0 && (i + j + h) % 3 != 0; };
  const auto shifted = [&](int b) -> VisibleFn {
    const int q0 = p.cu_seqlens_q[b], k0 = p.cu_seqlens_k[b];
    return [q0, k0](int, int h, int i, int j) { return (q0 + i + k0 + j + h) % 3 != 0; };
  };
  expect_per_sequence(
      p, in, same_precision_forward(p, in.q, in.k, in.v, visible),
      [&](const Problem& s, const std::vector<float>& q, const std::vector<float>& k, const std::vector<float>& v,
          int b) { return same_precision_forward(s, q, k, v, shifted(b)); },
      {kInf, kInf});
  expect_per_sequence(
      p, in, fp32_score_forward(p, in.q, in.k, in.v, visible),
      [&](const Problem& s, const std::vector<float>& q, const std::vector<float>& k, const std::vector<float>& v,
          int b) { return fp32_score_forward(s, q, k, v, shifted(b)); },
      {kInf, kInf});
  expect_per_sequence(
      p, in, reference_forward(p, in.q, in.k, in.v, visible),
      [&](const Problem& s, const std::vector<float>& q, const std::vector<float>& k, const std::vector<float>& v,
          int b) { return reference_forward(s, q, k, v, shifted(b)); },
      {kInf, kInf});
}

// Score options apply per sequence; a sequence without keys takes the sink's logit as its LSE.
TEST(ReferenceVarlen, ScoreOptionsPerSequence) {
  const Problem p = varlen_problem(false);
  const Inputs in = inputs_for(p, 13);
  ScoreOptions o;
  o.softcap = 2.0;
  o.alibi_slopes = {0.25f, 0.5f};
  o.sink_logits = {0.5f, -1.5f};
  expect_per_sequence(
      p, in, reference_forward(p, in.q, in.k, in.v, {}, o),
      [&](const Problem& s, const std::vector<float>& q, const std::vector<float>& k, const std::vector<float>& v, int) {
        return reference_forward(s, q, k, v, {}, o);
      },
      {0.5, -1.5});
}

// The problem's softcap reaches every sequence (sequence_problem keeps it), in every yardstick.
TEST(ReferenceVarlen, ProblemSoftcapPerSequence) {
  Problem p = varlen_problem(true);
  p.softcap = 1.5f;
  const Inputs in = inputs_for(p, 19);
  ScoreOptions cap;
  cap.softcap = 1.5;
  const auto per_sequence = [&](auto forward) {
    return [forward, cap](const Problem& s, const std::vector<float>& q, const std::vector<float>& k,
                          const std::vector<float>& v, int) { return forward(s, q, k, v, VisibleFn{}, cap); };
  };
  expect_per_sequence(p, in, reference_forward(p, in.q, in.k, in.v), per_sequence(&reference_forward), {kInf, kInf});
  expect_per_sequence(p, in, same_precision_forward(p, in.q, in.k, in.v), per_sequence(&same_precision_forward),
                      {kInf, kInf});
  Problem uncapped = p;
  uncapped.softcap = 0;
  EXPECT_NE(fp32_score_forward(p, in.q, in.k, in.v).o, fp32_score_forward(uncapped, in.q, in.k, in.v).o);
  expect_close(fp32_score_forward(p, in.q, in.k, in.v).o, reference_forward(p, in.q, in.k, in.v).o, 1e-5, "fp32 O");
}

using BackwardOf = std::function<ReferenceBackward(const Problem&, const std::vector<float>& q, const std::vector<float>& k,
                                                   const std::vector<float>& v, const std::vector<float>& dout, int b)>;

// `packed` (a backward of varlen problem p) against `backward` called by hand on each sequence's
// rows as a plain [1, H, len, D] problem: the same bits on the sequence's query rows (dQ) and key
// rows (dK, dV); dK = dV = 0 on the keys of a sequence without queries, dQ = 0 on the queries of
// one without keys.
void expect_backward_per_sequence(const Problem& p, const Inputs& in, const std::vector<float>& dout,
                                  const ReferenceBackward& packed, const BackwardOf& backward) {
  ASSERT_EQ(packed.dq.size(), static_cast<std::size_t>(p.q_elems()));
  ASSERT_EQ(packed.dk.size(), static_cast<std::size_t>(p.kv_elems()));
  ASSERT_EQ(packed.dv.size(), static_cast<std::size_t>(p.kv_elems()));
  const int d = p.head_dim;
  int q_rows = 0, k_rows = 0;
  for (int b = 0; b + 1 < static_cast<int>(p.cu_seqlens_q.size()); ++b) {
    const int q0 = p.cu_seqlens_q[b], lq = p.cu_seqlens_q[b + 1] - q0;
    const int k0 = p.cu_seqlens_k[b], lk = p.cu_seqlens_k[b + 1] - k0;
    q_rows += lq;
    k_rows += lk;
    ReferenceBackward want{Tensor(static_cast<std::size_t>(p.heads) * lq * d, 0.0),
                           Tensor(static_cast<std::size_t>(p.kv_heads) * lk * d, 0.0),
                           Tensor(static_cast<std::size_t>(p.kv_heads) * lk * d, 0.0)};
    if (lq > 0 && lk > 0)
      want = backward(make_problem(1, p.heads, p.kv_heads, lq, lk, d, p.causal),
                      rows_of(in.q, p.heads, p.seqlen_q, d, q0, lq), rows_of(in.k, p.kv_heads, p.seqlen_k, d, k0, lk),
                      rows_of(in.v, p.kv_heads, p.seqlen_k, d, k0, lk), rows_of(dout, p.heads, p.seqlen_q, d, q0, lq), b);
    for (int h = 0; h < p.heads; ++h)
      for (int i = 0; i < lq; ++i)
        for (int c = 0; c < d; ++c)
          EXPECT_EQ(packed.dq[row_index(p.heads, p.seqlen_q, 0, h, q0 + i) * d + c], want.dq[row_index(p.heads, lq, 0, h, i) * d + c])
              << "dQ, sequence " << b << " h=" << h << " i=" << i << " c=" << c;
    for (int h = 0; h < p.kv_heads; ++h)
      for (int j = 0; j < lk; ++j)
        for (int c = 0; c < d; ++c) {
          const std::size_t got = row_index(p.kv_heads, p.seqlen_k, 0, h, k0 + j) * d + c;
          const std::size_t at = row_index(p.kv_heads, lk, 0, h, j) * d + c;
          EXPECT_EQ(packed.dk[got], want.dk[at]) << "dK, sequence " << b << " kv head " << h << " j=" << j << " c=" << c;
          EXPECT_EQ(packed.dv[got], want.dv[at]) << "dV, sequence " << b << " kv head " << h << " j=" << j << " c=" << c;
        }
  }
  EXPECT_EQ(q_rows, p.seqlen_q);  // every packed row belongs to one sequence
  EXPECT_EQ(k_rows, p.seqlen_k);
}

TEST(ReferenceVarlen, BackwardIsEachSequencesBackwardOnItsRows) {
  for (bool causal : {false, true}) {
    SCOPED_TRACE(causal ? "causal" : "not causal");
    const Problem p = varlen_problem(causal);
    const Inputs in = inputs_for(p, 14);
    const std::vector<float> dout = random_normal(p.o_elems(), 15, Dtype::f32);
    const ReferenceBackward packed = reference_backward(p, in.q, in.k, in.v, dout);
    expect_backward_per_sequence(p, in, dout, packed,
                                 [](const Problem& s, const std::vector<float>& q, const std::vector<float>& k,
                                    const std::vector<float>& v, const std::vector<float>& d_o,
                                    int) { return reference_backward(s, q, k, v, d_o); });
    // Sequence (0, 2)'s keys 4 and 5 have no query, sequence (2, 0)'s queries 3 and 4 no key: zero
    // gradients, where the unpacked problem (every query over every key) gives them some.
    Problem one = p;
    one.cu_seqlens_q.clear();
    one.cu_seqlens_k.clear();
    const ReferenceBackward unpacked = reference_backward(one, in.q, in.k, in.v, dout);
    for (int c = 0; c < p.head_dim; ++c) {
      for (int j : {4, 5}) {
        const std::size_t at = row_index(p.kv_heads, p.seqlen_k, 0, 0, j) * p.head_dim + c;
        EXPECT_EQ(packed.dk[at], 0.0) << "j=" << j << " c=" << c;
        EXPECT_EQ(packed.dv[at], 0.0) << "j=" << j << " c=" << c;
        EXPECT_NE(unpacked.dv[at], 0.0) << "j=" << j << " c=" << c;
      }
      for (int h = 0; h < p.heads; ++h)
        for (int i : {3, 4}) {
          const std::size_t at = row_index(p.heads, p.seqlen_q, 0, h, i) * p.head_dim + c;
          EXPECT_EQ(packed.dq[at], 0.0) << "h=" << h << " i=" << i << " c=" << c;
          EXPECT_NE(unpacked.dq[at], 0.0) << "h=" << h << " i=" << i << " c=" << c;
        }
    }
  }
}

// A VisibleFn sees the packed problem's coordinates, and the score options apply within each
// sequence, in the backward as in the forward.
TEST(ReferenceVarlen, BackwardVisibleFnAndScoreOptionsPerSequence) {
  const Problem p = varlen_problem(true);
  const Inputs in = inputs_for(p, 16);
  const std::vector<float> dout = random_normal(p.o_elems(), 17, Dtype::f32);
  const VisibleFn visible = [](int b, int h, int i, int j) { return b == 0 && (i + j + h) % 3 != 0; };
  const ScoreOptions options = all_options(p);
  expect_backward_per_sequence(
      p, in, dout, reference_backward(p, in.q, in.k, in.v, dout, visible, options),
      [&](const Problem& s, const std::vector<float>& q, const std::vector<float>& k, const std::vector<float>& v,
          const std::vector<float>& d_o, int b) {
        const int q0 = p.cu_seqlens_q[b], k0 = p.cu_seqlens_k[b];
        const VisibleFn shifted = [q0, k0](int, int h, int i, int j) { return (q0 + i + k0 + j + h) % 3 != 0; };
        return reference_backward(s, q, k, v, d_o, shifted, options);
      });
}

// varlen_forward and varlen_backward take varlen problems only.
TEST(ReferenceVarlen, RefusesAPlainProblem) {
  const Problem p = make_problem(1, 2, 1, 10, 13, 4, true);
  const Inputs in = inputs_for(p, 18);
  const std::vector<float> dout(p.o_elems(), 1.0f);
  EXPECT_THROW(varlen_forward(p, in.q, in.k, in.v,
                              [](const Problem&, int, const std::vector<float>&, const std::vector<float>&,
                                 const std::vector<float>&) { return ReferenceForward{}; }),
               std::invalid_argument);
  EXPECT_THROW(varlen_backward(p, in.q, in.k, in.v, dout,
                               [](const Problem&, int, const std::vector<float>&, const std::vector<float>&,
                                  const std::vector<float>&, const std::vector<float>&) { return ReferenceBackward{}; }),
               std::invalid_argument);
}

}  // namespace
}  // namespace fa
