// Chapter 12's ring against the float64 reference, through the shared harnesses (poisoned
// outputs, guard bytes, NaN never passes, two runs): the forward (test_harness.h) and the backward
// (08's backward_harness.h, O and LSE from the CPU), on rings of 1, 2 and 4 simulated ranks (copy)
// and NCCL rings of 2 and 4 GPUs; bf16 and f16, D 64 and 128, causal and full, GQA and MQA, at
// S = 2R * 128 and 2 x 2R * 128. The refusals (no GPU needed) include the ring's own rules.
//   ctest -L 12_ring_attention
#include <stdexcept>
#include <string>
#include <vector>

#include "08_backward/harness/backward_harness.h"
#include "12_ring_attention/ring.h"
#include "common/harness/test_harness.h"

namespace {

using ring_attention::RingConfig;
using ring_attention::TransportKind;

struct RingCase {
  RingConfig config;
  fa::Problem problem;
  std::string name;
};
void PrintTo(const RingCase& c, std::ostream* os) { *os << c.name; }

std::vector<RingCase> ring_cases() {
  const RingConfig configs[] = {{.ranks = 1, .transport = TransportKind::copy},
                                {.ranks = 2, .transport = TransportKind::copy},
                                {.ranks = 4, .transport = TransportKind::copy},
                                {.ranks = 2, .transport = TransportKind::nccl},
                                {.ranks = 4, .transport = TransportKind::nccl}};
  std::vector<RingCase> cases;
  for (const RingConfig& config : configs) {
    int n = 0;
    for (fa::Dtype dtype : {fa::Dtype::bf16, fa::Dtype::f16})
      for (int d : {64, 128})
        for (bool causal : {false, true}) {
          // Alternately the smallest sequence (a chunk of one 128-row tile, GQA 4 / 2) and one of
          // two tiles a chunk (batch 2, MQA 2 / 1).
          const bool small = n++ % 2 == 0;
          fa::Problem p = fa::default_problem(dtype);
          p.head_dim = d, p.causal = causal;
          p.batch = small ? 1 : 2, p.heads = small ? 4 : 2, p.kv_heads = small ? 2 : 1;
          p.seqlen_q = p.seqlen_k = (small ? 1 : 2) * 2 * config.ranks * ring_attention::kChunkMultiple;
          const std::string name = std::string(ring_attention::transport_name(config.transport)) +
                                   std::to_string(config.ranks) + "_" + fa::dtype_name(dtype) + "_D" +
                                   std::to_string(d) + (causal ? "_causal" : "_full") + "_S" +
                                   std::to_string(p.seqlen_q) + (small ? "_GQA" : "_MQA_B2");
          cases.push_back({.config = config, .problem = p, .name = name});
        }
  }
  return cases;
}

// Why this machine cannot run the case's ring ("" when it can).
std::string ring_unavailable(const RingConfig& config) {
  const std::string reason = fa::unavailable_reason(ring_attention::chapter().support);
  if (!reason.empty()) return "GPU test skipped: " + reason;
  const int gpus = ring_attention::visible_gpus();
  if (config.transport == TransportKind::nccl && gpus < config.ranks)
    return "NCCL ring of " + std::to_string(config.ranks) + " ranks skipped: it needs " +
           std::to_string(config.ranks) + " GPUs, this machine has " + std::to_string(gpus);
  return "";
}

class RingForward : public ::testing::TestWithParam<RingCase> {};
TEST_P(RingForward, MatchesReference) {
  const RingCase& c = GetParam();
  if (const std::string why = ring_unavailable(c.config); !why.empty()) GTEST_SKIP() << why;
  const ring_attention::UseConfig use(c.config);
  fa::testing::check_forward({.chapter = &ring_attention::chapter(), .problem = c.problem, .name = c.name});
}
INSTANTIATE_TEST_SUITE_P(Rings, RingForward, ::testing::ValuesIn(ring_cases()), fa::testing::CaseName{});

class RingBackward : public ::testing::TestWithParam<RingCase> {};
TEST_P(RingBackward, MatchesReference) {
  const RingCase& c = GetParam();
  if (const std::string why = ring_unavailable(c.config); !why.empty()) GTEST_SKIP() << why;
  const ring_attention::UseConfig use(c.config);
  fa::testing::check_backward({.chapter = &ring_attention::backward_chapter(), .problem = c.problem, .name = c.name});
}
INSTANTIATE_TEST_SUITE_P(Rings, RingBackward, ::testing::ValuesIn(ring_cases()), fa::testing::CaseName{});

// The shared refusals (dtype, head dim, layout, window, softcap, varlen, null pointers), then the
// ring's own: lengths it cannot split into 2R chunks of whole tiles, and Sq != Sk.
std::vector<fa::testing::RefusalCase> ring_refusals() {
  std::vector<fa::testing::RefusalCase> cases = fa::testing::refusal_cases(ring_attention::chapter());
  fa::Problem p = ring_attention::chapter().defaults;
  p.seqlen_q = p.seqlen_k = 1000;
  cases.push_back({.chapter = &ring_attention::chapter(), .problem = p, .null_output = false,
                   .expect = "multiple of 2R * 128", .name = "Ring_Seqlen1000"});
  p.seqlen_q = p.seqlen_k = 2048 + 128;  // a multiple of 128, not of 2R * 128 for R = 8
  cases.push_back({.chapter = &ring_attention::chapter(), .problem = p, .null_output = false,
                   .expect = "multiple of 2R * 128", .name = "Ring_Seqlen2176"});
  p.seqlen_q = 2048, p.seqlen_k = 4096;
  cases.push_back({.chapter = &ring_attention::chapter(), .problem = p, .null_output = false,
                   .expect = "self-attention", .name = "Ring_SqNotSk"});
  return cases;
}

class RingRefuses : public ::testing::TestWithParam<fa::testing::RefusalCase> {};
TEST_P(RingRefuses, BadInput) {
  // Eight ranks (simulated: no GPU is asked for), so that 2176 is no multiple of 2R * 128 = 2048.
  const ring_attention::UseConfig use({.ranks = 8, .transport = TransportKind::copy});
  fa::testing::check_refusal(GetParam());
}
INSTANTIATE_TEST_SUITE_P(Inputs, RingRefuses, ::testing::ValuesIn(ring_refusals()), fa::testing::CaseName{});

class RingBackwardRefuses : public ::testing::TestWithParam<fa::testing::BackwardRefusalCase> {};
TEST_P(RingBackwardRefuses, BadInput) {
  const ring_attention::UseConfig use({.ranks = 8, .transport = TransportKind::copy});
  fa::testing::check_backward_refusal(GetParam());
}
INSTANTIATE_TEST_SUITE_P(Inputs, RingBackwardRefuses,
                         ::testing::ValuesIn(fa::testing::backward_refusal_cases(ring_attention::backward_chapter())),
                         fa::testing::CaseName{});

TEST(InputsEnvironment, BadRingSizeIsRefusedNamingTheVariable) {
  EXPECT_THROW(ring_attention::parse_config("17", nullptr, 1, true), std::invalid_argument);
  try {
    ring_attention::parse_config("x", nullptr, 1, true);
    FAIL() << "FA_RING_RANKS=x accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("FA_RING_RANKS"), std::string::npos) << e.what();
  }
}

}  // namespace
