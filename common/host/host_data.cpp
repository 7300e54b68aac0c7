#include "common/host/host_data.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>

namespace fa {
namespace {

std::uint32_t float_bits(float x) {
  std::uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  return u;
}
float bits_float(std::uint32_t u) {
  float x;
  std::memcpy(&x, &u, sizeof x);
  return x;
}

// Round the integer `value >> shift` to nearest, ties to even.
std::uint32_t shift_round_even(std::uint32_t value, int shift) {
  const std::uint32_t kept = value >> shift;
  const std::uint32_t rest = value & ((1u << shift) - 1);
  const std::uint32_t halfway = 1u << (shift - 1);
  return kept + ((rest > halfway || (rest == halfway && (kept & 1))) ? 1 : 0);
}

// SplitMix64: a fast, well-mixed 64-bit hash, used as a counter-based generator.
std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

}  // namespace

std::uint16_t float_to_half_bits(float x) {
  const std::uint32_t u = float_bits(x);
  const std::uint16_t sign = static_cast<std::uint16_t>((u >> 16) & 0x8000);
  const int exp = static_cast<int>((u >> 23) & 0xFF);
  std::uint32_t mant = u & 0x7FFFFF;
  if (exp == 0xFF) return sign | 0x7C00 | (mant ? 0x200 : 0);  // inf stays inf, NaN stays NaN
  const int e = exp - 127 + 15;                                 // re-biased exponent
  if (e >= 0x1F) return sign | 0x7C00;                          // too large: inf
  if (e <= 0) {                                                 // half subnormal (or zero)
    if (e < -10) return sign;
    mant |= 0x800000;  // the implicit leading 1; value = mant * 2^(e - 14 - 10)
    return sign | static_cast<std::uint16_t>(shift_round_even(mant, 14 - e));
  }
  // A carry out of the mantissa correctly bumps the exponent (and rounds to inf at the top).
  return sign | static_cast<std::uint16_t>(shift_round_even((e << 23) | mant, 13));
}

float half_bits_to_float(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000) << 16;
  const int exp = (h >> 10) & 0x1F;
  const std::uint32_t mant = h & 0x3FF;
  if (exp == 0x1F) return bits_float(sign | 0x7F800000 | (mant << 13));
  if (exp == 0) {
    const float v = std::ldexp(static_cast<float>(mant), -24);
    return sign ? -v : v;
  }
  return bits_float(sign | static_cast<std::uint32_t>(exp - 15 + 127) << 23 | (mant << 13));
}

std::uint16_t float_to_bf16_bits(float x) {
  const std::uint32_t u = float_bits(x);
  if (std::isnan(x)) return static_cast<std::uint16_t>((u >> 16) | 0x40);  // keep it a NaN
  return static_cast<std::uint16_t>(shift_round_even(u, 16));
}

float bf16_bits_to_float(std::uint16_t b) { return bits_float(static_cast<std::uint32_t>(b) << 16); }

float round_to_dtype(float x, Dtype dtype) {
  switch (dtype) {
    case Dtype::f32: return x;
    case Dtype::f16: return half_bits_to_float(float_to_half_bits(x));
    case Dtype::bf16: return bf16_bits_to_float(float_to_bf16_bits(x));
  }
  return x;
}

namespace {

// Copies each D-element row between [B, H, S, D] (bhsd) and [B, S, H, D], one direction or the other.
std::vector<std::uint8_t> swap_heads_rows(const std::vector<std::uint8_t>& x, bool to_bshd, std::size_t elem,
                                          int batch, int heads, int seqlen, int dim) {
  const std::size_t row = elem * dim;
  if (x.size() != row * batch * heads * seqlen) throw std::invalid_argument("to_layout: size mismatch");
  std::vector<std::uint8_t> y(x.size());
  for (std::size_t b = 0; b < std::size_t(batch); ++b)
    for (std::size_t h = 0; h < std::size_t(heads); ++h)
      for (std::size_t s = 0; s < std::size_t(seqlen); ++s) {
        const std::size_t bhsd = ((b * heads + h) * seqlen + s) * row, bshd = ((b * seqlen + s) * heads + h) * row;
        std::copy_n(x.begin() + (to_bshd ? bhsd : bshd), row, y.begin() + (to_bshd ? bshd : bhsd));
      }
  return y;
}

}  // namespace

