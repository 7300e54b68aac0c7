// The command line every chapter's executable shares.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

#include "common/problem.h"

namespace fa {

struct Options {
  Problem problem;
  int iters = 20;           // timed repetitions (after 3 warm-up runs)
  bool json = false;        // also print the result as one JSON line
  bool check = true;        // compare with the CPU reference (--no-check skips it)
  std::uint64_t seed = 2024;
};

// Thrown by parse_cli for --help; what() is the usage text.
struct HelpRequested : std::runtime_error {
  using std::runtime_error::runtime_error;
};

std::string usage(const std::string& program, const Problem& defaults);

// Throws std::invalid_argument naming the bad flag or value, HelpRequested for --help.
// `defaults` is the chapter's default problem (its dtype, say).
Options parse_cli(int argc, const char* const* argv, const Problem& defaults);

}  // namespace fa
