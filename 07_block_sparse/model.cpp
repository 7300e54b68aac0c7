// Chapter 07's forward on the CPU, in fp32, one query block at a time: the grid's loop over
// query blocks, then the kernel's walk over the block's active key tiles (sparse_tiles.h), with
// 05's per-tile update (flash_v2::model::update_row). A step the kernel takes, this takes; a tile
// the kernel skips, this skips.
#include "07_block_sparse/model.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <stdexcept>

#include "05_flash_v2/model.h"  // update_row: 05's online softmax and P V for one row
#include "07_block_sparse/sparse_tiles.h"
#include "common/device/constants.h"
#include "common/device/tiles.h"

namespace block_sparse::model {

void forward(const fa::Problem& p, const BlockMask& mask, const std::vector<float>& q, const std::vector<float>& k,
             const std::vector<float>& v, std::vector<float>& o, std::vector<float>& lse, int Bc) {
  check_fits(mask.shape, p, "block_sparse::model");
  mask.validate();
  if (Bc < 1 || mask.shape.block_k % Bc != 0)
    throw std::invalid_argument("block_sparse::model: Bc must divide the key block size");
  const float inf = std::numeric_limits<float>::infinity();
  const int D = p.head_dim, Sq = p.seqlen_q, Sk = p.seqlen_k, Br = mask.shape.block_q;
  const int tpb = mask.shape.block_k / Bc;  // kernel tiles per mask key block
  const float scale_log2 = p.scale() * fa::cuda::kLog2e;
  o.assign(p.o_elems(), 0.0f);
  lse.assign(p.lse_elems(), 0.0f);

  for (std::int64_t bh = 0; bh < std::int64_t{p.batch} * p.heads; ++bh) {
    const std::int64_t kv_bh = p.kv_index(bh);
    const float* Q = q.data() + bh * Sq * D;     // (Sq, D)
    const float* K = k.data() + kv_bh * Sk * D;  // (Sk, D)
    const float* V = v.data() + kv_bh * Sk * D;  // (Sk, D)
    for (int i_tile = 0; i_tile < mask.shape.num_q_blocks; ++i_tile) {  // the GPU's grid
      const int i0 = i_tile * Br, rows = std::min(Br, Sq - i0);
      std::vector<float> m_i(rows, -inf), l_i(rows, 0.0f), O_i(std::size_t(rows) * D, 0.0f);

      // The kernel's walk: this block's CSR row, cut at Tc_end.
      const std::int64_t row = bh * mask.shape.num_q_blocks + i_tile;
      const int* cols = mask.col_indices.data() + mask.row_offsets[row];
      const int Tc_end = fa::cuda::key_tile_end(i_tile, Br, Bc, Sq, Sk, p.causal);
      const int n_end = walk_length(cols, mask.row_offsets[row + 1] - mask.row_offsets[row], tpb, Tc_end);
      for (int n = 0; n < n_end; ++n) {
        const int j0 = walk_tile(cols, n, tpb) * Bc;
        std::vector<float> S_ij(std::size_t(rows) * Bc);  // (Br, Bc): raw scores, -inf where hidden
        for (int r = 0; r < rows; ++r) {
          for (int c = 0; c < Bc; ++c) {
            const int j = j0 + c;
            const bool seen = j < Sk && (!p.causal || fa::causal_visible(i0 + r, j, Sq, Sk));
            float s = 0.0f;
            for (int d = 0; d < D && seen; ++d) s += Q[std::int64_t{i0 + r} * D + d] * K[std::int64_t{j} * D + d];
            S_ij[r * Bc + c] = seen ? s : -inf;
          }
        }
        for (int r = 0; r < rows; ++r)  // 05's online softmax and P V, exp2 with the scale folded in
          flash_v2::model::update_row(&S_ij[r * Bc], Bc, V + std::int64_t{j0} * D, std::min(Bc, Sk - j0), D, scale_log2,
                                      m_i[r], l_i[r], &O_i[r * D]);
      }
      for (int r = 0; r < rows; ++r) {  // normalize once: O = 0, LSE = +inf where no key was seen
        const std::int64_t out = bh * Sq + i0 + r;
        const float inv_l = l_i[r] > 0.0f ? 1.0f / l_i[r] : 0.0f;
        for (int d = 0; d < D; ++d) o[out * D + d] = O_i[r * D + d] * inv_l;
        lse[out] = l_i[r] > 0.0f ? m_i[r] * p.scale() + std::log(l_i[r]) : inf;
      }
    }
  }
}

}  // namespace block_sparse::model
