// Tests of common/host/compare.h: the allclose rule, NaN / unwritten / infinity handling, where the
// first mismatch is reported, the error statistics, and the per-dtype tolerances.
//
//   ./build/common/common_cpu_tests --gtest_filter='Compare*:OutputTolerance*'
#include "common/host/compare.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/host/host_data.h"

namespace fa {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr Tolerance kTol{1e-3, 1e-2};

// Compares float results (stored as `dtype`) against `want`, as a [1, 1, n, 1] tensor.
CompareReport compare_values(const std::vector<float>& got, const std::vector<double>& want,
                             Dtype dtype = Dtype::f32, Tolerance tol = kTol) {
  return compare("t", encode(got, dtype), dtype, want, {1, 1, static_cast<int>(want.size()), 1},
                 tol);
}

// Each want[n] moved by `factor` times its allowed error atol + rtol * |want|, alternating sign.
std::vector<float> off_by(const std::vector<double>& want, double factor) {
  std::vector<float> got;
  for (std::size_t n = 0; n < want.size(); ++n) {
    const double bound = kTol.atol + kTol.rtol * std::abs(want[n]);
    got.push_back(static_cast<float>(want[n] + (n % 2 ? -1 : 1) * factor * bound));
  }
  return got;
}

const std::vector<double> kWant{1.0, -2.0, 0.5, 100.0, 0.0, -3e-4};

TEST(Compare, PassesWithinTolerance) {
  const CompareReport r = compare_values(off_by(kWant, 0.99), kWant);
  EXPECT_TRUE(r.pass()) << r.summary();
  EXPECT_EQ(r.count, 6);
  EXPECT_EQ(r.bad, 0);
  EXPECT_TRUE(r.first.empty());
  EXPECT_NE(r.summary().find("PASS"), std::string::npos);
}

TEST(Compare, FailsJustOutsideTolerance) {
  // 1% past the bound: far more than the float rounding of `got` (~1e-7 relative).
  for (std::size_t n = 0; n < kWant.size(); ++n) {
    std::vector<float> got = off_by(kWant, 0.5);
    got[n] = off_by(kWant, 1.01)[n];
    const CompareReport r = compare_values(got, kWant);
    EXPECT_FALSE(r.pass()) << "element " << n;
    EXPECT_EQ(r.bad, 1);
    ASSERT_EQ(r.first.size(), 1u);
    EXPECT_EQ(r.first[0].index, static_cast<std::int64_t>(n));
    EXPECT_STREQ(r.first[0].why, "off");
    EXPECT_NE(r.summary().find("FAIL"), std::string::npos);
  }
}

TEST(Compare, NanFails) {
  std::vector<float> got(kWant.begin(), kWant.end());
  got[2] = std::numeric_limits<float>::quiet_NaN();
  const CompareReport r = compare_values(got, kWant);
  EXPECT_FALSE(r.pass());
  EXPECT_EQ(r.nans, 1);
  EXPECT_EQ(r.unwritten, 0);
  ASSERT_EQ(r.first.size(), 1u);
  EXPECT_STREQ(r.first[0].why, "NaN");
}

TEST(Compare, PoisonedElementFailsAsUnwritten) {
  for (Dtype dtype : {Dtype::f32, Dtype::f16, Dtype::bf16}) {
    SCOPED_TRACE(dtype_name(dtype));
    std::vector<std::uint8_t> got = encode(std::vector<float>(kWant.begin(), kWant.end()), dtype);
    const std::size_t size = dtype_size(dtype);
    for (std::size_t b = 0; b < size; ++b) got[3 * size + b] = kPoisonByte;  // element 3 unwritten
    const CompareReport r = compare("t", got, dtype, kWant, {1, 1, 6, 1}, output_tolerance(dtype));
    EXPECT_FALSE(r.pass());
    EXPECT_EQ(r.bad, 1);
    EXPECT_EQ(r.unwritten, 1);
    EXPECT_EQ(r.nans, 0);  // counted as unwritten, not as a NaN the kernel produced
    ASSERT_EQ(r.first.size(), 1u);
    EXPECT_EQ(r.first[0].index, 3);
    EXPECT_STREQ(r.first[0].why, "unwritten");
  }
}

TEST(Compare, InfinityMustMatchExactly) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_TRUE(compare_values({inf, 1.0f}, {kInf, 1.0}).pass());
  EXPECT_TRUE(compare_values({inf}, {kInf}, Dtype::bf16).pass());
  const CompareReport finite_for_inf = compare_values({1e30f}, {kInf});
  EXPECT_FALSE(finite_for_inf.pass());
  ASSERT_EQ(finite_for_inf.first.size(), 1u);
  EXPECT_STREQ(finite_for_inf.first[0].why, "inf");
  EXPECT_FALSE(compare_values({inf}, {1e30}).pass());
  EXPECT_FALSE(compare_values({-inf}, {kInf}).pass());
  // Infinite pairs do not enter the error statistics.
  EXPECT_EQ(compare_values({inf, 1.5f}, {kInf, 1.0}, Dtype::f32, {1, 1}).max_abs, 0.5);
}

