// Chapter 08's two walks over a key tile's query tiles, the steps a backward block takes: every
// query tile that sees key tile j (DenseWalk), or the ones chapter 07's mask keeps (ListedWalk,
// sparse_walk.h). The tensor-core kernels of 08 (backward_tc.cuh) and 11 take them.
#pragma once

#include <cstdint>

#include "08_backward/sparse_walk.h"  // step_head, step_tile, step_halves

namespace backward::tc {

// One step of a block's walk: which query head (b * H + h) and query tile, and which 64-key
// halves of K_j the mask keeps (3: both).
struct Step {
  std::int64_t bh;
  int i_tile, halves;
};

// The dense walk of key tile j_tile: query tiles i_begin .. Tr - 1 of query head bh0, then of
// bh0 + 1, ... (GQA/MQA: group_size heads share K_j, V_j). Causal: query tiles before i_begin see
// nothing of K_j (common/device/tiles.h). In turn order a key tile's rank is its index.
struct DenseWalk {
  static constexpr bool kHalves = false;  // every step keeps both 64-key halves
  std::int64_t bh0;
  int Tr, i_begin, n_steps, rank;
  __device__ __forceinline__ Step first() const { return {bh0, i_begin, 3}; }
  __device__ __forceinline__ Step next(const Step& s, int) const {
    return s.i_tile + 1 < Tr ? Step{s.bh, s.i_tile + 1, 3} : Step{s.bh + 1, i_begin, 3};
  }
  __device__ __forceinline__ int rank_of(int) const { return rank; }
};

// The block-sparse walk: the steps the host listed for this key tile (sparse_walk.h, chapter 07's
// mask transposed). In turn order a step's rank is the number of listed key tiles before j.
struct ListedWalk {
  static constexpr bool kHalves = true;  // a step may turn a 64-key half off
  std::int64_t bh0;
  const std::uint32_t* steps;  // this block's steps
  const int* ranks;
  int n_steps;
  __device__ __forceinline__ Step at(int n) const {
    const std::uint32_t s = steps[n];
    return {bh0 + step_head(s), step_tile(s), step_halves(s)};
  }
  __device__ __forceinline__ Step first() const { return n_steps > 0 ? at(0) : Step{bh0, 0, 0}; }
  __device__ __forceinline__ Step next(const Step&, int n) const { return at(n); }
  __device__ __forceinline__ int rank_of(int n) const { return ranks[n]; }
};

}  // namespace backward::tc
