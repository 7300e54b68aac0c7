// Chapter 08's backward on FlashAttention-2's benchmark shapes (Google Benchmark, CUDA events):
//   ./08_backward_bench [--max-seqlen N] [--head-dims 64,128] [--group G] [Google Benchmark flags]
// seqlen 512..16k, batch = 16k / seqlen, heads = 2048 / D, D = 64 and 128, causal and not;
// f32 (CUDA cores), bf16 and f16 (tensor cores), and bf16 in the deterministic mode
// (bwd/08_backward_deterministic/bf16/..., a column of its own in scripts/summarize.py).
// One dtype: --benchmark_filter=/bf16/
// The block-sparse backward: bwd_sparse/08_backward/bf16/D128/blockk128/random/density:0.50/
// seqlen:16384 (harness/sparse_bench.h); scripts/plot_sparse.py draws the speed-up against density.
// Only the backward is timed (the preprocessing kernel included); O and LSE come from one forward
// run before the loop. Counters: TFLOPS (fa::backward_flops over the median iteration),
// ms_median, extra_mem_MiB (device memory beyond the tensors: the D_i workspace).
#include <benchmark/benchmark.h>

#include <iostream>
#include <string>
#include <vector>

#include "08_backward/backward.h"
#include "08_backward/harness/backward_bench.h"  // Tensors, register_dense, main
#include "08_backward/harness/sparse_bench.h"    // register_sparse

using namespace fa::backward_bench;

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
    const int g = flags.group;
    register_dense(name, fa::Dtype::f32, chapter.backward, chapter, flags.head_dims, flags.max_seqlen, g);
    register_dense(name + "_ffma", fa::Dtype::f32, backward::fp32_chapter().backward, backward::fp32_chapter(),
                   flags.head_dims, flags.max_seqlen, g);
    register_dense(name, fa::Dtype::bf16, chapter.backward, chapter, tc_dims, flags.max_seqlen, g);
    register_dense(name, fa::Dtype::f16, chapter.backward, chapter, tc_dims, flags.max_seqlen, g);
    register_dense(name + "_deterministic", fa::Dtype::bf16, chapter.deterministic, chapter, tc_dims,
                   flags.max_seqlen, g);
    if (g != 1) std::cerr << "08_backward_bench: --group times the dense rows; the block-sparse rows stay MHA\n";
    if (flags.layout != fa::Layout::bhsd) std::cerr << "08_backward_bench: --layout is 11's; 08's rows stay [B, H, S, D]\n";
    register_sparse(
        name,
        [](const fa::Problem& p, const backward::DeviceSparseWalk& walk, Tensors& t) {
          backward::backward(p, walk, t.q.get(), t.k.get(), t.v.get(), t.o.get(), t.lse.as<float>(), t.dout.get(),
                             t.dq.get(), t.dk.get(), t.dv.get(), nullptr);
        },
        flags.max_seqlen);
  });
}
