// Tile index math: which key tiles a query tile visits (forward, taught in chapter 05) and which
// query tiles see a key tile (backward, chapter 08). Plain C++ for host and device, shared by the
// kernels and the CPU models so they cannot disagree, and checked against brute force in 05's and
// 08's test_model.cpp.
//
// Causal masking is bottom-right aligned (common/host/problem.h): query i sees key j iff
// j <= i + (Sk - Sq). A query tile's last row sees the most keys, so every key tile past the
// one holding that row's last visible key is fully masked and is skipped: the j loop ends early.
#pragma once

#include <cstdint>

#include "common/host/problem.h"

namespace fa::cuda {

// ceil(a / b) for positive a, b: the number of tiles of b that cover a. One type for both (int in
// kernels: a 64-bit division costs tens of instructions on the GPU).
template <class I>
FA_HOST_DEVICE constexpr I ceil_div(I a, I b) { return (a + b - 1) / b; }

// A sliding window (Problem::window_left, window_right; -1: unbounded) narrows the band further:
// row i (at key position i + Sk - Sq) sees keys position - left .. position + right. Causal
// masking is the window's right bound at 0, so the functions below take `causal` and the window
// together through this: the right bound in force, -1 for none.
FA_HOST_DEVICE constexpr int right_bound(bool causal, int window_right) { return causal ? 0 : window_right; }

// Number of key tiles (of Bc keys) that query tile `i_tile` (of Br rows) visits: key tiles
// 0 .. key_tile_end - 1 (from key_tile_begin under a window's left bound). Zero when no row of
// the tile sees any key (Sq > Sk, causal).
FA_HOST_DEVICE constexpr int key_tile_end(int i_tile, int Br, int Bc, int seqlen_q, int seqlen_k,
                                          bool causal, int window_right = -1) {
  const int Tc = ceil_div(seqlen_k, Bc);
  const int right = right_bound(causal, window_right);
  if (right < 0) return Tc;
  const int last_row = (i_tile + 1) * Br < seqlen_q ? (i_tile + 1) * Br - 1 : seqlen_q - 1;
  const int last_key = last_row + (seqlen_k - seqlen_q) + right;  // the last key that row sees
  if (last_key < 0) return 0;
  return last_key / Bc + 1 < Tc ? last_key / Bc + 1 : Tc;
}

// The first key tile query tile `i_tile` visits under a window's left bound (0 without one): its
// first row sees the earliest keys, from its position - window_left on. Tc when that lies past Sk.
FA_HOST_DEVICE constexpr int key_tile_begin(int i_tile, int Br, int Bc, int seqlen_q, int seqlen_k,
                                            int window_left = -1) {
  if (window_left < 0) return 0;
  const int first_key = i_tile * Br + (seqlen_k - seqlen_q) - window_left;  // the first key row i_tile Br sees
  if (first_key <= 0) return 0;
  return first_key < seqlen_k ? first_key / Bc : ceil_div(seqlen_k, Bc);
}

// Whether tile (i_tile, j_tile) needs the element mask: some key column lies past Sk (the
// last, partial key tile), or some row of the tile does not see some key of it: under causal
// masking or a window's right bound the diagonal tiles, under a window's left bound the tiles
// its lower edge crosses. Every other visited tile is computed without any mask.
FA_HOST_DEVICE constexpr bool needs_mask(int i_tile, int j_tile, int Br, int Bc, int seqlen_q,
                                         int seqlen_k, bool causal, int window_left = -1, int window_right = -1) {
  const int last_col = (j_tile + 1) * Bc - 1;
  if (last_col >= seqlen_k) return true;
  // The tile's first row sees the fewest late keys; if it sees the tile's last key, all rows do.
  const int right = right_bound(causal, window_right);
  if (right >= 0 && last_col > i_tile * Br + (seqlen_k - seqlen_q) + right) return true;
  // Its last row (of those below Sq) sees the fewest early keys; if it sees the first, all rows do.
  if (window_left < 0) return false;
  const int last_row = (i_tile + 1) * Br < seqlen_q ? (i_tile + 1) * Br - 1 : seqlen_q - 1;
  return j_tile * Bc < last_row + (seqlen_k - seqlen_q) - window_left;
}

// The backward turns the loops around and asks the transpose: "which query tiles see key tile j?".
// The first key of a tile is seen by the fewest rows, so every query tile before the one holding
// the first row that sees it sees nothing of the tile and is skipped. The element mask of a
// visited (query tile, key tile) pair is the forward's needs_mask.
// First query tile (of Br rows) that key tile `j_tile` (of Bc keys) is visible to: query tiles
// query_tile_begin .. Tr - 1 are visited. Tr (nothing to visit) when no row sees any key of it.
FA_HOST_DEVICE constexpr int query_tile_begin(int j_tile, int Br, int Bc, int seqlen_q, int seqlen_k,
                                              bool causal, int window_right = -1) {
  const int right = right_bound(causal, window_right);
  if (right < 0) return 0;
  const int first_row = j_tile * Bc - (seqlen_k - seqlen_q) - right;  // the first row that sees key j_tile * Bc
  if (first_row >= seqlen_q) return ceil_div(seqlen_q, Br);
  return first_row > 0 ? first_row / Br : 0;
}

// One past the last query tile that key tile `j_tile` is visible to under a window's left bound
// (Tr without one): the tile's last key is seen by rows up to its position + window_left.
FA_HOST_DEVICE constexpr int query_tile_end(int j_tile, int Br, int Bc, int seqlen_q, int seqlen_k,
                                            int window_left = -1) {
  const int Tr = ceil_div(seqlen_q, Br);
  if (window_left < 0) return Tr;
  const int last_col = (j_tile + 1) * Bc < seqlen_k ? (j_tile + 1) * Bc - 1 : seqlen_k - 1;
  const int last_row = last_col - (seqlen_k - seqlen_q) + window_left;  // the last row that sees it
  if (last_row < 0) return 0;
  return last_row / Br + 1 < Tr ? last_row / Br + 1 : Tr;
}

// A packed batch of sequences (varlen): which sequence item x (a tile, a row) belongs to, where
// sequence b holds items offsets[b] .. offsets[b + 1] - 1 (B + 1 nondecreasing offsets from 0; an
// empty sequence holds none). The last b with offsets[b] <= x, by binary search: log2(B) loads.
template <class I>
FA_HOST_DEVICE constexpr int sequence_of(const I* offsets, int batch, I x) {
  int lo = 0, hi = batch - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (offsets[mid] <= x) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

// A grid of `tiles` key tiles x `rows` (batch, KV head) rows in the longest-first order of a causal
// backward (FlashAttention-3's LPT order): key tile j is seen by the query tiles from about j on,
// so tile 0 walks longest. Block n (in launch order) takes (tile, row) with the rows in sections of
// `section` (the last one may be shorter) and, within a section, every row's tile 0, then every
// row's tile 1, and so on: the long walks start first, and a section's rows share L2 while its
// blocks run. A bijection of 0 .. tiles x rows - 1 onto the (tile, row) pairs.
struct TileRow {
  int tile;
  std::int64_t row;
};
FA_HOST_DEVICE constexpr TileRow longest_first(std::int64_t n, int tiles, std::int64_t rows, int section) {
  const std::int64_t per_section = std::int64_t{section} * tiles;
  const std::int64_t first_row = n / per_section * section;
  const std::int64_t height = rows - first_row < section ? rows - first_row : section;
  const std::int64_t k = n - first_row * tiles;  // within the section
  return {static_cast<int>(k / height), first_row + k % height};
}

// n / d for 32-bit n and a divisor d > 0 fixed at launch, as a multiplication (Granlund and
// Montgomery; Hacker's Delight 10-9): l = ceil(log2 d), m = 2^32 (2^l - d) / d + 1, and
// n / d = (umulhi(n, m) + n) >> l, the sum in 64 bits. A division is a dozen instructions on the
// vector datapath; this multiply, add and shift of values every thread shares run on the uniform
// datapath as well, so the quotient can stay in a uniform register.
struct DivisionBy {
  unsigned d = 1, m = 1, l = 0;
  static constexpr DivisionBy of(unsigned d) {
    unsigned l = 0;
    while ((std::uint64_t{1} << l) < d) ++l;
    return {d, static_cast<unsigned>((std::uint64_t{1} << 32) * ((std::uint64_t{1} << l) - d) / d + 1), l};
  }
  FA_HOST_DEVICE unsigned quotient(unsigned n) const {
#ifdef __CUDA_ARCH__
    const std::uint64_t hi = __umulhi(n, m);
#else
    const std::uint64_t hi = std::uint64_t{n} * m >> 32;
#endif
    return static_cast<unsigned>((hi + n) >> l);
  }
};

// longest_first for block x (x < tiles) of grid row `row`, n = x + tiles row, with no division:
// where a section is a power of two of rows, n's section starts at row & -section, and the tile
// and row within it come from one quotient by the section's height, a DivisionBy made at launch
// (the last section's own where it is shorter). 11's [B, S, H, D] kernels take their block this way:
// with longest_first's 64-bit divisions ptxas keeps the tile, the row and what the walk derives
// from them in vector registers, and spills 52 bytes a thread.
struct LongestFirstPow2 {
  DivisionBy full, last;  // by the section's rows (full.d), and by the last section's height
  unsigned last_row = 0;  // the shorter last section's first row (rows where every section is full)
  static constexpr LongestFirstPow2 of(std::int64_t rows, int section) {
    const auto s = static_cast<unsigned>(section), tail = static_cast<unsigned>(rows % section);
    return {DivisionBy::of(s), DivisionBy::of(tail > 0 ? tail : s), static_cast<unsigned>(rows) - tail};
  }
  FA_HOST_DEVICE TileRow at(unsigned x, unsigned tiles, unsigned row) const {
    const unsigned first_row = row & (0u - full.d);
    const unsigned k = x + tiles * (row - first_row);  // n's place in its section
    const bool in_last = first_row >= last_row;
    // Both quotients, then a select: selecting between the two DivisionBy makes ptxas index the
    // kernel's parameters, and the values go back to vector registers.
    const unsigned q_full = full.quotient(k), q_last = last.quotient(k);
    const unsigned tile = in_last ? q_last : q_full, height = in_last ? last.d : full.d;
    return {static_cast<int>(tile), std::int64_t{first_row + (k - tile * height)}};
  }
};

}  // namespace fa::cuda
