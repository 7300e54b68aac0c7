// Tests of common/host/host_data.h: the fp16/bf16 encoders against known bit patterns and exhaustive
// round trips, byte encoding, the poison pattern, and the seeded inputs.
//
//   ./build/common/common_cpu_tests --gtest_filter='Half*:Bf16*:Encode*:Poison*:Seeded*:Inputs*'
#include "common/host/host_data.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <vector>

namespace fa {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

float pow2(int e) { return std::ldexp(1.0f, e); }

std::uint32_t bits_of(float x) {
  std::uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  return u;
}

float float_of(std::uint32_t u) {
  float x;
  std::memcpy(&x, &u, sizeof x);
  return x;
}

bool half_is_nan(std::uint16_t h) { return (h & 0x7C00) == 0x7C00 && (h & 0x3FF) != 0; }
bool bf16_is_nan(std::uint16_t b) { return (b & 0x7F80) == 0x7F80 && (b & 0x7F) != 0; }

// A NaN made by arithmetic at run time (volatile: the compiler may not fold it).
float arithmetic_nan() {
  volatile float zero = 0.0f;
  return zero / zero;
}

TEST(HalfEncode, KnownBitPatterns) {
  EXPECT_EQ(float_to_half_bits(1.0f), 0x3C00);
  EXPECT_EQ(float_to_half_bits(-2.0f), 0xC000);
  EXPECT_EQ(float_to_half_bits(0.5f), 0x3800);
  EXPECT_EQ(float_to_half_bits(0.0f), 0x0000);
  EXPECT_EQ(float_to_half_bits(-0.0f), 0x8000);
  EXPECT_EQ(float_to_half_bits(65504.0f), 0x7BFF);     // largest finite half
  EXPECT_EQ(float_to_half_bits(pow2(-14)), 0x0400);    // smallest normal
  EXPECT_EQ(float_to_half_bits(pow2(-24)), 0x0001);    // smallest subnormal
  EXPECT_EQ(float_to_half_bits(-pow2(-24)), 0x8001);
  EXPECT_EQ(float_to_half_bits(1e-10f), 0x0000);       // far below the subnormals: zero
}

TEST(HalfEncode, RoundsToNearestTiesToEven) {
  // Around 1 a half step is 2^-10. 1 + 2^-11 is half way between 0x3C00 and 0x3C01: the even
  // one (0x3C00) wins; 1 + 3*2^-11 is half way between 0x3C01 and 0x3C02: 0x3C02 wins.
  EXPECT_EQ(float_to_half_bits(1.0f + pow2(-11)), 0x3C00);
  EXPECT_EQ(float_to_half_bits(1.0f + 3 * pow2(-11)), 0x3C02);
  EXPECT_EQ(float_to_half_bits(1.0f + pow2(-11) + pow2(-20)), 0x3C01);  // just above half way
  EXPECT_EQ(float_to_half_bits(1.0f + pow2(-10)), 0x3C01);              // exact
  // 65520 is half way between 65504 (0x7BFF, odd) and 65536 (would be 0x7C00): rounds to inf.
  EXPECT_EQ(float_to_half_bits(65520.0f), 0x7C00);
  EXPECT_EQ(float_to_half_bits(65519.0f), 0x7BFF);
  EXPECT_EQ(float_to_half_bits(-65520.0f), 0xFC00);
  // Subnormal ties: 2^-25 is half of the smallest subnormal (ties to 0), 3*2^-25 is 1.5 steps
  // (ties to 2), and 1023.5 steps carries into the smallest normal 0x0400.
  EXPECT_EQ(float_to_half_bits(pow2(-25)), 0x0000);
  EXPECT_EQ(float_to_half_bits(3 * pow2(-25)), 0x0002);
  EXPECT_EQ(float_to_half_bits(pow2(-25) + pow2(-40)), 0x0001);
  EXPECT_EQ(float_to_half_bits(1023.5f * pow2(-24)), 0x0400);
}

TEST(HalfEncode, InfAndNanSurvive) {
  EXPECT_EQ(float_to_half_bits(kInf), 0x7C00);
  EXPECT_EQ(float_to_half_bits(-kInf), 0xFC00);
  EXPECT_TRUE(half_is_nan(float_to_half_bits(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_TRUE(half_is_nan(float_to_half_bits(arithmetic_nan())));
  // A NaN whose payload sits only in the low float bits must not truncate to inf.
  EXPECT_TRUE(half_is_nan(float_to_half_bits(float_of(0x7F800001))));
  EXPECT_TRUE(std::isnan(half_bits_to_float(0x7E00)));
  EXPECT_EQ(half_bits_to_float(0x7C00), kInf);
}

TEST(HalfEncode, EveryNonNanPatternRoundTrips) {
  for (std::uint32_t h = 0; h <= 0xFFFF; ++h) {
    const auto bits = static_cast<std::uint16_t>(h);
    const float x = half_bits_to_float(bits);
    if (half_is_nan(bits)) {
      ASSERT_TRUE(std::isnan(x)) << std::hex << h;
      ASSERT_TRUE(half_is_nan(float_to_half_bits(x))) << std::hex << h;
    } else {
      ASSERT_EQ(float_to_half_bits(x), bits) << std::hex << h << " decodes to " << x;
    }
  }
}

TEST(Bf16Encode, KnownBitPatterns) {
  EXPECT_EQ(float_to_bf16_bits(1.0f), 0x3F80);
  EXPECT_EQ(float_to_bf16_bits(-2.0f), 0xC000);
  EXPECT_EQ(float_to_bf16_bits(0.0f), 0x0000);
  EXPECT_EQ(float_to_bf16_bits(-0.0f), 0x8000);
  EXPECT_EQ(float_to_bf16_bits(kInf), 0x7F80);
  EXPECT_EQ(float_to_bf16_bits(-kInf), 0xFF80);
  EXPECT_EQ(float_to_bf16_bits(float_of(0x00010000)), 0x0001);  // smallest bf16 subnormal
}

TEST(Bf16Encode, RoundsToNearestTiesToEven) {
  // Around 1 a bf16 step is 2^-7: 1 + 2^-8 is half way and goes to even 0x3F80, 1 + 3*2^-8
  // goes to even 0x3F82, and a hair above half way rounds up.
  EXPECT_EQ(float_to_bf16_bits(1.0f + pow2(-8)), 0x3F80);
  EXPECT_EQ(float_to_bf16_bits(1.0f + 3 * pow2(-8)), 0x3F82);
  EXPECT_EQ(float_to_bf16_bits(1.0f + pow2(-8) + pow2(-20)), 0x3F81);
  EXPECT_EQ(float_to_bf16_bits(-(1.0f + 3 * pow2(-8))), 0xBF82);
  // The largest float rounds up past the largest bf16 (0x7F7F) into inf.
  EXPECT_EQ(float_to_bf16_bits(std::numeric_limits<float>::max()), 0x7F80);
  EXPECT_EQ(float_to_bf16_bits(float_of(0x7F7F7FFF)), 0x7F7F);
}

TEST(Bf16Encode, NanSurvives) {
  EXPECT_TRUE(bf16_is_nan(float_to_bf16_bits(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_TRUE(bf16_is_nan(float_to_bf16_bits(arithmetic_nan())));
  // Truncating 0x7F800001 would give 0x7F80, which is inf: the encoder must keep it a NaN.
  EXPECT_TRUE(bf16_is_nan(float_to_bf16_bits(float_of(0x7F800001))));
  EXPECT_TRUE(bf16_is_nan(float_to_bf16_bits(float_of(0xFF800001))));
}

TEST(Bf16Encode, EveryNonNanPatternRoundTrips) {
  for (std::uint32_t b = 0; b <= 0xFFFF; ++b) {
    const auto bits = static_cast<std::uint16_t>(b);
    const float x = bf16_bits_to_float(bits);
    ASSERT_EQ(bits_of(x), b << 16);
    if (bf16_is_nan(bits)) {
      ASSERT_TRUE(std::isnan(x)) << std::hex << b;
      ASSERT_TRUE(bf16_is_nan(float_to_bf16_bits(x))) << std::hex << b;
    } else {
      ASSERT_EQ(float_to_bf16_bits(x), bits) << std::hex << b << " decodes to " << x;
    }
  }
}

// Values that each dtype holds exactly: seeded normals plus the edge cases.
std::vector<float> representable_values(Dtype dtype) {
  std::vector<float> values = random_normal(1000, 5, dtype);
  const float largest = dtype == Dtype::f16 ? 65504.0f : std::numeric_limits<float>::max();
  for (float x : {0.0f, -0.0f, 1.0f, -largest, largest, kInf, -kInf}) {
    values.push_back(round_to_dtype(x, dtype));
  }
  return values;
}

TEST(EncodeDecode, RoundTripsEveryDtypeBitForBit) {
  for (Dtype dtype : {Dtype::f32, Dtype::f16, Dtype::bf16}) {
    SCOPED_TRACE(dtype_name(dtype));
    const std::vector<float> values = representable_values(dtype);
    const std::vector<std::uint8_t> bytes = encode(values, dtype);
    ASSERT_EQ(bytes.size(), values.size() * dtype_size(dtype));
    const std::vector<float> back = decode(bytes, dtype);
    ASSERT_EQ(back.size(), values.size());
    for (std::size_t n = 0; n < values.size(); ++n)
      ASSERT_EQ(bits_of(back[n]), bits_of(values[n])) << "element " << n << " = " << values[n];
  }
}

TEST(EncodeDecode, BytesAreLittleEndianDevicePatterns) {
  EXPECT_EQ(encode({1.0f, -2.0f}, Dtype::f16), (std::vector<std::uint8_t>{0x00, 0x3C, 0x00, 0xC0}));
  EXPECT_EQ(encode({1.0f}, Dtype::bf16), (std::vector<std::uint8_t>{0x80, 0x3F}));
  EXPECT_EQ(encode({1.0f}, Dtype::f32), (std::vector<std::uint8_t>{0x00, 0x00, 0x80, 0x3F}));
}

TEST(Poison, AllFfBytesArePoison) {
  for (Dtype dtype : {Dtype::f32, Dtype::f16, Dtype::bf16}) {
    const std::vector<std::uint8_t> element(dtype_size(dtype), kPoisonByte);
    EXPECT_TRUE(is_poison(element.data(), dtype)) << dtype_name(dtype);
    // It decodes to a NaN, so even a harness that forgot to check would not pass it.
    EXPECT_TRUE(std::isnan(decode(element, dtype)[0])) << dtype_name(dtype);
  }
}

TEST(Poison, ArithmeticNanAndNearMissesAreNotPoison) {
  for (Dtype dtype : {Dtype::f32, Dtype::f16, Dtype::bf16}) {
    SCOPED_TRACE(dtype_name(dtype));
    const std::vector<std::uint8_t> nan = encode({arithmetic_nan(), std::sqrt(-1.0f)}, dtype);
    EXPECT_FALSE(is_poison(&nan[0], dtype));
    EXPECT_FALSE(is_poison(&nan[dtype_size(dtype)], dtype));
    std::vector<std::uint8_t> almost(dtype_size(dtype), kPoisonByte);
    almost[0] = 0xFE;
    EXPECT_FALSE(is_poison(almost.data(), dtype));
  }
}

TEST(SeededNormal, IsDeterministicAndSeedsDiffer) {
  int same = 0;
  for (std::uint64_t n = 0; n < 1000; ++n) {
    ASSERT_EQ(bits_of(seeded_normal(42, n)), bits_of(seeded_normal(42, n)));
    same += seeded_normal(42, n) == seeded_normal(43, n);
  }
  EXPECT_EQ(same, 0);
  EXPECT_NE(seeded_normal(42, 0), seeded_normal(42, 1));
}

TEST(SeededNormal, HasMeanZeroAndVarianceOne) {
  // With N = 200k draws the standard error of the mean is 1/sqrt(N) = 0.0022 and that of the
  // variance sqrt(2/N) = 0.0032, so the bounds 0.01 and 0.02 are 4.5 and 6 standard errors.
  constexpr int kCount = 200000;
  double sum = 0, sum2 = 0;
  int tails = 0;
  for (int n = 0; n < kCount; ++n) {
    const double x = seeded_normal(7, n);
    ASSERT_TRUE(std::isfinite(x)) << n;
    sum += x;
    sum2 += x * x;
    tails += std::abs(x) > 1.959964;
  }
  const double mean = sum / kCount;
  EXPECT_NEAR(mean, 0.0, 0.01);
  EXPECT_NEAR(sum2 / kCount - mean * mean, 1.0, 0.02);
  // A normal lands outside +-1.96 5% of the time (standard error 0.05% at this N).
  EXPECT_NEAR(static_cast<double>(tails) / kCount, 0.05, 0.003);
}

TEST(SeededNormal, RandomNormalIsAlreadyRoundedToTheDtype) {
  for (Dtype dtype : {Dtype::f32, Dtype::f16, Dtype::bf16}) {
    SCOPED_TRACE(dtype_name(dtype));
    const std::vector<float> values = random_normal(4096, 11, dtype);
    ASSERT_EQ(values.size(), 4096u);
    for (std::size_t n = 0; n < values.size(); ++n) {
      ASSERT_EQ(round_to_dtype(values[n], dtype), values[n]) << n;
      ASSERT_EQ(values[n], round_to_dtype(seeded_normal(11, n), dtype)) << n;
    }
  }
}

TEST(Inputs, SizesMatchTheProblemAndTensorsDiffer) {
  Problem p;
  p.batch = 2;
  p.heads = 4;
  p.kv_heads = 2;
  p.seqlen_q = 17;
  p.seqlen_k = 33;
  p.head_dim = 16;
  const HostInputs in = make_inputs(p, 1);
  EXPECT_EQ(static_cast<std::int64_t>(in.q.size()), p.q_elems());
  EXPECT_EQ(static_cast<std::int64_t>(in.k.size()), p.kv_elems());
  EXPECT_EQ(static_cast<std::int64_t>(in.v.size()), p.kv_elems());
  EXPECT_NE(in.k, in.v);

  // Same shape for all three: Q must not equal K or V either, anywhere.
  p.kv_heads = p.heads;
  p.seqlen_k = p.seqlen_q;
  const HostInputs same = make_inputs(p, 1);
  int equal = 0;
  for (std::size_t n = 0; n < same.q.size(); ++n)
    equal += (same.q[n] == same.k[n]) + (same.q[n] == same.v[n]) + (same.k[n] == same.v[n]);
  EXPECT_EQ(equal, 0);
}

// [B, H, S, D] to [B, S, H, D]: element (b, h, s, d) moves from ((b H + h) S + s) D + d to
// ((b S + s) H + h) D + d, and from_layout brings it back; bhsd is left as it is.
TEST(Layout, MovesRowsBetweenBhsdAndBshd) {
  const int B = 2, H = 3, S = 5, D = 4;
  const std::size_t elem = 2;
  std::vector<std::uint8_t> x(std::size_t(B) * H * S * D * elem);
  for (std::size_t n = 0; n < x.size(); ++n) x[n] = static_cast<std::uint8_t>(n * 7 + n / 251);
  const std::vector<std::uint8_t> y = to_layout(x, Layout::bshd, elem, B, H, S, D);
  ASSERT_EQ(y.size(), x.size());
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < H; ++h)
      for (int s = 0; s < S; ++s)
        for (int d = 0; d < D; ++d)
          for (std::size_t e = 0; e < elem; ++e)
            ASSERT_EQ(y[(((std::size_t(b) * S + s) * H + h) * D + d) * elem + e],
                      x[(((std::size_t(b) * H + h) * S + s) * D + d) * elem + e]);
  EXPECT_EQ(from_layout(y, Layout::bshd, elem, B, H, S, D), x);
  EXPECT_EQ(to_layout(x, Layout::bhsd, elem, B, H, S, D), x);
  EXPECT_THROW(to_layout(x, Layout::bshd, elem, B, H, S + 1, D), std::invalid_argument);
}

// The strides a kernel reads a layout with (problem.h): the same element offsets as the loops above.
TEST(Layout, StridesMatchTheLayouts) {
  const Strides bhsd = layout_strides(Layout::bhsd, 3, 5, 4), bshd = layout_strides(Layout::bshd, 3, 5, 4);
  EXPECT_EQ(bhsd.batch, 60); EXPECT_EQ(bhsd.head, 20); EXPECT_EQ(bhsd.row, 4);
  EXPECT_EQ(bshd.batch, 60); EXPECT_EQ(bshd.head, 4); EXPECT_EQ(bshd.row, 12);
  Problem p;
  p.heads = 8, p.kv_heads = 2, p.seqlen_q = 7, p.seqlen_k = 9, p.head_dim = 16, p.layout = Layout::bshd;
  EXPECT_EQ(p.q_strides().row, 8 * 16);
  EXPECT_EQ(p.kv_strides().row, 2 * 16);
  EXPECT_EQ(p.kv_strides().batch, 9 * 2 * 16);
  EXPECT_EQ(parse_layout("bshd"), Layout::bshd);
  EXPECT_THROW(parse_layout("nhwc"), std::invalid_argument);
}

// The Problem form sizes each tensor by what it is: Q, O with H heads of Sq rows, K, V with Hkv of
// Sk, V and O of Dv columns.
TEST(Layout, ProblemFormSizesEachOperand) {
  Problem p;
  p.batch = 2, p.heads = 4, p.kv_heads = 2, p.seqlen_q = 3, p.seqlen_k = 5, p.head_dim = 8, p.head_dim_v = 16;
  p.dtype = Dtype::bf16, p.layout = Layout::bshd;
  const std::size_t elem = 2;
  auto bytes = [](std::size_t n) {
    std::vector<std::uint8_t> x(n);
    for (std::size_t e = 0; e < n; ++e) x[e] = static_cast<std::uint8_t>(e * 7 + e / 256);
    return x;
  };
  const struct {
    Operand which;
    int heads, seqlen, dim;
  } cases[] = {{Operand::q, 4, 3, 8}, {Operand::o, 4, 3, 16}, {Operand::k, 2, 5, 8}, {Operand::v, 2, 5, 16}};
  for (const auto& c : cases) {
    const std::vector<std::uint8_t> x = bytes(std::size_t(p.batch) * c.heads * c.seqlen * c.dim * elem);
    const std::vector<std::uint8_t> y = to_layout(x, p, c.which);
    EXPECT_EQ(y, to_layout(x, Layout::bshd, elem, p.batch, c.heads, c.seqlen, c.dim));
    EXPECT_EQ(from_layout(y, p, c.which), x);
  }
  p.layout = Layout::bhsd;
  const std::vector<std::uint8_t> q = bytes(std::size_t(p.batch) * 4 * 3 * 8 * elem);
  EXPECT_EQ(to_layout(q, p, Operand::q), q);
}

// row_offset (problem.h), the kernels' address of row i of slice bh = b H + h: the element where
// to_layout put that row, in both layouts.
TEST(Layout, RowOffsetFindsTheRowsToLayoutMoved) {
  const int batch = 2, heads = 3, seqlen = 5, dim = 4;
  std::vector<std::uint8_t> bhsd(std::size_t(batch) * heads * seqlen * dim);
  for (std::size_t e = 0; e < bhsd.size(); ++e) bhsd[e] = static_cast<std::uint8_t>(e / dim);  // the row's number
  for (Layout layout : {Layout::bhsd, Layout::bshd}) {
    const std::vector<std::uint8_t> x = to_layout(bhsd, layout, 1, batch, heads, seqlen, dim);
    const Strides s = layout_strides(layout, heads, seqlen, dim);
    for (int bh = 0; bh < batch * heads; ++bh)
      for (int i = 0; i < seqlen; ++i) {
        const std::int64_t at = row_offset(s, heads, bh, i);
        ASSERT_EQ(x[at], bh * seqlen + i) << layout_name(layout) << " bh " << bh << " i " << i;
        ASSERT_EQ(x[at + dim - 1], bh * seqlen + i) << layout_name(layout) << ": a row is dim elements side by side";
      }
  }
}

TEST(Inputs, AreSeededAndRoundedToTheDtype) {
  Problem p;
  p.seqlen_q = p.seqlen_k = 32;
  p.head_dim = 8;
  p.dtype = Dtype::bf16;
  EXPECT_EQ(make_inputs(p, 3).q, make_inputs(p, 3).q);
  EXPECT_NE(make_inputs(p, 3).q, make_inputs(p, 4).q);
  for (float x : make_inputs(p, 3).v) ASSERT_EQ(round_to_dtype(x, Dtype::bf16), x);
}

}  // namespace
}  // namespace fa
