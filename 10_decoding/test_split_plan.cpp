// Chapter 10's host side on the CPU (ctest -L 10_decoding): the packed rows, the split plan, and
// the combine step checked against the float64 reference (common/host/reference.h), options included.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>
#include <stdexcept>
#include <utility>
#include <vector>

#include "10_decoding/split_plan.h"
#include "common/host/host_data.h"
#include "common/host/reference.h"

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

TEST(PackedRows, EveryHeadAndPositionOnce) {
  for (int group : {1, 4, 8})
    for (int seqlen_q : {1, 3, 16}) {
      std::set<std::pair<int, int>> seen;
      for (int r = 0; r < decoding::packed_rows(group, seqlen_q); ++r) {
        const decoding::PackedRow row = decoding::packed_row(r, seqlen_q);
        ASSERT_GE(row.head_in_group, 0);
        ASSERT_LT(row.head_in_group, group);
        ASSERT_GE(row.position, 0);
        ASSERT_LT(row.position, seqlen_q);
        seen.insert({row.head_in_group, row.position});
      }
      EXPECT_EQ(seen.size(), static_cast<std::size_t>(group * seqlen_q)) << group << " x " << seqlen_q;
    }
}

// The rule of split_plan.h, derived again here from its definition by search: among the counts s
// whose CTAs fit one wave (tiles x s <= slots, s <= key_blocks, s <= max_splits), those giving the
// shortest pieces; of those, the fewest.
int expected_splits(std::int64_t tiles, int key_blocks, int slots, int max_splits) {
  if (key_blocks <= 1 || tiles >= 0.8 * slots) return 1;
  auto longest_piece = [&](int s) { return (key_blocks + s - 1) / s; };
  int best = 1;
  for (int s = 1; s <= std::min(max_splits, key_blocks) && tiles * s <= slots; ++s)
    if (longest_piece(s) < longest_piece(best)) best = s;
  return best;
}

TEST(SplitPlan, ByHand) {
  // Batch 1, 8 KV heads (8 tiles), 64 key tiles (4k keys of 64), 132 SMs. One wave holds
  // 132 / 8 = 16 pieces a tile: 16 pieces of 4 tiles, 128 CTAs, 0.97 of the SMs busy.
  decoding::SplitPlan plan = decoding::plan_splits(8, 64, 132);
  EXPECT_EQ(plan.splits, 16);
  EXPECT_EQ(plan.blocks_per_split, 4);
  EXPECT_NEAR(plan.efficiency, 128.0 / 132.0, 1e-12);
  // 100 key tiles: 16 pieces would be 7 tiles long (ceil(100 / 16)), and 15 pieces of 7 cover
  // 105 >= 100 already: 15 pieces, none empty (the last one 2 tiles).
  plan = decoding::plan_splits(8, 100, 132);
  EXPECT_EQ(plan.splits, 15);
  EXPECT_EQ(plan.blocks_per_split, 7);
  // Batch 8: 64 tiles, 2 pieces each fill 128 of 132 SMs.
  EXPECT_EQ(decoding::plan_splits(64, 1024, 132).splits, 2);
  // A full GPU needs no split: 106 tiles are 80% of 132 slots.
  EXPECT_EQ(decoding::plan_splits(106, 1024, 132).splits, 1);
  // 105 tiles are not, but two pieces each would not fit one wave either.
  EXPECT_EQ(decoding::plan_splits(105, 1024, 132).splits, 1);
  EXPECT_EQ(decoding::plan_splits(66, 1024, 132).splits, 2);
  // Nothing to split: an empty or one-tile key range.
  EXPECT_EQ(decoding::plan_splits(8, 0, 132).splits, 1);
  EXPECT_EQ(decoding::plan_splits(8, 1, 132).splits, 1);
  // Fewer key tiles than the wave would hold: one tile a piece.
  EXPECT_EQ(decoding::plan_splits(1, 5, 132).splits, 5);
}

