// Chapter 08's block-sparse backward on the GPU: the cases of harness/sparse_cases.h (chapter 07's
// masks against the float64 backward given the same mask), its deterministic mode, and what it
// refuses. ctest -L 08_backward
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "07_block_sparse/block_mask.h"  // make_mask, visible_fn: 07's forward is not run here
#include "08_backward/backward.h"
#include "08_backward/harness/backward_check.h"
#include "08_backward/harness/backward_harness.h"
#include "08_backward/harness/sparse_cases.h"
#include "common/cuda/cuda_check.h"
#include "common/cuda/device_memory.h"
#include "common/host/host_data.h"
#include "common/harness/test_cases.h"

namespace {

namespace bs = block_sparse;
using fa::testing::run_sparse_case;
using fa::testing::SparseCase;
using fa::testing::sparse_cases;

// 08's block-sparse backward with the test's deterministic flag.
void sparse_backward(const fa::Problem& p, const backward::DeviceSparseWalk& walk, const void* q, const void* k,
                     const void* v, const void* o, const float* lse, const void* dout, void* dq, void* dk, void* dv,
                     bool deterministic) {
  backward::backward(p, walk, q, k, v, o, lse, dout, dq, dk, dv, nullptr,
                     backward::BackwardOptions{.deterministic = deterministic});
}

class Sparse : public ::testing::TestWithParam<SparseCase> {};
TEST_P(Sparse, MatchesReferenceWithMask) {
  const std::string reason = fa::cuda::unavailable_reason();
  if (!reason.empty()) GTEST_SKIP() << "GPU test skipped: " << reason;
  run_sparse_case(GetParam(), sparse_backward);
}
INSTANTIATE_TEST_SUITE_P(Patterns, Sparse, ::testing::ValuesIn(sparse_cases()),
                         [](const ::testing::TestParamInfo<SparseCase>& info) { return info.param.name; });

// Deterministic mode under a mask: the turn order follows the listed key tiles (sparse_walk.h).
std::vector<SparseCase> deterministic_cases() {
  using P = bs::Pattern;
  std::vector<SparseCase> cases;
  for (int block_k : {64, 128}) {
    fa::Problem p;
    p.heads = 4, p.kv_heads = 2, p.seqlen_q = 1013, p.seqlen_k = 1013, p.head_dim = 64, p.causal = true;
    p.dtype = fa::Dtype::bf16;
    cases.push_back({.problem = p,
                     .block_k = block_k,
                     .patterns = {{.pattern = P::random, .density = 0.5, .seed = 3}},
                     .deterministic = true,
                     .name = "Random50_bk" + std::to_string(block_k)});
  }
  // More (b, h) pairs than grid y holds, in deterministic mode (each head waits on its own turns).
  fa::Problem many;
  many.batch = 129, many.heads = 512, many.kv_heads = 128, many.seqlen_q = 3, many.seqlen_k = 130;
  many.head_dim = 64, many.causal = true, many.dtype = fa::Dtype::bf16;
  cases.push_back({.problem = many,
                   .block_k = 128,
                   .patterns = {{.pattern = P::random, .density = 0.5, .seed = 3}},
                   .deterministic = true,
                   .name = "Random50_bk128_B129_H512x128_Sq3_Sk130"});
  return cases;
}
class SparseDeterministic : public ::testing::TestWithParam<SparseCase> {};
TEST_P(SparseDeterministic, BitwiseIdenticalAndCorrect) {
  const std::string reason = fa::cuda::unavailable_reason();
  if (!reason.empty()) GTEST_SKIP() << "GPU test skipped: " << reason;
  run_sparse_case(GetParam(), sparse_backward);
}
INSTANTIATE_TEST_SUITE_P(Patterns, SparseDeterministic, ::testing::ValuesIn(deterministic_cases()),
                         [](const ::testing::TestParamInfo<SparseCase>& info) { return info.param.name; });

// Refusals before any kernel runs: f32, and a walk built for another problem (the walk's own
// check is also tested on the CPU, test_sparse_walk.cpp).
TEST(SparseRefused, F32AndAWalkOfAnotherProblem) {
  const std::string reason = fa::cuda::unavailable_reason();
  if (!reason.empty()) GTEST_SKIP() << "GPU test skipped: " << reason;
  fa::Problem p = backward::chapter().defaults;
  p.seqlen_q = p.seqlen_k = 300;
  p.dtype = fa::Dtype::bf16;
  const backward::DeviceSparseWalk walk(p, bs::make_mask(p, 128, {{bs::Pattern::dense}}));
  static float dummy[4];  // never dereferenced
  auto refused = [&](const fa::Problem& problem, const std::string& word) {
    try {
      backward::backward(problem, walk, dummy, dummy, dummy, dummy, dummy, dummy, dummy, dummy, dummy, nullptr);
      ADD_FAILURE() << "accepted " << problem.describe();
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(word), std::string::npos) << e.what();
    }
  };
  fa::Problem longer = p;
  longer.seqlen_k = 1013;
  refused(longer, "another problem");
  fa::Problem f32 = p;
  f32.dtype = fa::Dtype::f32;
  refused(f32, "f32");
}

// Above D = 128 the dense backward runs 64-key blocks; the walk lists 128-key tiles, so a walk at
// D = 136 .. 256 is refused by name (the dense backward at those dims is tested in test_backward).
TEST(SparseRefused, HeadDimAbove128) {
  const std::string reason = fa::cuda::unavailable_reason();
  if (!reason.empty()) GTEST_SKIP() << "GPU test skipped: " << reason;
  for (int d : {136, 192, 256}) {
    fa::Problem p = backward::chapter().defaults;
    p.seqlen_q = p.seqlen_k = 300;
    p.head_dim = d;
    p.dtype = fa::Dtype::bf16;
    const backward::DeviceSparseWalk walk(p, bs::make_mask(p, 128, {{bs::Pattern::dense}}));
    alignas(16) static float dummy[4];  // never dereferenced
    try {
      backward::backward(p, walk, dummy, dummy, dummy, dummy, dummy, dummy, dummy, dummy, dummy, nullptr);
      ADD_FAILURE() << "accepted " << p.describe();
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("up to 128"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
