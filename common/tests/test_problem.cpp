// Tests of common/host/problem.h: validation, the default softmax scale, FLOP counting, the causal
// visibility rule, dtype names, and the head-dim rule of common/support.h.
//
//   ./build/common/common_cpu_tests --gtest_filter='Problem*'
#include "common/host/problem.h"
#include "common/host/support.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

namespace fa {
namespace {

// The message validate() throws, or "" when the problem is accepted.
std::string validation_error(const Problem& p) {
  try {
    p.validate();
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

// Changes one field of a valid problem and expects validate() to refuse it naming `field`.
template <typename Edit>
void expect_refused(Edit edit, const std::string& field) {
  Problem p;
  edit(p);
  const std::string error = validation_error(p);
  EXPECT_NE(error, "") << "accepted: " << p.describe();
  EXPECT_NE(error.find(field), std::string::npos) << "message '" << error << "' does not name "
                                                  << field;
}

Problem shape(int batch, int heads, int seqlen_q, int seqlen_k, int head_dim, bool causal) {
  Problem p;
  p.batch = batch;
  p.heads = p.kv_heads = heads;
  p.seqlen_q = seqlen_q;
  p.seqlen_k = seqlen_k;
  p.head_dim = head_dim;
  p.causal = causal;
  return p;
}

// The number of (i, j) pairs a causal problem lets through, counted one by one.
double visible_pairs(int seqlen_q, int seqlen_k) {
  double pairs = 0;
  for (int i = 0; i < seqlen_q; ++i)
    for (int j = 0; j < seqlen_k; ++j) pairs += causal_visible(i, j, seqlen_q, seqlen_k) ? 1 : 0;
  return pairs;
}

TEST(ProblemValidate, AcceptsTheDefaultAndGqaAndMqa) {
  EXPECT_EQ(validation_error(Problem{}), "");
  Problem gqa;
  gqa.heads = 8;
  gqa.kv_heads = 2;
  EXPECT_EQ(validation_error(gqa), "");
  EXPECT_EQ(gqa.group_size(), 4);
  gqa.kv_heads = 1;  // MQA
  EXPECT_EQ(validation_error(gqa), "");
  EXPECT_EQ(gqa.group_size(), 8);
}

TEST(ProblemValidate, RefusesZeroHeadDim) {
  expect_refused([](Problem& p) { p.head_dim = 0; }, "head_dim");
}

TEST(ProblemValidate, RefusesNegativeSizesNamingTheField) {
  expect_refused([](Problem& p) { p.batch = -1; }, "batch");
  expect_refused([](Problem& p) { p.heads = p.kv_heads = -2; }, "heads");
  expect_refused([](Problem& p) { p.kv_heads = -1; }, "kv_heads");
  expect_refused([](Problem& p) { p.seqlen_q = -5; }, "seqlen_q");
  expect_refused([](Problem& p) { p.seqlen_k = -5; }, "seqlen_k");
  expect_refused([](Problem& p) { p.head_dim = -64; }, "head_dim");
  expect_refused([](Problem& p) { p.seqlen_k = 0; }, "seqlen_k");
}

TEST(ProblemValidate, RefusesKvHeadsThatDoNotDivideHeads) {
  expect_refused([](Problem& p) { p.heads = 4; p.kv_heads = 3; }, "kv_heads");
  expect_refused([](Problem& p) { p.heads = 2; p.kv_heads = 4; }, "kv_heads");
}

TEST(ProblemValidate, RefusesBadScale) {
  for (float scale : {0.0f, -0.125f, std::numeric_limits<float>::infinity(),
                      std::numeric_limits<float>::quiet_NaN()}) {
    SCOPED_TRACE(scale);
    expect_refused([scale](Problem& p) { p.softmax_scale = scale; }, "softmax_scale");
  }
}

TEST(ProblemValidate, RefusesSlicesBeyond32BitIndexing) {
  // 2^25 * 64 = 2^31: one past the largest slice a 32-bit index can address.
  expect_refused([](Problem& p) { p.seqlen_k = 1 << 25; }, "2^31");
}

TEST(ProblemScale, DefaultsToOneOverSqrtHeadDim) {
  Problem p;
  p.head_dim = 64;
  EXPECT_EQ(p.scale(), 0.125f);
  p.head_dim = 80;
  EXPECT_FLOAT_EQ(p.scale(), 1.0f / std::sqrt(80.0f));
  p.softmax_scale = 0.3f;
  EXPECT_EQ(p.scale(), 0.3f);
}

TEST(ProblemSizes, ElementCountsAndDescription) {
  Problem p = shape(2, 8, 1024, 512, 64, true);
  p.kv_heads = 2;
  p.dtype = Dtype::bf16;
  EXPECT_EQ(p.q_elems(), 2LL * 8 * 1024 * 64);
  EXPECT_EQ(p.o_elems(), p.q_elems());
  EXPECT_EQ(p.kv_elems(), 2LL * 2 * 512 * 64);
  EXPECT_EQ(p.lse_elems(), 2LL * 8 * 1024);
  EXPECT_EQ(p.describe(), "B=2 H=8/2 Sq=1024 Sk=512 D=64 causal bf16");
  // Q, K, V read once and O written once at 2 bytes each, plus the float LSE.
  EXPECT_EQ(forward_min_bytes(p), 2.0 * (2 * p.q_elems() + 2 * p.kv_elems()) + 4.0 * p.lse_elems());
}

// A V head dim of its own (MLA: 576 for Q.K, 512 for V): V's and O's sizes, the description, the
// FLOPs of the two products, the bytes; 0 means head_dim's.
TEST(ProblemSizes, SeparateVHeadDim) {
  Problem p = shape(2, 8, 100, 300, 576, false);
  p.kv_heads = 1;
  p.dtype = Dtype::bf16;
  EXPECT_EQ(p.dv(), 576);
  p.head_dim_v = 512;
  EXPECT_EQ(p.dv(), 512);
  EXPECT_EQ(p.q_elems(), 2LL * 8 * 100 * 576);
  EXPECT_EQ(p.kv_elems(), 2LL * 1 * 300 * 576);
  EXPECT_EQ(p.v_elems(), 2LL * 1 * 300 * 512);
  EXPECT_EQ(p.o_elems(), 2LL * 8 * 100 * 512);
  EXPECT_EQ(p.describe(), "B=2 H=8/1 Sq=100 Sk=300 D=576/512 bf16");
  EXPECT_DOUBLE_EQ(forward_flops(p), 2.0 * 2 * 8 * 100 * 300 * 576 + 2.0 * 2 * 8 * 100 * 300 * 512);
  EXPECT_DOUBLE_EQ(forward_min_bytes(p),
                   2.0 * (p.q_elems() + p.kv_elems() + p.v_elems() + p.o_elems()) + 4.0 * p.lse_elems());
  p.head_dim_v = -1;
  EXPECT_THROW(p.validate(), std::invalid_argument);
}

TEST(ProblemFlops, NonCausalIsFourBHSqSkD) {
  const Problem p = shape(3, 5, 17, 1013, 96, false);
  EXPECT_EQ(forward_flops(p), 4.0 * 3 * 5 * 17 * 1013 * 96);
}

TEST(ProblemFlops, CausalSquareCountsHalf) {
  // FlashAttention's benchmarks count Sq*Sk/2 pairs (not the exact Sq*(Sq+1)/2) for Sq == Sk.
  const Problem p = shape(2, 4, 1024, 1024, 64, true);
  EXPECT_EQ(forward_flops(p), 4.0 * 2 * 4 * 1024 * 1024 * 64 / 2);
}

TEST(ProblemFlops, CausalRectangularCountsVisiblePairsExactly) {
  // Sq=4, Sk=2: query i sees keys j <= i - 2, so rows 0 and 1 see nothing, 2 sees one, 3 two.
  EXPECT_EQ(visible_pairs(4, 2), 3);
  const int shapes[][2] = {{4, 2}, {7, 3}, {17, 1}, {1, 17}, {5, 9}, {127, 1013}, {1013, 127}};
  for (const auto& s : shapes) {
    SCOPED_TRACE(testing::Message() << "Sq=" << s[0] << " Sk=" << s[1]);
    const Problem p = shape(2, 3, s[0], s[1], 64, true);
    EXPECT_EQ(forward_flops(p), 4.0 * 2 * 3 * 64 * visible_pairs(s[0], s[1]));
  }
}

TEST(ProblemFlops, BackwardIsTwoAndAHalfForward) {
  for (bool causal : {false, true}) {
    for (const Problem& p : {shape(2, 4, 128, 128, 64, causal), shape(1, 2, 7, 3, 32, causal)})
      EXPECT_EQ(backward_flops(p), 2.5 * forward_flops(p)) << p.describe();
  }
}

TEST(CausalVisible, IsBottomRightAligned) {
  // Sq=2, Sk=5: the last query row lines up with the last key, so row 0 sees keys 0..3.
  for (int j = 0; j <= 3; ++j) EXPECT_TRUE(causal_visible(0, j, 2, 5)) << "j=" << j;
  EXPECT_FALSE(causal_visible(0, 4, 2, 5));
  for (int j = 0; j <= 4; ++j) EXPECT_TRUE(causal_visible(1, j, 2, 5)) << "j=" << j;
  static_assert(causal_visible(0, 3, 2, 5) && !causal_visible(0, 4, 2, 5), "usable in kernels");
}

TEST(CausalVisible, SquareIsLowerTriangular) {
  for (int i = 0; i < 6; ++i)
    for (int j = 0; j < 6; ++j) EXPECT_EQ(causal_visible(i, j, 6, 6), j <= i) << i << "," << j;
}

TEST(CausalVisible, MoreQueriesThanKeysLeavesEmptyRows) {
  // Sq=5, Sk=2: rows 0..2 see no key, row 3 sees key 0, row 4 sees both.
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 2; ++j) EXPECT_FALSE(causal_visible(i, j, 5, 2)) << i << "," << j;
  EXPECT_TRUE(causal_visible(3, 0, 5, 2));
  EXPECT_FALSE(causal_visible(3, 1, 5, 2));
  EXPECT_TRUE(causal_visible(4, 1, 5, 2));
}

// The sliding window, written out: query i of Sq sits at key position i + Sk - Sq and sees keys
// position - left .. position + right; -1 leaves that side open.
TEST(WindowVisible, BoundsAroundTheBottomRightAlignedPosition) {
  // Sq = 2, Sk = 5: query 0 sits at position 3, query 1 at 4.
  const bool want_left1_right0[2][5] = {{false, false, true, true, false}, {false, false, false, true, true}};
  const bool want_left0_right1[2][5] = {{false, false, false, true, true}, {false, false, false, false, true}};
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 5; ++j) {
      EXPECT_EQ(window_visible(i, j, 2, 5, 1, 0), want_left1_right0[i][j]) << i << "," << j;
      EXPECT_EQ(window_visible(i, j, 2, 5, 0, 1), want_left0_right1[i][j]) << i << "," << j;
      EXPECT_TRUE(window_visible(i, j, 2, 5, -1, -1)) << i << "," << j;               // no window
      EXPECT_EQ(window_visible(i, j, 2, 5, -1, 0), causal_visible(i, j, 2, 5)) << i << "," << j;  // = causal
      EXPECT_EQ(window_visible(i, j, 2, 5, 2, -1), j >= i + 3 - 2) << i << "," << j;    // left only
    }
  static_assert(window_visible(0, 2, 2, 5, 1, 0) && !window_visible(0, 1, 2, 5, 1, 0), "usable in kernels");
}

TEST(WindowVisible, ProblemCombinesItWithCausal) {
  Problem p;
  p.seqlen_q = p.seqlen_k = 6;
  p.causal = true;
  p.window_left = 2;
  p.window_right = 3;  // causal already hides every later key
  for (int i = 0; i < 6; ++i)
    for (int j = 0; j < 6; ++j) EXPECT_EQ(p.visible(i, j), i - 2 <= j && j <= i) << i << "," << j;
  EXPECT_TRUE(p.has_window());
  p.causal = false;
  EXPECT_EQ(p.visible(1, 4), true);
  EXPECT_EQ(p.visible(1, 5), false);
  p.window_left = p.window_right = -1;
  EXPECT_FALSE(p.has_window());
  EXPECT_TRUE(p.visible(0, 5));
}

TEST(ProblemValidate, RefusesAWindowBelowMinusOne) {
  Problem p;
  p.window_left = -2;
  try {
    p.validate();
    FAIL() << "accepted window_left -2";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("window_left"), std::string::npos) << e.what();
  }
  p.window_left = 0;  // a window of the diagonal alone is a problem too
  EXPECT_NO_THROW(p.validate());
  EXPECT_NE(p.describe().find("window=(0,-1)"), std::string::npos) << p.describe();
}

// The logit softcap: 0 is off; a positive one is a problem of its own, named by describe(); a
// negative, infinite or NaN one is refused, naming the field.
TEST(ProblemValidate, RefusesABadSoftcap) {
  Problem p;
  EXPECT_FALSE(p.has_softcap());
  EXPECT_EQ(p.describe().find("softcap"), std::string::npos) << p.describe();
  for (float bad : {-1.0f, -0.0001f, std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN()}) {
    p.softcap = bad;
    try {
      p.validate();
      FAIL() << "accepted softcap " << bad;
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("softcap"), std::string::npos) << e.what();
    }
  }
  p.softcap = 30.0f;
  EXPECT_NO_THROW(p.validate());
  EXPECT_TRUE(p.has_softcap());
  EXPECT_NE(p.describe().find(" softcap=30"), std::string::npos) << p.describe();
  p.softcap = 0.5f;
  EXPECT_NE(p.describe().find(" softcap=0.5"), std::string::npos) << p.describe();
  EXPECT_DOUBLE_EQ(forward_flops(p), forward_flops(Problem{}));  // tanh is not counted, as FlashAttention counts
}

