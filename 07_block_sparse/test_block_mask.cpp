// CPU tests of chapter 07's block masks: dense <-> CSR, the generators' exact patterns and
// densities, per-head patterns, seeds, and the refusal of bad masks. ctest -L cpu
#include <gtest/gtest.h>

#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "07_block_sparse/block_mask.h"
#include "common/host/host_data.h"

namespace bs = block_sparse;
using P = bs::Pattern;

namespace {

fa::Problem problem(int batch, int heads, int seqlen_q, int seqlen_k) {
  fa::Problem p;
  p.batch = batch;
  p.heads = p.kv_heads = heads;
  p.seqlen_q = seqlen_q;
  p.seqlen_k = seqlen_k;
  return p;
}

// Every (b, h, qb, kb) of `mask` against a predicate.
template <class Want>
void expect_pattern(const bs::BlockMask& mask, Want want) {
  const bs::MaskShape& s = mask.shape;
  for (int b = 0; b < s.batch; ++b)
    for (int h = 0; h < s.heads; ++h)
      for (int qb = 0; qb < s.num_q_blocks; ++qb)
        for (int kb = 0; kb < s.num_k_blocks; ++kb)
          ASSERT_EQ(mask.active(b, h, qb, kb), want(b, h, qb, kb)) << "b" << b << " h" << h << " block (" << qb
                                                                    << ", " << kb << ")";
}

template <class Fn>
void expect_refused(Fn fn, const std::string& word) {
  try {
    fn();
    FAIL() << "accepted; expected std::invalid_argument mentioning '" << word << "'";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find(word), std::string::npos) << e.what();
  }
}

TEST(Csr, SmallByHand) {
  const bs::MaskShape s = bs::mask_shape(problem(1, 1, 200, 300), 128);  // 2 x 3 blocks
  const bs::BlockMask m = bs::from_dense(s, {1, 0, 1, 0, 0, 0});
  EXPECT_EQ(m.row_offsets, (std::vector<int>{0, 2, 2}));
  EXPECT_EQ(m.col_indices, (std::vector<int>{0, 2}));
  EXPECT_DOUBLE_EQ(m.density(), 2.0 / 6.0);
}

TEST(Csr, DenseRoundTrip) {
  const bs::MaskShape s = bs::mask_shape(problem(2, 3, 1013, 777), 64);  // 8 x 13 blocks per head
  std::vector<std::uint8_t> dense(s.rows() * s.num_k_blocks);
  for (std::size_t n = 0; n < dense.size(); ++n) dense[n] = fa::seeded_normal(7, n) > 0.3f;
  const bs::BlockMask m = bs::from_dense(s, dense);
  EXPECT_NO_THROW(m.validate());
  EXPECT_EQ(bs::to_dense(m), dense);
  for (std::int64_t row = 0; row < s.rows(); ++row)
    for (int kb = 0; kb < s.num_k_blocks; ++kb) {
      const int h = static_cast<int>(row / s.num_q_blocks % s.heads), b = static_cast<int>(row / s.num_q_blocks / s.heads);
      ASSERT_EQ(m.active(b, h, static_cast<int>(row % s.num_q_blocks), kb), dense[row * s.num_k_blocks + kb] != 0);
    }
  // And back: a generated mask survives dense -> CSR unchanged.
  const bs::BlockMask g =
      bs::make_mask(problem(2, 3, 1013, 777), 64, {{.pattern = P::random, .density = 0.3, .seed = 11}});
  const bs::BlockMask again = bs::from_dense(g.shape, bs::to_dense(g));
  EXPECT_EQ(again.row_offsets, g.row_offsets);
  EXPECT_EQ(again.col_indices, g.col_indices);
}

TEST(Csr, VisibleFnExpandsBlocks) {
  const fa::Problem p = problem(1, 2, 300, 200);
  const bs::BlockMask m = bs::make_mask(p, 64, {{.pattern = P::random, .density = 0.5, .seed = 3}});
  const fa::VisibleFn visible = bs::visible_fn(m);
  for (int h = 0; h < 2; ++h)
    for (int i = 0; i < p.seqlen_q; ++i)
      for (int j = 0; j < p.seqlen_k; ++j) ASSERT_EQ(visible(0, h, i, j), m.active(0, h, i / 128, j / 64));
}

TEST(Generators, Dense) {
  const bs::BlockMask m = bs::make_mask(problem(2, 2, 300, 1013), 128, {{bs::Pattern::dense}});
  EXPECT_DOUBLE_EQ(m.density(), 1.0);
  expect_pattern(m, [](int, int, int, int) { return true; });
}

