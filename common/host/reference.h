// The CPU reference every chapter is checked against: plain attention with Eigen, float64
// throughout (inputs are widened from their float values, every product and sum is double).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "common/host/problem.h"

namespace fa {

// An extra visibility rule on top of causal masking and the sliding window (Problem::visible):
// chapter 07 passes its block mask here, expanded to elements. Empty means every key is visible
// (subject to those two).
using VisibleFn = std::function<bool(int b, int h, int i, int j)>;

struct ReferenceForward {
  std::vector<double> o;    // [B, H, Sq, D]
  std::vector<double> lse;  // [B, H, Sq], natural log; +inf where a row sees no key
};

struct ReferenceBackward {
  std::vector<double> dq;  // [B, H, Sq, D]
  std::vector<double> dk;  // [B, Hkv, Sk, D], summed over the H / Hkv query heads sharing it
  std::vector<double> dv;  // [B, Hkv, Sk, D]
};

// What inference kernels (llama.cpp's, Gemma's) do to the scores besides masking. None by
// default. Chapter 10 (10_decoding: forward_with_options, forward_with_cache and the paged-cache
// step) takes all three; the reference and the same-precision yardstick have them so that its
// kernels are checked against them. With s_ij = scale Q_i . K_j, in this order:
//   softcap > 0    s_ij = softcap tanh(s_ij / softcap)          (Gemma 2's logit softcap)
//   alibi_slopes   s_ij += m_h (j - i')  with one slope m_h per query head and i' = i + Sk - Sq, the
//                  query's position among the keys (bottom-right, as causal masking aligns it):
//                  ALiBi's linear bias, 0 on the diagonal and more negative the farther back j lies
//   sink_logits    one logit sigma_h per query head that joins every row's softmax denominator
//                  and nothing else (an attention sink): P_ij = e^s_ij / (sum_j e^s_ij + e^sigma_h),
//                  LSE_i = log(sum_j e^s_ij + e^sigma_h), so P's row sums to 1 - e^(sigma_h - LSE_i);
//                  a row that sees no key gets O = 0 and LSE = sigma_h instead of +inf.
// Empty vectors and softcap = 0 mean off. Anything else is checked: softcap finite and >= 0, one
// slope and one sink per query head, all finite (std::invalid_argument otherwise).
struct ScoreOptions {
  double softcap = 0;
  std::vector<float> alibi_slopes;  // [H] or empty
  std::vector<float> sink_logits;   // [H] or empty
};

// The checks above, for the reference and for the kernels that take the options (chapter 10):
// std::invalid_argument("<who>: ...") naming what is wrong.
void check_score_options(const Problem& p, const ScoreOptions& o, const std::string& who);

// The score options a problem carries itself (Problem::softcap) joined to `options`, those a caller
// names beside the problem (chapter 10's forward_with_options). Every yardstick below (the forwards,
// the backward, 08's same_precision_backward) applies this, so a softcap problem is checked against
// softcapped references wherever it goes. A softcap set in both must be the same one
// (std::invalid_argument otherwise).
ScoreOptions problem_score_options(const Problem& p, ScoreOptions options = {});

ReferenceForward reference_forward(const Problem& p, const std::vector<float>& q,
                                   const std::vector<float>& k, const std::vector<float>& v,
                                   const VisibleFn& visible = {}, const ScoreOptions& options = {});

// A plain same-precision implementation, the yardstick of FlashAttention's tolerance rule (for
// f32 rounding to p.dtype changes nothing: a plain fp32 implementation): inputs as given (already rounded to p.dtype), S and the softmax in float32, P
// rounded to p.dtype, O = P V accumulated in float32 and rounded to p.dtype. LSE is float32.
// Returned as double so it compares with the reference like a kernel's output does. `visible`
// is reference_forward's extra rule (chapter 07's block masks); `options` its score options, applied
// in float in the same order.
ReferenceForward same_precision_forward(const Problem& p, const std::vector<float>& q,
                                        const std::vector<float>& k, const std::vector<float>& v,
                                        const VisibleFn& visible = {}, const ScoreOptions& options = {});

// The float64 forward of the scores an fp32 kernel computes, for grading an fp32 backward on
// its own (without a forward chapter). 05's forward and 08's fp32 backward both form
// S_ij = Q_i . K_j in float32 as one fmaf chain over d = 0 .. D-1 (the same bits in both), and
// take exp2(S_ij * scale_log2 - LSE_i log2(e)) with scale_log2 = float(scale * log2(e)). This
// forms those same float scores, bit for bit, and does the rest in double: the softmax of
// S_ij * scale_log2 * ln(2), its LSE and O = P V. So P = exp(scale S - LSE) in the backward is
// exact to the float rounding of the stored LSE, as it is after 05's forward. With the exact
// reference's LSE instead, P carries each score's float rounding (scores ~150: ~1e-5 of P), which
// missed the f32 rule in 4 of 08's large-logit cases on the H100. A softcap (Problem::softcap) is
// taken in double on those scores, softcap tanh(S_ij * scale_log2 * ln(2) / softcap): a kernel's
// own tanh rounding is not modelled. f32 problems only.
ReferenceForward fp32_score_forward(const Problem& p, const std::vector<float>& q, const std::vector<float>& k,
                                    const std::vector<float>& v, const VisibleFn& visible = {});

// A varlen problem's forward (Problem::cu_seqlens_q, cu_seqlens_k), one sequence at a time:
// `forward` runs on sequence b as sequence_problem(p, b) with its rows of q, k and v
// ([1, H, len_q, D] and [1, Hkv, len_k, D]), and its O and LSE go to that sequence's rows of the
// packed [1, H, total_q, Dv] and [1, H, total_q]. A sequence with queries but no keys gets O = 0
// and LSE = +inf (problem.h), or LSE = sigma_h with options.sink_logits; one without queries adds
// nothing. reference_forward, same_precision_forward and fp32_score_forward run a varlen problem
// through it, with their VisibleFn seeing the packed problem's coordinates (b = 0, i and j
// counted from the first packed row).
using SequenceForward = std::function<ReferenceForward(const Problem& sequence, int b, const std::vector<float>& q,
                                                       const std::vector<float>& k, const std::vector<float>& v)>;
ReferenceForward varlen_forward(const Problem& p, const std::vector<float>& q, const std::vector<float>& k,
                                const std::vector<float>& v, const SequenceForward& forward,
                                const ScoreOptions& options = {});

// A varlen problem's backward, one sequence at a time: `backward` runs on sequence b as
// sequence_problem(p, b) with its rows of q, k, v and dout ([1, H, len_q, D] and [1, Hkv, len_k, D]);
// its dQ goes to that sequence's query rows of the packed [1, H, total_q, D], its dK and dV to its
// key rows of the packed [1, Hkv, total_k, D]. A sequence without queries leaves dK = dV = 0 on its
// keys, one without keys dQ = 0 on its queries (every P_ij of theirs is 0, with or without a sink);
// `backward` runs on neither. reference_backward and same_precision_backward
// (08_backward/harness/backward_check.h) run a varlen problem through it, with their VisibleFn
// seeing the packed problem's coordinates (sequence_visible).
using SequenceBackward =
    std::function<ReferenceBackward(const Problem& sequence, int b, const std::vector<float>& q, const std::vector<float>& k,
                                    const std::vector<float>& v, const std::vector<float>& dout)>;
ReferenceBackward varlen_backward(const Problem& p, const std::vector<float>& q, const std::vector<float>& k,
                                  const std::vector<float>& v, const std::vector<float>& dout,
                                  const SequenceBackward& backward);

// `visible` of varlen problem p's sequence b, in the sequence's own coordinates: the packed
// problem's rule at (0, h, cu_seqlens_q[b] + i, cu_seqlens_k[b] + j). Empty stays empty.
VisibleFn sequence_visible(const VisibleFn& visible, const Problem& p, int b);

// dQ, dK, dV of L = sum(dO o O) for reference_forward's O, with the same visibility rules and score
// options (the softcap's tanh differentiated through: dS_raw = dS (1 - tanh(x / softcap)^2)). A
// varlen problem runs through varlen_backward, the options applied within each sequence as
// reference_forward applies them.
ReferenceBackward reference_backward(const Problem& p, const std::vector<float>& q,
                                     const std::vector<float>& k, const std::vector<float>& v,
                                     const std::vector<float>& dout,
                                     const VisibleFn& visible = {}, const ScoreOptions& options = {});

}  // namespace fa
