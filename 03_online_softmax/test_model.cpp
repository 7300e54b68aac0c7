// Chapter 03's CPU model against the float64 reference, and the README's worked example.
// No GPU needed:  ./build/03_online_softmax/03_online_softmax_cpu_tests   (or ctest -L cpu)
#include <gtest/gtest.h>

#include <cmath>
#include <ostream>
#include <string>
#include <vector>

#include "03_online_softmax/model.h"
#include "common/host/forward_check.h"
#include "common/host/host_data.h"

namespace {

using online_softmax::model::RowState;
using online_softmax::model::step;
using online_softmax::model::Update;

// The README's worked example: scores 1, 3, 2, 5 and values 1, 2, 3, 4 for one query row. The
// running max grows at the second and at the fourth key; each time l is rescaled by
// exp(m_old - m_new) = exp(-2). The numbers are the README's, worked out by hand.
TEST(Step, WorkedExampleFromReadme) {
  const float e2 = std::exp(-2.0f), e1 = std::exp(-1.0f);
  RowState row;
  float acc = 0.0f;  // the unnormalized output O_i for D = 1
  auto apply = [&](float s, float v) {
    const Update u = step(row, s);
    acc = u.alpha * acc + u.p * v;
    return u;
  };

  Update u = apply(1.0f, 1.0f);  // first key: m = 1, l = exp(0) = 1
  EXPECT_EQ(u.alpha, 0.0f);
  EXPECT_EQ(row.m, 1.0f);
  EXPECT_FLOAT_EQ(row.l, 1.0f);
  EXPECT_FLOAT_EQ(acc, 1.0f);

  u = apply(3.0f, 2.0f);  // the max grows 1 -> 3: l = 1 * e^-2 + 1 = 1.135335
  EXPECT_FLOAT_EQ(u.alpha, e2);
  EXPECT_EQ(row.m, 3.0f);
  EXPECT_NEAR(row.l, 1.135335f, 1e-6f);
  EXPECT_NEAR(acc, 2.135335f, 1e-6f);  // 1 * e^-2 + 1 * 2

  u = apply(2.0f, 3.0f);  // below the max: no rescale, p = e^-1, l = 1.135335 + 0.367879
  EXPECT_EQ(u.alpha, 1.0f);
  EXPECT_FLOAT_EQ(u.p, e1);
  EXPECT_EQ(row.m, 3.0f);
  EXPECT_NEAR(row.l, 1.503215f, 1e-6f);
  EXPECT_NEAR(acc, 3.238974f, 1e-6f);  // 2.135335 + e^-1 * 3

  u = apply(5.0f, 4.0f);  // the max grows 3 -> 5: l = 1.503215 * e^-2 + 1 = 1.203438
  EXPECT_FLOAT_EQ(u.alpha, e2);
  EXPECT_EQ(row.m, 5.0f);
  EXPECT_NEAR(row.l, 1.203438f, 1e-6f);
  EXPECT_NEAR(acc, 4.438347f, 2e-6f);  // 3.238974 * e^-2 + 1 * 4

  // The same l as the two-pass softmax with the final max: e^-4 + e^-2 + e^-3 + e^0.
  EXPECT_NEAR(row.l, std::exp(-4.0f) + e2 + std::exp(-3.0f) + 1.0f, 1e-6f);
  EXPECT_NEAR(acc / row.l, 3.688057f, 1e-6f);              // O
  EXPECT_NEAR(row.m + std::log(row.l), 5.185182f, 1e-6f);  // LSE = log(sum_j e^s_j)
}

// The same row through the model's forward: D = 1, so the scale is 1 and S_1j = q * k_j.
TEST(Model, WorkedExampleRow) {
  fa::Problem p;
  p.seqlen_q = 1;
  p.seqlen_k = 4;
  p.head_dim = 1;
  std::vector<float> o, lse;
  const std::vector<float> q{1.0f}, k{1.0f, 3.0f, 2.0f, 5.0f}, v{1.0f, 2.0f, 3.0f, 4.0f};
  online_softmax::model::forward(p, q, k, v, o, lse);
  EXPECT_NEAR(o[0], 3.688057f, 1e-6f);
  EXPECT_NEAR(lse[0], 5.185182f, 1e-6f);
}

struct Shape {
  int batch, heads, kv_heads, seqlen_q, seqlen_k, head_dim;
  bool causal;
  float scale;  // 0: the default 1 / sqrt(D)
};

std::string name_of(const Shape& s) {
  return "B" + std::to_string(s.batch) + "_H" + std::to_string(s.heads) + "x" +
         std::to_string(s.kv_heads) + "_Sq" + std::to_string(s.seqlen_q) + "_Sk" +
         std::to_string(s.seqlen_k) + "_D" + std::to_string(s.head_dim) +
         (s.causal ? "_causal" : "") + (s.scale > 0 ? "_scale" + std::to_string(int(s.scale)) : "");
}

// gtest prints a failing case's parameter with this (instead of its raw bytes).
void PrintTo(const Shape& s, std::ostream* os) { *os << name_of(s); }

class Model : public ::testing::TestWithParam<Shape> {};

TEST_P(Model, MatchesReference) {
  const Shape& s = GetParam();
  fa::Problem p;
  p.batch = s.batch;
  p.heads = s.heads;
  p.kv_heads = s.kv_heads;
  p.seqlen_q = s.seqlen_q;
  p.seqlen_k = s.seqlen_k;
  p.head_dim = s.head_dim;
  p.causal = s.causal;
  if (s.scale > 0) p.softmax_scale = s.scale;
  const fa::HostInputs in = fa::make_inputs(p, 3);

  std::vector<float> o, lse;
  online_softmax::model::forward(p, in.q, in.k, in.v, o, lse);
  // The same verdict as the GPU tests give a kernel (common/host/forward_check.h).
  const fa::ForwardCheck check =
      fa::check_forward(p, in, fa::encode(o, fa::Dtype::f32), fa::encode(lse, fa::Dtype::f32));
  EXPECT_TRUE(check.pass()) << p.describe() << "\n" << check.summary();
}

// Small enough to run in well under a second in total, awkward enough to catch the usual bugs.
INSTANTIATE_TEST_SUITE_P(
    Shapes, Model,
    ::testing::Values(Shape{1, 1, 1, 1, 1, 7, false, 0},          // one query, one key
                      Shape{1, 1, 1, 1, 1, 32, true, 0},
                      Shape{1, 2, 1, 17, 17, 64, true, 0},        // MQA: both heads read KV head 0
                      Shape{2, 4, 2, 127, 127, 128, false, 0},    // GQA: groups of 2
                      Shape{2, 4, 2, 127, 127, 32, true, 0},
                      Shape{1, 2, 1, 17, 127, 64, true, 0},       // Sq < Sk: row i sees i + 111 keys
                      Shape{1, 2, 1, 127, 17, 7, true, 0},        // Sq > Sk: rows 0..109 see no key
                      Shape{1, 2, 2, 127, 17, 96, false, 0},
                      Shape{2, 3, 3, 1, 300, 128, true, 0},       // one query row seeing every key
                      Shape{1, 2, 2, 300, 1, 32, false, 0},       // one key: P = 1, O = V_0
                      // Scores of size ~100: exp(S) alone overflows float32 (max ~ e^88), while
                      // exp(S - m) stays <= 1. The running max must be right for this to pass.
                      Shape{1, 2, 1, 64, 200, 32, false, 10}),
    [](const ::testing::TestParamInfo<Shape>& info) { return name_of(info.param); });

}  // namespace
