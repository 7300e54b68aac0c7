// The shared GPU test suite. A chapter's test file is three lines:
//
//   #include "common/harness/test_harness.h"
//   #include "01_naive/naive.h"
//   FA_FORWARD_TESTS(naive::chapter())
//
// which checks the chapter's forward against the float64 reference on every shape below, for
// every head dim and dtype the chapter lists, and checks that bad input is refused with a
// clear std::invalid_argument. The shape tests skip, naming the reason, where no GPU is
// present; the refusal tests need no GPU and always run.
#pragma once

#include <gtest/gtest.h>

#include <ostream>
#include <string>
#include <vector>

#include "common/harness/chapter.h"
#include "common/host/host_data.h"

namespace fa::testing {

struct ForwardCase {
  const Chapter* chapter;
  Problem problem;
  std::string name;
  InputKind inputs = InputKind::normal;
};

struct RefusalCase {
  const Chapter* chapter;
  Problem problem;
  bool null_output;        // pass a null O pointer
  std::string expect;      // a word the error message must contain
  std::string name;
};

// Shapes: seqlen 1, 17, 127, 1013; Sq != Sk both ways (including rows that see no key under
// causal masking); batch/heads/kv_heads combinations for MHA, GQA and MQA; causal and not; the
// hard inputs and the grids beyond 65,535 blocks of test_cases.h.
std::vector<ForwardCase> forward_cases(const Chapter& chapter);
std::vector<RefusalCase> refusal_cases(const Chapter& chapter);
// A chapter's step-by-step versions (fa::Step), each in its first dtype and every test head dim,
// on a few awkward shapes: GQA 1013 x 1013 causal, MQA 127 x 300, 300 x 77 causal (rows and whole
// tiles that see no key), 1 x 1013 causal. The core tier (test_cases.h) runs the first and the third.
std::vector<ForwardCase> step_cases(const std::vector<Step>& steps);

// Runs the forward twice on a cudaStreamNonBlocking stream, outputs poisoned before each run:
// the first run must match the reference (forward_check.h), the second must give the same bits.
void check_forward(const ForwardCase& c);
void check_refusal(const RefusalCase& c);

// gtest prints a parameter of a failing test with these (instead of its raw bytes).
inline void PrintTo(const ForwardCase& c, std::ostream* os) { *os << c.name; }
inline void PrintTo(const RefusalCase& c, std::ostream* os) { *os << c.name; }

struct CaseName {
  template <class Case>
  std::string operator()(const ::testing::TestParamInfo<Case>& info) const {
    return info.param.name;
  }
};

}  // namespace fa::testing

#define FA_FORWARD_TESTS(chapter_expr)                                                        \
  FA_FORWARD_SHAPE_TESTS(Forward, chapter_expr);                                              \
  class Refuses : public ::testing::TestWithParam<::fa::testing::RefusalCase> {};             \
  TEST_P(Refuses, BadInput) { ::fa::testing::check_refusal(GetParam()); }                    \
  INSTANTIATE_TEST_SUITE_P(Inputs, Refuses,                                                   \
                           ::testing::ValuesIn(::fa::testing::refusal_cases(chapter_expr)),   \
                           ::fa::testing::CaseName{})

// The shapes alone, under a suite name of their own: a second kernel of a chapter whose refusals
// FA_FORWARD_TESTS already checks (05's FFMA kernel: FA_FORWARD_SHAPE_TESTS(ForwardFfma, ...)).
#define FA_FORWARD_SHAPE_TESTS(Suite, chapter_expr)                                           \
  class Suite : public ::testing::TestWithParam<::fa::testing::ForwardCase> {};               \
  TEST_P(Suite, MatchesReference) { ::fa::testing::check_forward(GetParam()); }              \
  INSTANTIATE_TEST_SUITE_P(Shapes, Suite,                                                     \
                           ::testing::ValuesIn(::fa::testing::forward_cases(chapter_expr)),   \
                           ::fa::testing::CaseName{})

// The step-by-step versions of a chapter (05, 06): FA_STEP_TESTS(flash_v2::steps::all())
#define FA_STEP_TESTS(steps_expr)                                                             \
  class Steps : public ::testing::TestWithParam<::fa::testing::ForwardCase> {};               \
  TEST_P(Steps, MatchesReference) { ::fa::testing::check_forward(GetParam()); }              \
  INSTANTIATE_TEST_SUITE_P(Versions, Steps,                                                   \
                           ::testing::ValuesIn(::fa::testing::step_cases(steps_expr)),        \
                           ::fa::testing::CaseName{})
