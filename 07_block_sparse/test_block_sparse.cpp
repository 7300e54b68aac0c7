// Chapter 07 on the GPU: the shared shapes through the chapter's dense-mask forward, then every
// mask pattern on awkward shapes (both dtypes, D = 64 and 128, key blocks of 64 and 128, causal
// and not, empty and full masks, Sq != Sk) against the float64 reference given the same mask,
// with the same verdict as every chapter. ctest -L 07_block_sparse
#include <stdexcept>
#include <string>
#include <vector>

#include "07_block_sparse/block_sparse.h"
#include "common/cuda/cuda_check.h"
#include "common/host/host_data.h"
#include "07_block_sparse/masked_check.h"
#include "common/harness/test_cases.h"
#include "common/harness/test_harness.h"

FA_FORWARD_TESTS(block_sparse::chapter());

namespace {

namespace bs = block_sparse;
using fa::testing::kGuardBytes;

struct MaskedCase {
  fa::Problem problem;
  int block_k;
  std::vector<bs::HeadPattern> patterns;
  std::string name;
};

void PrintTo(const MaskedCase& c, std::ostream* os) { *os << c.name; }

using fa::testing::Shape;  // and problem_of: common/harness/test_cases.h

// Awkward lengths; Sq > Sk under causal masking (rows that see nothing); whole blocks only.
constexpr Shape kShapes[] = {
    {1, 1, 1, 1, 1, false},       {1, 2, 1, 17, 17, true},      {1, 2, 2, 300, 77, false},
    {1, 2, 1, 77, 300, true},     {1, 2, 2, 1013, 1013, true},  {2, 2, 1, 1013, 700, false},
    {1, 2, 2, 128, 1024, false},  {1, 2, 2, 1024, 128, true},
};

std::vector<MaskedCase> masked_cases() {
  using P = bs::Pattern;
  struct Named {
    const char* name;
    std::vector<bs::HeadPattern> patterns;  // one for all heads; PerHead: cycled over the heads
  };
  const std::vector<Named> patterns = {
      {"Dense", {{.pattern = P::dense}}},
      {"Empty", {{.pattern = P::random, .density = 0.0}}},
      {"Random50", {{.pattern = P::random, .density = 0.5, .seed = 1}}},
      {"Random10", {{.pattern = P::random, .density = 0.1, .seed = 2}}},
      {"Local", {{.pattern = P::local, .window = 1}}},
      {"Streaming", {{.pattern = P::streaming, .window = 1, .sink = 1}}},
      {"CausalBlocks", {{.pattern = P::causal}}},
      {"PerHead",
       {{.pattern = P::dense},
        {.pattern = P::streaming, .window = 0, .sink = 1},
        {.pattern = P::random, .density = 0.3, .seed = 4},
        {.pattern = P::random, .density = 0.0}}},
  };
  std::vector<MaskedCase> cases;
  for (fa::Dtype dtype : {fa::Dtype::bf16, fa::Dtype::f16})
    for (int d : {64, 128})
      for (int block_k : {64, 128})
        for (const Shape& s : kShapes)
          for (const Named& n : patterns) {
            const fa::Problem p = fa::testing::problem_of(s, d, dtype);
            const std::vector<bs::HeadPattern> per_head = bs::cycle_patterns(n.patterns, p.heads);
            const std::string name = std::string(n.name) + "_bk" + std::to_string(block_k) + "_B" +
                                     std::to_string(s.batch) + "_H" + std::to_string(s.heads) + "x" +
                                     std::to_string(s.kv_heads) + "_Sq" + std::to_string(s.seqlen_q) + "_Sk" +
                                     std::to_string(s.seqlen_k) + "_D" + std::to_string(d) +
                                     (s.causal ? "_causal_" : "_") + fa::dtype_name(dtype);
            cases.push_back({.problem = p, .block_k = block_k, .patterns = per_head, .name = name});
          }
  // [B, S, H, D] tensors (06's layout; rows H D apart): every pattern, both block sizes, GQA,
  // Sq != Sk, D 64 and 72 (a padded tile).
  for (int d : {64, 72})
    for (int block_k : {64, 128})
      for (const Named& n : patterns) {
        fa::Problem p = fa::testing::problem_of({2, 4, 2, 257, 300, true}, d, fa::Dtype::bf16);
        p.layout = fa::Layout::bshd;
        cases.push_back({.problem = p,
                         .block_k = block_k,
                         .patterns = bs::cycle_patterns(n.patterns, p.heads),
                         .name = std::string(n.name) + "_bk" + std::to_string(block_k) + "_B2_H4x2_Sq257_Sk300_D" +
                                 std::to_string(d) + "_causal_bf16_bshd"});
      }
  // batch x heads = 66,048: more (b, h) pairs than grid y holds (common/device/grid.cuh), each
  // head with its own pattern; two key blocks, the second partial.
  for (int block_k : {64, 128}) {
    const fa::Problem p = fa::testing::problem_of({129, 512, 128, 3, block_k + 2, false}, 64, fa::Dtype::bf16);
    const std::vector<bs::HeadPattern> per_head = bs::cycle_patterns(patterns.back().patterns, p.heads);
    cases.push_back({.problem = p,
                     .block_k = block_k,
                     .patterns = per_head,
                     .name = "PerHead_bk" + std::to_string(block_k) + "_B129_H512x128_Sq3_Sk" +
                             std::to_string(p.seqlen_k) + "_D64_bf16"});
  }
  return cases;
}

class Masked : public ::testing::TestWithParam<MaskedCase> {};

TEST_P(Masked, MatchesReferenceWithMask) {
  const std::string reason = fa::cuda::unavailable_reason();
  if (!reason.empty()) GTEST_SKIP() << "GPU test skipped: " << reason;
  const MaskedCase& c = GetParam();
  const fa::Problem& p = c.problem;
  const fa::HostInputs in = fa::make_inputs(p, fa::testing::seed_of(c.name));
  const bs::BlockMask mask = bs::make_mask(p, c.block_k, c.patterns);
  const bs::DeviceBlockMask device_mask(mask);
  const std::size_t elem = fa::dtype_size(p.dtype);

  fa::cuda::DeviceBuffer q(p.q_elems() * elem), k(p.kv_elems() * elem), v(p.kv_elems() * elem);
  fa::cuda::DeviceBuffer o(p.o_elems() * elem + kGuardBytes), lse(p.lse_elems() * sizeof(float) + kGuardBytes);
  // Q, K, V in the problem's layout; O comes back to [B, H, S, D] for the check.
  q.upload(fa::to_layout(fa::encode(in.q, p.dtype), p, fa::Operand::q));
  k.upload(fa::to_layout(fa::encode(in.k, p.dtype), p, fa::Operand::k));
  v.upload(fa::to_layout(fa::encode(in.v, p.dtype), p, fa::Operand::v));
  o.poison();  // every element the kernel fails to write stays poisoned and fails the check
  lse.poison();

  bs::forward(p, device_mask, q.get(), k.get(), v.get(), o.get(), lse.as<float>(), nullptr);
  FA_CUDA_CHECK(cudaDeviceSynchronize());

  const std::vector<std::uint8_t> o_bhsd = fa::from_layout(fa::testing::download_guarded(o, "O"), p, fa::Operand::o);
  const fa::ForwardCheck check =
      fa::check_forward_masked(p, in, o_bhsd, fa::testing::download_guarded(lse, "LSE"), bs::visible_fn(mask));
  EXPECT_TRUE(check.pass()) << p.describe() << ", block mask density " << mask.density() << "\n"
                            << check.summary();
}

INSTANTIATE_TEST_SUITE_P(Patterns, Masked, ::testing::ValuesIn(masked_cases()), fa::testing::CaseName{});

// A mask for another shape, or a bad CSR, is refused before any device work.
TEST(MaskRefused, WrongShapeOrBlockSize) {
  const std::string reason = fa::cuda::unavailable_reason();
  if (!reason.empty()) GTEST_SKIP() << "GPU test skipped: " << reason;
  fa::Problem p;
  p.heads = p.kv_heads = 2;
  p.seqlen_q = p.seqlen_k = 300;
  p.dtype = fa::Dtype::bf16;
  static float dummy[4];  // never dereferenced
  auto refused = [&](const fa::Problem& problem, const bs::DeviceBlockMask& mask, const std::string& word) {
    try {
      bs::forward(problem, mask, dummy, dummy, dummy, dummy, dummy, nullptr);
      ADD_FAILURE() << "accepted a mask for " << mask.shape().describe() << " on " << problem.describe();
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(word), std::string::npos) << e.what();
    }
  };
  const bs::DeviceBlockMask mask64(bs::make_mask(p, 64, {{bs::Pattern::dense}}));
  fa::Problem longer = p;
  longer.seqlen_k = 1013;
  refused(longer, mask64, "does not fit");
  fa::Problem more_heads = p;
  more_heads.heads = more_heads.kv_heads = 4;
  refused(more_heads, mask64, "heads");
  bs::BlockMask bad = bs::make_mask(p, 128, {{bs::Pattern::dense}});
  bad.col_indices[0] = 7;  // out of range: refused at upload
  EXPECT_THROW(bs::DeviceBlockMask{bad}, std::invalid_argument);
}

}  // namespace
