// CPU tests of chapter 08: the backward model against the float64 reference, rows that see no
// key, the causal tile-skip index math that the kernel shares with the model, and the
// same-precision yardstick (a packed varlen batch's too). ctest -L cpu
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <tuple>
#include <vector>

#include "08_backward/model.h"
#include "08_backward/harness/backward_check.h"
#include "common/device/tiles.h"
#include "common/host/host_data.h"
#include "common/host/reference.h"

namespace {

struct Case {
  int batch, heads, kv_heads, seqlen_q, seqlen_k, head_dim;
  bool causal;
  int Br, Bc;
};

std::string name_of(const Case& c) {
  return "B" + std::to_string(c.batch) + "_H" + std::to_string(c.heads) + "x" +
         std::to_string(c.kv_heads) + "_Sq" + std::to_string(c.seqlen_q) + "_Sk" +
         std::to_string(c.seqlen_k) + "_D" + std::to_string(c.head_dim) +
         (c.causal ? "_causal" : "") + "_Br" + std::to_string(c.Br) + "_Bc" + std::to_string(c.Bc);
}

fa::Problem problem_of(const Case& c) {
  fa::Problem p;
  p.batch = c.batch;
  p.heads = c.heads;
  p.kv_heads = c.kv_heads;
  p.seqlen_q = c.seqlen_q;
  p.seqlen_k = c.seqlen_k;
  p.head_dim = c.head_dim;
  p.causal = c.causal;
  return p;
}

// O and LSE as an exact forward would write them in float: the float64 reference, rounded. (The
// GPU tests use the chapter's own forward; here the backward is checked on its own.)
void forward_for(const fa::Problem& p, const fa::HostInputs& in, std::vector<float>& o, std::vector<float>& lse) {
  const fa::ReferenceForward ref = fa::reference_forward(p, in.q, in.k, in.v);
  o.assign(ref.o.begin(), ref.o.end());
  lse.assign(ref.lse.begin(), ref.lse.end());
}

// Rows first .. first + count - 1 of every head of a [1, heads, rows, d] tensor, as [1, heads, count, d].
template <class T>
std::vector<T> rows_of(const std::vector<T>& t, int heads, int rows, int d, int first, int count) {
  std::vector<T> out;
  for (int h = 0; h < heads; ++h)
    out.insert(out.end(), t.begin() + (static_cast<std::ptrdiff_t>(h) * rows + first) * d,
               t.begin() + (static_cast<std::ptrdiff_t>(h) * rows + first + count) * d);
  return out;
}

class Model : public ::testing::TestWithParam<Case> {};

TEST_P(Model, MatchesReference) {
  const Case& c = GetParam();
  const fa::Problem p = problem_of(c);
  const fa::HostInputs in = fa::make_inputs(p, 5);
  const std::vector<float> dout = fa::make_dout(p, 5);
  std::vector<float> o, lse, dq, dk, dv;
  forward_for(p, in, o, lse);
  backward::model::backward(p, in.q, in.k, in.v, o, lse, dout, dq, dk, dv, c.Br, c.Bc);

  // The same verdict as the GPU tests give a kernel (08_backward/harness/backward_check.h).
  const fa::BackwardCheck check = fa::check_backward(p, in, dout, fa::encode(dq, fa::Dtype::f32),
                                                     fa::encode(dk, fa::Dtype::f32),
                                                     fa::encode(dv, fa::Dtype::f32));
  EXPECT_TRUE(check.pass()) << p.describe() << "\n" << check.summary();
}

// Tile sizes: the kernel's (Br x Bc = 64 x 64 for D <= 64, 32 x 64 above), small ones so short
// sequences span several tiles, and sizes that divide nothing.
INSTANTIATE_TEST_SUITE_P(
    Shapes, Model,
    ::testing::Values(Case{1, 1, 1, 1, 1, 32, false, 64, 64},
                      Case{1, 1, 1, 1, 1, 7, true, 32, 64},
                      Case{1, 2, 1, 17, 17, 64, true, 64, 64},
                      Case{1, 2, 1, 17, 17, 7, true, 4, 4},
                      Case{2, 4, 2, 127, 127, 32, false, 64, 64},
                      Case{1, 4, 2, 127, 127, 64, true, 16, 8},
                      Case{1, 2, 2, 127, 127, 32, true, 7, 13},
                      Case{1, 2, 1, 17, 127, 32, true, 64, 64},    // Sq < Sk: later keys
                      Case{1, 2, 1, 127, 17, 32, true, 16, 16},    // Sq > Sk: rows that see nothing
                      Case{1, 2, 1, 127, 17, 7, true, 64, 64},     // a whole tile sees nothing
                      Case{1, 3, 1, 33, 70, 64, false, 16, 32},    // MQA
                      Case{1, 4, 1, 127, 1, 32, false, 32, 64},    // MQA, one key: dV sums 4 x 127 rows
                      Case{2, 2, 2, 1, 127, 64, true, 64, 64},
                      Case{1, 2, 2, 127, 1, 32, false, 64, 64}),
    [](const ::testing::TestParamInfo<Case>& info) { return name_of(info.param); });

// Sq = 40 > Sk = 8, causal: query rows 0..31 see no key (problem.h), their LSE is +inf.
// Their dQ rows must be exactly 0, every gradient finite, and their Q and dO must not reach dK
// or dV at all: scaling those rows up by 1e4 leaves dK and dV bit for bit the same.
TEST(EmptyRows, ZeroGradientsAndNoNaN) {
  const Case c{1, 2, 1, 40, 8, 32, true, 24, 4};  // query tile 1 mixes empty and seeing rows
  const fa::Problem p = problem_of(c);
  fa::HostInputs in = fa::make_inputs(p, 11);
  std::vector<float> dout = fa::make_dout(p, 11);
  std::vector<float> o, lse, dq, dk, dv;
  forward_for(p, in, o, lse);
  const int empty_rows = p.seqlen_q - p.seqlen_k;
  for (int h = 0; h < p.heads; ++h)
    for (int i = 0; i < p.seqlen_q; ++i) ASSERT_EQ(std::isinf(lse[h * p.seqlen_q + i]), i < empty_rows);
  backward::model::backward(p, in.q, in.k, in.v, o, lse, dout, dq, dk, dv, c.Br, c.Bc);

  for (float x : dq) ASSERT_TRUE(std::isfinite(x));
  for (float x : dk) ASSERT_TRUE(std::isfinite(x));
  for (float x : dv) ASSERT_TRUE(std::isfinite(x));
  for (int h = 0; h < p.heads; ++h)
    for (int i = 0; i < empty_rows; ++i)
      for (int d = 0; d < p.head_dim; ++d)
        ASSERT_EQ(dq[(h * p.seqlen_q + i) * p.head_dim + d], 0.0f) << "h=" << h << " i=" << i << " d=" << d;

  for (int h = 0; h < p.heads; ++h) {
    for (int n = 0; n < empty_rows * p.head_dim; ++n) {
      in.q[h * p.seqlen_q * p.head_dim + n] *= 1e4f;
      dout[h * p.seqlen_q * p.head_dim + n] *= 1e4f;
    }
  }
  std::vector<float> dq2, dk2, dv2;
  backward::model::backward(p, in.q, in.k, in.v, o, lse, dout, dq2, dk2, dv2, c.Br, c.Bc);
  EXPECT_EQ(dk2, dk);
  EXPECT_EQ(dv2, dv);
}

// query_tile_begin and key_tile_end against brute force over every (key tile, query tile) pair:
// the query tiles it skips see nothing of the key tile, and every one it visits sees something of it.
TEST(TileSkip, MatchesBruteForce) {
  const int sizes[] = {1, 2, 3, 5, 16, 17, 31, 64, 65, 100, 129};
  const int tiles[] = {1, 3, 8, 16, 32, 64};
  for (int Sq : sizes)
    for (int Sk : sizes)
      for (int Br : tiles)
        for (int Bc : tiles)
          for (bool causal : {false, true}) {
            const int Tr = fa::cuda::ceil_div(Sq, Br);
            for (int jt = 0; jt < fa::cuda::ceil_div(Sk, Bc); ++jt) {
              const int begin = fa::cuda::query_tile_begin(jt, Br, Bc, Sq, Sk, causal);
              for (int it = 0; it < Tr; ++it) {
                bool any_seen = false;
                for (int i = it * Br; i < std::min((it + 1) * Br, Sq); ++i)
                  for (int j = jt * Bc; j < std::min((jt + 1) * Bc, Sk); ++j)
                    any_seen |= !causal || fa::causal_visible(i, j, Sq, Sk);
                ASSERT_EQ(it >= begin, any_seen)
                    << "Sq=" << Sq << " Sk=" << Sk << " Br=" << Br << " Bc=" << Bc << " causal=" << causal
                    << " key tile " << jt << " query tile " << it << " (query_tile_begin " << begin << ")";
                // The forward's key_tile_end says the same from the query tile's side (11's
                // deterministic order counts a query tile's key tiles with it).
                ASSERT_EQ(jt < fa::cuda::key_tile_end(it, Br, Bc, Sq, Sk, causal), any_seen)
                    << "Sq=" << Sq << " Sk=" << Sk << " Br=" << Br << " Bc=" << Bc << " causal=" << causal
                    << " key tile " << jt << " query tile " << it;
              }
            }
          }
}

}  // namespace

