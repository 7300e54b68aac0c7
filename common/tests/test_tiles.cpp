// CPU test of the tile index math (common/device/tiles.h) under causal masking and a sliding
// window, against brute force over every (row, key) pair of every tile pair: the key tiles a query
// tile visits are exactly key_tile_begin .. key_tile_end - 1, the query tiles a key tile is seen by
// exactly query_tile_begin .. query_tile_end - 1, and needs_mask says whether a visited tile holds
// a (row < Sq, key) pair that is not visible or a key column past Sk; sequence_of, the
// sequence of a packed batch an item belongs to; longest_first, the causal backward's order, and
// LongestFirstPow2 and DivisionBy, the same order without a division.
#include "common/device/tiles.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include <algorithm>

namespace fa::cuda {
namespace {

struct Shape {
  int Br, Bc, Sq, Sk;
};

TEST(TilesUnderAWindow, RangesAndMasksMatchBruteForce) {
  const Shape shapes[] = {{64, 64, 1, 300},    {64, 64, 37, 37},     {128, 64, 300, 1000}, {64, 128, 1000, 300},
                          {128, 176, 700, 701}, {64, 64, 128, 1},     {128, 80, 257, 513},  {64, 64, 200, 217}};
  int checked = 0;
  for (const Shape& sh : shapes)
    for (bool causal : {false, true})
      for (int left : {-1, 0, 1, 2, 5, 31, 63, 64, 65, 127, 300})
        for (int right : {-1, 0, 1, 3, 63, 64, 130}) {
          Problem p;
          p.seqlen_q = sh.Sq;
          p.seqlen_k = sh.Sk;
          p.causal = causal;
          p.window_left = left;
          p.window_right = right;
          const int Tr = ceil_div(sh.Sq, sh.Br), Tc = ceil_div(sh.Sk, sh.Bc);
          SCOPED_TRACE(p.describe() + " Br " + std::to_string(sh.Br) + " Bc " + std::to_string(sh.Bc));
          for (int it = 0; it < Tr; ++it) {
            const int begin = key_tile_begin(it, sh.Br, sh.Bc, sh.Sq, sh.Sk, left);
            const int end = key_tile_end(it, sh.Br, sh.Bc, sh.Sq, sh.Sk, causal, right);
            for (int jt = 0; jt < Tc; ++jt) {
              bool seen = false, hidden = false;
              for (int i = it * sh.Br; i < std::min((it + 1) * sh.Br, sh.Sq); ++i)
                for (int j = jt * sh.Bc; j < (jt + 1) * sh.Bc; ++j) {
                  const bool v = j < sh.Sk && p.visible(i, j);
                  seen |= v;
                  hidden |= !v;
                }
              ASSERT_EQ(begin <= jt && jt < end, seen) << "query tile " << it << " key tile " << jt << ": range "
                                                       << begin << " .. " << end;
              const int qb = query_tile_begin(jt, sh.Br, sh.Bc, sh.Sq, sh.Sk, causal, right);
              const int qe = query_tile_end(jt, sh.Br, sh.Bc, sh.Sq, sh.Sk, left);
              ASSERT_EQ(qb <= it && it < qe, seen) << "key tile " << jt << " query tile " << it << ": range " << qb
                                                   << " .. " << qe;
              if (seen) {
                ASSERT_EQ(needs_mask(it, jt, sh.Br, sh.Bc, sh.Sq, sh.Sk, causal, left, right), hidden)
                    << "query tile " << it << " key tile " << jt;
                ++checked;
              }
            }
          }
        }
  EXPECT_GT(checked, 1000);
}

// Without a window the functions are what they were: the window's parameters default to -1.
TEST(TilesUnderAWindow, NoWindowIsCausalOrFull) {
  EXPECT_EQ(key_tile_begin(5, 64, 64, 1024, 1024), 0);
  EXPECT_EQ(key_tile_end(5, 64, 64, 1024, 1024, true), 6);
  EXPECT_EQ(key_tile_end(5, 64, 64, 1024, 1024, false), 16);
  EXPECT_EQ(query_tile_begin(3, 64, 64, 1024, 1024, true), 3);
  EXPECT_EQ(query_tile_end(3, 64, 64, 1024, 1024), 16);
  EXPECT_TRUE(needs_mask(3, 3, 64, 64, 1024, 1024, true));
  EXPECT_FALSE(needs_mask(3, 2, 64, 64, 1024, 1024, true));
  // A window of 128 keys back: query tile 5 (rows 320-383) starts at key tile 3 (key 192) and key
  // tile 3 is seen up to query tile 5.
  EXPECT_EQ(key_tile_begin(5, 64, 64, 1024, 1024, 128), 3);
  EXPECT_EQ(query_tile_end(3, 64, 64, 1024, 1024, 128), 6);
  EXPECT_TRUE(needs_mask(5, 3, 64, 64, 1024, 1024, true, 128));   // row 383 sees from key 255 on
  EXPECT_FALSE(needs_mask(5, 4, 64, 64, 1024, 1024, true, 128));  // keys 256-319: every row
}

// sequence_of: the sequence holding item x of a packed batch, empty sequences skipped, against a
// linear scan over every item.
TEST(LongestFirst, EveryTileOfEveryRowOnceLongestFirstInEachSection) {
  struct Grid {
    int tiles;
    std::int64_t rows;
    int section;
  };
  const Grid grids[] = {{32, 32, 4}, {32, 32, 32}, {32, 32, 64}, {7, 10, 4}, {1, 5, 2}, {5, 1, 8}, {3, 9, 1}};
  for (const Grid& g : grids) {
    std::vector<int> seen(static_cast<std::size_t>(g.tiles * g.rows), 0);
    std::int64_t last_section = -1;
    int last_tile = 0;
    for (std::int64_t n = 0; n < g.tiles * g.rows; ++n) {
      const TileRow tr = longest_first(n, g.tiles, g.rows, g.section);
      ASSERT_GE(tr.tile, 0);
      ASSERT_LT(tr.tile, g.tiles);
      ASSERT_GE(tr.row, 0);
      ASSERT_LT(tr.row, g.rows);
      ++seen[static_cast<std::size_t>(tr.row * g.tiles + tr.tile)];
      const std::int64_t section = tr.row / g.section;
      ASSERT_GE(section, last_section) << "sections in order, n = " << n;
      if (section == last_section) ASSERT_GE(tr.tile, last_tile) << "tiles ascending within a section, n = " << n;
      last_section = section, last_tile = tr.tile;
    }
    for (int count : seen) ASSERT_EQ(count, 1) << "every (tile, row) exactly once";
  }
}

// LongestFirstPow2 (11's [B, S, H, D] kernels) is longest_first without a division: the same (tile,
// row) for every block of every grid, sections of a power of two of rows, a shorter last one included.
TEST(LongestFirst, WithoutADivisionMatchesLongestFirst) {
  int checked = 0;
  for (int section = 1; section <= 64; section *= 2)
    for (int tiles : {1, 2, 3, 7, 16, 33})
      for (int rows : {1, 2, 3, 5, 8, 31, 64, 65, 69, 200}) {
        const LongestFirstPow2 lpt = LongestFirstPow2::of(rows, section);
        for (int row = 0; row < rows; ++row)
          for (int x = 0; x < tiles; ++x, ++checked) {
            const TileRow want = longest_first(x + std::int64_t{tiles} * row, tiles, rows, section);
            const TileRow got = lpt.at(x, tiles, row);
            ASSERT_EQ(got.tile, want.tile) << "section " << section << ", tiles " << tiles << ", rows " << rows
                                           << ", block " << x << " of row " << row;
            ASSERT_EQ(got.row, want.row) << "section " << section << ", tiles " << tiles << ", rows " << rows
                                         << ", block " << x << " of row " << row;
          }
      }
  EXPECT_GT(checked, 100000);
}

// DivisionBy's quotient is n / d for every 32-bit n: checked at the edges (0, multiples of d and
// their neighbours, the largest n) and on seeded random n, for small, odd, power-of-two and huge d.
TEST(DivisionBy, QuotientIsTheDivision) {
  std::mt19937 rng(11);
  for (unsigned d : {1u, 2u, 3u, 5u, 7u, 8u, 10u, 63u, 64u, 65u, 641u, 1000u, 65535u, 65536u, 123456789u,
                     0x7fffffffu, 0x80000000u, 0x80000001u, 0xfffffffeu, 0xffffffffu}) {
    const DivisionBy div = DivisionBy::of(d);
    std::vector<unsigned> ns = {0u, 1u, d - 1, d, d + 1, 2 * d - 1, 0xfffffffeu, 0xffffffffu,
                                0xffffffffu / d * d, 0xffffffffu / d * d - 1};
    for (int i = 0; i < 20000; ++i) ns.push_back(static_cast<unsigned>(rng()));
    for (unsigned n : ns) ASSERT_EQ(div.quotient(n), n / d) << n << " / " << d;
  }
}

TEST(SequenceOf, FindsTheSequenceOfEveryItem) {
  const std::vector<std::vector<int>> batches = {{0, 5}, {0, 0, 3}, {0, 3, 3, 3, 7}, {0, 1, 2, 2, 10, 10, 11}};
  for (const std::vector<int>& offsets : batches) {
    const int batch = static_cast<int>(offsets.size()) - 1;
    for (int x = 0; x < offsets.back(); ++x) {
      int want = 0;
      while (!(offsets[want] <= x && x < offsets[want + 1])) ++want;
      EXPECT_EQ(sequence_of(offsets.data(), batch, x), want) << "item " << x;
    }
    const std::vector<std::int64_t> wide(offsets.begin(), offsets.end());  // 09's unit offsets are 64-bit
    EXPECT_EQ(sequence_of(wide.data(), batch, std::int64_t{offsets.back() - 1}), batch - 1);
  }
}

}  // namespace
}  // namespace fa::cuda