TEST(Generators, RandomDensityAndSeeds) {
  const fa::Problem p = problem(2, 4, 4096, 4096);
  for (int block_k : {64, 128}) {
    for (double density : {0.0, 0.1, 0.25, 0.5, 0.9, 1.0}) {
      const bs::BlockMask m = bs::make_mask(p, block_k, {{.pattern = P::random, .density = density, .seed = 42}});
      const int per_row = static_cast<int>(std::lround(density * m.shape.num_k_blocks));
      for (std::int64_t row = 0; row < m.shape.rows(); ++row)
        ASSERT_EQ(m.row_offsets[row + 1] - m.row_offsets[row], per_row);  // every row the same work
      EXPECT_NEAR(m.density(), density, 0.5 / m.shape.num_k_blocks) << "block_k " << block_k;
      const bs::BlockMask same = bs::make_mask(p, block_k, {{.pattern = P::random, .density = density, .seed = 42}});
      EXPECT_EQ(same.col_indices, m.col_indices) << "a seed must give the same mask";
      if (density > 0.0 && density < 1.0) {
        const bs::BlockMask other = bs::make_mask(p, block_k, {{.pattern = P::random, .density = density, .seed = 43}});
        EXPECT_NE(other.col_indices, m.col_indices) << "another seed, another mask";
      }
    }
  }
  // Rows differ from each other (not one row pattern repeated).
  const bs::BlockMask m = bs::make_mask(p, 128, {{.pattern = P::random, .density = 0.5, .seed = 1}});
  const std::vector<int> row0(m.col_indices.begin(), m.col_indices.begin() + m.row_offsets[1]);
  const std::vector<int> row1(m.col_indices.begin() + m.row_offsets[1], m.col_indices.begin() + m.row_offsets[2]);
  EXPECT_NE(row0, row1);
}

TEST(Generators, LocalExact) {
  // Sq = Sk = 1024: query block qb covers keys 128 qb .. 128 qb + 127.
  expect_pattern(bs::make_mask(problem(1, 2, 1024, 1024), 128, {{.pattern = P::local, .window = 1}}),
                 [](int, int, int qb, int kb) { return qb - 1 <= kb && kb <= qb + 1; });
  expect_pattern(bs::make_mask(problem(1, 1, 1024, 1024), 64, {{.pattern = P::local, .window = 1}}),
                 [](int, int, int qb, int kb) { return 2 * qb - 1 <= kb && kb <= 2 * qb + 2; });
  expect_pattern(bs::make_mask(problem(1, 1, 1024, 1024), 128, {{.pattern = P::local, .window = 0}}),
                 [](int, int, int qb, int kb) { return kb == qb; });
  // Sq = 256, Sk = 1024, bottom-right aligned: the 2 query blocks sit on key blocks 6 and 7.
  expect_pattern(bs::make_mask(problem(1, 1, 256, 1024), 128, {{.pattern = P::local, .window = 2}}),
                 [](int, int, int qb, int kb) { return 6 + qb - 2 <= kb && kb <= 6 + qb + 2; });
}

TEST(Generators, StreamingExact) {
  expect_pattern(bs::make_mask(problem(1, 1, 1024, 1024), 128, {{.pattern = P::streaming, .window = 2, .sink = 1}}),
                 [](int, int, int qb, int kb) { return kb < 1 || (qb - 2 <= kb && kb <= qb); });
  expect_pattern(bs::make_mask(problem(1, 1, 1024, 1024), 64, {{.pattern = P::streaming, .window = 1, .sink = 2}}),
                 [](int, int, int qb, int kb) { return kb < 2 || (2 * qb - 1 <= kb && kb <= 2 * qb + 1); });
}

TEST(Generators, CausalExact) {
  expect_pattern(bs::make_mask(problem(1, 1, 1024, 1024), 128, {{bs::Pattern::causal}}),
                 [](int, int, int qb, int kb) { return kb <= qb; });
  expect_pattern(bs::make_mask(problem(1, 1, 1024, 1024), 64, {{bs::Pattern::causal}}),
                 [](int, int, int qb, int kb) { return kb <= 2 * qb + 1; });
  // Sq > Sk: query block 0 (rows 0..127) lines up with keys -896..-769: no block at all.
  expect_pattern(bs::make_mask(problem(1, 1, 1024, 128), 128, {{bs::Pattern::causal}}),
                 [](int, int, int qb, int) { return qb == 7; });
  // A partial last query block (Sq = 300): its last row, 299, is the diagonal.
  expect_pattern(bs::make_mask(problem(1, 1, 300, 300), 64, {{bs::Pattern::causal}}),
                 [](int, int, int qb, int kb) { return kb <= (std::min(128 * qb + 127, 299)) / 64; });
}

