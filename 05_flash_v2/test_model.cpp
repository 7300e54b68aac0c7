// CPU tests of chapter 05: the FA2 model against the float64 reference, and the causal
// tile-skip index math that the kernel shares with the model. ctest -L cpu
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "05_flash_v2/model.h"
#include "common/device/tiles.h"
#include "common/host/forward_check.h"
#include "common/host/host_data.h"

namespace {

struct Case {
  int batch, heads, kv_heads, seqlen_q, seqlen_k, head_dim;
  bool causal;
  int Br, Bc;
};

std::string name_of(const Case& c) {
  return "B" + std::to_string(c.batch) + "_H" + std::to_string(c.heads) + "x" +
         std::to_string(c.kv_heads) + "_Sq" + std::to_string(c.seqlen_q) + "_Sk" +
         std::to_string(c.seqlen_k) + "_D" + std::to_string(c.head_dim) +
         (c.causal ? "_causal" : "") + "_Br" + std::to_string(c.Br) + "_Bc" + std::to_string(c.Bc);
}

class Model : public ::testing::TestWithParam<Case> {};

TEST_P(Model, MatchesReference) {
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
  std::vector<float> o, lse;
  flash_v2::model::forward(p, in.q, in.k, in.v, o, lse, c.Br, c.Bc);

  // The same verdict as the GPU tests give a kernel (common/host/forward_check.h).
  const fa::ForwardCheck check =
      fa::check_forward(p, in, fa::encode(o, fa::Dtype::f32), fa::encode(lse, fa::Dtype::f32));
  EXPECT_TRUE(check.pass()) << p.describe() << "\n" << check.summary();
}

// Tile sizes: the kernel's (64 x 64 and 64 x 32), small ones so short sequences span several
// tiles, and sizes that divide nothing.
INSTANTIATE_TEST_SUITE_P(
    Shapes, Model,
    ::testing::Values(Case{1, 1, 1, 1, 1, 32, false, 64, 64},
                      Case{1, 1, 1, 1, 1, 7, true, 64, 32},
                      Case{1, 2, 1, 17, 17, 64, true, 64, 64},
                      Case{1, 2, 1, 17, 17, 7, true, 4, 4},
                      Case{2, 4, 2, 127, 127, 32, false, 64, 32},
                      Case{1, 4, 2, 127, 127, 64, true, 16, 8},
                      Case{1, 2, 2, 127, 127, 32, true, 7, 13},
                      Case{1, 2, 1, 17, 127, 32, true, 64, 32},    // Sq < Sk: later keys
                      Case{1, 2, 1, 127, 17, 32, true, 16, 16},    // Sq > Sk: rows that see nothing
                      Case{1, 2, 1, 127, 17, 7, true, 64, 64},     // a whole tile sees nothing
                      Case{1, 3, 1, 33, 70, 64, false, 16, 32},    // MQA
                      Case{2, 2, 2, 1, 127, 64, true, 64, 64},
                      Case{1, 2, 2, 127, 1, 32, false, 64, 32}),
    [](const ::testing::TestParamInfo<Case>& info) { return name_of(info.param); });

// key_tile_end and needs_mask against brute force over every (query tile, key tile) pair.
TEST(TileSkip, MatchesBruteForce) {
  const int sizes[] = {1, 2, 3, 5, 16, 17, 31, 64, 65, 100, 129};
  const int tiles[] = {1, 3, 8, 16, 32, 64};
  for (int Sq : sizes)
    for (int Sk : sizes)
      for (int Br : tiles)
        for (int Bc : tiles)
          for (bool causal : {false, true}) {
            const int Tc = fa::cuda::ceil_div(Sk, Bc);
            for (int it = 0; it < fa::cuda::ceil_div(Sq, Br); ++it) {
              const int rows_end = std::min((it + 1) * Br, Sq);
              int want_end = 0;  // 1 + the last key tile holding a key some row sees
              for (int jt = 0; jt < Tc; ++jt) {
                bool any_seen = false, any_hidden = false;
                for (int i = it * Br; i < rows_end; ++i) {
                  for (int j = jt * Bc; j < (jt + 1) * Bc; ++j) {
                    const bool seen = j < Sk && (!causal || fa::causal_visible(i, j, Sq, Sk));
                    any_seen |= seen;
                    any_hidden |= !seen;
                  }
                }
                if (any_seen) want_end = jt + 1;
                if (jt < fa::cuda::key_tile_end(it, Br, Bc, Sq, Sk, causal)) {
                  ASSERT_EQ(fa::cuda::needs_mask(it, jt, Br, Bc, Sq, Sk, causal), any_hidden)
                      << "Sq=" << Sq << " Sk=" << Sk << " Br=" << Br << " Bc=" << Bc
                      << " causal=" << causal << " tile (" << it << ", " << jt << ")";
                }
              }
              ASSERT_EQ(fa::cuda::key_tile_end(it, Br, Bc, Sq, Sk, causal), want_end)
                  << "Sq=" << Sq << " Sk=" << Sk << " Br=" << Br << " Bc=" << Bc
                  << " causal=" << causal << " query tile " << it;
            }
          }
}

}  // namespace