TEST(ProblemFlops, WindowCountsVisiblePairs) {
  Problem p;
  p.batch = 2;
  p.heads = p.kv_heads = 3;
  p.seqlen_q = p.seqlen_k = 8;
  p.head_dim = 16;
  p.causal = true;
  p.window_left = 2;  // rows see 1, 2, 3, 3, 3, 3, 3, 3 keys: 21 pairs
  EXPECT_DOUBLE_EQ(forward_flops(p), 2.0 * 2 * 3 * 21 * (16 + 16));
  p.causal = false;
  p.window_right = 1;  // rows see 2, 3, 4, 4, 4, 4, 4, 3 keys: 28 pairs
  EXPECT_DOUBLE_EQ(forward_flops(p), 2.0 * 2 * 3 * 28 * (16 + 16));
  p.seqlen_q = 3;  // rows at positions 5, 6, 7 see keys 3..6, 4..7, 5..7: 4 + 4 + 3
  EXPECT_DOUBLE_EQ(forward_flops(p), 2.0 * 2 * 3 * 11 * (16 + 16));
}

TEST(DtypeNames, RoundTripAndAliases) {
  for (Dtype d : {Dtype::f32, Dtype::f16, Dtype::bf16}) EXPECT_EQ(parse_dtype(dtype_name(d)), d);
  EXPECT_STREQ(dtype_name(Dtype::f32), "f32");
  EXPECT_STREQ(dtype_name(Dtype::f16), "f16");
  EXPECT_STREQ(dtype_name(Dtype::bf16), "bf16");
  EXPECT_EQ(parse_dtype("float32"), Dtype::f32);
  EXPECT_EQ(parse_dtype("fp16"), Dtype::f16);
  EXPECT_EQ(parse_dtype("bfloat16"), Dtype::bf16);
  EXPECT_EQ(dtype_size(Dtype::f32), 4u);
  EXPECT_EQ(dtype_size(Dtype::f16), 2u);
  EXPECT_EQ(dtype_size(Dtype::bf16), 2u);
}

