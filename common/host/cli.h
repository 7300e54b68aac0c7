// The command line every chapter's executable shares, its --help text and its error lines.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/host/problem.h"
#include "common/host/support.h"

namespace fa {

struct Options {
  Problem problem;
  int iters = 20;           // timed repetitions (after 3 warm-up runs)
  bool json = false;        // also print the result as one JSON line
  bool check = true;        // compare with the CPU reference (--no-check skips it)
  std::uint64_t seed = 2024;
};

// Thrown by parse_cli for --help (or -h); the runner then prints usage().
struct HelpRequested : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// What --help says about one executable.
struct Help {
  std::string chapter;            // "05_flash_v2"
  std::string runs;               // one line: what the executable runs ("runs one attention forward pass, ...")
  std::vector<Support> supports;  // the chapter's table, or one table per dtype where head dims differ by dtype
  Problem defaults;               // the chapter's default problem
  std::string chapter_flags;      // the chapter's own flags, one "  --flag ..." line each ("" for none)
  std::string program;            // argv[0] (run_main fills it in)
};

// The --help text: what the executable runs, then every flag, the dtypes and head dims from
// `supports` (the tables the chapter refuses problems by), then the exit statuses.
std::string usage(const Help& help);
// "f32 only", "bf16 or f16", "f32, f16 or bf16": every dtype of `supports`, in order.
std::string dtypes_text(const std::vector<Support>& supports);
// "32, 64, 96, 128 or 256", "any of 1..128", or one clause per table where there are several:
// "f32: any of 1..128; f16 and bf16: 64 or 128".
std::string head_dims_text(const std::vector<Support>& supports);

// A chapter's own flag without a value (08's --ffma, the backward's --deterministic): true where
// argv holds it, and then it is taken out of argv (argc one less) before parse_cli sees argv.
bool take_flag(int& argc, char** argv, const char* flag);

// Throws std::invalid_argument naming the bad flag or value, HelpRequested for --help.
// `defaults` is the chapter's default problem (its dtype, say).
Options parse_cli(int argc, const char* const* argv, const Problem& defaults);

// The one form every executable prints an error in: "error: <chapter>: <message>". Chapter code
// names itself in what it throws ("05_flash_v2: head_dim 200 ..."), so a leading "<chapter>: "
// or "<chapter> " of `message` is dropped rather than printed twice.
std::string error_line(const std::string& chapter, const std::string& message);

}  // namespace fa
