// The main() of every chapter's executable: parse the command line, draw seeded inputs, run
// the chapter's forward, check it against the CPU reference, time it, print one readable line
// (and with --json one JSON line).
#pragma once

#include "common/chapter.h"

namespace fa {

// Exit status: 0 pass, 1 mismatch or CUDA error, 2 bad arguments or unsupported problem.
int run_chapter(const Chapter& chapter, int argc, char** argv);

}  // namespace fa