TEST(SplitPlan, FollowsTheRuleAndLeavesNoPieceEmpty) {
  for (std::int64_t tiles : {1, 2, 3, 8, 16, 40, 64, 100, 131, 1000})
    for (int key_blocks : {0, 1, 2, 3, 7, 64, 100, 257, 1024, 2048})
      for (int slots : {132, 264, 7})
        for (int max_splits : {128, 4, 1}) {
          const decoding::SplitPlan plan = decoding::plan_splits(tiles, key_blocks, slots, max_splits);
          SCOPED_TRACE(testing::Message() << tiles << " tiles, " << key_blocks << " key tiles, " << slots
                                          << " slots, at most " << max_splits);
          EXPECT_EQ(plan.splits, expected_splits(tiles, key_blocks, slots, max_splits));
          EXPECT_LE(plan.splits, std::max(1, std::min({max_splits, key_blocks, slots})));
          // Every key tile in some piece, and no piece empty.
          EXPECT_GE(static_cast<std::int64_t>(plan.splits) * plan.blocks_per_split, key_blocks);
          if (key_blocks > 0) EXPECT_LT(static_cast<std::int64_t>(plan.splits - 1) * plan.blocks_per_split, key_blocks);
          // One wave (or no split at all).
          if (plan.splits > 1) EXPECT_LE(tiles * plan.splits, slots);
          EXPECT_GT(plan.efficiency, 0.0);
          EXPECT_LE(plan.efficiency, 1.0);
        }
}

TEST(SplitPlan, RefusesNonsense) {
  EXPECT_THROW(decoding::plan_splits(0, 64, 132), std::invalid_argument);
  EXPECT_THROW(decoding::plan_splits(8, -1, 132), std::invalid_argument);
  EXPECT_THROW(decoding::plan_splits(8, 64, 0), std::invalid_argument);
  EXPECT_THROW(decoding::plan_splits(8, 64, 132, 0), std::invalid_argument);
}

// Split the keys of a problem into pieces, take the float64 reference of each piece alone (its keys
// made the only visible ones), combine per row, and compare with the reference of the whole.
// Both sides are float64 sums of the same terms in a different order: they agree to ~1e-15
// relative; 1e-12 leaves room for the exp and log of the LSE weights, and nothing more.
void expect_combine_matches(const fa::Problem& p, const fa::ScoreOptions& options, const std::vector<int>& cuts,
                            bool some_piece_empty = false) {
  const fa::HostInputs in = fa::make_inputs(p, 1234);
  const fa::ReferenceForward whole = fa::reference_forward(p, in.q, in.k, in.v, {}, options);
  fa::ScoreOptions no_sink = options;  // a piece never sees the sink: the combine adds it once
  no_sink.sink_logits.clear();
  std::vector<fa::ReferenceForward> parts;
  for (std::size_t s = 0; s + 1 < cuts.size(); ++s) {
    const int lo = cuts[s], hi = cuts[s + 1];
    parts.push_back(fa::reference_forward(p, in.q, in.k, in.v, [=](int, int, int, int j) { return j >= lo && j < hi; },
                                          no_sink));
  }
  const int D = p.head_dim;
  int empty_pieces = 0;
  for (int b = 0; b < p.batch; ++b)
    for (int h = 0; h < p.heads; ++h)
      for (int i = 0; i < p.seqlen_q; ++i) {
        const std::size_t row = (static_cast<std::size_t>(b) * p.heads + h) * p.seqlen_q + i;
        std::vector<double> o_parts, lse_parts;
        for (const auto& part : parts) {
          o_parts.insert(o_parts.end(), part.o.begin() + row * D, part.o.begin() + (row + 1) * D);
          lse_parts.push_back(part.lse[row]);
          empty_pieces += part.lse[row] == kInf;
        }
        const double sink = options.sink_logits.empty() ? -kInf : options.sink_logits[h];
        std::vector<double> o;
        double lse = 0;
        decoding::combine_row(o_parts, lse_parts, D, sink, o, lse);
        if (std::isinf(whole.lse[row])) {
          EXPECT_EQ(lse, whole.lse[row]) << "row " << row;
        } else {
          EXPECT_NEAR(lse, whole.lse[row], 1e-12 * std::max(1.0, std::abs(whole.lse[row]))) << "row " << row;
        }
        for (int d = 0; d < D; ++d) ASSERT_NEAR(o[d], whole.o[row * D + d], 1e-12) << "row " << row << ", column " << d;
      }
  if (some_piece_empty) EXPECT_GT(empty_pieces, 0) << "the cuts should leave some rows a piece without a key";
}

