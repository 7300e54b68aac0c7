// FlashAttention-2's forward on the CPU, one query tile at a time, as flash_v2.cu does it:
//   outer loop over query tiles Q_i (on the GPU: the grid), inner loop over key tiles K_j, V_j
//   (ending early under causal masking), running max m_i and sum l_i, O_i normalized once.
#include "05_flash_v2/model.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "common/device/constants.h"
#include "common/device/tiles.h"

namespace flash_v2::model {

using fa::cuda::ceil_div;  // the kernel's tile math (common/device/tiles.h)
using fa::cuda::key_tile_end;
using fa::cuda::needs_mask;

void forward(const fa::Problem& p, const std::vector<float>& q, const std::vector<float>& k,
             const std::vector<float>& v, std::vector<float>& o, std::vector<float>& lse, int Br,
             int Bc) {
  const float inf = std::numeric_limits<float>::infinity();
  const int D = p.head_dim, Sq = p.seqlen_q, Sk = p.seqlen_k;
  const float scale_log2 = p.scale() * fa::cuda::kLog2e;  // scale * log2(e): P = exp2(S scale_log2 - m scale_log2)
  o.assign(p.o_elems(), 0.0f);
  lse.assign(p.lse_elems(), 0.0f);

  for (std::int64_t bh = 0; bh < std::int64_t{p.batch} * p.heads; ++bh) {
    const std::int64_t kv_bh = p.kv_index(bh);
    const float* Q = q.data() + bh * Sq * D;     // (Sq, D)
    const float* K = k.data() + kv_bh * Sk * D;  // (Sk, D)
    const float* V = v.data() + kv_bh * Sk * D;  // (Sk, D)
    for (int i_tile = 0; i_tile < ceil_div(Sq, Br); ++i_tile) {  // the GPU's grid
      const int i0 = i_tile * Br, rows = std::min(Br, Sq - i0);
      std::vector<float> Q_i(std::size_t(rows) * D);  // (Br, D)
      for (int r = 0; r < rows; ++r)
        for (int d = 0; d < D; ++d) Q_i[r * D + d] = Q[std::int64_t{i0 + r} * D + d];
      std::vector<float> m_i(rows, -inf), l_i(rows, 0.0f), O_i(std::size_t(rows) * D, 0.0f);

      const int Tc_end = key_tile_end(i_tile, Br, Bc, Sq, Sk, p.causal);
      for (int j_tile = 0; j_tile < Tc_end; ++j_tile) {
        const int j0 = j_tile * Bc;
        const bool mask = needs_mask(i_tile, j_tile, Br, Bc, Sq, Sk, p.causal);
        std::vector<float> S_ij(std::size_t(rows) * Bc);  // (Br, Bc), raw scores Q_i K_j^T
        for (int r = 0; r < rows; ++r) {
          for (int c = 0; c < Bc; ++c) {
            const int j = j0 + c;
            float s = 0.0f;
            for (int d = 0; d < D && j < Sk; ++d) s += Q_i[r * D + d] * K[std::int64_t{j} * D + d];
            const bool seen = j < Sk && (!p.causal || fa::causal_visible(i0 + r, j, Sq, Sk));
            S_ij[r * Bc + c] = !mask || seen ? s : -inf;
          }
        }
        for (int r = 0; r < rows; ++r)
          update_row(&S_ij[r * Bc], Bc, V + std::int64_t{j0} * D, std::min(Bc, Sk - j0), D, scale_log2, m_i[r], l_i[r],
                     &O_i[r * D]);
      }
      for (int r = 0; r < rows; ++r) {  // normalize once; LSE back to natural log
        const std::int64_t row = bh * Sq + i0 + r;
        const float inv_l = l_i[r] > 0.0f ? 1.0f / l_i[r] : 0.0f;  // no key seen: O = 0
        for (int d = 0; d < D; ++d) o[row * D + d] = O_i[r * D + d] * inv_l;
        const double lse_log2 = double{m_i[r] * scale_log2} + std::log2(double{l_i[r]});
        lse[row] = l_i[r] > 0.0f ? static_cast<float>(lse_log2 * fa::cuda::kLn2D) : inf;
      }
    }
  }
}

void update_row(float* s, int Bc, const float* V_j, int keys, int D, float scale_log2, float& m, float& l,
                float* O) {
  const float inf = std::numeric_limits<float>::infinity();
  // BEGIN SOLUTION: FlashAttention-2's per-tile update in exp2 units: O and l stay unnormalized until the end, rescaled only when the max grows; where the max holds, the rescale factor must be exactly 1 (README: Algorithm)
  // STUB: (void)s, (void)Bc, (void)V_j, (void)keys, (void)D, (void)scale_log2, (void)m, (void)l, (void)O, (void)inf;
  const float m_new = std::max(m, *std::max_element(s, s + Bc));
  const float m_use = m_new == -inf ? 0.0f : m_new;  // a row that has seen nothing yet
  const float m_scaled = m_use * scale_log2;
  const float alpha = std::exp2(m * scale_log2 - m_scaled);  // rescales the old l and O
  float rowsum = 0.0f;
  for (int c = 0; c < Bc; ++c) rowsum += (s[c] = std::exp2(std::fma(s[c], scale_log2, -m_scaled)));  // P_ij
  l = alpha * l + rowsum;
  m = m_new;
  for (int d = 0; d < D; ++d) {
    float pv = 0.0f;
    for (int c = 0; c < keys; ++c) pv += s[c] * V_j[std::int64_t{c} * D + d];
    O[d] = alpha * O[d] + pv;
  }
  // END SOLUTION
}

}  // namespace flash_v2::model
