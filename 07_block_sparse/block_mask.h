// The block mask of chapter 07, on the host: which (query block, key block) pairs of each batch
// and head are computed at all. Plain C++, so the CPU tests check it without a GPU.
//
// A mask covers a problem [B, H, Sq, Sk] with query blocks of block_q = 128 rows (the kernel's
// Br) and key blocks of block_k = 64 or 128 keys; the last block of each may be partial. It is
// stored CSR-style, one row per (b, h, query block), the layout the kernel walks:
//
//   row = (b * H + h) * Tq + qb                  Tq = ceil(Sq / block_q), Tk = ceil(Sk / block_k)
//   active key blocks of the row: col_indices[row_offsets[row] .. row_offsets[row + 1]), ascending
//
// A query row whose blocks are all inactive sees no key: O = 0, LSE = +inf (common/host/problem.h).
// Causal masking, when the problem asks for it, applies on top of the block mask.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/host/problem.h"
#include "common/host/reference.h"

namespace block_sparse {

constexpr int kBlockQ = 128;  // query rows per mask block: the kernel's Br (two of its Br = 64 above D = 128)

// Which problem a mask fits.
struct MaskShape {
  int batch = 0, heads = 0;
  int block_q = kBlockQ, block_k = 128;
  int num_q_blocks = 0, num_k_blocks = 0;  // Tq, Tk

  std::int64_t rows() const { return std::int64_t{batch} * heads * num_q_blocks; }
  std::string describe() const;  // "B=2 H=4 Tq=8 x Tk=16 blocks of 128 x 64"
};

// The shape of a mask for problem p with key blocks of block_k (64 or 128; else
// std::invalid_argument).
MaskShape mask_shape(const fa::Problem& p, int block_k);

// Throws std::invalid_argument, starting with `who`, unless `shape` fits p exactly: batch,
// heads, block sizes (128 x 64 or 128 x 128) and the block counts Sq and Sk need.
void check_fits(const MaskShape& shape, const fa::Problem& p, const std::string& who);

struct BlockMask {
  MaskShape shape;
  std::vector<int> row_offsets;  // [B * H * Tq + 1]
  std::vector<int> col_indices;  // [nnz] key blocks, ascending within each row

  std::int64_t nnz() const { return static_cast<std::int64_t>(col_indices.size()); }
  double density() const;  // active blocks / all blocks
  bool active(int b, int h, int qb, int kb) const;
  // Throws std::invalid_argument for a bad shape, offsets that are not a CSR row index, or
  // column indices out of [0, Tk) or not strictly ascending within their row.
  void validate() const;
};

// dense: [B, H, Tq, Tk], nonzero = active. Throws std::invalid_argument for a wrong size.
BlockMask from_dense(const MaskShape& shape, const std::vector<std::uint8_t>& dense);
std::vector<std::uint8_t> to_dense(const BlockMask& mask);

// The generators. Positions are bottom-right aligned like causal masking: query block qb's
// rows r0..r1 line up with keys r0 + Sk - Sq .. r1 + Sk - Sq, which lie in key blocks lo..hi
// (floor division; negative when Sq > Sk). Then, per (b, h, qb), key block kb is active iff
//   dense:      always
//   random:     kb is one of round(density * Tk) blocks drawn without replacement, seeded
//               by (seed, b, h, qb): every row has the same count, the density is exact to 1/Tk
//   local:      lo - window <= kb <= hi + window                     (a band around the diagonal)
//   streaming:  kb < sink  or  lo - window <= kb <= hi               (attention sinks + recent past)
//   causal:     kb <= hi                                              (the blocks causal rows touch)
enum class Pattern { dense, random, local, streaming, causal };
const char* pattern_name(Pattern pattern);
Pattern parse_pattern(const std::string& name);  // throws std::invalid_argument

struct HeadPattern {
  Pattern pattern = Pattern::dense;
  double density = 1.0;    // random: in [0, 1]
  int window = 1;          // local, streaming: key blocks beyond the diagonal blocks, >= 0
  int sink = 1;            // streaming: the first key blocks every query block sees, >= 0
  std::uint64_t seed = 0;  // random
};

// `patterns` holds one pattern for every head, or one per head (H of them): some heads can be
// dense and others sparse in the same launch. Throws std::invalid_argument for bad parameters.
BlockMask make_mask(const fa::Problem& p, int block_k, const std::vector<HeadPattern>& patterns);

// Several patterns spread over `heads` heads in turn (head h gets patterns[h % size]), as
// make_mask takes them; a single pattern stays one, for every head.
std::vector<HeadPattern> cycle_patterns(const std::vector<HeadPattern>& patterns, int heads);

// Floating-point operations of the forward pass under the mask: 4 * D per (query, key) pair
// that an active block holds and causal masking (if p.causal) keeps -- the work the kernel must
// do, for TFLOP/s figures comparable with a dense kernel's.
double forward_flops(const fa::Problem& p, const BlockMask& mask);

// The mask expanded to elements for the reference (fa::reference_forward's extra rule): query i
// of (b, h) sees key j iff block (i / block_q, j / block_k) is active. Holds its own copy.
fa::VisibleFn visible_fn(const BlockMask& mask);

}  // namespace block_sparse
