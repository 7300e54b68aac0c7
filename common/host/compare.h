// Checking a GPU result against the float64 reference.
//
// An element passes when |got - want| <= atol + rtol * |want| (the rule of numpy.allclose and
// llm.c's dev/cuda). NaN never passes, an element still holding the poison pattern (never
// written) never passes, and an infinite reference value (the LSE of a row that sees no key)
// passes only when the result is the same infinity.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "common/host/problem.h"

namespace fa {

struct Tolerance {
  double atol;
  double rtol;
};

// The tolerance for a chapter's output O in a given dtype. The reasoning is written where it is
// defined, in compare.cpp.
Tolerance output_tolerance(Dtype dtype);

// The tolerance for LSE (float32 in every dtype), given the largest error of a plain
// same-precision implementation's LSE on the same inputs (0 where none was computed). Why it has
// almost no relative part: compare.cpp.
Tolerance lse_tolerance(double plain_lse_error);

struct Mismatch {
  std::int64_t index;
  std::array<int, 4> where;  // (b, h, i, j) of a [B, H, rows, cols] tensor
  double got;
  double want;
  const char* why;  // "off", "NaN", "unwritten", "inf"
};

struct CompareReport {
  std::string name;
  std::int64_t count = 0;
  std::int64_t bad = 0;
  std::int64_t nans = 0;
  std::int64_t unwritten = 0;
  double max_abs = 0;   // largest |got - want| over finite pairs
  double max_rel = 0;   // largest |got - want| / |want| over pairs with |want| > atol
  double rel_fro = 0;   // ||got - want||_F / ||want||_F over finite pairs
  Tolerance tol{0, 0};
  std::vector<Mismatch> first;  // the first few failures, in memory order

  bool pass() const { return bad == 0; }
  std::string summary() const;  // one line; the first mismatches follow on their own lines
};

// `got` holds the raw device bytes (dtype_size(dtype) each); `dims` is the tensor's shape as
// [B, H, rows, cols] (cols = 1 for LSE).
CompareReport compare(const std::string& name, const std::vector<std::uint8_t>& got, Dtype dtype,
                      const std::vector<double>& want, std::array<int, 4> dims, Tolerance tol);

// FlashAttention's rule (the rule of its test suite for f16/bf16 outputs; we apply it to every
// dtype, f32 included, on top of the element-wise tolerance): the kernel's largest
// error against the float64 reference may be at most twice the largest error of a plain
// same-precision implementation (same_precision_forward in reference.h) against the same
// reference, plus kSamePrecisionSlack. Why: rounding P and O to 8 (bf16) or 11 (f16) bits costs
// an error that depends on the data and the shape; measuring it with the plain implementation on
// the same inputs gives a bound that is tight for every shape, where a fixed atol would be either
// loose for short rows or too strict for long ones. The factor 2 admits a different but equally
// good order of rounding (the kernel rounds P per tile, before dividing by l); the slack (1e-5,
// far below one bf16 or f16 ulp of an output of size 1) only matters when both errors are ~0,
// as for seqlen 1 where O is a row of V exactly. For f32 the plain implementation's error is
// itself ~1e-7..1e-6 on standard-normal inputs, so there the slack is most of the bound: about 80
// float32 ulps of an output of size 1, 10x tighter than the element-wise 1e-4; on hard inputs
// (scores of size ~100) the plain error grows to ~1e-5..1e-4 and the factor 2 takes over.
constexpr double kSamePrecisionSlack = 1e-5;

//
// One more term, score_rounding (score_rounding() below), where the scores are large: every fp32
// implementation rounds each score s at least once, by up to half an ulp of |s| (2^-24 |s|), and
// which scores the rounding hits hardest depends on the order of the sums, not on the quality of
// the implementation. That error goes into P as a relative error and into O (size ~1) as about
// the same absolute error. At standard-normal inputs it is ~1e-6, below the slack; at scores of
// ~500 (the long-context large-logit cases) it is ~1e-4, and the plain implementation's own
// error on a handful of rows does not measure it (on an H200, f32 chapters at 70,000 keys: O
// errors of 1.2e-5..1.5e-4 where the plain one happened to err by 2e-7..6e-5 on the same rows).
struct SamePrecisionCheck {
  double kernel_max_abs;
  double baseline_max_abs;
  double score_rounding = 0.0;
  double bound() const { return 2.0 * baseline_max_abs + kSamePrecisionSlack + score_rounding; }
  bool pass() const { return kernel_max_abs <= bound(); }
  std::string summary() const;
};

// Half an fp32 ulp of the largest score p's inputs can give: 2^-24 * scale * max |q_i| * max |k_j|
// (Cauchy-Schwarz bounds |scale q_i . k_j|). q: [B, H, Sq, D], k: [B, Hkv, Sk, D].
double score_rounding(const Problem& p, const std::vector<float>& q, const std::vector<float>& k);

}  // namespace fa
