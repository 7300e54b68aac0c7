// Chapter 11's backward on FlashAttention-2's benchmark shapes (Google Benchmark, CUDA events), the
// rows 08's bench has, for bf16 and f16:
//   ./11_backward_v3_bench [--max-seqlen N] [--head-dims 64,128] [--group G] [--layout bshd] [Google Benchmark flags]
// bwd/11_backward_v3/bf16/D128/causal/seqlen:4096 -- batch = 16k / seqlen, heads = 2048 / D.
// Only the backward is timed (the preparation and the dQ conversion included); O and LSE come
// from one run of the chapter's forward before the loop (09's; 06's at D = 96, 192 and 256;
// 08_backward/harness/backward_bench.h).
#include "08_backward/harness/backward_bench.h"
#include "11_backward_v3/backward_v3.h"

int main(int argc, char** argv) {
  const fa::BackwardChapter& chapter = backward_v3::chapter();
  return fa::backward_bench::main(chapter.support, argc, argv, [&](const fa::backward_bench::Flags& flags) {
    for (fa::Dtype dtype : {fa::Dtype::bf16, fa::Dtype::f16})
      fa::backward_bench::register_dense(chapter.support.chapter, dtype, chapter.backward, chapter, flags.head_dims,
                                         flags.max_seqlen, flags.group, flags.layout);
  });
}