// The f16/bf16 yardstick (backward_check.h: same_precision_backward). In f32 it is plain fp32
// attention backward, so it must agree with the float64 reference to fp32 accuracy; in f16/bf16
// its error must be that of rounding P, dS and the gradients: clearly above fp32's, clearly below
// the gradients' own size. Rows that see no key (causal, Sq > Sk) get exact zeros.
TEST(SamePrecisionBackward, ErrorFollowsTheDtype) {
  for (fa::Dtype dtype : {fa::Dtype::f32, fa::Dtype::f16, fa::Dtype::bf16}) {
    fa::Problem p;
    p.batch = 1, p.heads = 2, p.kv_heads = 1, p.seqlen_q = 97, p.seqlen_k = 61, p.head_dim = 64, p.causal = true;
    p.dtype = dtype;
    const fa::HostInputs in = fa::make_inputs(p, 42);
    const std::vector<float> dout = fa::make_dout(p, 42);
    const fa::ReferenceBackward ref = fa::reference_backward(p, in.q, in.k, in.v, dout);
    const fa::ReferenceBackward plain = fa::same_precision_backward(p, in.q, in.k, in.v, dout);
    auto rel_err = [](const std::vector<double>& got, const std::vector<double>& want) {
      double err = 0, size = 0;
      for (std::size_t n = 0; n < want.size(); ++n) {
        EXPECT_TRUE(std::isfinite(got[n]));
        err = std::max(err, std::abs(got[n] - want[n]));
        size = std::max(size, std::abs(want[n]));
      }
      return err / size;
    };
    const double lo = dtype == fa::Dtype::f32 ? 0.0 : 1e-5, hi = dtype == fa::Dtype::f32 ? 1e-5 : 5e-2;
    for (const auto& [name, got, want] : {std::tuple{"dQ", &plain.dq, &ref.dq}, std::tuple{"dK", &plain.dk, &ref.dk},
                                          std::tuple{"dV", &plain.dv, &ref.dv}}) {
      const double e = rel_err(*got, *want);
      EXPECT_GE(e, lo) << name << " " << fa::dtype_name(dtype);
      EXPECT_LE(e, hi) << name << " " << fa::dtype_name(dtype);
    }
    // Query rows 0 .. Sq - Sk - 1 see no key: their dQ is exactly 0.
    for (int i = 0; i < p.seqlen_q - p.seqlen_k; ++i)
      for (int c = 0; c < p.head_dim; ++c) EXPECT_EQ(plain.dq[static_cast<std::size_t>(i) * p.head_dim + c], 0.0);
  }
}

