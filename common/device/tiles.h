// Tile index math: which key tiles a query tile visits (forward, taught in chapter 05) and which
// query tiles see a key tile (backward, chapter 08). Plain C++ for host and device, shared by the
// kernels and the CPU models so they cannot disagree, and checked against brute force in 05's and
// 08's test_model.cpp.
//
// Causal masking is bottom-right aligned (common/host/problem.h): query i sees key j iff
// j <= i + (Sk - Sq). A query tile's last row sees the most keys, so every key tile past the
// one holding that row's last visible key is fully masked and is skipped: the j loop ends early.
#pragma once

#include "common/host/problem.h"

namespace fa::cuda {

// ceil(a / b) for positive a, b: the number of tiles of b that cover a. One type for both (int in
// kernels: a 64-bit division costs tens of instructions on the GPU).
template <class I>
FA_HOST_DEVICE constexpr I ceil_div(I a, I b) { return (a + b - 1) / b; }

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

// The backward turns the loops around and asks the transpose: "which query tiles see key tile j?".
// The first key of a tile is seen by the fewest rows, so every query tile before the one holding
// the first row that sees it sees nothing of the tile and is skipped. The element mask of a
// visited (query tile, key tile) pair is the forward's needs_mask.
// First query tile (of Br rows) that key tile `j_tile` (of Bc keys) is visible to: query tiles
// query_tile_begin .. Tr - 1 are visited. Tr (nothing to visit) when no row sees any key of it.
FA_HOST_DEVICE constexpr int query_tile_begin(int j_tile, int Br, int Bc, int seqlen_q, int seqlen_k,
                                              bool causal) {
  if (!causal) return 0;
  const int first_row = j_tile * Bc - (seqlen_k - seqlen_q);  // the first row that sees key j_tile * Bc
  if (first_row >= seqlen_q) return ceil_div(seqlen_q, Br);
  return first_row > 0 ? first_row / Br : 0;
}

}  // namespace fa::cuda
