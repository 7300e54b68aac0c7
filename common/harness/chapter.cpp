#include "common/harness/chapter.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "common/cuda/cuda_check.h"

namespace fa {

std::string unavailable_reason(const Support& s) {
  const std::string reason = cuda::unavailable_reason();
  if (!reason.empty()) return reason;
  const int min_cc = s.min_compute_capability;
  if (min_cc > 0 && cuda::compute_capability() < min_cc)
    return s.chapter + " needs compute capability " + std::to_string(min_cc / 10) + "." + std::to_string(min_cc % 10) +
           " or newer";
  return "";
}

void check_forward_args(const Support& s, const Problem& p, const void* q, const void* k,
                        const void* v, const void* o, const void* lse) {
  auto fail = [&](const std::string& what) { throw std::invalid_argument(s.chapter + ": " + what); };
  try {
    p.validate();
  } catch (const std::invalid_argument& e) {
    fail(e.what());
  }
  if (std::find(s.dtypes.begin(), s.dtypes.end(), p.dtype) == s.dtypes.end()) {
    std::string list;
    for (Dtype d : s.dtypes) list += std::string(list.empty() ? "" : ", ") + dtype_name(d);
    fail(std::string("dtype ") + dtype_name(p.dtype) + " is not supported (supported: " + list + ")");
  }
  if (!supports_head_dim(s, p.head_dim))
    fail("head_dim " + std::to_string(p.head_dim) + " is not supported (supported: " + head_dims_words(s) + ")");
  if (s.head_dim_v == 0 && p.dv() != p.head_dim)
    fail("V's head dim (" + std::to_string(p.dv()) + ") must be Q and K's (" + std::to_string(p.head_dim) +
         "): a different one is not supported");
  if (s.head_dim_v != 0 && p.dv() != s.head_dim_v)
    fail("V's head dim must be " + std::to_string(s.head_dim_v) + ", got " + std::to_string(p.dv()));
  // Before the layout: a varlen problem is bshd, and its refusal should name what is missing.
  if (p.is_varlen() && !s.varlen)
    fail("a varlen problem (cu_seqlens_q, cu_seqlens_k: " + std::to_string(p.varlen_batch()) +
         " sequences packed in one tensor) is not supported: this chapter takes one length per batch");
  if (p.layout == Layout::bshd && !takes_bshd(s, p.dtype))
    fail(std::string("layout bshd (Q, K, V, O as [B, S, H, D]) is not supported") +
         (s.bshd_dtypes.empty() ? "" : std::string(" in ") + dtype_name(p.dtype)) +
         ": this chapter takes bhsd, [B, H, S, D]" + (s.bshd_dtypes.empty() ? "" : " there"));
  if (p.has_window() && !s.window)
    fail("a sliding window (window_left " + std::to_string(p.window_left) + ", window_right " +
         std::to_string(p.window_right) + ") is not supported: this chapter attends to every key (or, causal, to every earlier one)");
  if (p.has_softcap() && !s.softcap)
    fail("a logit softcap (softcap " + number_text(p.softcap) +
         ") is not supported: this chapter takes the scores as scale Q.K");
  if (p.has_input_strides()) {
    if (!s.input_strides) fail("Q, K and V with strides other than the layout's are not supported: contiguous tensors only");
    if (p.layout != Layout::bshd) fail("input strides (Q, K, V) need layout bshd");
    for (const std::optional<Strides>& in : {p.q_input, p.k_input, p.v_input})
      if (in && (in->batch <= 0 || in->head <= 0 || in->row <= 0 || in->batch % 8 || in->head % 8 || in->row % 8))
        fail("input strides must be positive multiples of 8 elements (16 bytes), got batch " + std::to_string(in->batch) +
             ", head " + std::to_string(in->head) + ", row " + std::to_string(in->row));
  }
  if (!q || !k || !v || !o || !lse) fail("a tensor pointer is null");
}

const Step& find_step(const std::vector<Step>& steps, const std::string& name) {
  std::string known;
  for (const Step& s : steps) {
    if (s.name == name) return s;
    known += (known.empty() ? "" : ", ") + s.name;
  }
  throw std::invalid_argument("unknown step '" + name + "' (known: " + known + ")");
}

}  // namespace fa
