// The block-sparse backward's GPU test cases, shared by chapter 08's block-sparse backward
// (test_sparse.cpp) and chapter 11's block-sparse step (11_backward_v3/steps/test_steps.cpp):
// chapter 07's masks (every pattern, key blocks of 64 and 128, both dtypes, D = 64 and 128, causal
// and not, GQA, empty rows, Sq != Sk) against the float64 backward given the same mask, with the
// same verdict as the dense backward. O and LSE come from the float64 reference under the mask
// (upload_forward_outputs), not from chapter 07's forward: the backward is graded on its own.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include "07_block_sparse/block_mask.h"  // make_mask, visible_fn: 07's forward is not run here
#include "08_backward/backward.h"        // DeviceSparseWalk
#include "08_backward/harness/backward_check.h"
#include "08_backward/harness/backward_harness.h"
#include "common/cuda/cuda_check.h"
#include "common/cuda/device_memory.h"
#include "common/harness/test_cases.h"
#include "common/host/host_data.h"

namespace fa::testing {

struct SparseCase {
  fa::Problem problem;
  int block_k;
  std::vector<block_sparse::HeadPattern> patterns;
  bool deterministic;
  std::string name;
};
inline void PrintTo(const SparseCase& c, std::ostream* os) { *os << c.name; }

inline std::vector<SparseCase> sparse_cases() {
  using P = block_sparse::Pattern;
  using fa::testing::Shape;  // and problem_of: common/harness/test_cases.h
  struct Named {
    const char* name;
    std::vector<block_sparse::HeadPattern> patterns;  // one for all heads; more: cycled over the heads
  };
  const std::vector<Named> patterns = {
      {"Dense", {{.pattern = P::dense}}},
      {"Empty", {{.pattern = P::random, .density = 0.0}}},
      {"Random50", {{.pattern = P::random, .density = 0.5, .seed = 11}}},
      {"Streaming", {{.pattern = P::streaming, .window = 1, .sink = 1}}},
      {"PerHead",
       {{.pattern = P::dense},
        {.pattern = P::random, .density = 0.3, .seed = 5},
        {.pattern = P::random, .density = 0.0},
        {.pattern = P::local, .window = 1}}},
  };
  // Awkward lengths, GQA, Sq > Sk under causal masking (rows that see nothing), partial tiles.
  const Shape shapes[] = {{1, 2, 1, 77, 300, true},
                          {1, 4, 2, 1013, 1013, true},
                          {2, 2, 1, 300, 517, false},
                          {1, 4, 4, 1024, 128, true}};
  std::vector<SparseCase> cases;
  const bool full = fa::testing::test_tier() == fa::testing::Tier::full;
  for (fa::Dtype dtype : {fa::Dtype::bf16, fa::Dtype::f16})
    for (int d : {64, 128})
      for (int block_k : {64, 128})
        for (const Shape& s : shapes)
          for (std::size_t k = 0; k < patterns.size(); ++k) {
            // core: the 1013 x 1013 shape (its yardsticks take seconds) with one pattern per
            // (dtype, d, block_k), the patterns taking turns; the other shapes with every pattern.
            const int instance = (dtype == fa::Dtype::bf16 ? 0 : 4) + (d == 64 ? 0 : 2) + (block_k == 64 ? 0 : 1);
            if (!full && s.seqlen_q == 1013 && k != static_cast<std::size_t>(instance) % patterns.size()) continue;
            const Named& n = patterns[k];
            const fa::Problem p = fa::testing::problem_of(s, d, dtype);
            const std::vector<block_sparse::HeadPattern> per_head = block_sparse::cycle_patterns(n.patterns, p.heads);
            const std::string name = std::string(n.name) + "_bk" + std::to_string(block_k) + "_B" +
                                     std::to_string(s.batch) + "_H" + std::to_string(s.heads) + "x" +
                                     std::to_string(s.kv_heads) + "_Sq" + std::to_string(s.seqlen_q) + "_Sk" +
                                     std::to_string(s.seqlen_k) + "_D" + std::to_string(d) +
                                     (s.causal ? "_causal_" : "_") + fa::dtype_name(dtype);
            cases.push_back(
                {.problem = p, .block_k = block_k, .patterns = per_head, .deterministic = false, .name = name});
          }
  // batch x kv_heads = 16,512 key-tile rows of 4 query heads each, batch x heads = 66,048: more
  // (b, h) pairs than grid y holds (common/device/grid.cuh); each head its own pattern.
  for (int block_k : {64, 128}) {
    if (!full && block_k != 64) continue;  // core: one of the two (each takes tens of seconds)
    const fa::Problem p = fa::testing::problem_of({129, 512, 128, 3, block_k + 2, false}, 64, fa::Dtype::bf16);
    const std::vector<block_sparse::HeadPattern> per_head = block_sparse::cycle_patterns(patterns.back().patterns, p.heads);
    cases.push_back({.problem = p,
                     .block_k = block_k,
                     .patterns = per_head,
                     .deterministic = false,
                     .name = "PerHead_bk" + std::to_string(block_k) + "_B129_H512x128_Sq3_Sk" +
                             std::to_string(p.seqlen_k) + "_D64_bf16"});
  }
  return cases;
}

// A block-sparse backward under test: 08's, or chapter 11's block-sparse step.
using SparseBackwardFn =
    std::function<void(const fa::Problem& p, const backward::DeviceSparseWalk& walk, const void* q, const void* k,
                       const void* v, const void* o, const float* lse, const void* dout, void* dq, void* dk, void* dv,
                       bool deterministic)>;

// Runs `backward` (twice in deterministic mode, which must agree byte for byte) on poisoned
// gradients and checks it against the reference under the mask.
inline void run_sparse_case(const SparseCase& c, const SparseBackwardFn& backward) {
  namespace cuda = fa::cuda;
  const fa::Problem& p = c.problem;
  const std::uint64_t seed = fa::testing::seed_of(c.name);
  const fa::HostInputs in = fa::make_inputs(p, seed);
  const std::vector<float> dout_host = fa::make_dout(p, seed);
  const block_sparse::BlockMask mask = block_sparse::make_mask(p, c.block_k, c.patterns);
  const backward::DeviceSparseWalk walk(p, mask);
  const std::size_t elem = fa::dtype_size(p.dtype);
  cuda::DeviceBuffer q(p.q_elems() * elem), k(p.kv_elems() * elem), v(p.kv_elems() * elem),
      o(p.o_elems() * elem), lse(p.lse_elems() * sizeof(float)), dout(p.o_elems() * elem);
  q.upload(fa::encode(in.q, p.dtype));
  k.upload(fa::encode(in.k, p.dtype));
  v.upload(fa::encode(in.v, p.dtype));
  dout.upload(fa::encode(dout_host, p.dtype));
  fa::testing::upload_forward_outputs(p, in, o, lse, block_sparse::visible_fn(mask));

  std::vector<std::uint8_t> runs[2][3];  // [run][dQ, dK, dV]
  for (int r = 0; r < (c.deterministic ? 2 : 1); ++r) {
    cuda::DeviceBuffer dq(p.q_elems() * elem), dk(p.kv_elems() * elem), dv(p.kv_elems() * elem);
    dq.poison();  // every element the kernels fail to write stays poisoned and fails the check
    dk.poison();
    dv.poison();
    backward(p, walk, q.get(), k.get(), v.get(), o.get(), lse.as<float>(), dout.get(), dq.get(), dk.get(), dv.get(),
             c.deterministic);
    FA_CUDA_CHECK(cudaDeviceSynchronize());
    runs[r][0] = dq.download();
    runs[r][1] = dk.download();
    runs[r][2] = dv.download();
  }
  if (c.deterministic) {
    const char* names[3] = {"dQ", "dK", "dV"};
    for (int t = 0; t < 3; ++t) EXPECT_TRUE(runs[0][t] == runs[1][t]) << names[t] << " differs between two runs";
  }
  const fa::BackwardCheck check =
      fa::check_backward(p, in, dout_host, runs[0][0], runs[0][1], runs[0][2], block_sparse::visible_fn(mask));
  EXPECT_TRUE(check.pass()) << p.describe() << ", block mask density " << mask.density() << "\n" << check.summary();
}

}  // namespace fa::testing
