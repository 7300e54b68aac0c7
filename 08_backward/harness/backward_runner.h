// The main() of a backward chapter's executable: parse the command line every chapter shares
// (cli.h), draw seeded inputs and a seeded dO, run the chapter's forward (for O and LSE) and its
// backward, check both against the CPU reference, time each, and print one readable line each
// (and with --json one JSON line with both).
#pragma once

#include <string>
#include <vector>

#include "08_backward/harness/backward.h"

namespace fa {

// Exit status and error lines as run_chapter's (runner.h): 0 pass, 1 mismatch or CUDA error,
// 2 bad arguments or unsupported problem. `tables`: where the head dims differ by dtype, one
// Support per group of dtypes (08: the fp32 kernel's, the tensor-core kernel's); the runner
// refuses a problem its dtype's table does not list, and --help lists each table. Empty:
// chapter.support alone. `own_flags`: help lines of flags the chapter's main() takes out of argv
// before calling this (08: --ffma).
int run_backward_chapter(const BackwardChapter& chapter, int argc, char** argv,
                         const std::vector<Support>& tables = {}, const std::string& own_flags = "");

}  // namespace fa
