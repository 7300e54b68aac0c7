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
#include <vector>

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

// The same walk over a packed batch of sequences of different lengths (varlen: cu_seqlens_q, as
// FlashAttention's varlen interface takes them). Sequence b has Tr_b = ceil(len_b / Br) query tiles
// per head and per_head(Tr_b) units (TileWalk's: tiles, or causal pairs when persistent); its units
// follow the previous sequence's, head by head. unit_offsets[b] = H * sum of per_head over the
// sequences before b (made by varlen_unit_offsets, on the host, B + 1 entries): a unit finds its
// sequence by a binary search there. Empty sequences hold no unit. tile() names the sequence, the
// head and the query tile; the tile's rows start at cu_seqlens_q[b] + i_tile * Br of the packed
// tensor and end at the sequence's end.
struct VarlenTile {
  int seq, head, i_tile;
};

class VarlenTileWalk {
 public:
  FA_HOST_DEVICE static int per_head(int len, bool causal, int Br, bool persistent) {
    const int Tr = fa::cuda::ceil_div(len, Br);
    return persistent && causal ? (Tr + 1) / 2 : Tr;
  }

  FA_HOST_DEVICE VarlenTileWalk(const int* cu_seqlens_q, const std::int64_t* unit_offsets, int batch, int heads,
                                bool causal, int Br, bool persistent, std::int64_t block, std::int64_t grid)
      : cu_(cu_seqlens_q), offsets_(unit_offsets), batch_(batch), heads_(heads), Br_(Br), grid_(grid),
        causal_(causal), pairs_(persistent && causal), u_(block) {
    locate();
  }

  FA_HOST_DEVICE bool done() const { return u_ >= offsets_[batch_]; }
  FA_HOST_DEVICE VarlenTile tile() const {
    const std::int64_t local = u_ - offsets_[b_];
    const int r = static_cast<int>(local % per_head_);
    const bool longest_first = pairs_ ? member_ == 0 : causal_;
    return {b_, static_cast<int>(local / per_head_), longest_first ? Tr_ - 1 - r : r};
  }
  FA_HOST_DEVICE bool last() const {  // no tile follows this one in the block's walk
    VarlenTileWalk next = *this;
    next.advance();
    return next.done();
  }
  FA_HOST_DEVICE void advance() {
    const int r = static_cast<int>((u_ - offsets_[b_]) % per_head_);
    if (pairs_ && member_ == 0 && r != Tr_ - 1 - r) {  // the pair's short tile (none for the middle one)
      member_ = 1;
      return;
    }
    member_ = 0;
    u_ += grid_;
    locate();
  }

 private:
  // The sequence of unit u_: the last b with offsets_[b] <= u_ (skipping empty sequences, whose
  // offset equals the next one's; sequence_of), and its tile counts.
  FA_HOST_DEVICE void locate() {
    if (done()) return;
    b_ = fa::cuda::sequence_of(offsets_, batch_, u_);
    const int len = cu_[b_ + 1] - cu_[b_];
    Tr_ = fa::cuda::ceil_div(len, Br_);
    per_head_ = pairs_ ? (Tr_ + 1) / 2 : Tr_;
  }

  const int* cu_;
  const std::int64_t* offsets_;
  int batch_, heads_, Br_;
  std::int64_t grid_;
  bool causal_, pairs_;
  std::int64_t u_;
  int member_ = 0;
  int b_ = 0, Tr_ = 0, per_head_ = 1;
};

// unit_offsets for VarlenTileWalk: B + 1 entries, the last one the number of units (the grid's
// bound, as TileWalk::units).
inline std::vector<std::int64_t> varlen_unit_offsets(const std::vector<int>& cu_seqlens_q, int heads, bool causal,
                                                     int Br, bool persistent) {
  std::vector<std::int64_t> offsets(cu_seqlens_q.size(), 0);
  for (std::size_t b = 0; b + 1 < cu_seqlens_q.size(); ++b)
    offsets[b + 1] = offsets[b] + std::int64_t{heads} *
                                      VarlenTileWalk::per_head(cu_seqlens_q[b + 1] - cu_seqlens_q[b], causal, Br, persistent);
  return offsets;
}

// A packed batch's sequences as the kernel reads them (device pointers): cu_seqlens_q and
// cu_seqlens_k (B + 1 entries each) and VarlenTileWalk's unit offsets. NoVarlen: a kernel for a
// batch of equally long sequences takes this empty parameter instead.
struct VarlenArgs {
  const int* cu_seqlens_q;
  const int* cu_seqlens_k;
  const std::int64_t* unit_offsets;
  int batch;
};
struct NoVarlen {};

// Where a work tile's sequence lies, asked where the kernel uses it: its slice (b * H + h; in a
// packed batch the head h, the tensors being [1, total, H, D]), the first query and key rows of its
// sequence in the tensors, and its lengths. In a batch of equal sequences: rows 0 and the problem's
// lengths, the very expressions the kernel had before packed batches, so its code stays the same.
FA_HOST_DEVICE inline std::int64_t slice_of(const WorkTile& t) { return t.bh; }
FA_HOST_DEVICE inline std::int64_t slice_of(const VarlenTile& t) { return t.head; }
FA_HOST_DEVICE inline int first_query(const WorkTile&, const NoVarlen&) { return 0; }
FA_HOST_DEVICE inline int first_query(const VarlenTile& t, const VarlenArgs& vl) { return vl.cu_seqlens_q[t.seq]; }
FA_HOST_DEVICE inline int first_key(const WorkTile&, const NoVarlen&) { return 0; }
FA_HOST_DEVICE inline int first_key(const VarlenTile& t, const VarlenArgs& vl) { return vl.cu_seqlens_k[t.seq]; }
FA_HOST_DEVICE inline int queries_of(const WorkTile&, int seqlen_q, const NoVarlen&) { return seqlen_q; }
FA_HOST_DEVICE inline int queries_of(const VarlenTile& t, int, const VarlenArgs& vl) {
  return vl.cu_seqlens_q[t.seq + 1] - vl.cu_seqlens_q[t.seq];
}
FA_HOST_DEVICE inline int keys_of(const WorkTile&, int seqlen_k, const NoVarlen&) { return seqlen_k; }
FA_HOST_DEVICE inline int keys_of(const VarlenTile& t, int, const VarlenArgs& vl) {
  return vl.cu_seqlens_k[t.seq + 1] - vl.cu_seqlens_k[t.seq];
}

FA_HOST_DEVICE inline TileWalk block_walk(int seqlen_q, std::int64_t batch_heads, int heads, bool causal, int Br,
                                          bool persistent, std::int64_t block, std::int64_t grid, const NoVarlen&) {
  return TileWalk(seqlen_q, batch_heads, causal, Br, persistent, block, grid);
}
FA_HOST_DEVICE inline VarlenTileWalk block_walk(int, std::int64_t, int heads, bool causal, int Br, bool persistent,
                                                std::int64_t block, std::int64_t grid, const VarlenArgs& vl) {
  return VarlenTileWalk(vl.cu_seqlens_q, vl.unit_offsets, vl.batch, heads, causal, Br, persistent, block, grid);
}
}  // namespace flash_v3
