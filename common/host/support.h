// What a chapter supports: the table its forward() refuses problems by (check_forward_args in
// chapter.h) and its executable's --help lists (cli.h). Plain C++, so the CPU tests see it.
#pragma once

#include <string>
#include <vector>

#include "common/host/problem.h"

namespace fa {

// What a chapter supports; its forward() checks its arguments against this.
struct Support {
  std::string chapter;            // "01_naive"
  std::vector<Dtype> dtypes;      // {Dtype::f32}
  std::vector<int> head_dims;     // exact list, or empty for "any head_dim up to max_head_dim"
  int max_head_dim = 0;
  int head_dim_multiple = 1;      // without a list: head_dim must be a multiple of this (8: 16-byte rows)
  // V's head dim where the chapter takes one other than Q and K's (Problem::head_dim_v; 512 under
  // Q.K's 576); 0: V's head dim must be head_dim's.
  int head_dim_v = 0;
  // The dtypes in which it takes Q, K, V and O as [B, S, H, D] too (Problem::layout ==
  // Layout::bshd; takes_bshd); empty: [B, H, S, D] only.
  std::vector<Dtype> bshd_dtypes = {};
  // The GPU it needs beyond the build's (90: a step that uses Hopper's copy engine); the GPU tests
  // skip, naming it, on an older GPU. 0: any GPU the chapter is built for.
  int min_compute_capability = 0;
  // Whether it takes a sliding window (Problem::window_left, window_right); false: refused.
  bool window = false;
  // Whether it takes a logit softcap (Problem::softcap: scores softcap tanh(x / softcap)); false:
  // refused.
  bool softcap = false;
  // Whether it reads Q, K and V through strides other than the layout's (Problem::q_input, k_input,
  // v_input: a fused QKV projection's slices), under Layout::bshd; false: refused.
  bool input_strides = false;
  // Whether it takes a packed varlen batch (Problem::cu_seqlens_q, cu_seqlens_k: sequences of
  // different lengths in one [1, total, H, D] tensor): the forward of the chapter this Support
  // belongs to, or its backward where it is a backward chapter's (BackwardChapter::support);
  // false: refused.
  bool varlen = false;
};

// Whether s takes dtype d's tensors as [B, S, H, D] (Layout::bshd).
inline bool takes_bshd(const Support& s, Dtype d) {
  for (Dtype listed : s.bshd_dtypes)
    if (listed == d) return true;
  return false;
}

// Whether s takes head dim d: the one rule check_forward_args, the test sweeps and --help use.
inline bool supports_head_dim(const Support& s, int d) {
  if (!s.head_dims.empty()) {
    for (int listed : s.head_dims)
      if (listed == d) return true;
    return false;
  }
  return d >= 1 && d <= s.max_head_dim && d % s.head_dim_multiple == 0;
}

// The supported head dims in words: "1..128", "multiples of 8 up to 256" or "64, 128".
inline std::string head_dims_words(const Support& s) {
  if (s.head_dims.empty())
    return s.head_dim_multiple == 1 ? "1.." + std::to_string(s.max_head_dim)
                                    : "multiples of " + std::to_string(s.head_dim_multiple) + " up to " +
                                          std::to_string(s.max_head_dim);
  std::string list;
  for (int d : s.head_dims) list += (list.empty() ? "" : ", ") + std::to_string(d);
  return list;
}

}  // namespace fa
