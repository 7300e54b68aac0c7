// The attention problem every chapter solves, and the facts about it that all chapters share.
//
//   O = softmax(scale * Q K^T + mask) V        per (batch, head)
//   Q, O: [B, H, Sq, D]     K, V: [B, Hkv, Sk, D]     LSE: [B, H, Sq]  (float, natural log)
//
// All tensors are contiguous in that order (Layout::bhsd); a chapter whose Support says so also takes
// Q, K, V and O as [B, S, H, D] (Layout::bhsd's transpose, PyTorch's usual attention layout; LSE stays
// [B, H, Sq]). GQA/MQA: query head h reads KV head h / (H / Hkv). A varlen problem (cu_seqlens_q,
// cu_seqlens_k) packs sequences of different lengths along the rows of one [1, total, H, D] tensor.
// This header compiles for host and device, so kernels use the same visibility rule as the
// reference.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#if defined(__CUDACC__)
#define FA_HOST_DEVICE __host__ __device__
#else
#define FA_HOST_DEVICE
#endif

namespace fa {

enum class Dtype { f32, f16, bf16 };

const char* dtype_name(Dtype dtype);
Dtype parse_dtype(const std::string& name);  // throws std::invalid_argument
constexpr std::size_t dtype_size(Dtype dtype) { return dtype == Dtype::f32 ? 4 : 2; }

// How Q, K, V and O lie in memory: [B, H, S, D] (bhsd, every chapter) or [B, S, H, D] (bshd, where a
// chapter's Support says so), contiguous either way.
enum class Layout { bhsd, bshd };
const char* layout_name(Layout layout);
Layout parse_layout(const std::string& name);  // throws std::invalid_argument

// One tensor's element strides between batches, heads and positions (rows); a row's D elements are
// contiguous. bhsd: (H S D, S D, D); bshd: (S H D, D, H D).
struct Strides {
  std::int64_t batch, head, row;
};
FA_HOST_DEVICE constexpr Strides layout_strides(Layout layout, int heads, int seqlen, int dim) {
  return layout == Layout::bshd ? Strides{std::int64_t{seqlen} * heads * dim, dim, std::int64_t{heads} * dim}
                                : Strides{std::int64_t{heads} * seqlen * dim, std::int64_t{seqlen} * dim, dim};
}
// Where row (position) i of slice bh = b * heads + h starts, in elements, in a tensor of strides s.
FA_HOST_DEVICE constexpr std::int64_t row_offset(const Strides& s, int heads, std::int64_t bh, std::int64_t i) {
  return bh / heads * s.batch + bh % heads * s.head + i * s.row;
}

struct Problem {
  int batch = 1;
  int heads = 1;     // query heads H
  int kv_heads = 1;  // key/value heads Hkv; H must be a multiple (GQA; Hkv == 1 is MQA)
  int seqlen_q = 128;
  int seqlen_k = 128;
  int head_dim = 64;
  // V's head dim (and so O's) where it differs from Q and K's: DeepSeek's MLA attends with 576 dims
  // for Q.K and 512 for V. 0: the same as head_dim. Only a chapter whose Support names it takes one
  // (support.h); the others refuse it.
  int head_dim_v = 0;
  bool causal = false;
  // A sliding window (Mistral, Gemma 2; FlashAttention's window_size): query i sees key j only if
  // i' - window_left <= j <= i' + window_right, with i' = i + Sk - Sq the query's position among
  // the keys (bottom-right aligned, as causal masking is). -1: no bound on that side. Under causal
  // masking as well, window_right > 0 adds nothing. Only a chapter whose Support says so takes one.
  int window_left = -1, window_right = -1;
  // Gemma 2's logit softcap (FlashAttention's softcap): each scaled score x = scale Q_i . K_j
  // becomes softcap tanh(x / softcap) before the softmax, so no score leaves (-softcap, softcap).
  // 0: off. Only a chapter whose Support says so takes one.
  float softcap = 0;
  std::optional<float> softmax_scale;  // unset: 1 / sqrt(head_dim)
  Dtype dtype = Dtype::f32;
  Layout layout = Layout::bhsd;  // Q, K, V and O; bshd only where the chapter's Support says so
  // Q's, K's and V's element strides where they are not the layout's, under Layout::bshd only: the
  // slices of a fused QKV projection ([B, S, 3, H, D]), whose rows lie 3 H D apart. O (and a
  // backward's dO, dQ, dK, dV) keep the layout's strides. Only a chapter whose Support says so
  // (input_strides) takes them; unset: the layout's.
  std::optional<Strides> q_input, k_input, v_input;
  // A packed batch of sequences of different lengths (FlashAttention's varlen): cumulative offsets,
  // B + 1 each, from 0 to seqlen_q (queries) and to seqlen_k (keys). Q, K, V and O are one
  // [1, total, H, D] tensor each (batch 1, Layout::bshd); sequence b's queries are rows
  // cu_seqlens_q[b] .. cu_seqlens_q[b+1] - 1 and see only its keys, cu_seqlens_k[b] ..
  // cu_seqlens_k[b+1] - 1, masked (causal, window) with its own lengths as sequence_problem(*this, b)
  // says. LSE is [1, H, total_q]. Empty: one plain [B, ...] problem. Only a chapter whose Support
  // says so (varlen) takes one.
  std::vector<int> cu_seqlens_q, cu_seqlens_k;

