#include "common/host/problem.h"

#include <algorithm>
#include <sstream>
#include <stdexcept>

namespace fa {

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
  // Chapters index with 32-bit ints inside one (batch, head) slice and 64-bit across slices.
  const std::int64_t widest = std::max(head_dim, dv());
  require(std::int64_t{seqlen_q} * widest < (std::int64_t{1} << 31) &&
              std::int64_t{seqlen_k} * widest < (std::int64_t{1} << 31),
          "seqlen * head_dim must stay below 2^31 per head");
}

std::string Problem::describe() const {
  std::ostringstream s;
  s << "B=" << batch << " H=" << heads << "/" << kv_heads << " Sq=" << seqlen_q
    << " Sk=" << seqlen_k << " D=" << head_dim;
  if (dv() != head_dim) s << "/" << dv();  // D=576/512: Q.K's head dim, then V's
  s << (causal ? " causal " : " ") << dtype_name(dtype);
  if (layout == Layout::bshd) s << " bshd";
  if (has_window()) s << " window=(" << window_left << "," << window_right << ")";
  return s.str();
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
