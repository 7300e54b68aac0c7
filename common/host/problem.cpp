#include "common/host/problem.h"

#include <algorithm>
#include <cstdio>
#include <sstream>
#include <stdexcept>

namespace fa {
std::string number_text(double x) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", x);
  return text;
}

const char* dtype_name(Dtype dtype) {
  switch (dtype) {
    case Dtype::f32: return "f32";
    case Dtype::f16: return "f16";
    case Dtype::bf16: return "bf16";
  }
  return "?";
}

Dtype parse_dtype(const std::string& name) {
  if (name == "f32" || name == "fp32" || name == "float32") return Dtype::f32;
  if (name == "f16" || name == "fp16" || name == "float16") return Dtype::f16;
  if (name == "bf16" || name == "bfloat16") return Dtype::bf16;
  throw std::invalid_argument("unknown dtype '" + name + "' (expected f32, f16 or bf16)");
}

const char* layout_name(Layout layout) { return layout == Layout::bshd ? "bshd" : "bhsd"; }

Layout parse_layout(const std::string& name) {
  if (name == "bhsd") return Layout::bhsd;
  if (name == "bshd") return Layout::bshd;
  throw std::invalid_argument("unknown layout '" + name + "' (expected bhsd or bshd)");
}

void Problem::validate() const {
  auto require = [](bool ok, const std::string& what) {
    if (!ok) throw std::invalid_argument(what);
  };
  require(batch >= 1, "batch must be >= 1, got " + std::to_string(batch));
  require(heads >= 1, "heads must be >= 1, got " + std::to_string(heads));
  require(kv_heads >= 1, "kv_heads must be >= 1, got " + std::to_string(kv_heads));
  require(heads % kv_heads == 0, "heads (" + std::to_string(heads) +
                                     ") must be a multiple of kv_heads (" +
                                     std::to_string(kv_heads) + ")");
  require(seqlen_q >= 1, "seqlen_q must be >= 1, got " + std::to_string(seqlen_q));
  require(seqlen_k >= 1, "seqlen_k must be >= 1, got " + std::to_string(seqlen_k));
  require(head_dim >= 1, "head_dim must be >= 1, got " + std::to_string(head_dim));
  require(head_dim_v >= 0, "head_dim_v must be >= 1, or 0 for head_dim's, got " + std::to_string(head_dim_v));
  require(window_left >= -1 && window_right >= -1,
          "window_left and window_right must be >= 0, or -1 for no bound, got (" + std::to_string(window_left) + ", " +
              std::to_string(window_right) + ")");
  require(!softmax_scale || (std::isfinite(*softmax_scale) && *softmax_scale > 0.0f),
          "softmax_scale must be finite and > 0");
  if (!(std::isfinite(softcap) && softcap >= 0.0f))
    throw std::invalid_argument("softcap must be finite and >= 0 (0: off), got " + number_text(softcap));
  // Chapters index with 32-bit ints inside one (batch, head) slice and 64-bit across slices.
  const std::int64_t widest = std::max(head_dim, dv());
  require(std::int64_t{seqlen_q} * widest < (std::int64_t{1} << 31) &&
              std::int64_t{seqlen_k} * widest < (std::int64_t{1} << 31),
          "seqlen * head_dim must stay below 2^31 per head");
  if (!is_varlen() && cu_seqlens_k.empty()) return;
  // A varlen problem: two offset lists of B + 1 entries that run from 0 to the packed lengths.
  require(!cu_seqlens_q.empty() && !cu_seqlens_k.empty(),
          "cu_seqlens_q and cu_seqlens_k are set together (a varlen problem), got " +
              std::to_string(cu_seqlens_q.size()) + " and " + std::to_string(cu_seqlens_k.size()) + " offsets");
  require(cu_seqlens_q.size() == cu_seqlens_k.size(),
          "cu_seqlens_q and cu_seqlens_k must have the same size (B + 1), got " +
              std::to_string(cu_seqlens_q.size()) + " and " + std::to_string(cu_seqlens_k.size()));
  require(cu_seqlens_q.size() >= 2, "cu_seqlens_q and cu_seqlens_k need B + 1 >= 2 offsets, got 1");
  auto check_offsets = [&](const std::vector<int>& cu, const char* name, const char* seqlen_name, int total) {
    require(cu.front() == 0, std::string(name) + " must start at 0, got " + std::to_string(cu.front()));
    for (std::size_t b = 1; b < cu.size(); ++b)
      require(cu[b] >= cu[b - 1], std::string(name) + " must not decrease, got " + std::to_string(cu[b]) +
                                      " after " + std::to_string(cu[b - 1]) + " (entry " + std::to_string(b) + ")");
    require(cu.back() == total, std::string(name) + " must end at " + seqlen_name + " (" + std::to_string(total) +
                                    "), got " + std::to_string(cu.back()));
  };
  check_offsets(cu_seqlens_q, "cu_seqlens_q", "seqlen_q", seqlen_q);
  check_offsets(cu_seqlens_k, "cu_seqlens_k", "seqlen_k", seqlen_k);
  require(batch == 1, "a varlen problem (cu_seqlens) has batch 1 (its sequences lie along the rows), got " +
                          std::to_string(batch));
  require(layout == Layout::bshd, "a varlen problem (cu_seqlens) needs layout bshd: Q, K, V, O as [1, total, H, D]");
  require(!has_input_strides(), "a varlen problem (cu_seqlens) takes no input strides (q_input, k_input, v_input)");
  require(head_dim_v == 0, "a varlen problem (cu_seqlens) takes no head_dim_v of its own: V's head dim is head_dim's");
}

