// Algorithm 1 of FlashAttention-1 (Dao et al. 2022), line by line, in float, on the host. The
// kernel (flash_v1.cu) runs the same tiles in the same order; the vectors o, l, m play the role
// of global memory, and the locals of one (i, j) step that of on-chip memory.
#include "04_flash_v1/model.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

namespace flash_v1::model {

void forward(const fa::Problem& p, const std::vector<float>& q, const std::vector<float>& k,
             const std::vector<float>& v, std::vector<float>& o, std::vector<float>& lse, int Br,
             int Bc) {
  constexpr float kInf = std::numeric_limits<float>::infinity();
  const int Sq = p.seqlen_q, Sk = p.seqlen_k, d = p.head_dim;
  const int Tr = (Sq + Br - 1) / Br, Tc = (Sk + Bc - 1) / Bc;
  const float scale = p.scale();
  o.assign(p.o_elems(), 0.0f);  // line 2: O = 0, l = 0, m = -inf
  std::vector<float> l(p.lse_elems(), 0.0f), m(p.lse_elems(), -kInf);
  lse.assign(p.lse_elems(), 0.0f);

  for (std::int64_t bh = 0; bh < std::int64_t{p.batch} * p.heads; ++bh) {  // one thread block
    const std::int64_t kv_bh = p.kv_index(bh);
    const float* Q = &q[bh * Sq * d];     // (Sq, d)
    const float* K = &k[kv_bh * Sk * d];  // (Sk, d)
    const float* V = &v[kv_bh * Sk * d];  // (Sk, d)
    float* O = &o[bh * Sq * d];           // (Sq, d)
    float* l_g = &l[bh * Sq];             // (Sq)
    float* m_g = &m[bh * Sq];             // (Sq)

    for (int j = 0; j < Tc; ++j) {  // line 5: K_j, V_j = rows [j0, j0 + bc)
      const int j0 = j * Bc, bc = std::min(Bc, Sk - j0);
      for (int i = 0; i < Tr; ++i) {  // line 7: Q_i, O_i, l_i, m_i = rows [i0, i0 + br)
        const int i0 = i * Br, br = std::min(Br, Sq - i0);
        if (p.causal && !fa::causal_visible(i0 + br - 1, j0, Sq, Sk)) continue;  // nothing visible
        const bool diagonal = p.causal && !fa::causal_visible(i0, j0 + bc - 1, Sq, Sk);
        for (int r = 0; r < br; ++r) {  // the kernel does the rows of a tile in parallel
          const int row = i0 + r;
          std::vector<float> P(bc);  // row r of S_ij, then of P~_ij
          float m_tilde = -kInf;     // line 9, 10: S_ij = scale Q_i K_j^T, m~_ij = rowmax(S_ij)
          for (int c = 0; c < bc; ++c) {
            float dot = 0.0f;
            for (int x = 0; x < d; ++x) dot += Q[row * d + x] * K[(j0 + c) * d + x];
            const bool seen = !diagonal || fa::causal_visible(row, j0 + c, Sq, Sk);
            P[c] = seen ? scale * dot : -kInf;
            m_tilde = std::max(m_tilde, P[c]);
          }
          // -inf - -inf would be NaN: a row with no key seen yet subtracts 0 (exp(-inf) = 0).
          const float m_tilde_ref = m_tilde == -kInf ? 0.0f : m_tilde;
          float l_tilde = 0.0f;  // line 10: P~_ij = exp(S_ij - m~_ij), l~_ij = rowsum(P~_ij)
          for (int c = 0; c < bc; ++c) l_tilde += P[c] = std::exp(P[c] - m_tilde_ref);
          // BEGIN SOLUTION: Algorithm 1's lines 8 and 11-13: merge this tile's statistics with the row's running ones, and update O_i so it stays normalized after every tile (README: Algorithm)
          const float m_i = m_g[row], l_i = l_g[row];  // line 8
          const float m_new = std::max(m_i, m_tilde);  // line 11
          const float m_ref = m_new == -kInf ? 0.0f : m_new;
          const float alpha = std::exp(m_i - m_ref), beta = std::exp(m_tilde - m_ref);
          const float l_new = alpha * l_i + beta * l_tilde;
          const float inv_l_new = l_new > 0.0f ? 1.0f / l_new : 0.0f;
          for (int x = 0; x < d; ++x) {  // line 12
            float pv = 0.0f;  // (P~_ij V_j)[r, x]
            for (int c = 0; c < bc; ++c) pv += P[c] * V[(j0 + c) * d + x];
            float& O_i = O[row * d + x];
            O_i = inv_l_new * (l_i * alpha * O_i + beta * pv);
          }
          l_g[row] = l_new;  // line 13
          m_g[row] = m_new;
          // END SOLUTION
        }
      }
    }
    for (int row = 0; row < Sq; ++row)  // LSE = m + log(l); a row that saw no key: +inf
      lse[bh * Sq + row] = l_g[row] > 0.0f ? m_g[row] + std::log(l_g[row]) : kInf;
  }
}

}  // namespace flash_v1::model
