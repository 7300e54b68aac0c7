// Chapter 08's backward on FlashAttention-2's benchmark shapes (Google Benchmark, CUDA events):
//   ./08_backward_bench [--max-seqlen N] [Google Benchmark flags]
// seqlen 512..16k, batch = 16k / seqlen, heads = 2048 / D, D = 64 and 128, causal and not;
// f32 (CUDA cores), bf16 and f16 (tensor cores), and bf16 in the deterministic mode
// (bwd/08_backward_deterministic/bf16/..., a column of its own in scripts/summarize.py).
// One dtype: --benchmark_filter=/bf16/
// The block-sparse backward: bwd_sparse/08_backward/bf16/D128/blockk128/random/density:0.50/
// seqlen:16384 -- random 128 x 128 block masks at densities 1, 0.5, 0.25, 0.1, seqlen 4k and 16k,
// non-causal; TFLOPS over the active blocks' FLOPs (2.5 x block_sparse::forward_flops), `density`
// the mask's exact one. scripts/plot_sparse.py draws the speed-up against density.
// Only the backward is timed (the preprocessing kernel included); O and LSE come from one forward
// run before the loop. Counters: TFLOPS (fa::backward_flops over the median iteration),
// ms_median, extra_mem_MiB (device memory beyond the tensors: the D_i workspace).
#include <benchmark/benchmark.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "07_block_sparse/block_sparse.h"
#include "08_backward/backward.h"
#include "08_backward/harness/backward_bench.h"  // Tensors, register_case, register_dense, main
#include "common/harness/bench_harness.h"      // fa2_shape

namespace {

namespace bs = block_sparse;
using namespace fa::backward_bench;

// The block-sparse backward against density: random 128 x 128 block masks, bf16, non-causal.
void register_sparse(int max_seqlen) {
  for (int d : {64, 128}) {
    for (int seqlen : {4096, 16384}) {
      if (seqlen > max_seqlen) continue;
      const fa::Problem p = fa::bench::fa2_shape(seqlen, d, false, fa::Dtype::bf16);
      for (double density : {1.0, 0.5, 0.25, 0.1}) {
        const bs::BlockMask mask =
            bs::make_mask(p, 128, {{.pattern = bs::Pattern::random, .density = density, .seed = 42}});
        // The device-side masks are built before the timed loop (with the forward) and freed
        // after it (with the counters), so no device memory outlives its case.
        auto forward_mask = std::make_shared<std::unique_ptr<bs::DeviceBlockMask>>();
        auto walk = std::make_shared<std::unique_ptr<backward::DeviceSparseWalk>>();
        char name[160];
        std::snprintf(name, sizeof name, "bwd_sparse/08_backward/bf16/D%d/blockk128/random/density:%.2f/seqlen:%d", d,
                      density, seqlen);
        const double exact = mask.density();
        register_case(
            name, p, 2.5 * bs::forward_flops(p, mask),
            [=](Tensors& t) {
              *forward_mask = std::make_unique<bs::DeviceBlockMask>(mask);
              *walk = std::make_unique<backward::DeviceSparseWalk>(p, mask);
              bs::forward(p, **forward_mask, t.q.get(), t.k.get(), t.v.get(), t.o.get(), t.lse.as<float>(), nullptr);
            },
            [=](Tensors& t) {
              backward::backward(p, **walk, t.q.get(), t.k.get(), t.v.get(), t.o.get(), t.lse.as<float>(),
                                 t.dout.get(), t.dq.get(), t.dk.get(), t.dv.get(), nullptr);
            },
            [=](benchmark::State& s) {
              s.counters["density"] = exact;
              forward_mask->reset();
              walk->reset();
            });
      }
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  const fa::BackwardChapter& chapter = backward::chapter();
  return fa::backward_bench::main(chapter.support, argc, argv, [&](const Flags& flags) {
    // f32: the chapter's pair (3xTF32 up to D = 128, backward.h: fp32_on_tensor_cores) and the
    // FFMA kernels alone, the lesson (05's chapter kernel as the forward). f16/bf16: the head dims
    // the tensor-core backward takes.
    const std::string& name = chapter.support.chapter;
    std::vector<int> tc_dims;
    for (int d : flags.head_dims)
      if (fa::supports_head_dim(backward::tensor_core_support(), d)) tc_dims.push_back(d);
    register_dense(name, fa::Dtype::f32, chapter.backward, chapter, flags.head_dims, flags.max_seqlen);
    register_dense(name + "_ffma", fa::Dtype::f32, backward::fp32_chapter().backward, backward::fp32_chapter(),
                   flags.head_dims, flags.max_seqlen);
    register_dense(name, fa::Dtype::bf16, chapter.backward, chapter, tc_dims, flags.max_seqlen);
    register_dense(name, fa::Dtype::f16, chapter.backward, chapter, tc_dims, flags.max_seqlen);
    register_dense(name + "_deterministic", fa::Dtype::bf16, chapter.deterministic, chapter, tc_dims,
                   flags.max_seqlen);
    register_sparse(flags.max_seqlen);
  });
}