// A packed varlen batch: the yardstick is each sequence's on its own rows (reference.h:
// varlen_backward; its VisibleFn in the packed coordinates), and the verdict takes the packed
// gradients, [1, H, total_q, D] and [1, Hkv, total_k, D]: the yardstick's own pass it, and a
// sequence's dK left at 0 fails it.
TEST(SamePrecisionBackward, VarlenIsEachSequencesOnItsRows) {
  for (fa::Dtype dtype : {fa::Dtype::f32, fa::Dtype::bf16}) {
    SCOPED_TRACE(fa::dtype_name(dtype));
    fa::Problem p;  // (queries, keys): (77, 150), (0, 45), (33, 0), (130, 130); GQA, causal
    p.heads = 4, p.kv_heads = 2, p.head_dim = 64, p.causal = true, p.dtype = dtype, p.layout = fa::Layout::bshd;
    p.cu_seqlens_q = {0, 77, 77, 110, 240};
    p.cu_seqlens_k = {0, 150, 195, 195, 325};
    p.seqlen_q = 240, p.seqlen_k = 325;
    const fa::HostInputs in = fa::make_inputs(p, 7);
    const std::vector<float> dout = fa::make_dout(p, 7);
    const fa::VisibleFn visible = [](int, int h, int i, int j) { return (i + 2 * j + h) % 5 != 0; };
    const fa::ReferenceBackward packed = fa::same_precision_backward(p, in.q, in.k, in.v, dout, visible);
    const int d = p.head_dim;
    for (int b = 0; b < p.varlen_batch(); ++b) {
      const fa::Problem s = fa::sequence_problem(p, b);
      const int q0 = p.cu_seqlens_q[b], k0 = p.cu_seqlens_k[b];
      fa::ReferenceBackward want{std::vector<double>(s.q_elems()), std::vector<double>(s.kv_elems()),
                                 std::vector<double>(s.kv_elems())};  // zeros for a sequence without queries or keys
      if (s.seqlen_q > 0 && s.seqlen_k > 0)
        want = fa::same_precision_backward(
            s, rows_of(in.q, p.heads, p.seqlen_q, d, q0, s.seqlen_q), rows_of(in.k, p.kv_heads, p.seqlen_k, d, k0, s.seqlen_k),
            rows_of(in.v, p.kv_heads, p.seqlen_k, d, k0, s.seqlen_k), rows_of(dout, p.heads, p.seqlen_q, d, q0, s.seqlen_q),
            [q0, k0](int, int h, int i, int j) { return (q0 + i + 2 * (k0 + j) + h) % 5 != 0; });
      EXPECT_EQ(rows_of(packed.dq, p.heads, p.seqlen_q, d, q0, s.seqlen_q), want.dq) << "dQ of sequence " << b;
      EXPECT_EQ(rows_of(packed.dk, p.kv_heads, p.seqlen_k, d, k0, s.seqlen_k), want.dk) << "dK of sequence " << b;
      EXPECT_EQ(rows_of(packed.dv, p.kv_heads, p.seqlen_k, d, k0, s.seqlen_k), want.dv) << "dV of sequence " << b;
    }

    const fa::BackwardYardsticks y = fa::backward_yardsticks(p, in, dout, visible);
    auto bytes = [&](const std::vector<double>& g) { return fa::encode(std::vector<float>(g.begin(), g.end()), dtype); };
    const fa::BackwardCheck own = fa::check_backward(p, y, bytes(y.plain.dq), bytes(y.plain.dk), bytes(y.plain.dv));
    EXPECT_TRUE(own.pass()) << own.summary();
    std::vector<double> dk = y.plain.dk;
    for (int h = 0; h < p.kv_heads; ++h)  // the last sequence's keys, 195 .. 324
      std::fill(dk.begin() + (static_cast<std::ptrdiff_t>(h) * p.seqlen_k + 195) * d,
                dk.begin() + (static_cast<std::ptrdiff_t>(h) + 1) * p.seqlen_k * d, 0.0);
    const fa::BackwardCheck missing = fa::check_backward(p, y, bytes(y.plain.dq), bytes(dk), bytes(y.plain.dv));
    EXPECT_FALSE(missing.pass()) << missing.summary();
  }
}

