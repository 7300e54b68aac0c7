// Chapter 09 against the float64 reference on the shared shapes (both dtypes, D 64, 96, 128, 192 and 256), and
// the README's step-by-step versions on a few awkward shapes: ctest -L 09_flash_v3
#include <string>
#include <vector>

#include "09_flash_v3/flash_v3.h"
#include "09_flash_v3/steps/steps.h"
#include "common/harness/test_cases.h"
#include "common/harness/test_harness.h"

FA_FORWARD_TESTS(flash_v3::chapter());

FA_STEP_TESTS(flash_v3::steps::all());

namespace {

// The chapter's paths into the three-consumer kernel (step v7), which the shared shapes' core tier
// reaches at D = 64 only with one query tile: without a mask, several 192-row tiles with a partial
// last one (1000 = 5 x 192 + 40), GQA, Sq != Sk, both layouts; under a causal mask from 4096
// queries (4100 = 21 x 192 + 68).
std::vector<fa::testing::ForwardCase> three_consumer_cases() {
  struct Named {
    fa::testing::Shape shape;
    fa::Layout layout;
    const char* name;
  };
  const Named shapes[] = {{{2, 4, 2, 1000, 1000, false}, fa::Layout::bhsd, "GQA_Sq1000"},
                          {{2, 4, 4, 1000, 777, false}, fa::Layout::bshd, "Sq1000_Sk777_bshd"},
                          {{1, 2, 1, 4100, 4100, true}, fa::Layout::bhsd, "MQA_Sq4100_causal"}};
  std::vector<fa::testing::ForwardCase> cases;
  for (fa::Dtype dtype : {fa::Dtype::bf16, fa::Dtype::f16})
    for (const Named& s : shapes) {
      fa::Problem p = fa::testing::problem_of(s.shape, 64, dtype);
      p.layout = s.layout;
      cases.push_back({.chapter = &flash_v3::chapter(),
                       .problem = p,
                       .name = std::string("D64_") + s.name + "_" + fa::dtype_name(dtype)});
    }
  return cases;
}

class ThreeConsumers : public ::testing::TestWithParam<fa::testing::ForwardCase> {};
TEST_P(ThreeConsumers, MatchesReference) { fa::testing::check_forward(GetParam()); }
INSTANTIATE_TEST_SUITE_P(Chapter, ThreeConsumers, ::testing::ValuesIn(three_consumer_cases()),
                         fa::testing::CaseName{});

}  // namespace
