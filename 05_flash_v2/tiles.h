// Which key tiles a query tile visits, shared by the kernel (flash_v2.cu) and the CPU model
// (model.cpp) so the two cannot disagree, and checked against brute force in test_model.cpp.
//
// Causal masking is bottom-right aligned (common/problem.h): query i sees key j iff
// j <= i + (Sk - Sq). A query tile's last row sees the most keys, so every key tile past the
// one holding that row's last visible key is fully masked and is skipped: the j loop ends early.
#pragma once

#include "common/problem.h"

namespace flash_v2 {

FA_HOST_DEVICE constexpr int ceil_div(int a, int b) { return (a + b - 1) / b; }

// Number of key tiles (of Bc keys) that query tile `i_tile` (of Br rows) visits: key tiles
// 0 .. key_tile_end - 1. Zero when no row of the tile sees any key (Sq > Sk, causal).
FA_HOST_DEVICE constexpr int key_tile_end(int i_tile, int Br, int Bc, int seqlen_q, int seqlen_k,
                                          bool causal) {
  const int Tc = ceil_div(seqlen_k, Bc);
  if (!causal) return Tc;
  const int last_row = (i_tile + 1) * Br < seqlen_q ? (i_tile + 1) * Br - 1 : seqlen_q - 1;
  const int last_key = last_row + (seqlen_k - seqlen_q);  // the last key that row sees
  if (last_key < 0) return 0;
  return last_key / Bc + 1 < Tc ? last_key / Bc + 1 : Tc;
}

// Whether tile (i_tile, j_tile) needs the element mask: some key column lies past Sk (the
// last, partial key tile), or, under causal masking, some row of the tile does not see some
// key of it (the diagonal tiles). Every other visited tile is computed without any mask.
FA_HOST_DEVICE constexpr bool needs_mask(int i_tile, int j_tile, int Br, int Bc, int seqlen_q,
                                         int seqlen_k, bool causal) {
  const int last_col = (j_tile + 1) * Bc - 1;
  if (last_col >= seqlen_k) return true;
  // The tile's first row sees the fewest keys; if it sees the tile's last key, all rows do.
  return causal && !fa::causal_visible(i_tile * Br, last_col, seqlen_q, seqlen_k);
}

}  // namespace flash_v2
