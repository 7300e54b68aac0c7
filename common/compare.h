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

#include "common/problem.h"

namespace fa {

struct Tolerance {
  double atol;
  double rtol;
};

// The tolerance for a chapter's output O and LSE in a given dtype. The reasoning is written
// where it is defined, in compare.cpp.
Tolerance output_tolerance(Dtype dtype);

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

}  // namespace fa