  float scale() const {
    return softmax_scale ? *softmax_scale : 1.0f / std::sqrt(static_cast<float>(head_dim));
  }
  FA_HOST_DEVICE bool has_window() const { return window_left >= 0 || window_right >= 0; }
  FA_HOST_DEVICE bool has_softcap() const { return softcap > 0.0f; }
  // Whether query i sees key j: causal masking and the window (not a chapter's block mask).
  FA_HOST_DEVICE bool visible(int i, int j) const;
  FA_HOST_DEVICE int group_size() const { return heads / kv_heads; }  // query heads per KV head
  FA_HOST_DEVICE int dv() const { return head_dim_v > 0 ? head_dim_v : head_dim; }  // V's and O's head dim
  // GQA/MQA: the (batch, KV head) slice b * Hkv + h / (H / Hkv) that slice bh = b * H + h reads.
  FA_HOST_DEVICE std::int64_t kv_index(std::int64_t bh) const { return bh / heads * kv_heads + bh % heads / group_size(); }

  FA_HOST_DEVICE std::int64_t q_elems() const { return std::int64_t{batch} * heads * seqlen_q * head_dim; }
  FA_HOST_DEVICE std::int64_t kv_elems() const { return std::int64_t{batch} * kv_heads * seqlen_k * head_dim; }  // K
  FA_HOST_DEVICE std::int64_t v_elems() const { return std::int64_t{batch} * kv_heads * seqlen_k * dv(); }
  FA_HOST_DEVICE std::int64_t o_elems() const { return std::int64_t{batch} * heads * seqlen_q * dv(); }
  FA_HOST_DEVICE std::int64_t lse_elems() const { return std::int64_t{batch} * heads * seqlen_q; }
  FA_HOST_DEVICE Strides q_strides() const { return layout_strides(layout, heads, seqlen_q, head_dim); }    // Q
  FA_HOST_DEVICE Strides kv_strides() const { return layout_strides(layout, kv_heads, seqlen_k, head_dim); }  // K
  FA_HOST_DEVICE Strides v_strides() const { return layout_strides(layout, kv_heads, seqlen_k, dv()); }
  FA_HOST_DEVICE Strides o_strides() const { return layout_strides(layout, heads, seqlen_q, dv()); }
  // Where Q, K and V are read from: their input strides where set, else the layout's.
  Strides q_read_strides() const { return q_input ? *q_input : q_strides(); }
  Strides k_read_strides() const { return k_input ? *k_input : kv_strides(); }
  Strides v_read_strides() const { return v_input ? *v_input : v_strides(); }
  bool has_input_strides() const { return q_input || k_input || v_input; }
  bool is_varlen() const { return !cu_seqlens_q.empty(); }
  // The number of sequences of a varlen problem (0 for any other).
  int varlen_batch() const { return is_varlen() ? static_cast<int>(cu_seqlens_q.size()) - 1 : 0; }

  // Throws std::invalid_argument naming the first field that is wrong.
  void validate() const;
  // "B=2 H=8/2 Sq=1024 Sk=1024 D=64 causal bf16", then what is on: " window=(127,0)",
  // " softcap=30"; varlen: "... bshd varlen q=1,129,0 k=64,236,1" (the lengths, up to four
  // sequences) or "... bshd varlen 5 seqs"
  std::string describe() const;
};

// Sequence b of varlen problem p on its own: batch 1, its query and key lengths (either may be 0),
// no cu_seqlens, every other field p's. Its rows are p's rows cu_seqlens_q[b] .. (queries) and
// cu_seqlens_k[b] .. (keys). Throws std::invalid_argument unless p is varlen and 0 <= b < B.
Problem sequence_problem(const Problem& p, int b);

// x as printf's %g writes it ("30", "0.5", "nan"), for messages. Not through a stream: inside the
// PyTorch extension, a stream's float output crashed in libstdc++'s codecvt (H200 machine, PyTorch
// 2.11).
std::string number_text(double x);

// The problem every chapter's executable runs when given no flags (and the tour's table uses):
// batch 4, 16 heads, seqlen 1024, head_dim 64, not causal.
Problem default_problem(Dtype dtype);

// Causal masking is bottom-right aligned (as in FlashAttention >= 2.1): when Sq != Sk the last
// query row lines up with the last key, so query i sees key j iff j <= i + (Sk - Sq).
// A query row that sees no key at all (possible when Sq > Sk, or under a block mask) has no
// softmax: by convention its output row is 0 and its LSE is +inf, so that the backward pass's
// P = exp(S - LSE) is exactly 0 there instead of NaN. Every chapter follows this convention.
FA_HOST_DEVICE constexpr bool causal_visible(int i, int j, int seqlen_q, int seqlen_k) {
  return j <= i + (seqlen_k - seqlen_q);
}

// The sliding window's rule (Problem::window_left, window_right; -1: unbounded on that side).
FA_HOST_DEVICE constexpr bool window_visible(int i, int j, int seqlen_q, int seqlen_k, int left, int right) {
  const int position = i + (seqlen_k - seqlen_q);  // the query's position among the keys
  return (left < 0 || j >= position - left) && (right < 0 || j <= position + right);
}

FA_HOST_DEVICE inline bool Problem::visible(int i, int j) const {
  return (!causal || causal_visible(i, j, seqlen_q, seqlen_k)) &&
         window_visible(i, j, seqlen_q, seqlen_k, window_left, window_right);
}

// Floating-point operations of one forward pass: two matrix products per head, 2*Sq*Sk*D for
// S = Q K^T and 2*Sq*Sk*Dv for O = P V (4*Sq*Sk*D when V's head dim is D's). For causal attention with Sq == Sk we count half, as FlashAttention's benchmarks do;
// for causal with Sq != Sk, and under a sliding window, we count the visible (i, j) pairs exactly.
// A varlen problem counts the sum of its sequences' (sequence_problem).
double forward_flops(const Problem& p);
// The backward pass does five matrix products against the forward's two: 2.5x.
double backward_flops(const Problem& p);
// The fewest bytes a forward pass must move: Q, K, V read once, O and LSE written once.
double forward_min_bytes(const Problem& p);

}  // namespace fa
