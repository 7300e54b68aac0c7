// CPU tests of chapter 07's algorithm: the kernel's walk over the CSR list against brute force,
// and the fp32 model of the sparse kernel against the float64 reference given the same mask
// expanded to elements. ctest -L cpu
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "07_block_sparse/block_mask.h"
#include "07_block_sparse/model.h"
#include "07_block_sparse/sparse_tiles.h"
#include "common/device/tiles.h"
#include "common/host/host_data.h"
#include "07_block_sparse/masked_check.h"

namespace bs = block_sparse;

namespace {

// The walk visits exactly the tiles of active blocks that hold a key some row may see
// (before Tc_end), in ascending order.
TEST(Walk, MatchesBruteForce) {
  const int lengths[] = {1, 17, 64, 77, 128, 129, 300, 1013};
  for (int Sq : lengths)
    for (int Sk : lengths)
      for (int block_k : {64, 128})
        for (int Bc : {32, 64, 128})
          for (bool causal : {false, true}) {
            if (block_k % Bc != 0) continue;
            fa::Problem p;
            p.seqlen_q = Sq;
            p.seqlen_k = Sk;
            const bs::BlockMask m = bs::make_mask(p, block_k, {{.pattern = bs::Pattern::random, .density = 0.6, .seed = 9}});
            const int tpb = block_k / Bc;
            for (int qb = 0; qb < m.shape.num_q_blocks; ++qb) {
              const int Tc_end = fa::cuda::key_tile_end(qb, 128, Bc, Sq, Sk, causal);
              std::vector<int> want, got;
              for (int jt = 0; jt < Tc_end; ++jt)
                if (m.active(0, 0, qb, jt / tpb)) want.push_back(jt);
              const int* cols = m.col_indices.data() + m.row_offsets[qb];
              const int n_end = bs::walk_length(cols, m.row_offsets[qb + 1] - m.row_offsets[qb], tpb, Tc_end);
              for (int n = 0; n < n_end; ++n) got.push_back(bs::walk_tile(cols, n, tpb));
              ASSERT_EQ(got, want) << "Sq=" << Sq << " Sk=" << Sk << " block_k=" << block_k << " Bc=" << Bc
                                   << " causal=" << causal << " query block " << qb;
            }
          }
}

struct Case {
  int batch, heads, kv_heads, seqlen_q, seqlen_k, head_dim;
  bool causal;
  int block_k, Bc;
  std::vector<bs::HeadPattern> patterns;
  std::string name;
};

class Model : public ::testing::TestWithParam<Case> {};

TEST_P(Model, MatchesReferenceWithMask) {
  const Case& c = GetParam();
  fa::Problem p;
  p.batch = c.batch;
  p.heads = c.heads;
  p.kv_heads = c.kv_heads;
  p.seqlen_q = c.seqlen_q;
  p.seqlen_k = c.seqlen_k;
  p.head_dim = c.head_dim;
  p.causal = c.causal;
  const fa::HostInputs in = fa::make_inputs(p, 5);
  const bs::BlockMask mask = bs::make_mask(p, c.block_k, c.patterns);
  std::vector<float> o, lse;
  bs::model::forward(p, mask, in.q, in.k, in.v, o, lse, c.Bc);
  // The same verdict as the GPU tests give the kernel (07_block_sparse/masked_check.h).
  const fa::ForwardCheck check = fa::check_forward_masked(p, in, fa::encode(o, fa::Dtype::f32),
                                                          fa::encode(lse, fa::Dtype::f32), bs::visible_fn(mask));
  EXPECT_TRUE(check.pass()) << p.describe() << " mask density " << mask.density() << "\n" << check.summary();
}

using P = bs::Pattern;
const bs::HeadPattern kDense{.pattern = P::dense}, kRandom{.pattern = P::random, .density = 0.4, .seed = 3},
    kEmpty{.pattern = P::random, .density = 0.0}, kLocal{.pattern = P::local, .window = 1},
    kStreaming{.pattern = P::streaming, .window = 1, .sink = 1}, kCausal{.pattern = P::causal};

INSTANTIATE_TEST_SUITE_P(
    Masks, Model,
    ::testing::Values(Case{1, 1, 1, 1, 1, 32, false, 128, 64, {kDense}, "Dense_Sq1"},
                      Case{1, 2, 1, 17, 17, 32, true, 64, 64, {kDense}, "Dense_Sq17_causal"},
                      Case{1, 2, 2, 300, 77, 32, false, 64, 64, {kRandom}, "Random_Sq300_Sk77"},
                      Case{1, 2, 1, 77, 300, 32, true, 128, 64, {kRandom}, "Random_Sq77_Sk300_causal"},
                      Case{1, 2, 2, 513, 700, 16, false, 128, 32, {kRandom}, "Random_Bc32"},
                      Case{1, 1, 1, 700, 513, 16, true, 128, 128, {kRandom}, "Random_Bc128_causal"},
                      Case{1, 2, 2, 640, 640, 16, false, 64, 64, {kLocal}, "Local"},
                      Case{1, 2, 2, 640, 1013, 16, true, 128, 64, {kStreaming}, "Streaming_causal"},
                      Case{1, 2, 2, 1013, 640, 16, false, 64, 64, {kCausal}, "CausalBlocks"},
                      Case{1, 2, 2, 300, 300, 16, true, 64, 64, {kEmpty}, "Empty_causal"},
                      Case{2, 4, 2, 384, 300, 16, true, 128, 64, {kDense, kRandom, kEmpty, kStreaming},
                           "PerHead_GQA_causal"}),
    [](const ::testing::TestParamInfo<Case>& info) { return info.param.name; });

}  // namespace
