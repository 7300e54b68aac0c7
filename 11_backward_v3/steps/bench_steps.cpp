// The README's step-by-step table: every step of steps.h on FlashAttention-2's shapes, rows
// bwd/11_backward_v3.<step>/<dtype>/D<d>/{full,causal}/seqlen:N, for example
//   ./11_backward_v3_steps_bench --max-seqlen 4096 --benchmark_filter='bf16/D64/causal/seqlen:4096'
#include "08_backward/harness/backward_bench.h"
#include "11_backward_v3/backward_v3.h"
#include "11_backward_v3/steps/steps.h"

int main(int argc, char** argv) {
  const fa::BackwardChapter& chapter = backward_v3::chapter();
  return fa::backward_bench::main(chapter.support, argc, argv, [&](const fa::backward_bench::Flags& flags) {
    for (const fa::BackwardStep& step : backward_v3::steps::all())
      for (fa::Dtype dtype : {fa::Dtype::bf16, fa::Dtype::f16})
        fa::backward_bench::register_dense(std::string(chapter.support.chapter) + "." + step.name, dtype,
                                           step.chapter.backward, chapter, flags.head_dims, flags.max_seqlen);
  });
}
