// The shared GPU test suite of a backward chapter, the backward twin of test_harness.h. A
// chapter's test file is three lines:
//
//   #include "08_backward/harness/backward_harness.h"
//   #include "08_backward/backward.h"
//   FA_BACKWARD_TESTS(backward::chapter())
//
// For every shape below, every test head dim and dtype of the chapter, it takes O and LSE from
// the CPU (upload_forward_outputs, below), not from a forward chapter, so the backward is graded
// on its own (the one exception: the problems a chapter's tests_own_forward names,
// 08_backward/harness/backward.h, whose scores only their own forward's LSE normalizes); runs its backward on
// seeded inputs and a seeded dO, and checks dQ, dK and dV against the float64 reference_backward
// (08_backward/harness/backward_check.h), with poisoned outputs and guard bytes after them. It also checks
// that bad input is refused with a clear std::invalid_argument. The shape tests skip, naming the
// reason, where no GPU is present; the refusal tests need no GPU and always run.
#pragma once

#include <gtest/gtest.h>

#include <ostream>
#include <string>
#include <vector>

#include "08_backward/harness/backward.h"
#include "common/cuda/device_memory.h"
#include "common/harness/test_harness.h"  // CaseName: a case's test name is its own
#include "common/host/host_data.h"
#include "common/host/reference.h"

namespace fa::testing {

struct BackwardCase {
  const BackwardChapter* chapter;
  Problem problem;
  std::string name;
  InputKind inputs = InputKind::normal;
};

struct BackwardRefusalCase {
  const BackwardChapter* chapter;
  Problem problem;
  std::string null_tensor;  // "" or the tensor passed as a null pointer ("dout", "dq", ...)
  std::string expect;       // a word the error message must contain
  std::string name;
};

// The forward harness's shapes: seqlen 1, 17, 127, 1013; Sq != Sk both ways (including rows that
// see no key under causal masking); MHA, GQA and MQA; causal and not; the hard inputs and the
// grids beyond 65,535 blocks; the features the chapter's Support takes (test_cases.h). Where it
// takes a packed varlen batch, the backward's own ones too (backward_harness.cpp: sequences
// without queries or without keys, causal GQA, a windowed MQA one where it takes a window); where
// it does not, backward_refusal_cases refuses one ("Varlen").
std::vector<BackwardCase> backward_cases(const BackwardChapter& chapter);
// A few shapes (GQA, Sq != Sk, causal; two in the core tier, four in the full) for every step,
// head dim and dtype: the step-by-step versions are checked like the chapter, on fewer shapes.
std::vector<BackwardCase> backward_step_cases(const std::vector<BackwardStep>& steps);
std::vector<BackwardRefusalCase> backward_refusal_cases(const BackwardChapter& chapter);

// O and LSE as a forward stores them (O in p.dtype, LSE in float, +inf for a row that sees no
// key), computed on the CPU, never by a forward chapter:
//   f16/bf16: same_precision_forward (reference.h), a plain forward as a kernel computes it
//     (float scores, P rounded to p.dtype, O summed in float and rounded). That is the O the
//     check's yardstick (backward_check.cpp: a plain same-precision backward) derives D_i from,
//     so kernel and yardstick start from the same O. D_i errors reach dQ coherently (dQ_i moves
//     by -dD_i sum_j P_ij K_j), and with the float64 O rounded to p.dtype instead, one f16 case
//     of 08's 393 (a block-sparse one) missed the rule by 17% on the H100.
//   f32: fp32_score_forward (reference.h), the float64 softmax of the very float scores an fp32
//     kernel forms, so that its P = exp(scale S - LSE) stays within the f32 rule at large logits.
// `visible` is the extra rule of a block mask (chapter 07). The backward tests of 08 (dense,
// deterministic, block-sparse) all take O and LSE from here: a mistake in a student's 05, 06 or
// 07 cannot fail them.
void upload_forward_outputs(const Problem& p, const HostInputs& in, cuda::DeviceBuffer& o, cuda::DeviceBuffer& lse,
                            const VisibleFn& visible = {});

// On a cudaStreamNonBlocking stream: the backward twice, outputs poisoned before
// each run. The first run must match the reference (backward_check.h); dK and dV must be the same
// bits both times (each element is written once, by one block). dQ is summed across key tiles by
// atomics in whatever order the blocks run, so its last bits may differ: it is repeatable only in
// the chapter's deterministic mode, which (where the chapter has one for the dtype) runs twice
// too and must give the same bits for all three gradients and pass the same check.
void check_backward(const BackwardCase& c);
void check_backward_refusal(const BackwardRefusalCase& c);

// gtest prints a parameter of a failing test with these (instead of its raw bytes).
inline void PrintTo(const BackwardCase& c, std::ostream* os) { *os << c.name; }
inline void PrintTo(const BackwardRefusalCase& c, std::ostream* os) { *os << c.name; }

}  // namespace fa::testing

// Refusal tests are instantiated as "Inputs/...": fa_register_gtests (cmake/Chapter.cmake) labels
// those `cpu`, the rest `gpu`. FA_BACKWARD_TESTS_NAMED(Suite, chapter) names the suites Suite and
// SuiteRefuses, so one test file can cover two chapter objects (08: the f32-only head dims).
#define FA_BACKWARD_TESTS(chapter_expr) FA_BACKWARD_TESTS_NAMED(Backward, chapter_expr)
#define FA_BACKWARD_TESTS_NAMED(Suite, chapter_expr)                                                    \
  class Suite : public ::testing::TestWithParam<::fa::testing::BackwardCase> {};                        \
  TEST_P(Suite, MatchesReference) { ::fa::testing::check_backward(GetParam()); }                       \
  INSTANTIATE_TEST_SUITE_P(Shapes, Suite, ::testing::ValuesIn(::fa::testing::backward_cases(chapter_expr)), \
                           ::fa::testing::CaseName{});                                                  \
  class Suite##Refuses : public ::testing::TestWithParam<::fa::testing::BackwardRefusalCase> {};        \
  TEST_P(Suite##Refuses, BadInput) { ::fa::testing::check_backward_refusal(GetParam()); }              \
  INSTANTIATE_TEST_SUITE_P(Inputs, Suite##Refuses,                                                      \
                           ::testing::ValuesIn(::fa::testing::backward_refusal_cases(chapter_expr)),    \
                           ::fa::testing::CaseName{})

// The steps of a chapter's README table against the reference, on backward_step_cases' shapes.
#define FA_BACKWARD_STEP_TESTS(steps_expr)                                                                  \
  class BackwardSteps : public ::testing::TestWithParam<::fa::testing::BackwardCase> {};                   \
  TEST_P(BackwardSteps, MatchesReference) { ::fa::testing::check_backward(GetParam()); }                   \
  INSTANTIATE_TEST_SUITE_P(Versions, BackwardSteps, ::testing::ValuesIn(::fa::testing::backward_step_cases(steps_expr)), \
                           ::fa::testing::CaseName{})
