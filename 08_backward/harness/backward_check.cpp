#include "08_backward/harness/backward_check.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>

#include "common/host/reference.h"

namespace fa {

std::vector<float> make_dout(const Problem& p, std::uint64_t seed) {
  // make_inputs draws Q, K, V from streams 3 seed + 0, 1, 2; dO takes a fourth, far from those.
  return random_normal(p.o_elems(), seed * 3 + 0x9E3779B97F4A7C15ull, p.dtype);
}

// Why this tolerance.
//
// The forward's outputs are softmax-weighted means of V, about 1 in size whatever the shape. The
// gradients are sums: dV_j = sum_i P_ij dO_i and dK_j = scale sum_i dS_ij Q_i run over up to
// (H / Hkv) * Sq query rows, dQ_i = scale sum_j dS_ij K_j over up to Sk keys. Their size follows
// the shape: with standard-normal inputs they are 0.1..3 for Sq = Sk, but dV reaches ~80 when
// 1013 query rows all attend to one key (Sk = 1, every P_ij = 1). A float sum's rounding error is
// relative to its partial sums, not to its final value: an element that cancels to almost 0 in a
// tensor of 80s still carries an error of order u * 80 * sqrt(n) (u = 2^-24). So the absolute
// floor scales with the tensor:
//
//     |got - want| <= atol * max(1, max|want|) + rtol * |want|,    atol = rtol = 1e-4 (f32),
//
// which is the forward's rule (compare.cpp) for gradients of size up to 1, and the same rule in
// units of the largest element above that.
// Measured on the CPU model (model.cpp: fp32, straight sums, O and LSE exact) against the float64
// reference -- B=1 H=2 Sq=Sk=1013 D=64 and 128 (causal), Sq=1013 Sk=1, MQA with 4 x 512 rows onto
// 16 keys, Sq=127 Sk=17 causal -- the largest error is 2e-6 of max|want| (5.7e-5 absolute where
// dV reaches 79). The 50x headroom covers the GPU's other summation order, its approximate exp2
// (2^-22 relative) and the fp32 error of the forward's O and LSE (~1e-6, which reaches dS through
// D_i and P). A real bug -- a skipped tile, a query head of a group left out, a missing scale --
// moves gradients by their own size, 1e-2 to 1 of max|want|.
// f16/bf16 gradients are judged by FlashAttention's same-precision rule instead (below); their
// element-wise tolerance is the largest double, so compare() still catches NaN, infinities and
// unwritten elements.
Tolerance gradient_tolerance(Dtype dtype, const std::vector<double>& want) {
  if (dtype != Dtype::f32) return {std::numeric_limits<double>::max(), 0.0};
  double largest = 0;
  for (double w : want) largest = std::max(largest, std::abs(w));
  const Tolerance t = output_tolerance(dtype);
  return {t.atol * std::max(1.0, largest), t.rtol};
}

ReferenceBackward same_precision_backward(const Problem& p, const std::vector<float>& q, const std::vector<float>& k,
                                          const std::vector<float>& v, const std::vector<float>& dout,
                                          const VisibleFn& visible) {
  if (p.is_varlen())
    return varlen_backward(p, q, k, v, dout,
                           [&](const Problem& s, int b, const std::vector<float>& qs, const std::vector<float>& ks,
                               const std::vector<float>& vs, const std::vector<float>& dos) {
                             return same_precision_backward(s, qs, ks, vs, dos, sequence_visible(visible, p, b));
                           });
  ReferenceBackward out{std::vector<double>(p.q_elems()), std::vector<double>(p.kv_elems()),
                        std::vector<double>(p.kv_elems())};
  const int d = p.head_dim, Sq = p.seqlen_q, Sk = p.seqlen_k;
  const float scale = p.scale();
  const float softcap = static_cast<float>(problem_score_options(p).softcap);  // 0: off
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  auto rd = [&](float x) { return round_to_dtype(x, p.dtype); };
  // One (b, kv head) at a time: the query heads of its group add into the same dK, dV. A plain
  // backward adds each dK_j, dV_j over the group's rows (head, query) one after another in float32,
  // and so does this one: the rows come in chunks; within a chunk, first every row's P, dS and dQ
  // (in parallel over rows), then every key's dK_j, dV_j over the chunk's rows in order (in
  // parallel over keys). Each sum runs in one thread in row order: the bits are those of a single
  // loop whatever the thread count, and the error of a long sum is a plain loop's, not a blocked
  // sum's (8 million rows into one dV_j: the kernels' own sums run in row order too).
  constexpr int kChunk = 4096;
  std::vector<float> p_chunk, ds_chunk;  // (chunk rows, Sk): P and dS rounded to p.dtype
  for (int b = 0; b < p.batch; ++b) {
    for (int kvh = 0; kvh < p.kv_heads; ++kvh) {
      const std::size_t kv0 = (static_cast<std::size_t>(b) * p.kv_heads + kvh) * Sk * d;
      const int h0 = kvh * p.group_size(), rows = p.group_size() * Sq;
      std::vector<float> dk(static_cast<std::size_t>(Sk) * d, 0.0f), dv(dk.size(), 0.0f);
      // Row r of the group: query row r % Sq of head h0 + r / Sq; `first` its offset in Q, dO, dQ.
      auto row_start = [&](int r) {
        return ((static_cast<std::size_t>(b) * p.heads + h0 + r / Sq) * Sq + r % Sq) * d;
      };
      for (int r0 = 0; r0 < rows; r0 += kChunk) {
        const int n = std::min(kChunk, rows - r0);
        p_chunk.assign(static_cast<std::size_t>(n) * Sk, 0.0f);
        ds_chunk.assign(p_chunk.size(), 0.0f);
#pragma omp parallel
        {
        std::vector<float> s(Sk), dtanh(Sk, 1.0f), o(d), dq(d);  // this thread's
#pragma omp for schedule(dynamic, 16)
        for (int r = r0; r < r0 + n; ++r) {
          const int h = h0 + r / Sq, i = r % Sq;
          const float* q_i = &q[row_start(r)];
          const float* do_i = &dout[row_start(r)];
          float* p_row = &p_chunk[static_cast<std::size_t>(r - r0) * Sk];
          float* ds_row = &ds_chunk[static_cast<std::size_t>(r - r0) * Sk];
          std::fill(o.begin(), o.end(), 0.0f);
          std::fill(dq.begin(), dq.end(), 0.0f);
          float m = kNegInf;
          for (int j = 0; j < Sk; ++j) {
            float dot = 0.0f;
            for (int c = 0; c < d; ++c) dot += q_i[c] * k[kv0 + static_cast<std::size_t>(j) * d + c];
            const bool seen = p.visible(i, j) && (!visible || visible(b, h, i, j));
            float x = scale * dot;
            if (softcap > 0) {  // x -> c tanh(x / c), as same_precision_forward; its slope 1 - tanh^2 for dS
              const float t = std::tanh(x / softcap);
              x = softcap * t;
              dtanh[j] = 1.0f - t * t;
            }
            s[j] = seen ? x : kNegInf;
            m = std::max(m, s[j]);
          }
          if (m != kNegInf) {  // else no visible key: every gradient term of the row is 0
            float l = 0.0f;
            for (int j = 0; j < Sk; ++j) l += std::exp(s[j] - m);
            // The forward hands the backward LSE as a float32 (the API's [B, H, Sq] float tensor),
            // and the backward recomputes P = exp(S - LSE) from it, as every FlashAttention
            // backward does. At scores of size ~100 that one rounding of LSE (half an ulp of ~400:
            // 1.5e-5) is most of an fp32 backward's error in P, so the yardstick pays it too.
            const float lse = m + std::log(l);
            for (float& x : s) x = std::exp(x - lse);  // P_ij in float32
            for (int j = 0; j < Sk; ++j)
              for (int c = 0; c < d; ++c) o[c] += rd(s[j]) * v[kv0 + static_cast<std::size_t>(j) * d + c];
            float D_i = 0.0f;
            for (int c = 0; c < d; ++c) D_i += do_i[c] * rd(o[c]);
            for (int j = 0; j < Sk; ++j) {
              const float* v_j = &v[kv0 + static_cast<std::size_t>(j) * d];
              const float* k_j = &k[kv0 + static_cast<std::size_t>(j) * d];
              float dp = 0.0f;
              for (int c = 0; c < d; ++c) dp += do_i[c] * v_j[c];
              p_row[j] = rd(s[j]);
              ds_row[j] = rd(s[j] * (dp - D_i) * dtanh[j]);  // dS through the softcap's tanh
              for (int c = 0; c < d; ++c) dq[c] += ds_row[j] * k_j[c];
            }
          }
          for (int c = 0; c < d; ++c) out.dq[row_start(r) + c] = rd(scale * dq[c]);
        }
        }
#pragma omp parallel for schedule(static)
        for (int j = 0; j < Sk; ++j) {
          float* dk_j = &dk[static_cast<std::size_t>(j) * d];
          float* dv_j = &dv[static_cast<std::size_t>(j) * d];
          for (int r = r0; r < r0 + n; ++r) {
            const float p16 = p_chunk[static_cast<std::size_t>(r - r0) * Sk + j];
            const float ds16 = ds_chunk[static_cast<std::size_t>(r - r0) * Sk + j];
            if (p16 == 0.0f && ds16 == 0.0f) continue;  // adds exactly 0 (a hidden key, or an empty row)
            const float* q_r = &q[row_start(r)];
            const float* do_r = &dout[row_start(r)];
            for (int c = 0; c < d; ++c) {
              dv_j[c] += p16 * do_r[c];
              dk_j[c] += ds16 * q_r[c];
            }
          }
        }
      }
      for (std::size_t n = 0; n < dk.size(); ++n) {
        out.dk[kv0 + n] = rd(scale * dk[n]);
        out.dv[kv0 + n] = rd(dv[n]);
      }
    }
  }
  return out;
}

std::string GradientRule::summary() const {
  std::ostringstream s;
  s.precision(3);
  s << name << " same-precision rule: " << (pass() ? "PASS" : "FAIL") << "  kernel max_abs " << kernel_max_abs
    << " <= 2 x plain " << baseline_max_abs << " + " << slack << " = " << bound();
  return s.str();
}

std::string BackwardCheck::summary() const {
  std::string s = dq.summary() + "\n" + dk.summary() + "\n" + dv.summary();
  for (const GradientRule& r : same_precision) s += "\n" + r.summary();
  return s;
}

namespace {

double max_abs_diff(const std::vector<double>& a, const std::vector<double>& b) {
  double m = 0;
  for (std::size_t n = 0; n < a.size(); ++n) m = std::max(m, std::abs(a[n] - b[n]));
  return m;
}

double max_abs(const std::vector<double>& a) {
  double m = 0;
  for (double x : a) m = std::max(m, std::abs(x));
  return m;
}

}  // namespace

BackwardYardsticks backward_yardsticks(const Problem& p, const HostInputs& in, const std::vector<float>& dout,
                                       const VisibleFn& visible) {
  // Every dtype, f32 included (there the yardstick is a plain fp32 backward).
  return {reference_backward(p, in.q, in.k, in.v, dout, visible),
          same_precision_backward(p, in.q, in.k, in.v, dout, visible), score_rounding(p, in.q, in.k)};
}

BackwardCheck check_backward(const Problem& p, const HostInputs& in, const std::vector<float>& dout,
                             const std::vector<std::uint8_t>& dq_bytes,
                             const std::vector<std::uint8_t>& dk_bytes,
                             const std::vector<std::uint8_t>& dv_bytes, const VisibleFn& visible) {
  return check_backward(p, backward_yardsticks(p, in, dout, visible), dq_bytes, dk_bytes, dv_bytes);
}

BackwardCheck check_backward(const Problem& p, const BackwardYardsticks& y, const std::vector<std::uint8_t>& dq_bytes,
                             const std::vector<std::uint8_t>& dk_bytes, const std::vector<std::uint8_t>& dv_bytes) {
  const ReferenceBackward& ref = y.ref;
  const ReferenceBackward& plain = y.plain;
  const std::array<int, 4> q_dims{p.batch, p.heads, p.seqlen_q, p.head_dim};
  const std::array<int, 4> kv_dims{p.batch, p.kv_heads, p.seqlen_k, p.head_dim};
  {
    // The slack. compare.h's kSamePrecisionSlack (1e-5) covers outputs of size 1 whose plain
    // error is ~0. Gradients are sums whose size follows the shape (up to ~80 here), and one case
    // needs more: with Sk = 1, P = 1 and O = V exactly, so dS = dP - D_i is 0 in exact arithmetic
    // and in the plain implementation (dP and D_i are then the same dot product in the same
    // order), but only fp32 noise of size u * |dO| |V| sqrt(D) in the kernel, whose dP (mma) and
    // D_i (a warp sum) add in other orders; summed over the rows into dK that reaches ~1e-5.
    // So the slack is 1e-5 per unit of the largest gradient of the case, as the f32 tolerance's
    // floor is (above): still ~100x below the 2^-8 relative step of a bf16 gradient. The scores'
    // own fp32 rounding (compare.h: score_rounding) adds to it per unit too: a relative error of P.
  }
  const double slack = (kSamePrecisionSlack + y.score_rounding) *
                       std::max({1.0, max_abs(ref.dq), max_abs(ref.dk), max_abs(ref.dv)});
  // As in check_forward (forward_check.cpp): where the plain backward itself exceeds the
  // element-wise f32 ceiling (scores of size ~100), the ceiling's absolute part becomes the rule's
  // bound. f16/bf16 ceilings are the largest double already.
  auto tolerance = [&](const std::vector<double>& want, const std::vector<double>& plain_grad) {
    Tolerance t = gradient_tolerance(p.dtype, want);
    t.atol = std::max(t.atol, 2.0 * max_abs_diff(plain_grad, want) + slack);
    return t;
  };
  BackwardCheck c{compare("dQ", dq_bytes, p.dtype, ref.dq, q_dims, tolerance(ref.dq, plain.dq)),
                  compare("dK", dk_bytes, p.dtype, ref.dk, kv_dims, tolerance(ref.dk, plain.dk)),
                  compare("dV", dv_bytes, p.dtype, ref.dv, kv_dims, tolerance(ref.dv, plain.dv)),
                  {}};
  c.same_precision = {{"dQ", c.dq.max_abs, max_abs_diff(plain.dq, ref.dq), slack},
                      {"dK", c.dk.max_abs, max_abs_diff(plain.dk, ref.dk), slack},
                      {"dV", c.dv.max_abs, max_abs_diff(plain.dv, ref.dv), slack}};
  return c;
}

}  // namespace fa
