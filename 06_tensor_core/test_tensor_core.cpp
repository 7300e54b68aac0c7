// Chapter 06 against the float64 reference on the shared shapes (both dtypes, every head dim),
// and the README's step-by-step versions on a few awkward shapes: ctest -L 06_tensor_core
#include <string>
#include <vector>

#include "06_tensor_core/steps.h"
#include "06_tensor_core/tensor_core.h"
#include "common/test_harness.h"

FA_FORWARD_TESTS(tensor_core::chapter());

namespace {

std::vector<fa::testing::ForwardCase> step_cases() {
  struct Shape {
    int batch, heads, kv_heads, seqlen_q, seqlen_k;
    bool causal;
    const char* name;
  };
  const Shape shapes[] = {{2, 4, 2, 1013, 1013, true, "GQA_Sq1013_causal"},
                          {1, 2, 1, 127, 300, false, "MQA_Sq127_Sk300"},
                          {1, 2, 2, 300, 77, true, "Sq300_Sk77_causal"}};
  std::vector<fa::testing::ForwardCase> cases;
  for (const auto& step : tensor_core::steps::all()) {
    for (int d : step.chapter.test_head_dims) {
      for (const Shape& s : shapes) {
        fa::Problem p;
        p.batch = s.batch;
        p.heads = s.heads;
        p.kv_heads = s.kv_heads;
        p.seqlen_q = s.seqlen_q;
        p.seqlen_k = s.seqlen_k;
        p.head_dim = d;
        p.causal = s.causal;
        p.dtype = fa::Dtype::bf16;
        cases.push_back({&step.chapter, p, step.name + "_D" + std::to_string(d) + "_" + s.name});
      }
    }
  }
  return cases;
}

class Steps : public ::testing::TestWithParam<fa::testing::ForwardCase> {};
TEST_P(Steps, MatchesReference) { fa::testing::check_forward(GetParam()); }
INSTANTIATE_TEST_SUITE_P(Versions, Steps, ::testing::ValuesIn(step_cases()), fa::testing::CaseName{});

}  // namespace
