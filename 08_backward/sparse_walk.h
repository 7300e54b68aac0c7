// The block-sparse backward's walk: chapter 07's block mask, transposed. Plain C++ (and the step
// encoding, shared with the kernel), so the CPU tests check it against brute force.
//
// 07's mask answers the forward's question, "which key blocks does query block qb see?" (one CSR
// row per (b, h, query block of 128 rows)). A backward block owns a key tile K_j (kBc = 128 keys)
// of one KV head and walks the query tiles (kBr = 64 rows) of every query head of its group, so
// it needs the transpose: "which (query head, query tile) see key tile j?". The host builds that
// list once per (problem, mask), CSR-style, one row per (b, kv head, key tile):
//
//   row = (b * Hkv + kv head) * Tc + j          Tc = ceil(Sk / kBc), Tr = ceil(Sq / kBr)
//   steps[row_offsets[row] .. row_offsets[row + 1]): (head in group, query tile, halves), ascending
//
// `halves` says which 64-key halves of K_j the mask makes active for that step: both for 128-key
// mask blocks, one or both for 64-key blocks (the kernel masks an inactive half element-wise, so
// its time follows the union). Causal masking drops the query tiles before query_tile_begin, as
// in the dense walk; partial last tiles are the kernel's element mask, as before.
//
// Deterministic mode (backward.h) needs one more number per step: its rank, the count of key
// tiles before j that add into the same (query head, query tile). Key tile j adds its dQ part when
// the tile's turn counter reaches its rank: the dense walk's rank is j itself.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "07_block_sparse/block_mask.h"
#include "common/host/problem.h"

namespace backward {

constexpr int kSparseBr = 64;   // query rows per step: the tensor-core kernel's Br
constexpr int kSparseBc = 128;  // keys per block: its Bc

// A step in 32 bits: head in the group (8 bits) | query tile (22 bits) | halves (2 bits).
constexpr int kMaxGroup = 1 << 8;
constexpr int kMaxQueryTiles = 1 << 22;
FA_HOST_DEVICE constexpr std::uint32_t pack_step(int head, int q_tile, int halves) {
  return static_cast<std::uint32_t>(head) << 24 | static_cast<std::uint32_t>(q_tile) << 2 |
         static_cast<std::uint32_t>(halves);
}
FA_HOST_DEVICE constexpr int step_head(std::uint32_t s) { return static_cast<int>(s >> 24); }
FA_HOST_DEVICE constexpr int step_tile(std::uint32_t s) { return static_cast<int>(s >> 2 & (kMaxQueryTiles - 1)); }
FA_HOST_DEVICE constexpr int step_halves(std::uint32_t s) { return static_cast<int>(s & 3); }

struct SparseWalk {
  // The problem it was built for: the walk depends on its heads, lengths and causal flag.
  int batch = 0, heads = 0, kv_heads = 0, seqlen_q = 0, seqlen_k = 0;
  bool causal = false;
  int key_tiles = 0;                // Tc
  std::vector<int> row_offsets;     // [B * Hkv * Tc + 1]
  std::vector<std::uint32_t> steps; // [n] pack_step
  std::vector<int> ranks;           // [n] deterministic mode's turn per step

  std::int64_t size() const { return static_cast<std::int64_t>(steps.size()); }
  // Throws std::invalid_argument, starting with `who`, unless p is the problem of this walk.
  void check_fits(const fa::Problem& p, const std::string& who) const;
};

// The transposed walk of `mask` for problem p. Throws std::invalid_argument when the mask does not
// fit p (block_sparse::check_fits), when H / Hkv > 256 or when Sq needs more than 2^22 query tiles.
SparseWalk transpose_mask(const fa::Problem& p, const block_sparse::BlockMask& mask);

}  // namespace backward
