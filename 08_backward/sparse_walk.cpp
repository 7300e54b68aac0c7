// The transposed block mask of the sparse backward (sparse_walk.h).
#include "08_backward/sparse_walk.h"

#include <limits>
#include <stdexcept>

#include "common/device/tiles.h"

namespace backward {

using fa::cuda::ceil_div;  // the kernels' tile math (common/device/tiles.h)
using fa::cuda::query_tile_begin;

void SparseWalk::check_fits(const fa::Problem& p, const std::string& who) const {
  if (p.batch != batch || p.heads != heads || p.kv_heads != kv_heads || p.seqlen_q != seqlen_q ||
      p.seqlen_k != seqlen_k || p.causal != causal)
    throw std::invalid_argument(who + ": the sparse walk was built for another problem (batch, heads, kv_heads, "
                                      "seqlen_q, seqlen_k and causal must match): it is for " +
                                std::to_string(batch) + "x" + std::to_string(heads) + "x" + std::to_string(kv_heads) +
                                " Sq " + std::to_string(seqlen_q) + " Sk " + std::to_string(seqlen_k) +
                                (causal ? " causal" : "") + ", given " + p.describe());
}

SparseWalk transpose_mask(const fa::Problem& p, const block_sparse::BlockMask& mask) {
  const std::string who = "08_backward (sparse walk)";
  mask.validate();
  block_sparse::check_fits(mask.shape, p, who);
  const int group = p.group_size(), Sq = p.seqlen_q, Sk = p.seqlen_k;
  const int Tr = ceil_div(Sq, kSparseBr), Tc = ceil_div(Sk, kSparseBc), Tq = mask.shape.num_q_blocks;
  if (group > kMaxGroup) throw std::invalid_argument(who + ": heads / kv_heads must be <= 256");
  if (Tr >= kMaxQueryTiles) throw std::invalid_argument(who + ": seqlen_q is too long for the step encoding");
  static_assert(block_sparse::kBlockQ == 2 * kSparseBr, "a mask query block is two query tiles");
  const int block_k = mask.shape.block_k;  // 64 or 128 (check_fits)

  SparseWalk w;
  w.batch = p.batch, w.heads = p.heads, w.kv_heads = p.kv_heads, w.seqlen_q = Sq, w.seqlen_k = Sk;
  w.causal = p.causal, w.key_tiles = Tc;
  w.row_offsets.push_back(0);
  std::vector<int> turns(static_cast<std::size_t>(p.batch) * p.heads * Tr, 0);  // per (b, h, query tile)
  struct Entry {
    int head, qb, halves;
  };
  for (int b = 0; b < p.batch; ++b) {
    for (int kvh = 0; kvh < p.kv_heads; ++kvh) {
      // One pass over the group's CSR rows, in (head, query block) order, fills every key tile's
      // list already sorted; the two 64-key blocks of a tile are adjacent in a row, so they merge.
      std::vector<std::vector<Entry>> by_tile(Tc);
      for (int hg = 0; hg < group; ++hg) {
        const std::int64_t h = std::int64_t{kvh} * group + hg;
        for (int qb = 0; qb < Tq; ++qb) {
          const std::int64_t row = (b * std::int64_t{p.heads} + h) * Tq + qb;
          for (int n = mask.row_offsets[row]; n < mask.row_offsets[row + 1]; ++n) {
            const int kb = mask.col_indices[n];
            const int j = kb * block_k / kSparseBc;
            const int halves = block_k == kSparseBc ? 3 : 1 << (kb % 2);
            std::vector<Entry>& list = by_tile[j];
            if (!list.empty() && list.back().head == hg && list.back().qb == qb) list.back().halves |= halves;
            else list.push_back({hg, qb, halves});
          }
        }
      }
      for (int j = 0; j < Tc; ++j) {
        const int i_begin = query_tile_begin(j, kSparseBr, kSparseBc, Sq, Sk, p.causal);
        for (const Entry& e : by_tile[j]) {
          for (int i_tile = 2 * e.qb; i_tile < 2 * e.qb + 2; ++i_tile) {
            if (i_tile < i_begin || i_tile >= Tr) continue;  // causally hidden, or past Sq
            w.steps.push_back(pack_step(e.head, i_tile, e.halves));
            const std::size_t h = static_cast<std::size_t>(b) * p.heads + static_cast<std::size_t>(kvh) * group + e.head;
            w.ranks.push_back(turns[h * Tr + i_tile]++);
          }
        }
        if (w.steps.size() > static_cast<std::size_t>(std::numeric_limits<int>::max()))
          throw std::invalid_argument(who + ": more than 2^31 steps (int offsets)");
        w.row_offsets.push_back(static_cast<int>(w.steps.size()));
      }
    }
  }
  return w;
}

}  // namespace backward
