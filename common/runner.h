// The main() of every chapter's executable: parse the command line, draw seeded inputs, run
// the chapter's forward, check it against the CPU reference, time it, print one readable line
// (and with --json one JSON line).
#pragma once

#include <functional>
#include <string>

#include "common/chapter.h"
#include "common/cli.h"

namespace fa {

// Parses the command line and runs `body`, turning what goes wrong into the exit status:
// --help prints `about` and the usage (0); a bad argument or an unsupported problem
// (std::invalid_argument) prints the message (2); a CUDA error or anything else (1).
int run_main(const std::string& chapter, const Problem& defaults, const std::string& about, int argc,
             char** argv, const std::function<int(const Options&)>& body);

// Exit status: 0 pass, 1 mismatch or CUDA error, 2 bad arguments or unsupported problem.
// The start of a result's JSON line, shared by the forward and backward runners:
// {"chapter":...,"gpu":...,"cuda_runtime":...,"batch":...,...,"dtype":"..."  (no closing brace).
std::string json_problem_fields(const std::string& chapter, const Problem& p);

int run_chapter(const Chapter& chapter, int argc, char** argv);

}  // namespace fa