// Under a softcap (Problem::softcap) the yardstick differentiates through tanh as the reference
// does: dS times 1 - tanh(x / softcap)^2. In f32 it agrees with the softcapped reference to fp32
// accuracy, in bf16 to bf16's, while the cap moves the gradients by far more than either, so a
// yardstick that left the factor out would miss by that much.
TEST(SamePrecisionBackward, DifferentiatesTheSoftcap) {
  for (fa::Dtype dtype : {fa::Dtype::f32, fa::Dtype::bf16}) {
    fa::Problem p;
    p.batch = 1, p.heads = 4, p.kv_heads = 2, p.seqlen_q = 61, p.seqlen_k = 97, p.head_dim = 32, p.causal = true;
    p.softmax_scale = 1.0f;  // scores ~+-6 against a cap of 5: deep in tanh's bend
    p.softcap = 5.0f;
    p.dtype = dtype;
    SCOPED_TRACE(p.describe());
    const fa::HostInputs in = fa::make_inputs(p, 43);
    const std::vector<float> dout = fa::make_dout(p, 43);
    fa::Problem uncapped = p;
    uncapped.softcap = 0.0f;
    const fa::ReferenceBackward ref = fa::reference_backward(p, in.q, in.k, in.v, dout);
    const fa::ReferenceBackward plain = fa::same_precision_backward(p, in.q, in.k, in.v, dout);
    const fa::ReferenceBackward off = fa::reference_backward(uncapped, in.q, in.k, in.v, dout);
    auto rel_err = [](const std::vector<double>& got, const std::vector<double>& want) {
      double err = 0, size = 0;
      for (std::size_t n = 0; n < want.size(); ++n) {
        err = std::max(err, std::abs(got[n] - want[n]));
        size = std::max(size, std::abs(want[n]));
      }
      return err / size;
    };
    const double hi = dtype == fa::Dtype::f32 ? 1e-5 : 5e-2;
    for (const auto& [name, got, want, without] :
         {std::tuple{"dQ", &plain.dq, &ref.dq, &off.dq}, std::tuple{"dK", &plain.dk, &ref.dk, &off.dk},
          std::tuple{"dV", &plain.dv, &ref.dv, &off.dv}}) {
      EXPECT_LE(rel_err(*got, *want), hi) << name;
      EXPECT_GE(rel_err(*without, *want), 4 * hi) << name << ": the cap should move the gradients";
    }
  }
}
