// Chapter 09's tile schedule (tile_walk.h) on the CPU: every block's walk, for every block of the
// grid, covers each (head, query tile) exactly once; pairs hold a long and a short tile whose key
// tiles add up to Tr + 1; last() marks each block's final tile. ctest -L 09_flash_v3
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <tuple>
#include <utility>
#include <vector>

#include "09_flash_v3/tile_walk.h"

namespace {

using flash_v3::TileWalk;
using flash_v3::WorkTile;

struct Case {
  int seqlen_q;
  std::int64_t batch_heads;
  bool causal, persistent;
  std::int64_t grid;  // 0: one block per unit
};

void check(const Case& c) {
  constexpr int Br = 128;
  const int Tr = (c.seqlen_q + Br - 1) / Br;
  const std::int64_t units = TileWalk::units(c.seqlen_q, c.batch_heads, c.causal, Br, c.persistent);
  const std::int64_t grid = c.grid ? std::min(c.grid, units) : units;
  SCOPED_TRACE(testing::Message() << "Sq " << c.seqlen_q << ", B*H " << c.batch_heads << (c.causal ? ", causal" : "")
                                  << (c.persistent ? ", persistent" : "") << ", grid " << grid);
  std::map<std::pair<std::int64_t, int>, int> seen;
  for (std::int64_t block = 0; block < grid; ++block) {
    TileWalk walk(c.seqlen_q, c.batch_heads, c.causal, Br, c.persistent, block, grid);
    ASSERT_FALSE(walk.done()) << "block " << block << " has no work";
    std::vector<WorkTile> mine;
    for (; !walk.done(); walk.advance()) {
      const WorkTile t = walk.tile();
      ASSERT_GE(t.bh, 0);
      ASSERT_LT(t.bh, c.batch_heads);
      ASSERT_GE(t.i_tile, 0);
      ASSERT_LT(t.i_tile, Tr);
      ++seen[{t.bh, t.i_tile}];
      mine.push_back(t);
      TileWalk after = walk;
      after.advance();
      EXPECT_EQ(walk.last(), after.done());
    }
    if (c.causal && c.persistent) {  // pairs: (Tr - 1 - r, r) of one head, back to back
      for (std::size_t n = 0; n < mine.size(); ++n) {
        const WorkTile t = mine[n];
        if (2 * t.i_tile < Tr - 1) {
          ASSERT_GT(n, 0u);  // a short tile follows its long partner
          EXPECT_EQ(mine[n - 1].bh, t.bh);
          EXPECT_EQ(mine[n - 1].i_tile + 1 + t.i_tile + 1, Tr + 1) << "key tiles of the pair (Sq = Sk)";
        }
      }
    }
  }
  EXPECT_EQ(seen.size(), static_cast<std::size_t>(c.batch_heads * Tr));
  for (const auto& [tile, count] : seen) EXPECT_EQ(count, 1) << "head " << tile.first << ", tile " << tile.second;
}

TEST(TileWalk, CoversEveryTileOnce) {
  for (int seqlen_q : {1, 128, 129, 300, 1013, 2048, 16384})
    for (std::int64_t batch_heads : {1, 3, 16, 128})
      for (bool causal : {false, true})
        for (bool persistent : {false, true})
          for (std::int64_t grid : {0, 1, 5, 132}) check({seqlen_q, batch_heads, causal, persistent, grid});
}

TEST(TileWalk, Order) {
  // Not causal: head by head, query tiles ascending. Causal, one block a unit: the longest first.
  // Causal and persistent: units are pairs, Tr = 5 gives (4, 0), (3, 1), (2).
  auto tiles_of = [](bool causal, bool persistent, std::int64_t block, std::int64_t grid) {
    std::vector<int> out;
    for (TileWalk w(5 * 128, 2, causal, 128, persistent, block, grid); !w.done(); w.advance())
      out.push_back(static_cast<int>(w.tile().bh) * 10 + w.tile().i_tile);
    return out;
  };
  EXPECT_EQ(tiles_of(false, true, 0, 1), (std::vector<int>{0, 1, 2, 3, 4, 10, 11, 12, 13, 14}));
  EXPECT_EQ(tiles_of(true, false, 0, 1), (std::vector<int>{4, 3, 2, 1, 0, 14, 13, 12, 11, 10}));
  EXPECT_EQ(tiles_of(true, true, 0, 1), (std::vector<int>{4, 0, 3, 1, 2, 14, 10, 13, 11, 12}));
  EXPECT_EQ(tiles_of(true, true, 1, 2), (std::vector<int>{3, 1, 14, 10, 12}));
  EXPECT_EQ(TileWalk::units(5 * 128, 2, true, 128, true), 6);
  EXPECT_EQ(TileWalk::units(5 * 128, 2, true, 128, false), 10);
}

// VarlenTileWalk over packed sequences: every (sequence, head, query tile) once over the grid,
// nothing for empty sequences, causal pairs of one sequence's head back to back.
TEST(VarlenTileWalk, CoversEveryTileOnce) {
  using flash_v3::VarlenTile;
  using flash_v3::VarlenTileWalk;
  constexpr int Br = 128;
  const std::vector<std::vector<int>> batches = {{1}, {0, 129, 300}, {1000, 0, 0, 1, 128, 257}, {0, 0}, {2048, 5, 4096}};
  for (const std::vector<int>& lens : batches)
    for (int heads : {1, 3})
      for (bool causal : {false, true})
        for (bool persistent : {false, true})
          for (std::int64_t grid_cap : {1, 5, 132, 1 << 20}) {
            std::vector<int> cu{0};
            for (int len : lens) cu.push_back(cu.back() + len);
            const int batch = static_cast<int>(lens.size());
            const std::vector<std::int64_t> offsets = flash_v3::varlen_unit_offsets(cu, heads, causal, Br, persistent);
            const std::int64_t units = offsets.back(), grid = std::min(grid_cap, units);
            SCOPED_TRACE(testing::Message() << lens.size() << " sequences, H " << heads << (causal ? ", causal" : "")
                                            << (persistent ? ", persistent" : "") << ", grid " << grid);
            std::map<std::tuple<int, int, int>, int> seen;
            for (std::int64_t block = 0; block < grid; ++block) {
              std::vector<VarlenTile> mine;
              for (VarlenTileWalk w(cu.data(), offsets.data(), batch, heads, causal, Br, persistent, block, grid);
                   !w.done(); w.advance()) {
                const VarlenTile t = w.tile();
                ASSERT_GE(t.seq, 0);
                ASSERT_LT(t.seq, batch);
                ASSERT_GE(t.head, 0);
                ASSERT_LT(t.head, heads);
                const int Tr = (lens[t.seq] + Br - 1) / Br;
                ASSERT_GE(t.i_tile, 0);
                ASSERT_LT(t.i_tile, Tr) << "sequence " << t.seq << " of " << lens[t.seq] << " rows";
                ++seen[{t.seq, t.head, t.i_tile}];
                mine.push_back(t);
              }
              if (causal && persistent) {
                for (std::size_t n = 0; n < mine.size(); ++n) {
                  const VarlenTile t = mine[n];
                  const int Tr = (lens[t.seq] + Br - 1) / Br;
                  if (2 * t.i_tile < Tr - 1) {  // a short tile follows its long partner
                    ASSERT_GT(n, 0u);
                    EXPECT_EQ(mine[n - 1].seq, t.seq);
                    EXPECT_EQ(mine[n - 1].head, t.head);
                    EXPECT_EQ(mine[n - 1].i_tile + t.i_tile, Tr - 1);
                  }
                }
              }
            }
            std::size_t tiles = 0;
            for (int len : lens) tiles += static_cast<std::size_t>(heads) * ((len + Br - 1) / Br);
            EXPECT_EQ(seen.size(), tiles);
            for (const auto& [tile, count] : seen) EXPECT_EQ(count, 1);
          }
}

}  // namespace
