// The README's steps of chapter 11 against the float64 reference (08's backward harness, a few
// shapes a step: GQA causal, Sq != Sk), and the block-sparse step v5_block_sparse on the masks of
// 08's block-sparse tests (08_backward/harness/sparse_cases.h): ctest -L 11_backward_v3.
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "07_block_sparse/block_mask.h"
#include "08_backward/harness/backward_harness.h"
#include "08_backward/harness/sparse_cases.h"
#include "11_backward_v3/backward_v3.h"
#include "11_backward_v3/steps/steps.h"
#include "common/harness/chapter.h"  // unavailable_reason

FA_BACKWARD_STEP_TESTS(backward_v3::steps::all());

namespace {

using fa::testing::SparseCase;

// The skip reason of these GPU tests ("" where they run): the chapter's, as every case of the
// shared harness asks it (common/harness/chapter.h).
std::string skip_reason() { return fa::unavailable_reason(backward_v3::chapter().support); }

// The core tier takes every other case of the list (the patterns alternate within each shape);
// the full tier all of them.
std::vector<SparseCase> step_cases() {
  std::vector<SparseCase> all = fa::testing::sparse_cases(), cases;
  const bool full = fa::testing::test_tier() == fa::testing::Tier::full;
  for (std::size_t n = 0; n < all.size(); ++n)
    if (full || n % 2 == 0) cases.push_back(all[n]);
  return cases;
}

void sparse_step(const fa::Problem& p, const backward::DeviceSparseWalk& walk, const void* q, const void* k,
                 const void* v, const void* o, const float* lse, const void* dout, void* dq, void* dk, void* dv,
                 bool deterministic) {
  if (deterministic) throw std::logic_error("the block-sparse step has no deterministic mode");
  backward_v3::steps::backward_block_sparse(p, walk, q, k, v, o, lse, dout, dq, dk, dv, nullptr);
}

class BlockSparseStep : public ::testing::TestWithParam<SparseCase> {};
TEST_P(BlockSparseStep, MatchesReferenceWithMask) {
  const std::string reason = skip_reason();
  if (!reason.empty()) GTEST_SKIP() << "GPU test skipped: " << reason;
  fa::testing::run_sparse_case(GetParam(), sparse_step);
}
INSTANTIATE_TEST_SUITE_P(Patterns, BlockSparseStep, ::testing::ValuesIn(step_cases()),
                         [](const ::testing::TestParamInfo<SparseCase>& info) { return info.param.name; });

// A walk built for another problem is refused before any kernel runs.
TEST(BlockSparseStepRefused, AWalkOfAnotherProblem) {
  const std::string reason = skip_reason();
  if (!reason.empty()) GTEST_SKIP() << "GPU test skipped: " << reason;
  fa::Problem p = fa::default_problem(fa::Dtype::bf16);
  p.seqlen_q = p.seqlen_k = 300;
  const backward::DeviceSparseWalk walk(p, block_sparse::make_mask(p, 128, {{block_sparse::Pattern::dense}}));
  fa::Problem longer = p;
  longer.seqlen_k = 1013;
  alignas(16) static float dummy[4];  // never dereferenced
  try {
    backward_v3::steps::backward_block_sparse(longer, walk, dummy, dummy, dummy, dummy, dummy, dummy, dummy, dummy,
                                              dummy, nullptr);
    ADD_FAILURE() << "accepted " << longer.describe();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("another problem"), std::string::npos) << e.what();
  }
}

}  // namespace
