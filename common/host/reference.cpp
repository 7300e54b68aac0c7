#include "common/host/reference.h"

#include "common/device/constants.h"
#include "common/host/host_data.h"

#include <Eigen/Dense>
#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

namespace fa {
namespace {

using Matrix = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using FloatMap = Eigen::Map<const Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>;

constexpr double kInf = std::numeric_limits<double>::infinity();

// Rows first .. first + count - 1 of one (b, h) slice of a [B, heads, rows, D] tensor, widened
// to double; without them, the whole slice.
Matrix slice(const std::vector<float>& t, int b, int h, int heads, int rows, int d, int first = 0, int count = -1) {
  const std::size_t offset = ((static_cast<std::size_t>(b) * heads + h) * rows + first) * d;
  return FloatMap(t.data() + offset, count < 0 ? rows : count, d).cast<double>();
}

// P = softmax(scale * Q K^T) with invisible entries exactly 0, and LSE per row; `options`
// (reference.h) change the scores and add a sink to the denominator. A row with no visible key
// gets P = 0 and LSE = +inf (see problem.h), or LSE = sigma_h with a sink. `q` holds query rows
// row0, row0 + 1, ... of head (b, h) (all of them, or a block of them).
void softmax_rows(const Problem& p, int b, int h, const Matrix& q, const Matrix& k,
                  const VisibleFn& visible, Matrix& prob, Eigen::VectorXd& lse,
                  const ScoreOptions& options = {}, int row0 = 0) {
  Matrix s = static_cast<double>(p.scale()) * (q * k.transpose());  // (rows, Sk)
  const double slope = options.alibi_slopes.empty() ? 0.0 : options.alibi_slopes[h];
  const double sink = options.sink_logits.empty() ? -kInf : options.sink_logits[h];
  const int rows = static_cast<int>(q.rows());
  prob.setZero(rows, p.seqlen_k);
  lse.resize(rows);
  for (int r = 0; r < rows; ++r) {
    const int i = row0 + r;  // the query row, for the masks
    double m = sink;  // -inf without a sink
    for (int j = 0; j < p.seqlen_k; ++j) {
      const bool seen = p.visible(i, j) &&
                        (!visible || visible(b, h, i, j));
      if (!seen) {
        s(r, j) = -kInf;
        continue;
      }
      if (options.softcap > 0) s(r, j) = options.softcap * std::tanh(s(r, j) / options.softcap);
      s(r, j) += slope * (j - (i + p.seqlen_k - p.seqlen_q));
      m = std::max(m, s(r, j));
    }
    if (m == -kInf) {  // no visible key and no sink
      lse(r) = kInf;
      continue;
    }
    double l = sink == -kInf ? 0.0 : std::exp(sink - m);  // the sink's share of the denominator
    for (int j = 0; j < p.seqlen_k; ++j) {
      prob(r, j) = s(r, j) == -kInf ? 0.0 : std::exp(s(r, j) - m);  // max-subtracted: no overflow
      l += prob(r, j);
    }
    prob.row(r) /= l;
    lse(r) = m + std::log(l);
  }
}


void check_sizes(const Problem& p, const std::vector<float>& q, const std::vector<float>& k,
                 const std::vector<float>& v) {
  p.validate();
  if (static_cast<std::int64_t>(q.size()) != p.q_elems() ||
      static_cast<std::int64_t>(k.size()) != p.kv_elems() ||
      static_cast<std::int64_t>(v.size()) != p.v_elems())
    throw std::invalid_argument("reference: tensor sizes do not match " + p.describe());
}

// Rows first .. first + count - 1 of every head of a [1, heads, rows, dim] tensor: one sequence's
// slice of a packed varlen tensor, as [1, heads, count, dim].
std::vector<float> sequence_rows(const std::vector<float>& t, int heads, int rows, int dim, int first, int count) {
  std::vector<float> out(static_cast<std::size_t>(heads) * count * dim);
  for (int h = 0; h < heads; ++h)
    std::copy_n(t.begin() + (static_cast<std::ptrdiff_t>(h) * rows + first) * dim, static_cast<std::size_t>(count) * dim,
                out.begin() + static_cast<std::ptrdiff_t>(h) * count * dim);
  return out;
}

// Copies the [1, heads, count, dim] tensor `from` (one sequence's rows) to rows first ..
// first + count - 1 of every head of the [1, heads, rows, dim] tensor `to`: sequence_rows' inverse.
void scatter_rows(const std::vector<double>& from, int heads, int rows, int dim, int first, int count,
                  std::vector<double>& to) {
  for (int h = 0; h < heads; ++h)
    std::copy_n(from.begin() + static_cast<std::ptrdiff_t>(h) * count * dim, static_cast<std::size_t>(count) * dim,
                to.begin() + (static_cast<std::ptrdiff_t>(h) * rows + first) * dim);
}

// One thread's buffers for a row of fp32_score_forward or same_precision_forward (T: their sum type).
template <class T>
struct RowBuffers {
  std::vector<T> s, acc;  // the row's scores, then probabilities; its output accumulators
  explicit RowBuffers(const Problem& p) : s(p.seqlen_k), acc(p.dv()) {}
};

// Calls row(b, h, i, kv_slice, row0, buffers) for every query row i of every (b, h), in parallel
// over all of them, so that one long head (4,096 x 4,096) takes every thread too. kv_slice: the
// (b, kv head) of K and V; row0: the first row of (b, h) in Q, O and LSE. A row runs in one
// thread, its sums in key order: the same bits at any thread count.
template <class T, class Row>
void for_each_row(const Problem& p, Row&& row) {
#pragma omp parallel
  {
    RowBuffers<T> buffers(p);  // this thread's
#pragma omp for collapse(3) schedule(dynamic, 8)
    for (int b = 0; b < p.batch; ++b)
      for (int h = 0; h < p.heads; ++h)
        for (int i = 0; i < p.seqlen_q; ++i)
          row(b, h, i, static_cast<std::size_t>(b) * p.kv_heads + h / p.group_size(),
              (static_cast<std::size_t>(b) * p.heads + h) * p.seqlen_q, buffers);
  }
}

}  // namespace

VisibleFn sequence_visible(const VisibleFn& visible, const Problem& p, int b) {
  if (!visible) return {};
  return [visible, q0 = p.cu_seqlens_q.at(b), k0 = p.cu_seqlens_k.at(b)](int, int h, int i, int j) {
    return visible(0, h, q0 + i, k0 + j);
  };
}

void check_score_options(const Problem& p, const ScoreOptions& o, const std::string& who) {
  auto fail = [&](const std::string& what) { throw std::invalid_argument(who + ": " + what); };
  if (!(std::isfinite(o.softcap) && o.softcap >= 0)) fail("softcap must be finite and >= 0 (0: off)");
  for (const auto* list : {&o.alibi_slopes, &o.sink_logits}) {
    const char* name = list == &o.alibi_slopes ? "alibi_slopes" : "sink_logits";
    if (!list->empty() && static_cast<int>(list->size()) != p.heads)
      fail(std::string(name) + " needs one value per query head (" + std::to_string(p.heads) + "), got " +
           std::to_string(list->size()));
    for (float x : *list)
      if (!std::isfinite(x)) fail(std::string(name) + " must be finite");
  }
}

ScoreOptions problem_score_options(const Problem& p, ScoreOptions options) {
  if (!p.has_softcap()) return options;
  if (options.softcap > 0 && options.softcap != static_cast<double>(p.softcap))
    throw std::invalid_argument("score options: softcap " + std::to_string(options.softcap) +
                                " beside the problem's own softcap " + std::to_string(p.softcap) + ": give one");
  options.softcap = p.softcap;
  return options;
}

ReferenceForward reference_forward(const Problem& p, const std::vector<float>& q,
                                   const std::vector<float>& k, const std::vector<float>& v,
                                   const VisibleFn& visible, const ScoreOptions& given) {
  check_sizes(p, q, k, v);
  const ScoreOptions options = problem_score_options(p, given);
  check_score_options(p, options, "reference");
  if (p.is_varlen())
    return varlen_forward(
        p, q, k, v,
        [&](const Problem& s, int b, const std::vector<float>& qs, const std::vector<float>& ks,
            const std::vector<float>& vs) { return reference_forward(s, qs, ks, vs, sequence_visible(visible, p, b), options); },
        options);
  ReferenceForward out{std::vector<double>(p.o_elems()), std::vector<double>(p.lse_elems())};
  const int d = p.head_dim, dv = p.dv();
  // Parallel over (b, h, block of query rows): a long head (4,096 x 4,096, or 8 million rows
  // over two keys) takes every thread, and only a block's scores are held at a time. Each output
  // element comes from its own row alone, so the blocks change nothing but speed and memory.
  constexpr int kRowBlock = 256;
  const int blocks = (p.seqlen_q + kRowBlock - 1) / kRowBlock;
#pragma omp parallel for collapse(3) schedule(dynamic)
  for (int b = 0; b < p.batch; ++b) {
    for (int h = 0; h < p.heads; ++h) {
      for (int blk = 0; blk < blocks; ++blk) {
        const int kvh = h / p.group_size();
        const int first = blk * kRowBlock, count = std::min(kRowBlock, p.seqlen_q - first);
        Matrix prob;
        Eigen::VectorXd lse;
        softmax_rows(p, b, h, slice(q, b, h, p.heads, p.seqlen_q, d, first, count),
                     slice(k, b, kvh, p.kv_heads, p.seqlen_k, d), visible, prob, lse, options, first);
        const Matrix o = prob * slice(v, b, kvh, p.kv_heads, p.seqlen_k, dv);  // (count, Dv)
        const std::size_t row0 = (static_cast<std::size_t>(b) * p.heads + h) * p.seqlen_q + first;
        for (int r = 0; r < count; ++r) {
          out.lse[row0 + r] = lse(r);
          for (int c = 0; c < dv; ++c) out.o[(row0 + r) * dv + c] = o(r, c);
        }
      }
    }
  }
  return out;
}

ReferenceForward fp32_score_forward(const Problem& p, const std::vector<float>& q, const std::vector<float>& k,
                                    const std::vector<float>& v, const VisibleFn& visible) {
  check_sizes(p, q, k, v);
  if (p.dtype != Dtype::f32) throw std::invalid_argument("fp32_score_forward: f32 problems only, got " + p.describe());
  const double softcap = problem_score_options(p).softcap;  // 0: off
  if (p.is_varlen())
    return varlen_forward(p, q, k, v,
                          [&](const Problem& s, int b, const std::vector<float>& qs, const std::vector<float>& ks,
                              const std::vector<float>& vs) {
                            return fp32_score_forward(s, qs, ks, vs, sequence_visible(visible, p, b));
                          });
  ReferenceForward out{std::vector<double>(p.o_elems()), std::vector<double>(p.lse_elems())};
  const int d = p.head_dim, dv = p.dv();
  const float scale_log2 = p.scale() * cuda::kLog2e;                  // rounded as the kernels round it
  const double scale = static_cast<double>(scale_log2) * cuda::kLn2D;  // back to natural-log units
  for_each_row<double>(p, [&](int b, int h, int i, std::size_t kv_slice, std::size_t row0, RowBuffers<double>& buf) {
    std::vector<double>& s = buf.s;
    std::vector<double>& acc = buf.acc;
    const std::size_t kv0 = kv_slice * p.seqlen_k * d, v0 = kv_slice * p.seqlen_k * dv;
    const float* q_i = &q[(row0 + i) * d];
    double m = -kInf;
    for (int j = 0; j < p.seqlen_k; ++j) {
      const float* k_j = &k[kv0 + static_cast<std::size_t>(j) * d];
      float dot = 0.0f;
      for (int c = 0; c < d; ++c) dot = std::fmaf(q_i[c], k_j[c], dot);  // the kernels' chain, same bits
      const bool seen = p.visible(i, j) &&
                        (!visible || visible(b, h, i, j));
      double x = scale * dot;
      if (softcap > 0) x = softcap * std::tanh(x / softcap);
      s[j] = seen ? x : -kInf;
      m = std::max(m, s[j]);
    }
    if (m == -kInf) {  // no visible key (problem.h): O row stays 0
      out.lse[row0 + i] = kInf;
      return;
    }
    double l = 0;
    for (int j = 0; j < p.seqlen_k; ++j) l += (s[j] = s[j] == -kInf ? 0.0 : std::exp(s[j] - m));
    std::fill(acc.begin(), acc.end(), 0.0);
    for (int j = 0; j < p.seqlen_k; ++j) {
      if (s[j] == 0.0) continue;
      for (int c = 0; c < dv; ++c) acc[c] += s[j] * v[v0 + static_cast<std::size_t>(j) * dv + c];
    }
    out.lse[row0 + i] = m + std::log(l);
    for (int c = 0; c < dv; ++c) out.o[(row0 + i) * dv + c] = acc[c] / l;
  });
  return out;
}

ReferenceForward same_precision_forward(const Problem& p, const std::vector<float>& q,
                                        const std::vector<float>& k, const std::vector<float>& v,
                                        const VisibleFn& visible, const ScoreOptions& given) {
  check_sizes(p, q, k, v);
  const ScoreOptions options = problem_score_options(p, given);
  check_score_options(p, options, "reference");
  if (p.is_varlen())
    return varlen_forward(
        p, q, k, v,
        [&](const Problem& s, int b, const std::vector<float>& qs, const std::vector<float>& ks,
            const std::vector<float>& vs) { return same_precision_forward(s, qs, ks, vs, sequence_visible(visible, p, b), options); },
        options);
  ReferenceForward out{std::vector<double>(p.o_elems()), std::vector<double>(p.lse_elems())};
  const int d = p.head_dim, dv = p.dv();
  const float scale = p.scale();
  const float softcap = static_cast<float>(options.softcap);
  constexpr float kInfF = std::numeric_limits<float>::infinity();
  for_each_row<float>(p, [&](int b, int h, int i, std::size_t kv_slice, std::size_t row0, RowBuffers<float>& buf) {
    std::vector<float>& s = buf.s;
    std::vector<float>& acc = buf.acc;
    const std::size_t kv0 = kv_slice * p.seqlen_k * d, v0 = kv_slice * p.seqlen_k * dv;
    const float slope = options.alibi_slopes.empty() ? 0.0f : options.alibi_slopes[h];
    const float sink = options.sink_logits.empty() ? -kInfF : options.sink_logits[h];
    const float* q_i = &q[(row0 + i) * d];
    float m = sink;  // the options as reference.h orders them, in float
    for (int j = 0; j < p.seqlen_k; ++j) {
      float dot = 0.0f;
      for (int c = 0; c < d; ++c) dot += q_i[c] * k[kv0 + static_cast<std::size_t>(j) * d + c];
      const bool seen = p.visible(i, j) &&
                        (!visible || visible(b, h, i, j));
      float x = scale * dot;
      if (softcap > 0) x = softcap * std::tanh(x / softcap);
      x += slope * static_cast<float>(j - (i + p.seqlen_k - p.seqlen_q));
      s[j] = seen ? x : -kInfF;
      m = std::max(m, s[j]);
    }
    if (m == -kInfF) {  // no visible key and no sink (problem.h)
      out.lse[row0 + i] = kInf;
      return;  // O row stays 0
    }
    float l = sink == -kInfF ? 0.0f : std::exp(sink - m);  // the sink's share of the denominator
    for (int j = 0; j < p.seqlen_k; ++j) l += (s[j] = std::exp(s[j] - m));
    std::fill(acc.begin(), acc.end(), 0.0f);
    for (int j = 0; j < p.seqlen_k; ++j) {
      const float p_ij = round_to_dtype(s[j] / l, p.dtype);  // P in the input dtype
      for (int c = 0; c < dv; ++c) acc[c] += p_ij * v[v0 + static_cast<std::size_t>(j) * dv + c];
    }
    for (int c = 0; c < dv; ++c) out.o[(row0 + i) * dv + c] = round_to_dtype(acc[c], p.dtype);
    out.lse[row0 + i] = m + std::log(l);
  });
  return out;
}

ReferenceForward varlen_forward(const Problem& p, const std::vector<float>& q, const std::vector<float>& k,
                                const std::vector<float>& v, const SequenceForward& forward,
                                const ScoreOptions& given) {
  check_sizes(p, q, k, v);
  const ScoreOptions options = problem_score_options(p, given);
  check_score_options(p, options, "varlen_forward");
  if (!p.is_varlen()) throw std::invalid_argument("varlen_forward: not a varlen problem, got " + p.describe());
  ReferenceForward out{std::vector<double>(p.o_elems()), std::vector<double>(p.lse_elems())};
  const int dv = p.dv();
  for (int b = 0; b < p.varlen_batch(); ++b) {
    const Problem s = sequence_problem(p, b);
    const int q0 = p.cu_seqlens_q[b], k0 = p.cu_seqlens_k[b];
    if (s.seqlen_q == 0) continue;  // nothing to write
    if (s.seqlen_k == 0) {  // every row sees no key: O stays 0, LSE as problem.h (or reference.h, a sink) says
      for (int h = 0; h < p.heads; ++h)
        std::fill_n(out.lse.begin() + static_cast<std::ptrdiff_t>(h) * p.seqlen_q + q0, s.seqlen_q,
                    options.sink_logits.empty() ? kInf : static_cast<double>(options.sink_logits[h]));
      continue;
    }
    const ReferenceForward r =
        forward(s, b, sequence_rows(q, p.heads, p.seqlen_q, p.head_dim, q0, s.seqlen_q),
                sequence_rows(k, p.kv_heads, p.seqlen_k, p.head_dim, k0, s.seqlen_k),
                sequence_rows(v, p.kv_heads, p.seqlen_k, dv, k0, s.seqlen_k));
    for (int h = 0; h < p.heads; ++h) {  // [1, H, len_q, ...] into rows q0 .. of [1, H, total_q, ...]
      const std::ptrdiff_t from = static_cast<std::ptrdiff_t>(h) * s.seqlen_q, to = static_cast<std::ptrdiff_t>(h) * p.seqlen_q + q0;
      std::copy_n(r.lse.begin() + from, s.seqlen_q, out.lse.begin() + to);
      std::copy_n(r.o.begin() + from * dv, static_cast<std::size_t>(s.seqlen_q) * dv, out.o.begin() + to * dv);
    }
  }
  return out;
}

ReferenceBackward varlen_backward(const Problem& p, const std::vector<float>& q, const std::vector<float>& k,
                                  const std::vector<float>& v, const std::vector<float>& dout,
                                  const SequenceBackward& backward) {
  check_sizes(p, q, k, v);
  if (!p.is_varlen()) throw std::invalid_argument("varlen_backward: not a varlen problem, got " + p.describe());
  if (p.dv() != p.head_dim)
    throw std::invalid_argument("varlen_backward: V's head dim must be Q and K's, got " + p.describe());
  if (static_cast<std::int64_t>(dout.size()) != p.o_elems())
    throw std::invalid_argument("varlen_backward: dout size does not match " + p.describe());
  ReferenceBackward out{std::vector<double>(p.q_elems()), std::vector<double>(p.kv_elems()),
                        std::vector<double>(p.kv_elems())};
  const int d = p.head_dim;
  for (int b = 0; b < p.varlen_batch(); ++b) {
    const Problem s = sequence_problem(p, b);
    // No queries: no P_ij, so dK = dV = 0 on its keys; no keys: no P_ij either, so dQ = 0. Both
    // stay as `out` was made, zeros.
    if (s.seqlen_q == 0 || s.seqlen_k == 0) continue;
    const int q0 = p.cu_seqlens_q[b], k0 = p.cu_seqlens_k[b];
    const ReferenceBackward r =
        backward(s, b, sequence_rows(q, p.heads, p.seqlen_q, d, q0, s.seqlen_q),
                 sequence_rows(k, p.kv_heads, p.seqlen_k, d, k0, s.seqlen_k),
                 sequence_rows(v, p.kv_heads, p.seqlen_k, d, k0, s.seqlen_k),
                 sequence_rows(dout, p.heads, p.seqlen_q, d, q0, s.seqlen_q));
    scatter_rows(r.dq, p.heads, p.seqlen_q, d, q0, s.seqlen_q, out.dq);      // [1, H, len_q, D] into [1, H, total_q, D]
    scatter_rows(r.dk, p.kv_heads, p.seqlen_k, d, k0, s.seqlen_k, out.dk);   // [1, Hkv, len_k, D] into [1, Hkv, total_k, D]
    scatter_rows(r.dv, p.kv_heads, p.seqlen_k, d, k0, s.seqlen_k, out.dv);
  }
  return out;
}

ReferenceBackward reference_backward(const Problem& p, const std::vector<float>& q,
                                     const std::vector<float>& k, const std::vector<float>& v,
                                     const std::vector<float>& dout, const VisibleFn& visible,
                                     const ScoreOptions& given) {
  check_sizes(p, q, k, v);
  const ScoreOptions options = problem_score_options(p, given);
  check_score_options(p, options, "reference_backward");
  if (p.dv() != p.head_dim)
    throw std::invalid_argument("reference_backward: V's head dim must be Q and K's (no chapter's backward takes "
                                "another), got " + p.describe());
  if (static_cast<std::int64_t>(dout.size()) != p.o_elems())
    throw std::invalid_argument("reference: dout size does not match " + p.describe());
  if (p.is_varlen())
    return varlen_backward(p, q, k, v, dout,
                           [&](const Problem& s, int b, const std::vector<float>& qs, const std::vector<float>& ks,
                               const std::vector<float>& vs, const std::vector<float>& dos) {
                             return reference_backward(s, qs, ks, vs, dos, sequence_visible(visible, p, b), options);
                           });
  ReferenceBackward out{std::vector<double>(p.q_elems()), std::vector<double>(p.kv_elems()),
                        std::vector<double>(p.kv_elems())};
  const int d = p.head_dim;
  const double scale = p.scale();
  // Parallel over (b, kv head): the query heads of one group add into the same dK, dV. A problem of
  // one such slice leaves the threads to Eigen's matrix products.
#pragma omp parallel for collapse(2) schedule(dynamic) if (std::int64_t{p.batch} * p.kv_heads > 1)
  for (int b = 0; b < p.batch; ++b) {
    for (int kvh = 0; kvh < p.kv_heads; ++kvh) {
      const Matrix kj = slice(k, b, kvh, p.kv_heads, p.seqlen_k, d);
      const Matrix vj = slice(v, b, kvh, p.kv_heads, p.seqlen_k, d);
      Matrix dk = Matrix::Zero(p.seqlen_k, d), dv = Matrix::Zero(p.seqlen_k, d);
      for (int h = kvh * p.group_size(); h < (kvh + 1) * p.group_size(); ++h) {
        const Matrix qi = slice(q, b, h, p.heads, p.seqlen_q, d);
        const Matrix doi = slice(dout, b, h, p.heads, p.seqlen_q, d);
        Matrix prob;
        Eigen::VectorXd lse;
        softmax_rows(p, b, h, qi, kj, visible, prob, lse, options);
        const Matrix o = prob * vj;
        // dS = P o (dP - D), D_i = rowsum(dO_i o O_i) = rowsum(P_i o dP_i). A sink adds to the
        // denominator only (its value row is 0), so the rule holds with P as normalized; ALiBi's
        // bias is a constant.
        const Matrix dp = doi * vj.transpose();                      // (Sq, Sk)
        const Eigen::VectorXd di = (doi.array() * o.array()).rowwise().sum();
        Matrix ds = (prob.array() * (dp.colwise() - di).array()).matrix();
        if (options.softcap > 0) {  // s = c tanh(x / c), x = scale Q.K: ds/dx = 1 - tanh(x / c)^2
          const Eigen::ArrayXXd t = (static_cast<double>(p.scale()) * (qi * kj.transpose())).array() / options.softcap;
          ds = (ds.array() * (1.0 - t.tanh().square())).matrix();
        }
        dv += prob.transpose() * doi;
        dk += scale * ds.transpose() * qi;
        const Matrix dq = scale * ds * kj;
        const std::size_t q0 = (static_cast<std::size_t>(b) * p.heads + h) * p.seqlen_q * d;
        for (Eigen::Index n = 0; n < dq.size(); ++n) out.dq[q0 + n] = dq.data()[n];
      }
      const std::size_t k0 = (static_cast<std::size_t>(b) * p.kv_heads + kvh) * p.seqlen_k * d;
      for (Eigen::Index n = 0; n < dk.size(); ++n) {
        out.dk[k0 + n] = dk.data()[n];
        out.dv[k0 + n] = dv.data()[n];
      }
    }
  }
  return out;
}

}  // namespace fa
