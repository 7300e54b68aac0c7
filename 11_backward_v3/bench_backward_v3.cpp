// Chapter 11's backward on FlashAttention-2's benchmark shapes (Google Benchmark, CUDA events), the
// rows 08's bench has, for bf16 and f16:
//   ./11_backward_v3_bench [--max-seqlen N] [--head-dims 64,128] [Google Benchmark flags]
// bwd/11_backward_v3/bf16/D128/causal/seqlen:4096 -- batch = 16k / seqlen, heads = 2048 / D.
// Only the backward is timed (the preparation and the dQ conversion included); O and LSE come
// from one run of 09's forward before the loop (08_backward/harness/backward_bench.h).
#include <benchmark/benchmark.h>

#include <iostream>
#include <string>

#include "08_backward/harness/backward_bench.h"
#include "11_backward_v3/backward_v3.h"
#include "common/cuda/cuda_check.h"

int main(int argc, char** argv) {
  using namespace fa::backward_bench;
  const fa::BackwardChapter& chapter = backward_v3::chapter();
  const Flags flags = take_flags(argc, argv);
  const std::string reason = fa::cuda::unavailable_reason();
  if (!reason.empty() || fa::cuda::compute_capability() != 90) {
    std::cerr << chapter.support.chapter << " benchmark: nothing to time: "
              << (reason.empty() ? "it needs a Hopper GPU (compute capability 9.0)" : reason) << "\n";
    return 0;
  }
  for (fa::Dtype dtype : {fa::Dtype::bf16, fa::Dtype::f16})
    register_dense(chapter.support.chapter, dtype, chapter.backward, chapter, flags.head_dims, flags.max_seqlen);
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
