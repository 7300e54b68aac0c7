// The sparse backward's transposed walk (sparse_walk.h) against brute force, on the CPU:
// for every (b, h, query i, key j), the kernel treats the pair as visible -- some step of key
// tile j / 128 names (h, i / 64) with j's 64-key half active, and causal masking keeps it -- iff
// the element-level mask of chapter 07 (block_sparse::visible_fn) and causal masking do.
// Also: steps ascending per row, ranks counting 0, 1, 2, ... per (b, h, query tile), refusals.
#include <gtest/gtest.h>

#include <set>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "08_backward/sparse_walk.h"
#include "common/device/tiles.h"

namespace {

namespace bs = block_sparse;
using backward::kSparseBc;
using backward::kSparseBr;

struct Shape {
  int batch, heads, kv_heads, seqlen_q, seqlen_k;
  bool causal;
};

fa::Problem problem_of(const Shape& s) {
  fa::Problem p;
  p.batch = s.batch, p.heads = s.heads, p.kv_heads = s.kv_heads;
  p.seqlen_q = s.seqlen_q, p.seqlen_k = s.seqlen_k, p.causal = s.causal, p.dtype = fa::Dtype::bf16;
  return p;
}

// Every pair the walk computes, checked pair by pair against the mask and causal masking.
void expect_same_pairs(const fa::Problem& p, const bs::BlockMask& mask, const std::string& what) {
  const backward::SparseWalk w = backward::transpose_mask(p, mask);
  const fa::VisibleFn visible = bs::visible_fn(mask);
  const int G = p.group_size(), Tc = w.key_tiles;
  ASSERT_EQ(w.row_offsets.size(), static_cast<std::size_t>(p.batch) * p.kv_heads * Tc + 1) << what;
  // (b, h, query tile, key tile) -> halves, from the walk.
  std::set<std::tuple<int, int, int, int, int>> listed;  // b, h, i_tile, j_tile, half
  for (int b = 0; b < p.batch; ++b)
    for (int kvh = 0; kvh < p.kv_heads; ++kvh)
      for (int j = 0; j < Tc; ++j) {
        const std::size_t row = (static_cast<std::size_t>(b) * p.kv_heads + kvh) * Tc + j;
        std::uint32_t previous = 0;
        for (int n = w.row_offsets[row]; n < w.row_offsets[row + 1]; ++n) {
          const std::uint32_t s = w.steps[n];
          ASSERT_NE(backward::step_halves(s), 0) << what << ": a step with no active half";
          ASSERT_LT(backward::step_head(s), G) << what;
          if (n > w.row_offsets[row]) ASSERT_GT(s >> 2, previous >> 2) << what << ": steps not ascending";
          previous = s;
          for (int half = 0; half < 2; ++half)
            if (backward::step_halves(s) >> half & 1)
              listed.insert({b, kvh * G + backward::step_head(s), backward::step_tile(s), j, half});
        }
      }
  for (int b = 0; b < p.batch; ++b)
    for (int h = 0; h < p.heads; ++h)
      for (int i = 0; i < p.seqlen_q; ++i)
        for (int j = 0; j < p.seqlen_k; ++j) {
          const bool want = visible(b, h, i, j) && (!p.causal || fa::causal_visible(i, j, p.seqlen_q, p.seqlen_k));
          const bool got = listed.count({b, h, i / kSparseBr, j / kSparseBc, j % kSparseBc / 64}) > 0 &&
                           (!p.causal || fa::causal_visible(i, j, p.seqlen_q, p.seqlen_k));
          if (want != got) {
            ADD_FAILURE() << what << ": b " << b << " h " << h << " query " << i << " key " << j << ": mask says "
                          << want << ", walk says " << got;
            return;
          }
        }
  // Ranks: key tiles add into a (b, h, query tile) in ascending order, ranked 0, 1, 2, ...
  const int Tr = (p.seqlen_q + kSparseBr - 1) / kSparseBr;
  std::vector<int> seen(static_cast<std::size_t>(p.batch) * p.heads * Tr, 0);
  for (int b = 0; b < p.batch; ++b)
    for (int kvh = 0; kvh < p.kv_heads; ++kvh)
      for (int j = 0; j < Tc; ++j) {
        const std::size_t row = (static_cast<std::size_t>(b) * p.kv_heads + kvh) * Tc + j;
        for (int n = w.row_offsets[row]; n < w.row_offsets[row + 1]; ++n) {
          const int h = kvh * G + backward::step_head(w.steps[n]);
          const std::size_t t = (static_cast<std::size_t>(b) * p.heads + h) * Tr + backward::step_tile(w.steps[n]);
          ASSERT_EQ(w.ranks[n], seen[t]++) << what << ": rank of step " << n;
        }
      }
}

TEST(SparseWalk, MatchesTheMaskPairByPair) {
  using P = bs::Pattern;
  const Shape shapes[] = {{1, 1, 1, 1, 1, false},      {1, 2, 1, 77, 300, true},    {2, 4, 2, 300, 517, false},
                          {1, 2, 2, 1013, 1013, true}, {1, 4, 1, 700, 256, true},   {1, 2, 1, 128, 1024, false},
                          {1, 2, 2, 1024, 128, true}};
  const std::vector<std::pair<const char*, std::vector<bs::HeadPattern>>> patterns = {
      {"dense", {{.pattern = P::dense}}},
      {"empty", {{.pattern = P::random, .density = 0.0}}},
      {"random30", {{.pattern = P::random, .density = 0.3, .seed = 7}}},
      {"random70", {{.pattern = P::random, .density = 0.7, .seed = 8}}},
      {"local", {{.pattern = P::local, .window = 1}}},
      {"streaming", {{.pattern = P::streaming, .window = 1, .sink = 1}}},
  };
  for (const Shape& s : shapes)
    for (int block_k : {64, 128})
      for (const auto& [name, pattern] : patterns) {
        const fa::Problem p = problem_of(s);
        expect_same_pairs(p, bs::make_mask(p, block_k, pattern),
                          std::string(name) + " bk" + std::to_string(block_k) + " " + p.describe());
      }
}

TEST(SparseWalk, PerHeadPatterns) {
  using P = bs::Pattern;
  const fa::Problem p = problem_of({1, 4, 2, 517, 700, true});
  for (int block_k : {64, 128})
    expect_same_pairs(p,
                      bs::make_mask(p, block_k,
                                    {{.pattern = P::dense},
                                     {.pattern = P::streaming, .window = 0, .sink = 1},
                                     {.pattern = P::random, .density = 0.4, .seed = 3},
                                     {.pattern = P::random, .density = 0.0}}),
                      "per-head bk" + std::to_string(block_k));
}

TEST(SparseWalk, DenseMaskIsTheDenseWalk) {
  // All blocks active: key tile j visits query tiles query_tile_begin .. Tr - 1 of every head.
  const fa::Problem p = problem_of({1, 2, 1, 1013, 700, true});
  const backward::SparseWalk w = backward::transpose_mask(p, bs::make_mask(p, 128, {{bs::Pattern::dense}}));
  const int Tr = (p.seqlen_q + kSparseBr - 1) / kSparseBr;
  for (int j = 0; j < w.key_tiles; ++j) {
    const int begin = fa::cuda::query_tile_begin(j, kSparseBr, kSparseBc, p.seqlen_q, p.seqlen_k, true);
    EXPECT_EQ(w.row_offsets[j + 1] - w.row_offsets[j], 2 * (Tr - begin)) << "key tile " << j;
    for (int n = w.row_offsets[j]; n < w.row_offsets[j + 1]; ++n) EXPECT_EQ(w.ranks[n], j) << "key tile " << j;
  }
}

TEST(SparseWalk, RefusesAMaskOfAnotherProblem) {
  const fa::Problem p = problem_of({1, 2, 1, 300, 300, false});
  const bs::BlockMask mask = bs::make_mask(p, 64, {{bs::Pattern::dense}});
  fa::Problem longer = p;
  longer.seqlen_k = 1013;
  EXPECT_THROW(backward::transpose_mask(longer, mask), std::invalid_argument);
  const backward::SparseWalk w = backward::transpose_mask(p, mask);
  fa::Problem causal = p;
  causal.causal = true;
  EXPECT_THROW(w.check_fits(causal, "test"), std::invalid_argument);
  EXPECT_NO_THROW(w.check_fits(p, "test"));
}

}  // namespace
