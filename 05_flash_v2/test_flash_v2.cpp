// Chapter 05 against the float64 reference on the shared shapes, and the README's step-by-step
// versions (steps.h) on a few awkward shapes: ctest -L 05_flash_v2
#include <string>
#include <vector>

#include "05_flash_v2/flash_v2.h"
#include "05_flash_v2/steps.h"
#include "common/test_harness.h"

FA_FORWARD_TESTS(flash_v2::chapter());

namespace {

std::vector<fa::testing::ForwardCase> step_cases() {
  struct Shape {
    int batch, heads, kv_heads, seqlen_q, seqlen_k;
    bool causal;
    const char* name;
  };
  const Shape shapes[] = {{2, 4, 2, 1013, 1013, true, "GQA_Sq1013_causal"},
                          {1, 2, 1, 127, 300, false, "MQA_Sq127_Sk300"},
                          {1, 2, 2, 300, 77, true, "Sq300_Sk77_causal"},  // rows and whole tiles see no key
                          {3, 2, 2, 1, 1013, true, "Sq1_Sk1013_causal"}};
  std::vector<fa::testing::ForwardCase> cases;
  for (const auto& step : flash_v2::steps::all()) {
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
        p.dtype = fa::Dtype::f32;
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
