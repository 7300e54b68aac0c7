// The README's step-by-step table, one step per run (the interface of every chapter's steps
// bench, which scripts/bench_all.sh drives): rows bwd/11_backward_v3.<step>/<dtype>/D<d>/...
//   ./11_backward_v3_steps_bench --step v3_tall_d64 --benchmark_filter='bf16/D64/causal/seqlen:4096'
//   ./11_backward_v3_steps_bench --step v6_longest_first --group 2   (GQA: 2 query heads a KV head)
// v5_block_sparse: rows bwd_sparse/11_backward_v3.v5_block_sparse/bf16/D<d>/blockk128/random/
// density:<x>/seqlen:<n>, 08's block-sparse rows (08_backward/harness/sparse_bench.h).
// Without --step it lists the steps (exit 2).
#include <iostream>
#include <string>

#include "08_backward/harness/backward_bench.h"
#include "08_backward/harness/sparse_bench.h"  // register_sparse
#include "11_backward_v3/backward_v3.h"
#include "11_backward_v3/steps/steps.h"
#include "common/harness/bench_harness.h"  // take_flag

int main(int argc, char** argv) {
  const fa::BackwardChapter& chapter = backward_v3::chapter();
  const std::string name = fa::bench::take_flag(argc, argv, "--step", "");
  const std::string label = std::string(chapter.support.chapter) + "." + name;
  if (name == "v5_block_sparse")
    return fa::backward_bench::main(chapter.support, argc, argv, [&](const fa::backward_bench::Flags& flags) {
      if (flags.group != 1) std::cerr << "v5_block_sparse: --group times dense rows; the block-sparse rows stay MHA\n";
      fa::backward_bench::register_sparse(
          label,
          [](const fa::Problem& p, const backward::DeviceSparseWalk& walk, fa::backward_bench::Tensors& t) {
            backward_v3::steps::backward_block_sparse(p, walk, t.q.get(), t.k.get(), t.v.get(), t.o.get(),
                                                      t.lse.as<float>(), t.dout.get(), t.dq.get(), t.dk.get(),
                                                      t.dv.get(), nullptr);
          },
          flags.max_seqlen);
    });
  const fa::BackwardStep* step = nullptr;
  for (const fa::BackwardStep& s : backward_v3::steps::all())
    if (s.name == name) step = &s;
  if (step == nullptr) {
    std::cerr << (name.empty() ? "usage: " + std::string(argv[0]) + " --step NAME [benchmark flags]"
                               : "unknown step '" + name + "'; the steps are:")
              << "\n";
    for (const fa::BackwardStep& s : backward_v3::steps::all()) std::cerr << "  " << s.name << ": " << s.what << "\n";
    std::cerr << "  v5_block_sparse: only the tiles chapter 07's block mask keeps (08's transposed walk)\n";
    return 2;
  }
  return fa::backward_bench::main(chapter.support, argc, argv, [&](const fa::backward_bench::Flags& flags) {
    for (fa::Dtype dtype : {fa::Dtype::bf16, fa::Dtype::f16})
      fa::backward_bench::register_dense(label, dtype, step->chapter.backward, chapter, flags.head_dims,
                                         flags.max_seqlen, flags.group, flags.layout);
  });
}