TEST(Compare, ReportsCoordinatesOfTheFirstMismatches) {
  const std::array<int, 4> dims{2, 3, 4, 5};
  const int count = 2 * 3 * 4 * 5;
  std::vector<double> want(count);
  for (int n = 0; n < count; ++n) want[n] = 0.25 * (n % 7);
  std::vector<float> got(want.begin(), want.end());
  // Break (1, 2, 3, 4), the last element, and (1, 0, 2, 1); memory order puts the latter first.
  const int late = ((1 * 3 + 2) * 4 + 3) * 5 + 4, early = ((1 * 3 + 0) * 4 + 2) * 5 + 1;
  got[late] += 1.0f;
  got[early] += 1.0f;
  const CompareReport r = compare("o", encode(got, Dtype::f32), Dtype::f32, want, dims, kTol);
  ASSERT_EQ(r.bad, 2);
  ASSERT_EQ(r.first.size(), 2u);
  EXPECT_EQ(r.first[0].index, early);
  EXPECT_EQ(r.first[0].where, (std::array<int, 4>{1, 0, 2, 1}));
  EXPECT_EQ(r.first[1].where, (std::array<int, 4>{1, 2, 3, 4}));
  EXPECT_EQ(r.first[0].got, want[early] + 1.0);
  EXPECT_EQ(r.first[0].want, want[early]);
  EXPECT_NE(r.summary().find("[b=1 h=0 i=2 j=1]"), std::string::npos) << r.summary();
}

TEST(Compare, KeepsOnlyTheFirstFewButCountsAll) {
  const std::vector<double> want(20, 1.0);
  const CompareReport r = compare_values(std::vector<float>(20, 2.0f), want);
  EXPECT_EQ(r.bad, 20);
  EXPECT_EQ(r.first.size(), 5u);
}

TEST(Compare, ErrorStatisticsOnAConstructedCase) {
  // want = (3, 4, 0), ||want|| = 5; got is off by 0.5 in the first element and by 1e-5 in the
  // last, whose |want| = 0 <= atol keeps it out of max_rel.
  const CompareReport r = compare_values({3.5f, 4.0f, 1e-5f}, {3.0, 4.0, 0.0}, Dtype::f32, {1, 1});
  EXPECT_TRUE(r.pass());
  EXPECT_DOUBLE_EQ(r.max_abs, 0.5);
  EXPECT_DOUBLE_EQ(r.max_rel, 0.5 / 3.0);
  EXPECT_NEAR(r.rel_fro, std::sqrt(0.25 + 1e-10) / 5.0, 1e-12);
}

TEST(Compare, SizeMismatchThrows) {
  const std::vector<double> want{1.0, 2.0, 3.0};
  EXPECT_THROW(compare("t", encode({1.0f, 2.0f}, Dtype::f32), Dtype::f32, want, {1, 1, 3, 1}, kTol),
               std::invalid_argument);
  // Three f16 elements are 6 bytes: the f32 byte count of the same values must not pass.
  EXPECT_THROW(compare("t", encode({1.0f, 2.0f, 3.0f}, Dtype::f32), Dtype::f16, want,
                       {1, 1, 3, 1}, kTol),
               std::invalid_argument);
}

TEST(OutputTolerance, IsPositiveAndOrderedByPrecision) {
  const Tolerance f32 = output_tolerance(Dtype::f32), f16 = output_tolerance(Dtype::f16),
                  bf16 = output_tolerance(Dtype::bf16);
  for (const Tolerance& t : {f32, f16, bf16}) {
    EXPECT_GT(t.atol, 0);
    EXPECT_GT(t.rtol, 0);
  }
  EXPECT_LT(f32.atol, f16.atol);
  EXPECT_LT(f16.atol, bf16.atol);
  EXPECT_LT(f32.rtol, f16.rtol);
  EXPECT_LT(f16.rtol, bf16.rtol);
  // A tolerance must admit one rounding of the output to its own dtype (2^-11 for f16,
  // 2^-8 for bf16 relative), or a perfect kernel would fail.
  EXPECT_GE(f16.rtol, std::ldexp(1.0, -11));
  EXPECT_GE(bf16.rtol, std::ldexp(1.0, -8));
}

}  // namespace
}  // namespace fa
