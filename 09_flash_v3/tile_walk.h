// Chapter 09's tile schedule: which work tiles (query tile i, head bh) a block computes, in which
// order. Plain C++ for host and device: test_tile_walk.cpp checks it on the CPU.
//
// The tiles of one head are neighbours in the walk (they share K and V in L2). Two walks:
//   * by tiles: unit n is tile (n / Tr, n % Tr), or causal (n / Tr, Tr - 1 - n % Tr), the longest
//     first. Not causal, every tile is equally long, and a persistent block walks units block,
//     block + grid, ...; without kPersistent there is one block per unit.
//   * by pairs (causal and persistent): unit u of a head holds its tiles Tr - 1 - c and c (c = u mod
//     ceil(Tr / 2)), the longest with the shortest: Tr + 1 key tiles in every pair when Sq = Sk. So
//     the persistent blocks stay in step and the tiles in flight stay within a few heads. (Taking
//     single causal tiles, the blocks' walks drifted apart: 1.4x slower at 16k.) With Tr odd the
//     middle tile is a unit of its own.
#pragma once

#include <cstdint>

#include "common/device/tiles.h"  // ceil_div, FA_HOST_DEVICE

namespace flash_v3 {

struct WorkTile {
  std::int64_t bh;
  int i_tile;
};

class TileWalk {
 public:
  // Units in all (the launch's grid: min(units, resident blocks) when persistent, else units).
  FA_HOST_DEVICE static std::int64_t units(int seqlen_q, std::int64_t batch_heads, bool causal, int Br, bool persistent) {
    const int Tr = fa::cuda::ceil_div(seqlen_q, Br);
    return (persistent && causal ? (Tr + 1) / 2 : Tr) * batch_heads;
  }

  FA_HOST_DEVICE TileWalk(int seqlen_q, std::int64_t batch_heads, bool causal, int Br, bool persistent,
                          std::int64_t block, std::int64_t grid)
      : Tr_(fa::cuda::ceil_div(seqlen_q, Br)),
        per_head_(persistent && causal ? (Tr_ + 1) / 2 : Tr_),
        units_(units(seqlen_q, batch_heads, causal, Br, persistent)),
        grid_(grid),
        causal_(causal),
        pairs_(persistent && causal),
        u_(block) {}

  FA_HOST_DEVICE bool done() const { return u_ >= units_; }
  FA_HOST_DEVICE WorkTile tile() const {
    const int r = static_cast<int>(u_ % per_head_);
    const bool longest_first = pairs_ ? member_ == 0 : causal_;
    return {u_ / per_head_, longest_first ? Tr_ - 1 - r : r};
  }
  FA_HOST_DEVICE void advance() {
    const int r = static_cast<int>(u_ % per_head_);
    if (pairs_ && member_ == 0 && r != Tr_ - 1 - r) {  // the pair's short tile (none for the middle one)
      member_ = 1;
    } else {
      member_ = 0;
      u_ += grid_;
    }
  }
  FA_HOST_DEVICE bool last() const {  // no tile follows this one in the block's walk
    TileWalk next = *this;
    next.advance();
    return next.done();
  }

 private:
  int Tr_, per_head_;     // query tiles per head; units per head
  std::int64_t units_, grid_;
  bool causal_, pairs_;
  std::int64_t u_;        // the block's current unit
  int member_ = 0;        // its tile in the unit: 0, or 1 (the short one of a pair)
};

}  // namespace flash_v3
