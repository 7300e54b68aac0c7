// The host side of the block mask: shape checks, CSR conversion, the generators.
#include "07_block_sparse/block_mask.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <numeric>
#include <stdexcept>

namespace block_sparse {
namespace {

int ceil_div(int a, int b) { return (a + b - 1) / b; }
int floor_div(int a, int b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

void fail(const std::string& what) { throw std::invalid_argument("block mask: " + what); }

// SplitMix64: a counter-based generator, the same numbers on every platform (std's
// distributions are not), so a seeded mask can be rebuilt anywhere.
std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// Active key blocks of one (b, h, qb) under a pattern, ascending.
std::vector<int> pattern_row(const HeadPattern& hp, const fa::Problem& p, const MaskShape& s, int b, int h,
                             int qb) {
  const int Tk = s.num_k_blocks;
  const int r0 = qb * s.block_q, r1 = std::min((qb + 1) * s.block_q, p.seqlen_q) - 1;
  const int lo = floor_div(r0 + p.seqlen_k - p.seqlen_q, s.block_k);  // aligned key blocks of
  const int hi = floor_div(r1 + p.seqlen_k - p.seqlen_q, s.block_k);  // the first and last row
  std::vector<int> cols;
  if (hp.pattern == Pattern::random) {
    std::vector<int> all(Tk);
    std::iota(all.begin(), all.end(), 0);
    const int count = static_cast<int>(std::lround(hp.density * Tk));
    std::uint64_t state = splitmix64(hp.seed ^ splitmix64((std::uint64_t(b) * s.heads + h) * s.num_q_blocks + qb));
    for (int n = 0; n < count; ++n) {  // a partial Fisher-Yates shuffle: `count` distinct blocks
      state = splitmix64(state);
      std::swap(all[n], all[n + static_cast<int>(state % std::uint64_t(Tk - n))]);
    }
    cols.assign(all.begin(), all.begin() + count);
    std::sort(cols.begin(), cols.end());
    return cols;
  }
  for (int kb = 0; kb < Tk; ++kb) {
    bool on = false;
    switch (hp.pattern) {
      case Pattern::dense: on = true; break;
      case Pattern::local: on = lo - hp.window <= kb && kb <= hi + hp.window; break;
      case Pattern::streaming: on = kb < hp.sink || (lo - hp.window <= kb && kb <= hi); break;
      case Pattern::causal: on = kb <= hi; break;
      case Pattern::random: break;
    }
    if (on) cols.push_back(kb);
  }
  return cols;
}

}  // namespace

std::string MaskShape::describe() const {
  return "B=" + std::to_string(batch) + " H=" + std::to_string(heads) + " Tq=" + std::to_string(num_q_blocks) +
         " x Tk=" + std::to_string(num_k_blocks) + " blocks of " + std::to_string(block_q) + " x " +
         std::to_string(block_k);
}

MaskShape mask_shape(const fa::Problem& p, int block_k) {
  if (block_k != 64 && block_k != 128)
    fail("key block size " + std::to_string(block_k) + " is not supported (64 or 128)");
  p.validate();
  return {p.batch, p.heads, kBlockQ, block_k, ceil_div(p.seqlen_q, kBlockQ), ceil_div(p.seqlen_k, block_k)};
}

void check_fits(const MaskShape& s, const fa::Problem& p, const std::string& who) {
  auto refuse = [&](const std::string& what) {
    throw std::invalid_argument(who + ": the block mask (" + s.describe() + ") does not fit " + p.describe() +
                                ": " + what);
  };
  if (s.block_q != kBlockQ) refuse("query block size must be " + std::to_string(kBlockQ));
  if (s.block_k != 64 && s.block_k != 128) refuse("key block size must be 64 or 128");
  const MaskShape want = mask_shape(p, s.block_k);
  if (s.batch != want.batch || s.heads != want.heads) refuse("batch and heads must match the problem's");
  if (s.num_q_blocks != want.num_q_blocks || s.num_k_blocks != want.num_k_blocks)
    refuse("the problem needs " + std::to_string(want.num_q_blocks) + " x " + std::to_string(want.num_k_blocks) +
           " blocks (wrong shape or wrong block size)");
}

double BlockMask::density() const {
  const double all = static_cast<double>(shape.rows()) * shape.num_k_blocks;
  return all > 0 ? nnz() / all : 0.0;
}

bool BlockMask::active(int b, int h, int qb, int kb) const {
  const std::int64_t row = (std::int64_t{b} * shape.heads + h) * shape.num_q_blocks + qb;
  const int* first = col_indices.data() + row_offsets[row];
  const int* last = col_indices.data() + row_offsets[row + 1];
  return std::binary_search(first, last, kb);
}

void BlockMask::validate() const {
  if (shape.batch < 1 || shape.heads < 1 || shape.num_q_blocks < 1 || shape.num_k_blocks < 1)
    fail("shape " + shape.describe() + " has an empty dimension");
  if (shape.block_q != kBlockQ) fail("query block size " + std::to_string(shape.block_q) + " is not " +
                                     std::to_string(kBlockQ));
  if (shape.block_k != 64 && shape.block_k != 128)
    fail("key block size " + std::to_string(shape.block_k) + " is not supported (64 or 128)");
  if (static_cast<std::int64_t>(row_offsets.size()) != shape.rows() + 1)
    fail("row_offsets has " + std::to_string(row_offsets.size()) + " entries, the shape needs B*H*Tq + 1 = " +
         std::to_string(shape.rows() + 1));
  if (row_offsets.front() != 0 || row_offsets.back() != nnz())
    fail("row_offsets must start at 0 and end at the number of column indices");
  for (std::int64_t row = 0; row < shape.rows(); ++row) {
    if (row_offsets[row + 1] < row_offsets[row]) fail("row_offsets decrease at row " + std::to_string(row));
    for (int n = row_offsets[row]; n < row_offsets[row + 1]; ++n) {
      const int kb = col_indices[n];
      if (kb < 0 || kb >= shape.num_k_blocks)
        fail("column index " + std::to_string(kb) + " of row " + std::to_string(row) + " is out of range [0, " +
             std::to_string(shape.num_k_blocks) + ")");
      if (n > row_offsets[row] && kb <= col_indices[n - 1])
        fail("column indices of row " + std::to_string(row) + " are not strictly ascending");
    }
  }
}

BlockMask from_dense(const MaskShape& shape, const std::vector<std::uint8_t>& dense) {
  BlockMask m{shape, {0}, {}};
  if (static_cast<std::int64_t>(dense.size()) != shape.rows() * shape.num_k_blocks)
    fail("the dense mask has " + std::to_string(dense.size()) + " entries, " + shape.describe() + " needs " +
         std::to_string(shape.rows() * shape.num_k_blocks));
  // BEGIN SOLUTION: per row of dense ([rows, Tk], nonzero = active): append its active kb to col_indices, then the row's end to row_offsets
  for (std::int64_t row = 0; row < shape.rows(); ++row) {
    for (int kb = 0; kb < shape.num_k_blocks; ++kb)
      if (dense[row * shape.num_k_blocks + kb]) m.col_indices.push_back(kb);
    m.row_offsets.push_back(static_cast<int>(m.col_indices.size()));
  }
  // END SOLUTION
  m.validate();
  return m;
}

std::vector<std::uint8_t> to_dense(const BlockMask& mask) {
  const MaskShape& s = mask.shape;
  std::vector<std::uint8_t> dense(s.rows() * s.num_k_blocks, 0);
  for (std::int64_t row = 0; row < s.rows(); ++row)
    for (int n = mask.row_offsets[row]; n < mask.row_offsets[row + 1]; ++n)
      dense[row * s.num_k_blocks + mask.col_indices[n]] = 1;
  return dense;
}

const char* pattern_name(Pattern pattern) {
  switch (pattern) {
    case Pattern::dense: return "dense";
    case Pattern::random: return "random";
    case Pattern::local: return "local";
    case Pattern::streaming: return "streaming";
    case Pattern::causal: return "causal";
  }
  return "?";
}

Pattern parse_pattern(const std::string& name) {
  for (Pattern p : {Pattern::dense, Pattern::random, Pattern::local, Pattern::streaming, Pattern::causal})
    if (name == pattern_name(p)) return p;
  fail("unknown pattern '" + name + "' (dense, random, local, streaming, causal)");
  return Pattern::dense;
}

BlockMask make_mask(const fa::Problem& p, int block_k, const std::vector<HeadPattern>& patterns) {
  const MaskShape s = mask_shape(p, block_k);
  if (patterns.size() != 1 && patterns.size() != static_cast<std::size_t>(p.heads))
    fail("give one pattern for all heads or one per head (" + std::to_string(p.heads) + "), not " +
         std::to_string(patterns.size()));
  for (const HeadPattern& hp : patterns) {
    if (!(hp.density >= 0.0 && hp.density <= 1.0)) fail("density must lie in [0, 1]");
    if (hp.window < 0 || hp.sink < 0) fail("window and sink must be >= 0");
  }
  BlockMask m{s, {0}, {}};
  // The CSR rows in order (b, h, qb), as from_dense builds them from a dense mask.
  for (int b = 0; b < s.batch; ++b)
    for (int h = 0; h < s.heads; ++h)
      for (int qb = 0; qb < s.num_q_blocks; ++qb) {
        const std::vector<int> cols = pattern_row(patterns[patterns.size() == 1 ? 0 : h], p, s, b, h, qb);
        m.col_indices.insert(m.col_indices.end(), cols.begin(), cols.end());
        m.row_offsets.push_back(static_cast<int>(m.col_indices.size()));
      }
  m.validate();  // a malformed mask (an unfinished TODO, say) is refused here, never walked
  return m;
}

std::vector<HeadPattern> cycle_patterns(const std::vector<HeadPattern>& patterns, int heads) {
  if (patterns.size() <= 1) return patterns;
  std::vector<HeadPattern> per_head;
  for (int h = 0; h < heads; ++h) per_head.push_back(patterns[h % patterns.size()]);
  return per_head;
}

double forward_flops(const fa::Problem& p, const BlockMask& mask) {
  check_fits(mask.shape, p, "forward_flops");
  const MaskShape& s = mask.shape;
  double pairs = 0;
  for (std::int64_t row = 0; row < s.rows(); ++row) {
    const int qb = static_cast<int>(row % s.num_q_blocks);
    const int i_end = std::min((qb + 1) * s.block_q, p.seqlen_q);
    for (int n = mask.row_offsets[row]; n < mask.row_offsets[row + 1]; ++n) {
      const int j0 = mask.col_indices[n] * s.block_k, j_end = std::min(j0 + s.block_k, p.seqlen_k);
      if (!p.causal) {
        pairs += double(i_end - qb * s.block_q) * (j_end - j0);
        continue;
      }
      for (int i = qb * s.block_q; i < i_end; ++i) {
        const int last = std::min(j_end - 1, i + p.seqlen_k - p.seqlen_q);  // causal: j <= i + Sk - Sq
        pairs += std::max(0, last - j0 + 1);
      }
    }
  }
  return 4.0 * p.head_dim * pairs;
}

fa::VisibleFn visible_fn(const BlockMask& mask) {
  const auto dense = std::make_shared<const std::vector<std::uint8_t>>(to_dense(mask));
  const MaskShape s = mask.shape;
  return [dense, s](int b, int h, int i, int j) {
    const std::int64_t row = (std::int64_t{b} * s.heads + h) * s.num_q_blocks + i / s.block_q;
    return (*dense)[row * s.num_k_blocks + j / s.block_k] != 0;
  };
}

}  // namespace block_sparse