std::vector<std::uint8_t> to_layout(const std::vector<std::uint8_t>& bhsd, Layout layout, std::size_t elem, int batch,
                                    int heads, int seqlen, int dim) {
  return layout == Layout::bshd ? swap_heads_rows(bhsd, true, elem, batch, heads, seqlen, dim) : bhsd;
}

std::vector<std::uint8_t> from_layout(const std::vector<std::uint8_t>& bytes, Layout layout, std::size_t elem, int batch,
                                      int heads, int seqlen, int dim) {
  return layout == Layout::bshd ? swap_heads_rows(bytes, false, elem, batch, heads, seqlen, dim) : bytes;
}

namespace {
struct Shape3 {
  int heads, seqlen, dim;
};
Shape3 shape_of(const Problem& p, Operand which) {
  const bool queries = which == Operand::q || which == Operand::o, values = which == Operand::o || which == Operand::v;
  return {queries ? p.heads : p.kv_heads, queries ? p.seqlen_q : p.seqlen_k, values ? p.dv() : p.head_dim};
}
}  // namespace

std::vector<std::uint8_t> to_layout(const std::vector<std::uint8_t>& bhsd, const Problem& p, Operand which) {
  const Shape3 s = shape_of(p, which);
  return to_layout(bhsd, p.layout, dtype_size(p.dtype), p.batch, s.heads, s.seqlen, s.dim);
}

std::vector<std::uint8_t> from_layout(const std::vector<std::uint8_t>& bytes, const Problem& p, Operand which) {
  const Shape3 s = shape_of(p, which);
  return from_layout(bytes, p.layout, dtype_size(p.dtype), p.batch, s.heads, s.seqlen, s.dim);
}

void set_fused_qkv(Problem& p) {
  if (p.seqlen_q != p.seqlen_k || p.dv() != p.head_dim)
    throw std::invalid_argument("set_fused_qkv: a fused QKV projection has Sq = Sk and one head dim");
  const std::int64_t row = std::int64_t{p.heads + 2 * p.kv_heads} * p.head_dim;
  p.layout = Layout::bshd;
  p.q_input = p.k_input = p.v_input = Strides{p.seqlen_q * row, p.head_dim, row};
}

FusedOffsets fused_qkv_offsets(const Problem& p) {
  return {0, std::int64_t{p.heads} * p.head_dim, std::int64_t{p.heads + p.kv_heads} * p.head_dim};
}

std::vector<std::uint8_t> fused_qkv(const std::vector<std::uint8_t>& q, const std::vector<std::uint8_t>& k,
                                    const std::vector<std::uint8_t>& v, const Problem& p) {
  const std::size_t elem = dtype_size(p.dtype), d = static_cast<std::size_t>(p.head_dim);
  const int slots = p.heads + 2 * p.kv_heads, S = p.seqlen_q;
  std::vector<std::uint8_t> out(std::size_t(p.batch) * S * slots * d * elem);
  // Slot `slot` of row (b, s) takes head h of `src` ([B, heads, S, D] bytes).
  auto put = [&](const std::vector<std::uint8_t>& src, int heads, int first_slot) {
    for (int b = 0; b < p.batch; ++b)
      for (int h = 0; h < heads; ++h)
        for (int i = 0; i < S; ++i)
          std::memcpy(&out[((std::size_t(b) * S + i) * slots + first_slot + h) * d * elem],
                      &src[((std::size_t(b) * heads + h) * S + i) * d * elem], d * elem);
  };
  put(q, p.heads, 0);
  put(k, p.kv_heads, p.heads);
  put(v, p.kv_heads, p.heads + p.kv_heads);
  return out;
}

std::vector<std::uint8_t> encode(const std::vector<float>& values, Dtype dtype) {
  std::vector<std::uint8_t> bytes(values.size() * dtype_size(dtype));
  for (std::size_t n = 0; n < values.size(); ++n) {
    if (dtype == Dtype::f32) {
      std::memcpy(&bytes[4 * n], &values[n], 4);
    } else {
      const std::uint16_t h = dtype == Dtype::f16 ? float_to_half_bits(values[n])
                                                  : float_to_bf16_bits(values[n]);
      std::memcpy(&bytes[2 * n], &h, 2);
    }
  }
  return bytes;
}