TEST(DtypeNames, RefusesInt8) {
  try {
    parse_dtype("int8");
    FAIL() << "int8 accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("int8"), std::string::npos) << e.what();
  }
}

// A list is exact; without one, 1..max, or multiples of head_dim_multiple up to max.
TEST(SupportHeadDims, ListRangeAndMultiple) {
  const Support list{.chapter = "x", .dtypes = {Dtype::bf16}, .head_dims = {64, 128}, .max_head_dim = 128};
  EXPECT_TRUE(supports_head_dim(list, 64));
  EXPECT_FALSE(supports_head_dim(list, 96));
  EXPECT_EQ(head_dims_words(list), "64, 128");
  const Support range{.chapter = "x", .dtypes = {Dtype::f32}, .head_dims = {}, .max_head_dim = 256};
  EXPECT_TRUE(supports_head_dim(range, 1));
  EXPECT_TRUE(supports_head_dim(range, 255));
  EXPECT_FALSE(supports_head_dim(range, 257));
  EXPECT_FALSE(supports_head_dim(range, 0));
  EXPECT_EQ(head_dims_words(range), "1..256");
  const Support eights{
      .chapter = "x", .dtypes = {Dtype::bf16}, .head_dims = {}, .max_head_dim = 256, .head_dim_multiple = 8};
  for (int d = 1; d <= 264; ++d) EXPECT_EQ(supports_head_dim(eights, d), d % 8 == 0 && d <= 256) << d;
  EXPECT_EQ(head_dims_words(eights), "multiples of 8 up to 256");
}