std::string Problem::describe() const {
  std::ostringstream s;
  s << "B=" << batch << " H=" << heads << "/" << kv_heads << " Sq=" << seqlen_q
    << " Sk=" << seqlen_k << " D=" << head_dim;
  if (dv() != head_dim) s << "/" << dv();  // D=576/512: Q.K's head dim, then V's
  s << (causal ? " causal " : " ") << dtype_name(dtype);
  if (layout == Layout::bshd) s << " bshd";
  if (has_window()) s << " window=(" << window_left << "," << window_right << ")";
  if (has_softcap()) s << " softcap=" << number_text(softcap);
  if (is_varlen()) {
    auto lengths = [](const std::vector<int>& cu) {
      std::string list;
      for (std::size_t b = 1; b < cu.size(); ++b) list += (b == 1 ? "" : ",") + std::to_string(cu[b] - cu[b - 1]);
      return list;
    };
    if (varlen_batch() <= 4)  // few: the lengths, the keys' only where they differ
      s << " varlen q=" << lengths(cu_seqlens_q) << (cu_seqlens_k == cu_seqlens_q ? "" : " k=" + lengths(cu_seqlens_k));
    else
      s << " varlen " << varlen_batch() << " seqs";
  }
  return s.str();
}

Problem sequence_problem(const Problem& p, int b) {
  if (!p.is_varlen() || p.cu_seqlens_k.size() != p.cu_seqlens_q.size())
    throw std::invalid_argument("sequence_problem: not a varlen problem (cu_seqlens_q, cu_seqlens_k)");
  if (b < 0 || b >= p.varlen_batch())
    throw std::invalid_argument("sequence_problem: sequence " + std::to_string(b) + " of " +
                                std::to_string(p.varlen_batch()));
  Problem s = p;
  s.batch = 1;
  s.seqlen_q = p.cu_seqlens_q[b + 1] - p.cu_seqlens_q[b];
  s.seqlen_k = p.cu_seqlens_k[b + 1] - p.cu_seqlens_k[b];
  s.cu_seqlens_q.clear();
  s.cu_seqlens_k.clear();
  return s;
}

Problem default_problem(Dtype dtype) {
  Problem p;
  p.batch = 4;
  p.heads = p.kv_heads = 16;
  p.seqlen_q = p.seqlen_k = 1024;
  p.head_dim = 64;
  p.dtype = dtype;
  return p;
}

double forward_flops(const Problem& p) {
  if (p.is_varlen()) {  // each sequence on its own; an empty one (no queries or no keys) does nothing
    double sum = 0;
    for (int b = 0; b < p.varlen_batch(); ++b) {
      const Problem s = sequence_problem(p, b);
      if (s.seqlen_q > 0 && s.seqlen_k > 0) sum += forward_flops(s);
    }
    return sum;
  }
  double pairs = static_cast<double>(p.seqlen_q) * p.seqlen_k;
  if (p.causal && !p.has_window() && p.seqlen_q == p.seqlen_k) {
    pairs /= 2;  // FlashAttention's benchmarks' convention
  } else if (p.causal || p.has_window()) {
    pairs = 0;
    for (int i = 0; i < p.seqlen_q; ++i) {  // the visible keys first .. last of row i
      const long position = static_cast<long>(i) + p.seqlen_k - p.seqlen_q;
      const long first = p.window_left < 0 ? 0 : std::max(0L, position - p.window_left);
      long last = p.window_right < 0 ? p.seqlen_k - 1L : std::min<long>(p.seqlen_k - 1L, position + p.window_right);
      if (p.causal) last = std::min(last, position);
      pairs += static_cast<double>(std::max(0L, last - first + 1));
    }
  }
  return 2.0 * p.batch * p.heads * pairs * (p.head_dim + p.dv());
}

double backward_flops(const Problem& p) { return 2.5 * forward_flops(p); }

double forward_min_bytes(const Problem& p) {
  const double elem = static_cast<double>(dtype_size(p.dtype));
  return elem * (p.q_elems() + p.o_elems() + p.kv_elems() + p.v_elems()) + 4.0 * p.lse_elems();
}

}  // namespace fa