fa::Problem decode_problem(int seqlen_q, int seqlen_k, bool causal) {
  fa::Problem p;
  p.batch = 2, p.heads = 8, p.kv_heads = 2, p.seqlen_q = seqlen_q, p.seqlen_k = seqlen_k, p.head_dim = 64;
  p.causal = causal, p.dtype = fa::Dtype::bf16;
  return p;
}

TEST(Combine, MatchesTheReferenceOfTheWhole) {
  // Uneven pieces, the last one short; causal with Sq = 5: rows 0-2 see no key of piece [298, 299)
  // (row i sees keys up to i + 295), so those pieces come back empty (LSE +inf) and must weigh nothing.
  expect_combine_matches(decode_problem(1, 300, false), {}, {0, 64, 128, 192, 256, 300});
  expect_combine_matches(decode_problem(5, 300, true), {}, {0, 100, 298, 299, 300}, true);
  expect_combine_matches(decode_problem(16, 77, true), {}, {0, 77});
}

TEST(Combine, WithSoftcapAlibiAndSinks) {
  fa::ScoreOptions options;
  options.softcap = 5;
  for (int h = 0; h < 8; ++h) {
    options.alibi_slopes.push_back(std::exp2(-1.0f * (h + 1)));  // ALiBi's slopes for 8 heads
    options.sink_logits.push_back(0.5f * h - 1.0f);
  }
  expect_combine_matches(decode_problem(1, 300, false), options, {0, 64, 128, 192, 256, 300});
  expect_combine_matches(decode_problem(5, 300, true), options, {0, 100, 298, 299, 300}, true);
}

TEST(Combine, RowsWithoutKeys) {
  // Sq > Sk, causal: the first rows see no key at all. Without a sink they get O = 0 and
  // LSE = +inf; with one, O = 0 and LSE = the sink.
  expect_combine_matches(decode_problem(9, 4, true), {}, {0, 2, 4}, true);
  fa::ScoreOptions sinks;
  for (int h = 0; h < 8; ++h) sinks.sink_logits.push_back(0.25f * h);
  expect_combine_matches(decode_problem(9, 4, true), sinks, {0, 2, 4}, true);
  std::vector<double> o;
  double lse = 0;
  decoding::combine_row({0, 0, 0, 0}, {kInf, kInf}, 2, -kInf, o, lse);
  EXPECT_EQ(lse, kInf);
  EXPECT_EQ(o, std::vector<double>(2, 0.0));
  decoding::combine_row({0, 0, 0, 0}, {kInf, kInf}, 2, 1.5, o, lse);
  EXPECT_EQ(lse, 1.5);
  EXPECT_EQ(o, std::vector<double>(2, 0.0));
}

TEST(Combine, ByHand) {
  // Two pieces with l = e^0 + e^0 = 2 (LSE log 2, O (1, 0)) and l = e^1 (LSE 1, O (0, 1)):
  // weights 2 and e, O = (2, e) / (2 + e), LSE = log(2 + e).
  std::vector<double> o;
  double lse = 0;
  decoding::combine_row({1, 0, 0, 1}, {std::log(2.0), 1.0}, 2, -kInf, o, lse);
  const double e = std::exp(1.0);
  EXPECT_NEAR(o[0], 2 / (2 + e), 1e-15);
  EXPECT_NEAR(o[1], e / (2 + e), 1e-15);
  EXPECT_NEAR(lse, std::log(2 + e), 1e-15);
  EXPECT_THROW(decoding::combine_row({1, 0, 0}, {0.0, 0.0}, 2, -kInf, o, lse), std::invalid_argument);
}

}  // namespace