// A packed varlen batch of five sequences: (queries, keys) = (3, 5), (0, 1), (4, 1), (4, 4), (2, 0).
Problem varlen_problem(bool causal) {
  Problem p = shape(1, 2, 13, 11, 8, causal);
  p.layout = Layout::bshd;
  p.cu_seqlens_q = {0, 3, 3, 7, 11, 13};
  p.cu_seqlens_k = {0, 5, 6, 7, 11, 11};
  return p;
}

TEST(ProblemVarlen, AcceptsAPackedBatchWithEmptySequences) {
  const Problem p = varlen_problem(true);
  EXPECT_EQ(validation_error(p), "");
  EXPECT_TRUE(p.is_varlen());
  EXPECT_EQ(p.varlen_batch(), 5);
  EXPECT_FALSE(Problem{}.is_varlen());
  EXPECT_EQ(Problem{}.varlen_batch(), 0);
  EXPECT_EQ(p.describe(), "B=1 H=2/2 Sq=13 Sk=11 D=8 causal f32 bshd varlen 5 seqs");
  Problem few = p;
  few.seqlen_q = few.seqlen_k = 7;
  few.cu_seqlens_q = {0, 3, 3, 7};
  few.cu_seqlens_k = {0, 5, 6, 7};
  EXPECT_EQ(validation_error(few), "");
  EXPECT_EQ(few.describe(), "B=1 H=2/2 Sq=7 Sk=7 D=8 causal f32 bshd varlen q=3,0,4 k=5,1,1");
  few.cu_seqlens_k = few.cu_seqlens_q;
  EXPECT_EQ(few.describe(), "B=1 H=2/2 Sq=7 Sk=7 D=8 causal f32 bshd varlen q=3,0,4");
}

