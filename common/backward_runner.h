// The main() of a backward chapter's executable: parse the command line every chapter shares
// (cli.h), draw seeded inputs and a seeded dO, run the chapter's forward (for O and LSE) and its
// backward, check both against the CPU reference, time each, and print one readable line each
// (and with --json one JSON line with both).
#pragma once

#include "common/backward.h"

namespace fa {

// Exit status, as run_chapter's: 0 pass, 1 mismatch or CUDA error, 2 bad arguments or
// unsupported problem.
int run_backward_chapter(const BackwardChapter& chapter, int argc, char** argv);

}  // namespace fa