TEST(Generators, PerHeadPatterns) {
  const fa::Problem p = problem(2, 3, 1024, 1024);
  const bs::BlockMask m = bs::make_mask(p, 128,
                                        {{.pattern = P::dense},
                                         {.pattern = P::random, .density = 0.25, .seed = 5},
                                         {.pattern = P::streaming, .window = 1, .sink = 1}});
  expect_pattern(m, [&](int b, int h, int qb, int kb) {
    if (h == 0) return true;
    if (h == 2) return kb < 1 || (qb - 1 <= kb && kb <= qb);
    return m.active(b, 1, qb, kb);  // head 1: checked by count below
  });
  for (int b = 0; b < 2; ++b)
    for (int qb = 0; qb < 8; ++qb) {
      const std::int64_t row = (std::int64_t{b} * 3 + 1) * 8 + qb;
      EXPECT_EQ(m.row_offsets[row + 1] - m.row_offsets[row], 2);  // round(0.25 * 8)
    }
}

TEST(Refuses, BadMasks) {
  const fa::Problem p = problem(1, 2, 300, 300);
  const bs::MaskShape s = bs::mask_shape(p, 128);  // 3 x 3 blocks
  expect_refused([&] { bs::mask_shape(p, 32); }, "key block size");
  expect_refused([&] { bs::mask_shape(p, 256); }, "key block size");
  expect_refused([&] { bs::from_dense(s, std::vector<std::uint8_t>(17, 1)); }, "entries");
  bs::BlockMask m = bs::make_mask(p, 128, {{bs::Pattern::dense}});
  EXPECT_NO_THROW(m.validate());
  bs::BlockMask bad = m;
  bad.col_indices[1] = 3;
  expect_refused([&] { bad.validate(); }, "out of range");
  bad = m;
  bad.col_indices[1] = -1;
  expect_refused([&] { bad.validate(); }, "out of range");
  bad = m;
  std::swap(bad.col_indices[0], bad.col_indices[1]);
  expect_refused([&] { bad.validate(); }, "ascending");
  bad = m;
  bad.row_offsets.pop_back();
  expect_refused([&] { bad.validate(); }, "row_offsets");
  bad = m;
  bad.row_offsets[2] = 1;
  expect_refused([&] { bad.validate(); }, "decrease");
  bad = m;
  bad.shape.block_q = 64;
  expect_refused([&] { bad.validate(); }, "query block");
  expect_refused([&] { bs::make_mask(p, 128, {{bs::Pattern::dense}, {bs::Pattern::dense}, {bs::Pattern::dense}}); },
                 "per head");
  expect_refused([&] { bs::make_mask(p, 128, {{.pattern = P::random, .density = 1.5}}); }, "density");
  expect_refused([&] { bs::make_mask(p, 128, {{.pattern = P::local, .window = -1}}); }, "window");
  expect_refused([&] { bs::parse_pattern("diagonal"); }, "unknown pattern");
}

TEST(Refuses, MaskThatDoesNotFit) {
  const fa::Problem p = problem(1, 2, 300, 300);
  const bs::MaskShape s = bs::mask_shape(p, 128);
  EXPECT_NO_THROW(bs::check_fits(s, p, "07"));
  fa::Problem other = p;
  other.seqlen_k = 400;  // 4 key blocks of 128, the mask has 3
  expect_refused([&] { bs::check_fits(s, other, "07"); }, "does not fit");
  other = p;
  other.heads = other.kv_heads = 4;
  expect_refused([&] { bs::check_fits(s, other, "07"); }, "heads");
  bs::MaskShape wrong_block = s;
  wrong_block.block_k = 96;
  expect_refused([&] { bs::check_fits(wrong_block, p, "07"); }, "key block size");
  wrong_block = bs::mask_shape(p, 64);  // 64-key blocks but counted for 128
  wrong_block.num_k_blocks = s.num_k_blocks;
  expect_refused([&] { bs::check_fits(wrong_block, p, "07"); }, "wrong block size");
}

}  // namespace

namespace {

TEST(Flops, ActiveBlocksOnly) {
  fa::Problem p = problem(2, 3, 1013, 700);
  p.head_dim = 64;
  EXPECT_DOUBLE_EQ(bs::forward_flops(p, bs::make_mask(p, 64, {{bs::Pattern::dense}})), fa::forward_flops(p));
  p.causal = true;  // Sq != Sk: fa::forward_flops counts the visible pairs exactly
  EXPECT_DOUBLE_EQ(bs::forward_flops(p, bs::make_mask(p, 128, {{bs::Pattern::dense}})), fa::forward_flops(p));
  fa::Problem q = problem(1, 2, 1024, 2048);  // whole blocks: FLOPs = density x dense FLOPs
  const bs::BlockMask m = bs::make_mask(q, 128, {{.pattern = P::random, .density = 0.25, .seed = 8}});
  EXPECT_DOUBLE_EQ(bs::forward_flops(q, m), m.density() * fa::forward_flops(q));
  EXPECT_EQ(bs::forward_flops(q, bs::make_mask(q, 64, {{.pattern = P::random, .density = 0.0}})), 0.0);
}

}  // namespace
