// The README's step-by-step table, one step per run (the interface of every chapter's steps
// bench, which scripts/bench_all.sh drives): rows bwd/11_backward_v3.<step>/<dtype>/D<d>/...
//   ./11_backward_v3_steps_bench --step v3_tall_d64 --benchmark_filter='bf16/D64/causal/seqlen:4096'
// Without --step it lists the steps (exit 2).
#include <iostream>
#include <string>

#include "08_backward/harness/backward_bench.h"
#include "11_backward_v3/backward_v3.h"
#include "11_backward_v3/steps/steps.h"
#include "common/harness/bench_harness.h"  // take_flag

int main(int argc, char** argv) {
  const fa::BackwardChapter& chapter = backward_v3::chapter();
  const std::string name = fa::bench::take_flag(argc, argv, "--step", "");
  const fa::BackwardStep* step = nullptr;
  for (const fa::BackwardStep& s : backward_v3::steps::all())
    if (s.name == name) step = &s;
  if (step == nullptr) {
    std::cerr << (name.empty() ? "usage: " + std::string(argv[0]) + " --step NAME [benchmark flags]"
                               : "unknown step '" + name + "'; the steps are:")
              << "\n";
    for (const fa::BackwardStep& s : backward_v3::steps::all()) std::cerr << "  " << s.name << ": " << s.what << "\n";
    return 2;
  }
  return fa::backward_bench::main(chapter.support, argc, argv, [&](const fa::backward_bench::Flags& flags) {
    for (fa::Dtype dtype : {fa::Dtype::bf16, fa::Dtype::f16})
      fa::backward_bench::register_dense(std::string(chapter.support.chapter) + "." + step->name, dtype,
                                         step->chapter.backward, chapter, flags.head_dims, flags.max_seqlen);
  });
}