std::vector<float> decode(const std::vector<std::uint8_t>& bytes, Dtype dtype) {
  const std::size_t size = dtype_size(dtype);
  std::vector<float> values(bytes.size() / size);
  for (std::size_t n = 0; n < values.size(); ++n) {
    if (dtype == Dtype::f32) {
      std::memcpy(&values[n], &bytes[4 * n], 4);
    } else {
      std::uint16_t h;
      std::memcpy(&h, &bytes[2 * n], 2);
      values[n] = dtype == Dtype::f16 ? half_bits_to_float(h) : bf16_bits_to_float(h);
    }
  }
  return values;
}

bool is_poison(const std::uint8_t* element, Dtype dtype) {
  for (std::size_t b = 0; b < dtype_size(dtype); ++b)
    if (element[b] != kPoisonByte) return false;
  return true;
}

float seeded_normal(std::uint64_t seed, std::uint64_t n) {
  // Box-Muller on two independent uniforms in (0, 1].
  const std::uint64_t a = splitmix64(seed * 0x632BE59BD9B4E019ull + 2 * n);
  const std::uint64_t b = splitmix64(seed * 0x632BE59BD9B4E019ull + 2 * n + 1);
  const double u1 = (static_cast<double>(a >> 11) + 1.0) * 0x1.0p-53;
  const double u2 = static_cast<double>(b >> 11) * 0x1.0p-53;
  return static_cast<float>(std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2));
}

std::vector<float> random_normal(std::int64_t count, std::uint64_t seed, Dtype dtype) {
  std::vector<float> values(static_cast<std::size_t>(count));
  // Element n depends on (seed, n) only, so the threads give the same values as one thread.
#pragma omp parallel for schedule(static) if (count > (1 << 16))
  for (std::int64_t n = 0; n < count; ++n)
    values[n] = round_to_dtype(seeded_normal(seed, static_cast<std::uint64_t>(n)), dtype);
  return values;
}

const char* input_kind_name(InputKind kind) {
  switch (kind) {
    case InputKind::normal: return "normal";
    case InputKind::large_logits: return "large_logits";
    case InputKind::tiny_logits: return "tiny_logits";
    case InputKind::constant_scores: return "constant_scores";
    case InputKind::rare_spikes: return "rare_spikes";
  }
  return "?";
}

HostInputs make_inputs(const Problem& p, std::uint64_t seed, InputKind kind) {
  // Three different streams, so Q, K and V are independent even where shapes coincide. The
  // values are drawn in float, shaped, and only then rounded to the dtype.
  HostInputs in{random_normal(p.q_elems(), seed * 3 + 0, Dtype::f32),
                random_normal(p.kv_elems(), seed * 3 + 1, Dtype::f32),
                random_normal(p.v_elems(), seed * 3 + 2, Dtype::f32)};
  const std::size_t row = static_cast<std::size_t>(p.head_dim);
  auto scale_all = [](std::vector<float>& x, float by) {
    for (float& e : x) e *= by;
  };
  switch (kind) {
    case InputKind::normal: break;
    case InputKind::large_logits:
      scale_all(in.q, 12.0f);
      scale_all(in.k, 12.0f);
      break;
    case InputKind::tiny_logits:
      scale_all(in.q, 1e-3f);
      scale_all(in.k, 1e-3f);
      break;
    case InputKind::constant_scores:
      for (std::size_t n = 0; n < in.k.size(); ++n) {
        const std::size_t key = n / row, first = key - key % static_cast<std::size_t>(p.seqlen_k);
        in.k[n] = in.k[first * row + n % row];
      }
      break;
    case InputKind::rare_spikes:
      for (std::size_t key = 0; key < in.k.size() / row; ++key) {
        if (splitmix64(seed ^ (key * 0x9E3779B97F4A7C15ull)) % 40 != 0) continue;
        for (std::size_t c = 0; c < row; ++c) in.k[key * row + c] *= 16.0f;
      }
      break;
  }
  for (std::vector<float>* x : {&in.q, &in.k, &in.v})
    for (float& e : *x) e = round_to_dtype(e, p.dtype);
  return in;
}

}  // namespace fa
