// The key tiles a query block visits under a block mask, shared by the kernel (block_sparse.cuh)
// and the CPU model (model.cpp) so the two cannot disagree, and checked against brute force in
// test_model.cpp.
//
// A query block's active key blocks come as a sorted list `cols` (one CSR row, block_mask.h).
// A mask key block of block_k keys is tpb = block_k / Bc kernel tiles of Bc keys, so the walk is
//
//   step n  ->  kernel tile  cols[n / tpb] * tpb + n % tpb        (ascending in n)
//
// Tiles at or past Tc_end (05's key_tile_end: past the last key, or past the causal diagonal of
// the block's last row) hold no key any row of the block sees. The walk is ascending, so they
// are a suffix of it: walk_length cuts it with a binary search instead of testing every step.
#pragma once

#include "common/host/problem.h"

namespace block_sparse {

// The kernel tile (of Bc keys) of step n of the walk.
FA_HOST_DEVICE constexpr int walk_tile(const int* cols, int n, int tpb) { return cols[n / tpb] * tpb + n % tpb; }

// The number of steps of the walk over `count` sorted blocks whose tiles lie before Tc_end.
FA_HOST_DEVICE constexpr int walk_length(const int* cols, int count, int tpb, int Tc_end) {
  int lo = 0, hi = count;  // the first block whose first tile is >= Tc_end: binary search
  while (lo < hi) {
    const int mid = (lo + hi) / 2;
    if (cols[mid] * tpb < Tc_end) lo = mid + 1;
    else hi = mid;
  }
  if (lo == 0) return 0;
  const int last = Tc_end - cols[lo - 1] * tpb;  // tiles of the last block before Tc_end
  return (lo - 1) * tpb + (last < tpb ? last : tpb);
}

}  // namespace block_sparse
