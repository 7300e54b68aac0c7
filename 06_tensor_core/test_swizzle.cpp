// CPU tests of chapter 06's shared-memory layout (swizzle.h): the swizzle is a permutation of
// every tile, and the exact access patterns of the kernel -- the 16-byte cp.async stores and the
// ldmatrix.x4 row reads -- are bank-conflict free with it (and conflicted without it). Also the
// fragment identity that lets P go from the S accumulators straight into the next mma.
// ctest -L cpu
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "common/device/swizzle.h"
#include "common/device/wgmma_layout.h"  // kmajor_sw128_offset: where the copy engine puts an element

namespace {

using fa::cuda::LdsmOrder;

// The model of shared memory: 32 banks of 4-byte words. A warp's request is served in phases of
// 8 lanes for 16-byte accesses (cp.async 16 B; each ldmatrix.x4 matrix); a phase takes as many
// 128-byte wavefronts as the largest number of distinct words it needs from one bank.
int wavefronts(const std::vector<int>& byte_addresses) {
  std::map<int, std::set<int>> words_in_bank;
  for (int a : byte_addresses)
    for (int w = 0; w < 4; ++w) words_in_bank[(a / 4 + w) % 32].insert(a / 4 + w);
  int most = 0;
  for (const auto& [bank, words] : words_in_bank) most = std::max<int>(most, words.size());
  return most;
}

// The smem tiles chapter 06 uses: head dim D (kCols = smem_cols(D)) with Br or Bc rows.
struct Tile {
  int d, rows;
};
const Tile kTiles[] = {{32, 128}, {32, 64},  {64, 128}, {64, 64},  {64, 32},  {96, 128},
                       {96, 64},  {128, 128}, {128, 64}, {128, 32}, {256, 64}, {256, 32}};
constexpr int kThreads = 128;  // 4 warps

std::string name_of(const Tile& t) { return "D" + std::to_string(t.d) + "_rows" + std::to_string(t.rows); }

TEST(Swizzle, IsAPermutationOfEachRow) {
  for (int cols : {16, 32, 64, 128, 256}) {
    for (bool swizzled : {false, true}) {
      std::set<int> seen;
      for (int r = 0; r < 64; ++r)
        for (int c = 0; c < cols; ++c) {
          const int off = fa::cuda::tile_offset(r, c, cols, swizzled);
          ASSERT_EQ(off / cols, r) << "cols " << cols << ": (" << r << ", " << c << ") left its row";
          ASSERT_TRUE(seen.insert(off).second) << "cols " << cols << ": (" << r << ", " << c << ") collides";
          // Elements of a chunk stay together and in order: 16-byte copies and ldmatrix rows work.
          ASSERT_EQ(off % fa::cuda::kChunkElems, c % fa::cuda::kChunkElems);
        }
      EXPECT_EQ(static_cast<int>(seen.size()), 64 * cols);
    }
  }
}

TEST(Swizzle, KeyRepeatsEvery8Rows) {  // what lets copy_tile and the ldmatrix addresses use immediates
  for (int row_chunks : {2, 4, 8, 16, 32})
    for (int r = 0; r < 64; ++r)
      ASSERT_EQ(fa::cuda::swizzle_key(r, row_chunks), fa::cuda::swizzle_key(r + 8, row_chunks));
}

// copy_tile (tensor_core.cuh): thread t copies chunk copy_chunk(t) of rows copy_row(t) + it *
// (threads / row_chunks); chunks at or past D (padding) are not copied.
TEST(Swizzle, CopiesAreConflictFree) {
  for (const Tile& tile : kTiles) {
    const int cols = fa::cuda::smem_cols(tile.d), row_chunks = cols / fa::cuda::kChunkElems;
    const int rows_per_it = kThreads / row_chunks;
    for (bool swizzled : {true, false}) {
      int worst = 0;
      for (int it = 0; it < tile.rows / rows_per_it; ++it) {
        for (int warp = 0; warp < kThreads / 32; ++warp) {
          for (int phase = 0; phase < 4; ++phase) {
            std::vector<int> addresses;
            for (int lane = 8 * phase; lane < 8 * phase + 8; ++lane) {
              const int t = 32 * warp + lane;
              const int r = fa::cuda::copy_row(t, row_chunks) + it * rows_per_it;
              const int c = fa::cuda::copy_chunk(t, row_chunks) * fa::cuda::kChunkElems;
              ASSERT_EQ(fa::cuda::copy_row(t + it * kThreads, row_chunks), r);
              if (c >= tile.d) continue;
              addresses.push_back(2 * fa::cuda::tile_offset(r, c, cols, swizzled));
            }
            if (!addresses.empty()) worst = std::max(worst, wavefronts(addresses));
          }
        }
      }
      // The stores of 8 consecutive threads are 128 contiguous bytes of one row, a permutation of
      // one 128-byte line (or two 64-byte rows, whose keys differ): conflict free either way.
      EXPECT_EQ(worst, 1) << name_of(tile) << (swizzled ? " swizzled" : " plain");
    }
  }
}

// Every ldmatrix.x4 the kernel issues: Q (kRowsFirst) and K (kColsFirst) over (rows, D) at every
// 16x16 block; V (kRowsFirst, .trans) likewise. The kernel's address arithmetic must give the
// element tile_offset says, and each 8-lane phase must be one wavefront.
TEST(Swizzle, LdmatrixIsConflictFreeAndAddressedRight) {
  for (const Tile& tile : kTiles) {
    const int cols = fa::cuda::smem_cols(tile.d);
    for (LdsmOrder order : {LdsmOrder::kRowsFirst, LdsmOrder::kColsFirst}) {
      for (bool swizzled : {true, false}) {
        int worst = 0, best = 1 << 30;
        for (int r0 = 0; r0 < tile.rows; r0 += 16) {
          for (int c0 = 0; c0 < tile.d; c0 += 16) {
            for (int phase = 0; phase < 4; ++phase) {
              std::vector<int> addresses;
              for (int lane = 8 * phase; lane < 8 * phase + 8; ++lane) {
                const int lane_offset = fa::cuda::ldsm_lane_offset(lane, order, cols, swizzled);
                const int address = fa::cuda::ldsm_address(lane_offset, r0, c0, cols);
                const int r = r0 + fa::cuda::ldsm_row(lane, order);
                const int c = c0 + fa::cuda::kChunkElems * fa::cuda::ldsm_chunk(lane, order);
                ASSERT_EQ(address, 2 * fa::cuda::tile_offset(r, c, cols, swizzled))
                    << name_of(tile) << " block (" << r0 << ", " << c0 << ") lane " << lane;
                addresses.push_back(address);
              }
              worst = std::max(worst, wavefronts(addresses));
              best = std::min(best, wavefronts(addresses));
            }
          }
        }
        if (swizzled) {
          EXPECT_EQ(worst, 1) << name_of(tile);
        } else {
          // Plain rows of 128 bytes or more: 8 rows at one column share a bank group, 8-way.
          // Rows of 64 bytes (D = 32): two rows per line, 4-way.
          EXPECT_EQ(best, cols >= 64 ? 8 : 4) << name_of(tile) << " plain";
        }
      }
    }
  }
}

// Chapter 08's folded corners: a warp's ldmatrix and accumulator-store addresses, with its
// corner (row_w, col_w) folded into the lane's offset, land where tile_offset says.
TEST(Swizzle, WarpCornerFoldsIntoTheLaneOffset) {
  for (int cols : {64, 128}) {
    for (int width = 16; width <= cols; width *= 2) {
      for (int col_w = 0; col_w < cols; col_w += width) {
        for (int row_w : {0, 16, 32, 48, 112}) {
          for (LdsmOrder order : {LdsmOrder::kRowsFirst, LdsmOrder::kColsFirst}) {
            for (int lane = 0; lane < 32; ++lane) {
              const int lane_w =
                  fa::cuda::ldsm_warp_offset(fa::cuda::ldsm_lane_offset(lane, order, cols, true), row_w, col_w, cols);
              for (int r0 : {0, 16, 32}) {
                for (int c0 = 0; c0 < width; c0 += 16) {
                  const int r = row_w + r0 + fa::cuda::ldsm_row(lane, order);
                  const int c = col_w + c0 + fa::cuda::kChunkElems * fa::cuda::ldsm_chunk(lane, order);
                  ASSERT_EQ(fa::cuda::ldsm_address(lane_w, r0, c0, cols), 2 * fa::cuda::tile_offset(r, c, cols, true))
                      << "cols " << cols << " W " << width << " corner (" << row_w << ", " << col_w << ") block (" << r0
                      << ", " << c0 << ") lane " << lane;
                }
              }
            }
          }
        }
      }
    }
    for (int width = 8; width <= cols; width *= 2) {
      for (int col_w = 0; col_w < cols; col_w += width) {
        for (int row_w : {0, 32, 64}) {
          for (int lane = 0; lane < 32; ++lane) {
            const int g = lane / 4, t = lane % 4;
            const int base = 2 * fa::cuda::tile_offset(row_w + g, col_w + 2 * t, cols, true);
            for (int r : {0, 8, 16, 24}) {
              for (int c = 0; c < width; c += 8) {
                ASSERT_EQ(fa::cuda::pair_address(base, r, c, cols),
                          2 * fa::cuda::tile_offset(row_w + g + r, col_w + 2 * t + c, cols, true))
                    << "cols " << cols << " W " << width << " corner (" << row_w << ", " << col_w << ") (" << r << ", "
                    << c << ") lane " << lane;
              }
            }
          }
        }
      }
    }
  }
}

// The PTX ISA's fragment layouts of mma.m16n8k16 (mma.cuh), as (row, col) of each element a lane
// holds. Two adjacent n-tiles of the fp32 accumulator cover a 16x16 block exactly as the A
// fragment does -- the same lane, the same register order -- so P_ij needs no data movement.
struct RowCol {
  int row, col;
  bool operator==(const RowCol& o) const { return row == o.row && col == o.col; }
};
RowCol a_element(int lane, int i) {  // a0..a7: two 16-bit elements per register a[i / 2]
  const int g = lane / 4, t = lane % 4;
  return {g + (i % 4 >= 2 ? 8 : 0), 2 * t + i % 2 + (i >= 4 ? 8 : 0)};
}
RowCol c_element(int lane, int i) {  // c0..c3 of one 16x8 n-tile
  const int g = lane / 4, t = lane % 4;
  return {g + (i >= 2 ? 8 : 0), 2 * t + i % 2};
}

// The copy engine's 64-column panels (06's step v7_tma_kv, Config::kTmaKV): every lane's row
// address of every 16x16 block, in both orders, is where the 128-byte swizzle put that row's
// chunk, for tiles of 64 and 128 rows and 128 or 256 columns.
TEST(Swizzle, PanelAddressIsWhereTheCopyEngineWrites) {
  for (int rows : {64, 128})
    for (int cols : {128, 256})
      for (LdsmOrder order : {LdsmOrder::kRowsFirst, LdsmOrder::kColsFirst})
        for (int lane = 0; lane < 32; ++lane) {
          const int offset = fa::cuda::ldsm_lane_offset(lane, order, 64, true);
          for (int r0 = 0; r0 < rows; r0 += 16)
            for (int c0 = 0; c0 < cols; c0 += 16) {
              const int row = r0 + fa::cuda::ldsm_row(lane, order);
              const int col = c0 + fa::cuda::kChunkElems * fa::cuda::ldsm_chunk(lane, order);
              ASSERT_EQ(fa::cuda::ldsm_panel_address(offset, r0, c0, rows),
                        static_cast<int>(fa::cuda::kmajor_sw128_offset(row, col, rows)))
                  << "rows " << rows << " lane " << lane << " block (" << r0 << ", " << c0 << ")";
            }
        }
}

TEST(Fragments, AccumulatorPairIsAFragment) {
  for (int lane = 0; lane < 32; ++lane) {
    for (int i = 0; i < 8; ++i) {
      // A element i sits in register i / 2; the kernel fills register r of P from n-tile
      // (r >= 2 ? 1 : 0), accumulators 2 (r % 2) and 2 (r % 2) + 1.
      const int reg = i / 2, n_tile = reg >= 2 ? 1 : 0, c = 2 * (reg % 2) + i % 2;
      RowCol from_c = c_element(lane, c);
      from_c.col += 8 * n_tile;
      EXPECT_EQ(a_element(lane, i), from_c) << "lane " << lane << " a" << i;
    }
  }
}

}  // namespace
