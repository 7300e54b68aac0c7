// Which query tiles a key tile visits in the backward pass, shared by the kernel (backward.cu)
// and the CPU model (model.cpp), and checked against brute force in test_model.cpp.
//
// The forward's question was "which key tiles does query tile i see?" (05_flash_v2/tiles.h:
// key_tile_end). The backward turns the loops around, so it asks the transpose: "which query
// tiles see key tile j?". Under bottom-right causal masking (common/problem.h) query i sees key j
// iff j <= i + (Sk - Sq): the first key of a tile is seen by the fewest rows, so every query tile
// before the one holding the first row that sees it sees nothing of the tile and is skipped.
// The element mask of a visited (query tile, key tile) pair is the forward's needs_mask.
#pragma once

#include "05_flash_v2/tiles.h"
#include "common/problem.h"

namespace backward {

using flash_v2::ceil_div;
using flash_v2::needs_mask;

// First query tile (of Br rows) that key tile `j_tile` (of Bc keys) is visible to: query tiles
// query_tile_begin .. Tr - 1 are visited. Tr (nothing to visit) when no row sees any key of it.
FA_HOST_DEVICE constexpr int query_tile_begin(int j_tile, int Br, int Bc, int seqlen_q, int seqlen_k,
                                              bool causal) {
  if (!causal) return 0;
  const int first_row = j_tile * Bc - (seqlen_k - seqlen_q);  // the first row that sees key j_tile * Bc
  if (first_row >= seqlen_q) return ceil_div(seqlen_q, Br);
  return first_row > 0 ? first_row / Br : 0;
}

}  // namespace backward
