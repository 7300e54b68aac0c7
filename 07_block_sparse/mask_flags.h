// Chapter 07's own command-line flags: the mask's pattern and its parameters. Plain C++, so the
// CPU tests check them without a GPU (test_mask_flags.cpp).
#pragma once

#include "07_block_sparse/block_mask.h"

namespace block_sparse {

struct MaskOptions {
  HeadPattern pattern{.pattern = Pattern::random, .density = 0.5};
  int block_k = 128;
};

// The flags' --help lines (fa::Help::chapter_flags).
extern const char* const kMaskFlagsHelp;

// Takes the mask flags out of argv, keeping the others in order for the shared parser (which
// refuses flags it does not know). Throws std::invalid_argument for a missing or malformed value,
// an unknown pattern, or a parameter the pattern does not use (--density with --pattern local):
// a flag is never ignored.
MaskOptions take_mask_flags(int& argc, char** argv);

}  // namespace block_sparse
