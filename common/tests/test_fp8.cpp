// The host's E4M3 encoding (common/host/fp8.h) against the format's definition, code by code:
// every code decodes to sign x (1 + m/8) x 2^(e-7) (or m x 2^-9), encodes back to itself, and the
// values between two codes round to the nearer one, ties to the even code; beyond 448 saturates.
// ctest -L common
#include "common/host/fp8.h"

#include "common/host/forward_check.h"
#include "common/host/host_data.h"
#include "common/host/reference.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

namespace {

// The format's definition, written independently of fp8.cpp's arithmetic: the value of a code.
double code_value(int code) {
  const int e = code >> 3 & 0xF, m = code & 7;
  const double v = e == 0 ? m * std::pow(2.0, -9) : (1.0 + m / 8.0) * std::pow(2.0, e - 7);
  return code & 0x80 ? -v : v;
}

bool is_nan_code(int code) { return (code & 0x7F) == 0x7F; }

TEST(E4m3, EveryCodeDecodesToItsValueAndEncodesBack) {
  for (int code = 0; code < 256; ++code) {
    const float x = fa::e4m3_bits_to_float(static_cast<std::uint8_t>(code));
    if (is_nan_code(code)) {
      EXPECT_TRUE(std::isnan(x)) << "code " << code;
      continue;
    }
    EXPECT_EQ(static_cast<double>(x), code_value(code)) << "code " << code;
    EXPECT_EQ(fa::float_to_e4m3_bits(x), code) << "code " << code << " value " << x;
  }
  EXPECT_EQ(fa::e4m3_bits_to_float(0x7E), 448.0f);
  EXPECT_EQ(fa::e4m3_bits_to_float(0x08), std::ldexp(1.0f, -6));  // the smallest normal
  EXPECT_EQ(fa::e4m3_bits_to_float(0x01), std::ldexp(1.0f, -9));  // the smallest subnormal
}

TEST(E4m3, BetweenTwoCodesRoundsToTheNearerTiesToEven) {
  // Consecutive non-negative codes 0 .. 0x7E: the midpoint goes to the even code, a point a
  // little either side of it to the nearer code.
  for (int code = 0; code < 0x7E; ++code) {
    const double lo = code_value(code), hi = code_value(code + 1), mid = (lo + hi) / 2;
    const int even = code % 2 == 0 ? code : code + 1;
    EXPECT_EQ(fa::float_to_e4m3_bits(static_cast<float>(mid)), even) << "midpoint of " << code;
    EXPECT_EQ(fa::float_to_e4m3_bits(static_cast<float>(mid - (hi - lo) / 8)), code) << "below the midpoint of " << code;
    EXPECT_EQ(fa::float_to_e4m3_bits(static_cast<float>(mid + (hi - lo) / 8)), code + 1) << "above the midpoint of " << code;
    EXPECT_EQ(fa::float_to_e4m3_bits(static_cast<float>(-mid)), 0x80 | even) << "negative midpoint of " << code;
  }
}

TEST(E4m3, SaturatesBeyond448AndKeepsNaN) {
  constexpr float kInf = std::numeric_limits<float>::infinity();
  for (float x : {448.0f, 464.0f, 470.0f, 480.0f, 512.0f, 1e10f, kInf}) {
    EXPECT_EQ(fa::float_to_e4m3_bits(x), 0x7E) << x;
    EXPECT_EQ(fa::float_to_e4m3_bits(-x), 0xFE) << -x;
  }
  EXPECT_TRUE(std::isnan(fa::round_to_e4m3(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_EQ(fa::float_to_e4m3_bits(-0.0f), 0x80);
  EXPECT_EQ(fa::float_to_e4m3_bits(std::ldexp(1.0f, -11)), 0x00);  // below half the smallest subnormal
}

TEST(E4m3, RelativeErrorOfNormalsIsAtMostOneSixteenth) {
  // Three mantissa bits: between 2^-6 and 448 a value moves by at most half a step, 2^-4 of it.
  for (double x = 0x1p-6; x <= 448.0; x *= 1.0137) {
    const double r = fa::round_to_e4m3(static_cast<float>(x));
    EXPECT_LE(std::fabs(r - x), x / 16.0 + 1e-12) << x;
  }
}

TEST(E4m3, PerTensorQuantizationPutsTheLargestElementOn448) {
  const std::vector<float> x = {0.5f, -3.0f, 1.25f, 2.9f, 0.0f, -0.01f};
  const fa::E4m3Tensor t = fa::quantize_e4m3(x);
  EXPECT_FLOAT_EQ(t.scale, 3.0f / 448.0f);
  EXPECT_EQ(t.bits[1], 0xFE);  // -3.0 / scale = -448
  const std::vector<float> back = fa::dequantize(t);
  for (std::size_t i = 0; i < x.size(); ++i) EXPECT_LE(std::fabs(back[i] - x[i]), std::fabs(x[i]) / 16.0 + 1e-9) << i;
  EXPECT_EQ(fa::quantize_e4m3({0.0f, 0.0f}).scale, 1.0f);  // a tensor of zeros: scale 1, codes 0
}

// fp8_plain_forward, the FP8 forward's yardstick: with one key P = 1 is exact in E4M3, so O is
// V's row rounded to f16 and LSE the score; with many keys its O errs, but by less than the bound
// for any row (2^-4 max |v| plus the subnormals' share), and rows that see no key get O = 0 and
// LSE = +inf, as every forward's.
TEST(Fp8PlainForward, OneKeyIsExactAndManyKeysErrWithinTheRowBound) {
  fa::Problem p;
  p.batch = 1, p.heads = 2, p.kv_heads = 1, p.head_dim = 16, p.seqlen_q = 3, p.seqlen_k = 1, p.dtype = fa::Dtype::f16;
  const std::vector<float> q = fa::random_normal(p.q_elems(), 1, fa::Dtype::f16);
  const std::vector<float> k = fa::random_normal(p.kv_elems(), 2, fa::Dtype::f16);
  const std::vector<float> v = fa::random_normal(p.kv_elems(), 3, fa::Dtype::f16);
  const fa::ReferenceForward one = fa::fp8_plain_forward(p, q, k, v);
  const fa::ReferenceForward ref1 = fa::reference_forward(p, q, k, v);
  for (std::size_t n = 0; n < one.o.size(); ++n) EXPECT_EQ(one.o[n], fa::round_to_dtype(v[n % 16], fa::Dtype::f16));
  for (std::size_t n = 0; n < one.lse.size(); ++n) EXPECT_NEAR(one.lse[n], ref1.lse[n], 1e-5);

  p.seqlen_q = 64, p.seqlen_k = 200;
  const std::vector<float> q2 = fa::random_normal(p.q_elems(), 4, fa::Dtype::f16);
  const std::vector<float> k2 = fa::random_normal(p.kv_elems(), 5, fa::Dtype::f16);
  const std::vector<float> v2 = fa::random_normal(p.kv_elems(), 6, fa::Dtype::f16);
  const fa::ReferenceForward plain = fa::fp8_plain_forward(p, q2, k2, v2);
  const fa::ReferenceForward ref = fa::reference_forward(p, q2, k2, v2);
  double max_v = 0, err = 0;
  for (float x : v2) max_v = std::max(max_v, static_cast<double>(std::fabs(x)));
  for (std::size_t n = 0; n < ref.o.size(); ++n) err = std::max(err, std::fabs(plain.o[n] - ref.o[n]));
  EXPECT_GT(err, 1e-4) << "three mantissa bits of P must show in O";
  EXPECT_LT(err, max_v / 16.0 + 200 * 0x1p-10 * max_v) << "the bound for any row";

  p.seqlen_q = 5, p.seqlen_k = 2, p.causal = true;  // rows 0 .. 2 see no key (bottom-right causal)
  const fa::ReferenceForward none = fa::fp8_plain_forward(p, std::vector<float>(p.q_elems(), 1.0f),
                                                          std::vector<float>(p.kv_elems(), 1.0f),
                                                          std::vector<float>(p.kv_elems(), 1.0f));
  EXPECT_TRUE(std::isinf(none.lse[0]) && none.lse[0] > 0);
  EXPECT_EQ(none.o[0], 0.0);
  EXPECT_TRUE(std::isfinite(none.lse[4]));
}

TEST(Fp8PlainForward, RefusesWhatTheFp8StepDoesNotTake) {
  fa::Problem p;
  p.batch = 1, p.heads = p.kv_heads = 1, p.head_dim = 16, p.seqlen_q = p.seqlen_k = 4, p.dtype = fa::Dtype::f16;
  const std::vector<float> x(p.q_elems(), 0.5f);
  p.window_left = 2;
  EXPECT_THROW(fa::fp8_plain_forward(p, x, x, x), std::invalid_argument);
  p.window_left = -1;
  EXPECT_THROW(fa::fp8_plain_forward(p, x, x, std::vector<float>(3)), std::invalid_argument);
}

// check_forward_fp8, the FP8 step's verdict: the plain implementation's own output passes it; the
// same computed with V's keys out of order (what a wrong fp8_pv_key does) fails it; an LSE off by
// more than the FP8 scores' error fails it.
TEST(Fp8Verdict, PassesThePlainImplementationAndCatchesAWrongKeyOrder) {
  fa::Problem p;
  p.batch = 1, p.heads = 2, p.kv_heads = 1, p.head_dim = 32, p.seqlen_q = 40, p.seqlen_k = 96, p.dtype = fa::Dtype::f16;
  auto quantized = [](const std::vector<float>& x) { return fa::dequantize(fa::quantize_e4m3(x)); };
  const fa::HostInputs in{quantized(fa::random_normal(p.q_elems(), 7, fa::Dtype::f16)),
                          quantized(fa::random_normal(p.kv_elems(), 8, fa::Dtype::f16)),
                          quantized(fa::random_normal(p.kv_elems(), 9, fa::Dtype::f16))};
  auto bytes = [&](const fa::ReferenceForward& r) {
    return std::pair{fa::encode(std::vector<float>(r.o.begin(), r.o.end()), fa::Dtype::f16),
                     fa::encode(std::vector<float>(r.lse.begin(), r.lse.end()), fa::Dtype::f32)};
  };
  const fa::ReferenceForward plain = fa::fp8_plain_forward(p, in.q, in.k, in.v);
  const auto [o, lse] = bytes(plain);
  const fa::ForwardCheck good = fa::check_forward_fp8(p, in, o, lse);
  EXPECT_TRUE(good.pass()) << good.summary();

  std::vector<float> swapped = in.v;  // keys 2m and 2m + 1 exchanged
  for (int j = 0; j + 1 < p.seqlen_k; j += 2)
    for (int c = 0; c < p.head_dim; ++c) std::swap(swapped[j * p.head_dim + c], swapped[(j + 1) * p.head_dim + c]);
  const auto [o_wrong, lse_same] = bytes(fa::fp8_plain_forward(p, in.q, in.k, swapped));
  EXPECT_FALSE(fa::check_forward_fp8(p, in, o_wrong, lse_same).pass()) << "V's keys out of order must fail";

  fa::ReferenceForward off = plain;
  off.lse[5] += 0.05;  // the FP8 scores' error here: 2^-12 scale |q| |k|, about 0.002
  const auto [o_same, lse_off] = bytes(off);
  EXPECT_FALSE(fa::check_forward_fp8(p, in, o_same, lse_off).pass()) << "an LSE off by 0.05 must fail";
  p.dtype = fa::Dtype::bf16;
  EXPECT_THROW(fa::check_forward_fp8(p, in, o, lse), std::invalid_argument);
}

}  // namespace
