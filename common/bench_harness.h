// The shared forward benchmark (Google Benchmark, timed with CUDA events).
//
// Shapes are FlashAttention-2's: seqlen 512..16k, batch = 16k / seqlen, heads = 2048 / D,
// D = 64 and 128, causal and not. A chapter's benchmark main is one line:
//
//   int main(int argc, char** argv) { return fa::bench::main(naive::chapter(), argc, argv); }
//
// Extra flags (before Google Benchmark's own): --dtype f32|f16|bf16|all (default all the chapter
// supports), --max-seqlen N.
// Counters: TFLOPS (from the median iteration), GBps (the fewest bytes a forward must move),
// peak_mem_MiB (all device memory the run held) and extra_mem_MiB (beyond Q, K, V, O, LSE).
#pragma once

#include "common/chapter.h"

namespace fa::bench {

int main(const Chapter& chapter, int argc, char** argv);

}  // namespace fa::bench
