#include "common/host/fp8.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

#include "common/host/host_data.h"  // round_to_dtype

namespace fa {

std::uint8_t float_to_e4m3_bits(float x) {
  if (std::isnan(x)) return 0x7F;
  const std::uint8_t sign = std::signbit(x) ? 0x80 : 0x00;
  const double a = std::fabs(static_cast<double>(x));
  if (std::isinf(a)) return sign | 0x7E;  // satfinite: an infinity saturates too
  // Subnormals: a = m x 2^-9. std::nearbyint rounds ties to even in the default rounding mode, and
  // m = 8 is the smallest normal number (exponent field 1, mantissa 0): code 8 either way.
  if (a < 0x1p-6) return sign | static_cast<std::uint8_t>(std::nearbyint(a * 0x1p9));
  int e = 0;
  const double frac = std::frexp(a, &e);  // a = frac x 2^e, frac in [0.5, 1): 2^(e-1) <= a < 2^e
  if (e - 1 > 8) return sign | 0x7E;      // 512 and above: saturate to 448
  // a = (1 + q / 8) x 2^(e-1), q rounded to nearest even from the exact 8 (2 frac - 1).
  int exponent = e - 1, q = static_cast<int>(std::nearbyint((2.0 * frac - 1.0) * 8.0));
  if (q == 8) q = 0, ++exponent;  // rounded up to the next power of two
  const int field = exponent + 7;
  if (field > 15 || (field == 15 && q == 7)) return sign | 0x7E;  // past 448 (0x7F is NaN): saturate
  return sign | static_cast<std::uint8_t>(field << 3 | q);
}

float e4m3_bits_to_float(std::uint8_t bits) {
  const float sign = bits & 0x80 ? -1.0f : 1.0f;
  const int field = bits >> 3 & 0xF, m = bits & 7;
  if (field == 15 && m == 7) return std::numeric_limits<float>::quiet_NaN();
  if (field == 0) return sign * std::ldexp(static_cast<float>(m), -9);
  return sign * std::ldexp(1.0f + m / 8.0f, field - 7);
}

E4m3Tensor quantize_e4m3(const std::vector<float>& x) {
  float amax = 0.0f;
  for (float v : x) amax = std::fmax(amax, std::fabs(v));
  E4m3Tensor t;
  t.scale = amax > 0.0f ? amax / kE4m3Max : 1.0f;
  t.bits.resize(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) t.bits[i] = float_to_e4m3_bits(x[i] / t.scale);
  return t;
}

std::vector<float> dequantize(const E4m3Tensor& t) {
  std::vector<float> x(t.bits.size());
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = t.scale * e4m3_bits_to_float(t.bits[i]);
  return x;
}

ReferenceForward fp8_plain_forward(const Problem& p, const std::vector<float>& q, const std::vector<float>& k,
                                   const std::vector<float>& v) {
  p.validate();
  if (p.layout != Layout::bhsd || p.has_window() || p.has_softcap() || p.is_varlen() || p.dv() != p.head_dim)
    throw std::invalid_argument("fp8_plain_forward: [B, H, S, D] problems without window, softcap or packed batch, got " +
                                p.describe());
  const int d = p.head_dim;
  if (q.size() != static_cast<std::size_t>(p.q_elems()) || k.size() != static_cast<std::size_t>(p.kv_elems()) ||
      v.size() != static_cast<std::size_t>(p.kv_elems()))
    throw std::invalid_argument("fp8_plain_forward: q, k, v sizes do not match " + p.describe());
  ReferenceForward out{std::vector<double>(p.o_elems()), std::vector<double>(p.lse_elems())};
  const float scale = p.scale();
  constexpr float kInfF = std::numeric_limits<float>::infinity();
#pragma omp parallel
  {
    std::vector<float> s(p.seqlen_k), acc(d);
#pragma omp for collapse(3) schedule(dynamic, 8)
    for (int b = 0; b < p.batch; ++b)
      for (int h = 0; h < p.heads; ++h)
        for (int i = 0; i < p.seqlen_q; ++i) {
          const std::size_t row = (static_cast<std::size_t>(b) * p.heads + h) * p.seqlen_q + i;
          const std::size_t kv0 = (static_cast<std::size_t>(b) * p.kv_heads + h / p.group_size()) * p.seqlen_k * d;
          float m = -kInfF;
          for (int j = 0; j < p.seqlen_k; ++j) {
            float dot = 0.0f;
            for (int c = 0; c < d; ++c) dot += q[row * d + c] * k[kv0 + static_cast<std::size_t>(j) * d + c];
            s[j] = p.visible(i, j) ? scale * dot : -kInfF;
            m = std::max(m, s[j]);
          }
          if (m == -kInfF) {  // no key seen: O stays 0
            out.lse[row] = std::numeric_limits<double>::infinity();
            continue;
          }
          float l = 0.0f;
          std::fill(acc.begin(), acc.end(), 0.0f);
          for (int j = 0; j < p.seqlen_k; ++j) {
            const float p_ij = std::exp(s[j] - m);
            l += p_ij;
            const float rounded = round_to_e4m3(p_ij);  // as P goes into P V
            for (int c = 0; c < d; ++c) acc[c] += rounded * v[kv0 + static_cast<std::size_t>(j) * d + c];
          }
          for (int c = 0; c < d; ++c) out.o[row * d + c] = round_to_dtype(acc[c] / l, Dtype::f16);
          out.lse[row] = m + std::log(l);
        }
  }
  return out;
}

}  // namespace fa
