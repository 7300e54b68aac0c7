// The block-sparse backward's benchmark rows, shared by chapter 08 and chapter 11's block-sparse
// step: bwd_sparse/<label>/bf16/D<d>/blockk128/random/density:<x>/seqlen:<n>, random 128 x 128
// block masks at densities 1, 0.5, 0.25, 0.1, seqlen 4k and 16k, non-causal; TFLOPS over the
// active blocks' FLOPs (2.5 x block_sparse::forward_flops), `density` the mask's exact one. O and
// LSE come from chapter 07's forward under the same mask, run before the timed loop.
#pragma once

#include <benchmark/benchmark.h>

#include <cstdio>
#include <functional>
#include <memory>
#include <string>

#include "07_block_sparse/block_sparse.h"
#include "08_backward/backward.h"                // DeviceSparseWalk
#include "08_backward/harness/backward_bench.h"  // Tensors, register_case
#include "common/harness/bench_harness.h"      // fa2_shape

namespace fa::backward_bench {

// A block-sparse backward on the case's tensors, given the mask's transposed walk.
using SparseLaunch = std::function<void(const Problem&, const backward::DeviceSparseWalk&, Tensors&)>;

// The rows of `backward` (row label `label`) against density: random 128 x 128 block masks, bf16,
// non-causal, D = 64 and 128.
inline void register_sparse(const std::string& label, const SparseLaunch& backward, int max_seqlen) {
  namespace bs = block_sparse;
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
        std::snprintf(name, sizeof name, "bwd_sparse/%s/bf16/D%d/blockk128/random/density:%.2f/seqlen:%d",
                      label.c_str(), d, density, seqlen);
        const double exact = mask.density();
        register_case(
            name, p, 2.5 * bs::forward_flops(p, mask),
            [=](Tensors& t) {
              *forward_mask = std::make_unique<bs::DeviceBlockMask>(mask);
              *walk = std::make_unique<backward::DeviceSparseWalk>(p, mask);
              bs::forward(p, **forward_mask, t.q.get(), t.k.get(), t.v.get(), t.o.get(), t.lse.as<float>(), nullptr);
            },
            [=](Tensors& t) { backward(p, **walk, t); },
            [=](benchmark::State& s) {
              s.counters["density"] = exact;
              forward_mask->reset();
              walk->reset();
            });
      }
    }
  }
}

}  // namespace fa::backward_bench