namespace {

// Rows of a packed tile against brute force: the positions they hold, the keys any of them sees,
// and which key tiles some row of them must not see whole.
TEST(PackedRows, PositionsKeysAndMasks) {
  for (int group : {1, 4, 8})
    for (int seqlen_q : {1, 3, 16, 100})
      for (int seqlen_k : {1, 5, 64, 300})
        for (bool causal : {false, true})
          for (int r0 = 0; r0 < group * seqlen_q; r0 += 7)
            for (int rows : {1, 8, 64}) {
              const int n = std::min(rows, group * seqlen_q - r0);
              const decoding::PositionRange pr = decoding::positions(r0, n, seqlen_q);
              int lo = seqlen_q, hi = -1, end = 0;
              for (int r = r0; r < r0 + n; ++r) {
                const int i = decoding::packed_row(r, seqlen_q).position;
                ASSERT_GE(i, pr.lo);
                ASSERT_LE(i, pr.hi);
                lo = std::min(lo, i), hi = std::max(hi, i);
                for (int j = 0; j < seqlen_k; ++j)
                  if (!causal || fa::causal_visible(i, j, seqlen_q, seqlen_k)) end = std::max(end, j + 1);
              }
              EXPECT_EQ(std::max(0, decoding::keys_end(pr, seqlen_q, seqlen_k, causal)), end);
              if (n == rows || pr.lo == lo) EXPECT_EQ(pr.lo, lo);  // exact unless the rows wrap
              for (int j0 = 0; j0 < seqlen_k; j0 += 16) {
                bool hidden = false;  // some row of the range must not see some key of the tile
                for (int r = r0; r < r0 + n; ++r)
                  for (int j = j0; j < j0 + 16; ++j)
                    hidden |= j >= seqlen_k ||
                              (causal && !fa::causal_visible(decoding::packed_row(r, seqlen_q).position, j, seqlen_q, seqlen_k));
                if (hidden) EXPECT_TRUE(decoding::tile_needs_mask(pr, j0, 16, seqlen_q, seqlen_k, causal)) << r0 << " " << j0;
              }
            }
}

}  // namespace

namespace {

// Every row of Q (b, h, i) is exactly one packed row of exactly one KV head, and that KV head is
// the one query head h reads (common/host/problem.h: kv_index).
TEST(PackedRows, CoverQOnceThroughTheRightKvHead) {
  for (int batch : {1, 3})
    for (int kv_heads : {1, 2, 8})
      for (int group : {1, 4})
        for (int seqlen_q : {1, 5, 16}) {
          fa::Problem p;
          p.batch = batch, p.heads = kv_heads * group, p.kv_heads = kv_heads, p.seqlen_q = seqlen_q;
          std::vector<int> seen(static_cast<std::size_t>(p.batch) * p.heads * seqlen_q, 0);
          for (std::int64_t kv_bh = 0; kv_bh < std::int64_t{batch} * kv_heads; ++kv_bh)
            for (int r = 0; r < decoding::packed_rows(group, seqlen_q); ++r) {
              const std::int64_t row = decoding::packed_q_row(kv_bh, r, kv_heads, group, seqlen_q);
              ASSERT_GE(row, 0);
              ASSERT_LT(row, static_cast<std::int64_t>(seen.size()));
              ++seen[row];
              EXPECT_EQ(p.kv_index(row / seqlen_q), kv_bh) << "row " << row;
              EXPECT_EQ(row % seqlen_q, decoding::packed_row(r, seqlen_q).position);
            }
          for (int count : seen) ASSERT_EQ(count, 1);
        }
}

}  // namespace