TEST(ProblemVarlen, RefusesMalformedOffsetsNamingTheField) {
  auto expect_varlen_refused = [](auto edit, const std::string& words) {
    Problem p = varlen_problem(false);
    edit(p);
    const std::string error = validation_error(p);
    EXPECT_NE(error, "") << "accepted: " << p.describe();
    EXPECT_NE(error.find(words), std::string::npos) << "message '" << error << "' does not say '" << words << "'";
  };
  expect_varlen_refused([](Problem& p) { p.cu_seqlens_k.clear(); }, "cu_seqlens_q and cu_seqlens_k are set together");
  expect_varlen_refused([](Problem& p) { p.cu_seqlens_q.clear(); }, "cu_seqlens_q and cu_seqlens_k are set together");
  expect_varlen_refused([](Problem& p) { p.cu_seqlens_k.push_back(11); }, "same size");
  expect_varlen_refused([](Problem& p) { p.cu_seqlens_q = {13}; p.cu_seqlens_k = {11}; }, "B + 1 >= 2");
  expect_varlen_refused([](Problem& p) { p.cu_seqlens_q.front() = 1; }, "cu_seqlens_q must start at 0");
  expect_varlen_refused([](Problem& p) { p.cu_seqlens_k.front() = -1; }, "cu_seqlens_k must start at 0");
  expect_varlen_refused([](Problem& p) { p.cu_seqlens_q[2] = 2; }, "cu_seqlens_q must not decrease, got 2 after 3");
  expect_varlen_refused([](Problem& p) { p.cu_seqlens_k[3] = 12; }, "cu_seqlens_k must not decrease");
  expect_varlen_refused([](Problem& p) { p.seqlen_q = 14; }, "cu_seqlens_q must end at seqlen_q (14), got 13");
  expect_varlen_refused([](Problem& p) { p.cu_seqlens_k.back() = 12; }, "cu_seqlens_k must end at seqlen_k");
  expect_varlen_refused([](Problem& p) { p.batch = 2; }, "batch 1");
  expect_varlen_refused([](Problem& p) { p.layout = Layout::bhsd; }, "layout bshd");
  expect_varlen_refused([](Problem& p) { p.q_input = p.q_strides(); }, "input strides");
  expect_varlen_refused([](Problem& p) { p.head_dim_v = 4; }, "head_dim_v");
  // Every field check of a plain problem still comes first.
  expect_varlen_refused([](Problem& p) { p.head_dim = 0; }, "head_dim must be >= 1");
}

