// The main() of every chapter's executable: parse the command line, draw seeded inputs, run
// the chapter's forward, check it against the CPU reference, time it, print one readable line
// (and with --json one JSON line).
#pragma once

#include <exception>
#include <functional>
#include <string>

#include "common/harness/chapter.h"
#include "common/host/cli.h"

namespace fa {

// Exit status, as the README documents it: 0 pass, 1 mismatch or CUDA error (no usable GPU
// included), 2 bad arguments or unsupported problem. Every error is one line on stderr,
// error_line()'s "error: <chapter>: <message>".

// Prints error_line(chapter, e.what()) on stderr and returns the exit status for `e`: 2 for
// std::invalid_argument (a bad argument, an unsupported problem), 1 for anything else (a CUDA
// error, no usable GPU).
int report_error(const std::string& chapter, const std::exception& e);

// Parses the command line and runs `body`: --help prints usage(help) and returns 0; an exception
// from the parser or from `body` goes through report_error.
int run_main(Help help, int argc, char** argv, const std::function<int(const Options&)>& body);

// The start of a result's JSON line, shared by the forward and backward runners:
// {"chapter":...,"gpu":...,"cuda_runtime":...,"batch":...,...,"dtype":"...","layout":"...","softcap":0
// (no closing brace; softcap 0: off).
std::string json_problem_fields(const std::string& chapter, const Problem& p);

// Throws fa::cuda::Error saying why when no GPU can run the kernels (exit status 1). Runners
// call it after refusing unsupported problems, before drawing inputs.
void require_gpu();

// The executable of a forward chapter (01-06). chapter_flags: the --help lines of the chapter's own
// flags, which its main takes out of argv first (05's --ffma).
int run_chapter(const Chapter& chapter, int argc, char** argv, const std::string& chapter_flags = "");

}  // namespace fa
