// Chapter 11's backward against the float64 reference on the shared shapes (08's backward harness:
// seqlen 1 .. 1013, Sq != Sk both ways, MHA / GQA / MQA, causal and not, the hard inputs, the
// long-context large-logit cases and grids past 65,535 blocks), bf16 and f16 at head dims 64, 96
// and 128: ctest -L 11_backward_v3. The GPU cases skip, saying why, on a GPU other than Hopper.
#include <string>
#include <vector>

#include "08_backward/harness/backward_harness.h"
#include "11_backward_v3/backward_v3.h"

FA_BACKWARD_TESTS(backward_v3::chapter());

// Walks longer than Config::kFlushSteps steps, whose dK and dV go through the fp32 sums in global
// memory (flush_key_grads): 257 steps of 128 rows at D = 64 (a flush, then one more step), exactly
// 256 steps of 64 rows at D = 128 (the flush at the last step), and a GQA group of 8 query heads
// whose first key tile walks 264 steps and second 24 (causal, Sq > Sk). The shared verdict, the
// deterministic mode included.
namespace {

std::vector<fa::testing::BackwardCase> long_walk_cases() {
  struct Long {
    int heads, kv_heads, seqlen_q, seqlen_k, head_dim;
    bool causal;
    fa::Dtype dtype;
  };
  const Long longs[] = {{1, 1, 257 * 128, 2, 64, false, fa::Dtype::bf16},
                        {1, 1, 256 * 64, 200, 128, false, fa::Dtype::f16},
                        {8, 1, 2100, 300, 128, true, fa::Dtype::bf16}};
  std::vector<fa::testing::BackwardCase> cases;
  for (const Long& l : longs) {
    fa::Problem p = fa::default_problem(l.dtype);
    p.batch = 1, p.heads = l.heads, p.kv_heads = l.kv_heads, p.seqlen_q = l.seqlen_q, p.seqlen_k = l.seqlen_k;
    p.head_dim = l.head_dim, p.causal = l.causal;
    const std::string name = "H" + std::to_string(l.heads) + "x" + std::to_string(l.kv_heads) + "_Sq" +
                             std::to_string(l.seqlen_q) + "_Sk" + std::to_string(l.seqlen_k) + "_D" +
                             std::to_string(l.head_dim) + (l.causal ? "_causal_" : "_") + fa::dtype_name(l.dtype);
    cases.push_back({.chapter = &backward_v3::chapter(), .problem = p, .name = name});
  }
  return cases;
}

class LongWalks : public ::testing::TestWithParam<fa::testing::BackwardCase> {};
TEST_P(LongWalks, MatchesReference) { fa::testing::check_backward(GetParam()); }
INSTANTIATE_TEST_SUITE_P(FlushedSums, LongWalks, ::testing::ValuesIn(long_walk_cases()), fa::testing::CaseName{});

}  // namespace