TEST(ProblemVarlen, SequenceProblemIsOneSequenceWithEveryOtherField) {
  Problem p = varlen_problem(true);
  p.kv_heads = 1;
  p.softmax_scale = 0.5f;
  p.window_left = 2;
  p.softcap = 30.0f;
  p.dtype = Dtype::bf16;
  const int lengths[5][2] = {{3, 5}, {0, 1}, {4, 1}, {4, 4}, {2, 0}};
  for (int b = 0; b < 5; ++b) {
    const Problem s = sequence_problem(p, b);
    EXPECT_EQ(s.seqlen_q, lengths[b][0]) << b;
    EXPECT_EQ(s.seqlen_k, lengths[b][1]) << b;
    EXPECT_EQ(s.batch, 1);
    EXPECT_FALSE(s.is_varlen());
    EXPECT_TRUE(s.cu_seqlens_k.empty());
    EXPECT_EQ(s.heads, 2);
    EXPECT_EQ(s.kv_heads, 1);
    EXPECT_EQ(s.head_dim, 8);
    EXPECT_TRUE(s.causal);
    EXPECT_EQ(s.window_left, 2);
    EXPECT_EQ(s.window_right, -1);
    EXPECT_EQ(s.softcap, 30.0f);
    EXPECT_EQ(s.scale(), 0.5f);
    EXPECT_EQ(s.dtype, Dtype::bf16);
    EXPECT_EQ(s.layout, Layout::bshd);
  }
  EXPECT_EQ(validation_error(sequence_problem(p, 3)), "");
  EXPECT_THROW(sequence_problem(p, 5), std::invalid_argument);
  EXPECT_THROW(sequence_problem(p, -1), std::invalid_argument);
  EXPECT_THROW(sequence_problem(Problem{}, 0), std::invalid_argument);
}

// The sum over the sequences, each counted as a problem of its own (the causal square one by
// FlashAttention's half), not the packed problem's 13 x 11.
TEST(ProblemVarlen, FlopsAreTheSumOverTheSequences) {
  // Visible pairs: 3 x 5 + 0 + 4 x 1 + 4 x 4 + 0 = 35.
  EXPECT_DOUBLE_EQ(forward_flops(varlen_problem(false)), 2.0 * 2 * 35 * (8 + 8));
  // Causal: rows of (3, 5) see 3, 4, 5 keys; of (4, 1) only the last row sees the key; (4, 4)
  // counts half of 16: 12 + 1 + 8 = 21.
  EXPECT_DOUBLE_EQ(forward_flops(varlen_problem(true)), 2.0 * 2 * 21 * (8 + 8));
  EXPECT_DOUBLE_EQ(backward_flops(varlen_problem(true)), 2.5 * 2.0 * 2 * 21 * (8 + 8));
  // Unpacked, the same numbers are one 13 x 11 sequence.
  Problem packed = varlen_problem(false);
  packed.cu_seqlens_q.clear();
  packed.cu_seqlens_k.clear();
  EXPECT_DOUBLE_EQ(forward_flops(packed), 2.0 * 2 * 13 * 11 * (8 + 8));
}

}  // namespace
}  // namespace fa
