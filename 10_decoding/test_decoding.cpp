// Chapter 10 against the float64 reference: the shared shapes (both dtypes, D 64 and 128), and
// decode shapes -- seqlen_q 1-16, long and odd seqlen_k, GQA ratios 1, 4, 8, batch 1-64 -- chosen so
// that the plan splits the key range (several pieces and the combine) as well as not, and that the
// warps split the keys of a tile (at most 16 packed rows, 16 included) as well as its rows. The stream-K
// step (steps/) runs the same shared shapes and decode shapes.
// ctest -L 10_decoding
#include <cstdint>
#include <string>
#include <vector>

#include "10_decoding/decoding.h"
#include "10_decoding/steps/steps.h"
#include "common/harness/test_cases.h"  // test_tier
#include "common/harness/test_harness.h"

FA_FORWARD_TESTS(decoding::chapter());
FA_STEP_TESTS(decoding::steps::all());

namespace {

std::vector<fa::testing::ForwardCase> decode_cases(const fa::Chapter& ch) {
  struct Shape {
    int batch, heads, kv_heads, seqlen_q, seqlen_k;
    bool causal;
  };
  const std::vector<Shape> shapes = {
      {1, 32, 8, 1, 4096, false}, {1, 32, 8, 1, 4097, true},  {1, 8, 8, 1, 1, false},
      {1, 8, 1, 1, 131073, false}, {2, 16, 2, 3, 999, true},  {4, 32, 4, 16, 2049, true},
      {8, 32, 8, 1, 16384, false}, {64, 8, 1, 1, 300, true},  {3, 8, 8, 5, 70, true},
      {1, 64, 8, 16, 16, true},   {2, 32, 8, 7, 65, false},  {2, 32, 8, 4, 1000, true},
  };
  // The core tier (common/harness/test_cases.h) leaves out the shapes whose float64 reference takes
  // seconds (more than 2M query-row x key pairs); the full tier runs them all.
  const bool full = fa::testing::test_tier() == fa::testing::Tier::full;
  std::vector<fa::testing::ForwardCase> cases;
  for (const Shape& s : shapes) {
    if (!full && std::int64_t{s.batch} * s.heads * s.seqlen_q * s.seqlen_k > (std::int64_t{1} << 21)) continue;
    for (fa::Dtype dtype : ch.support.dtypes)
      for (int d : ch.test_head_dims) {
        fa::Problem p;
        p.batch = s.batch, p.heads = s.heads, p.kv_heads = s.kv_heads, p.seqlen_q = s.seqlen_q, p.seqlen_k = s.seqlen_k;
        p.head_dim = d, p.causal = s.causal, p.dtype = dtype;
        std::string name = "B" + std::to_string(s.batch) + "_H" + std::to_string(s.heads) + "x" +
                           std::to_string(s.kv_heads) + "_Sq" + std::to_string(s.seqlen_q) + "_Sk" +
                           std::to_string(s.seqlen_k) + "_D" + std::to_string(d) + (s.causal ? "_causal_" : "_") +
                           fa::dtype_name(dtype);
        cases.push_back({.chapter = &ch, .problem = p, .name = name});
      }
  }
  return cases;
}

class Decode : public ::testing::TestWithParam<fa::testing::ForwardCase> {};
TEST_P(Decode, MatchesReference) { fa::testing::check_forward(GetParam()); }
INSTANTIATE_TEST_SUITE_P(Shapes, Decode, ::testing::ValuesIn(decode_cases(decoding::chapter())), fa::testing::CaseName{});
INSTANTIATE_TEST_SUITE_P(StreamK, Decode, ::testing::ValuesIn(decode_cases(decoding::steps::all().at(0).chapter)),
                         fa::testing::CaseName{});

}  // namespace
