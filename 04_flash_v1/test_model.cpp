// Chapter 04's CPU tests (no GPU): Algorithm 1 as the model runs it agrees with the float64
// reference for any tile sizes, and the block-size rule gives the values worked out by hand.
//   ./build/04_flash_v1/04_flash_v1_cpu_tests
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "04_flash_v1/block_sizes.h"
#include "04_flash_v1/model.h"
#include "common/host/forward_check.h"
#include "common/host/host_data.h"

namespace {

struct Case {
  int batch, heads, kv_heads, seqlen_q, seqlen_k, head_dim;
  bool causal;
  int Br, Bc;
};

void check(const Case& c) {
  fa::Problem p;
  p.batch = c.batch;
  p.heads = c.heads;
  p.kv_heads = c.kv_heads;
  p.seqlen_q = c.seqlen_q;
  p.seqlen_k = c.seqlen_k;
  p.head_dim = c.head_dim;
  p.causal = c.causal;
  const std::string where = p.describe() + " Br=" + std::to_string(c.Br) + " Bc=" + std::to_string(c.Bc);
  const fa::HostInputs in = fa::make_inputs(p, 4 + c.seqlen_q * 31 + c.seqlen_k);
  std::vector<float> o, lse;
  flash_v1::model::forward(p, in.q, in.k, in.v, o, lse, c.Br, c.Bc);
  // The same verdict as the GPU tests give a kernel (common/host/forward_check.h).
  const fa::ForwardCheck check =
      fa::check_forward(p, in, fa::encode(o, fa::Dtype::f32), fa::encode(lse, fa::Dtype::f32));
  EXPECT_TRUE(check.pass()) << where << "\n" << check.summary();
}

// {B, H, Hkv, Sq, Sk, D, causal, Br, Bc}
TEST(Model, SingleRowAndKey) {
  check({1, 1, 1, 1, 1, 32, false, 16, 16});
  check({1, 1, 1, 1, 1, 32, true, 16, 16});
}
TEST(Model, TilesThatDoNotDivideTheSequence) {
  check({1, 2, 2, 17, 17, 32, false, 16, 16});
  check({1, 2, 2, 17, 17, 32, true, 5, 3});
  check({2, 2, 2, 127, 127, 64, false, 32, 64});
  check({2, 2, 2, 127, 127, 64, true, 64, 32});
}
TEST(Model, HeadDimSeven) { check({1, 2, 1, 127, 127, 7, true, 16, 48}); }
TEST(Model, MoreKeysThanQueries) {
  check({1, 2, 1, 17, 127, 32, true, 16, 64});
  check({1, 1, 1, 1, 1013, 64, true, 64, 64});
}
TEST(Model, MoreQueriesThanKeysLeavesEmptyRows) {  // causal: the first Sq - Sk rows see no key
  check({1, 2, 1, 127, 17, 32, true, 32, 16});
  check({1, 1, 1, 300, 1, 7, true, 64, 64});
  check({1, 2, 2, 127, 17, 32, false, 16, 32});
}
TEST(Model, GroupedAndMultiQuery) {
  check({2, 4, 2, 64, 96, 32, false, 16, 32});  // GQA: 2 query heads per KV head
  check({1, 4, 1, 33, 33, 64, true, 32, 16});   // MQA
}

// The block-size rule against values worked out by hand. M = smem_bytes / 4 floats.
TEST(BlockSizes, PaddedHeadDim) {
  EXPECT_EQ(flash_v1::padded_head_dim(1), 32);
  EXPECT_EQ(flash_v1::padded_head_dim(7), 32);
  EXPECT_EQ(flash_v1::padded_head_dim(33), 64);
  EXPECT_EQ(flash_v1::padded_head_dim(96), 96);
  EXPECT_EQ(flash_v1::padded_head_dim(97), 128);
  EXPECT_EQ(flash_v1::padded_head_dim(128), 128);
  EXPECT_EQ(flash_v1::padded_head_dim(129), 192);
  EXPECT_EQ(flash_v1::padded_head_dim(193), 256);
  EXPECT_EQ(flash_v1::padded_head_dim(256), 256);
}

void expect_sizes(std::size_t smem, int d, int paper_Br, int paper_Bc, int Br, int Bc) {
  const flash_v1::BlockSizes b = flash_v1::block_sizes(smem, d);
  const std::string where = std::to_string(smem) + " bytes, d = " + std::to_string(d);
  EXPECT_EQ(b.paper_Br, paper_Br) << where;
  EXPECT_EQ(b.paper_Bc, paper_Bc) << where;
  EXPECT_EQ(b.Br, Br) << where;
  EXPECT_EQ(b.Bc, Bc) << where;
  EXPECT_LE(flash_v1::smem_floats(b.Br, b.Bc, d) * sizeof(float), smem) << where;
}

// A100: 164 KB of shared memory per SM, of which one block may opt in to 163 KB = 166912 bytes,
// M = 41728 floats. d = 64: Bc = ceil(41728 / 256) = 163, Br = min(163, 64) = 64 -> 64 x 64.
TEST(BlockSizes, A100) {
  constexpr std::size_t kA100 = 163 * 1024;
  expect_sizes(kA100, 32, 32, 326, 32, 64);   // Br = d = 32 caps the rows
  expect_sizes(kA100, 64, 64, 163, 64, 64);
  expect_sizes(kA100, 96, 96, 109, 64, 64);   // ceil(41728 / 384) = ceil(108.7)
  expect_sizes(kA100, 128, 82, 82, 64, 64);   // ceil(41728 / 512) = ceil(81.5)
}

// H100: 228 KB per SM, 227 KB = 232448 bytes per block, M = 58112 floats.
TEST(BlockSizes, H100) {
  constexpr std::size_t kH100 = 227 * 1024;
  expect_sizes(kH100, 32, 32, 454, 32, 64);
  expect_sizes(kH100, 64, 64, 227, 64, 64);
  expect_sizes(kH100, 96, 96, 152, 64, 64);   // ceil(58112 / 384) = ceil(151.3)
  expect_sizes(kH100, 128, 114, 114, 64, 64);  // ceil(58112 / 512) = ceil(113.5)
}

// Smaller budgets: the rule itself shrinks the tiles (99 KB: RTX 4090 / sm_89; 48 KB: no opt-in),
// and at 66 KB the rule's 64 x 64 needs 70144 bytes, so the fit check halves Br.
TEST(BlockSizes, SmallerSharedMemory) {
  expect_sizes(99 * 1024, 128, 50, 50, 32, 32);  // M = 25344: ceil(25344 / 512) = ceil(49.5)
  expect_sizes(48 * 1024, 128, 24, 24, 16, 16);  // M = 12288: 12288 / 512 = 24
  expect_sizes(48 * 1024, 64, 48, 48, 32, 32);   // 12288 / 256 = 48
  expect_sizes(66 * 1024, 64, 64, 66, 32, 64);   // M = 16896: ceil(16896 / 256) = 66
  EXPECT_EQ(flash_v1::smem_floats(64, 64, 64) * sizeof(float), 70144u);
}

}  // namespace
