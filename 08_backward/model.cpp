// FlashAttention-2's backward on the CPU, one key tile at a time, as backward.cu does it:
//   preprocessing: D_i = rowsum(dO_i o O_i), dQ = 0;
//   outer loop over key tiles K_j, V_j (on the GPU: the grid), dK_j and dV_j accumulated across
//   the whole inner loop over the group's query heads and their query tiles Q_i (starting late
//   under causal masking); P_ij recomputed from the forward's LSE; dQ_i accumulated in place (on
//   the GPU: atomicAdd), dK_j and dV_j written once.
#include "08_backward/model.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "common/device/constants.h"
#include "common/device/tiles.h"

namespace backward::model {

using fa::cuda::ceil_div;  // the kernel's tile math and constants (common/device/)
using fa::cuda::kLog2e;
using fa::cuda::needs_mask;
using fa::cuda::query_tile_begin;

void backward(const fa::Problem& p, const std::vector<float>& q, const std::vector<float>& k,
              const std::vector<float>& v, const std::vector<float>& o, const std::vector<float>& lse,
              const std::vector<float>& dout, std::vector<float>& dq, std::vector<float>& dk,
              std::vector<float>& dv, int Br, int Bc) {
  const int D = p.head_dim, Sq = p.seqlen_q, Sk = p.seqlen_k;
  const float scale = p.scale(), scale_log2 = scale * kLog2e;  // P = exp2(s * scale_log2 - LSE * log2e)

  // Preprocessing (the GPU's dot_do_o kernel): D_i = rowsum(dO_i o O_i), and dQ = 0.
  std::vector<float> D_row(p.lse_elems());  // [B, H, Sq]
  for (std::int64_t row = 0; row < p.lse_elems(); ++row) {
    float d_i = 0.0f;
    for (int d = 0; d < D; ++d) d_i += dout[row * D + d] * o[row * D + d];
    D_row[row] = d_i;
  }
  dq.assign(p.q_elems(), 0.0f);
  dk.assign(p.kv_elems(), 0.0f);
  dv.assign(p.kv_elems(), 0.0f);

  for (std::int64_t kv_bh = 0; kv_bh < std::int64_t{p.batch} * p.kv_heads; ++kv_bh) {
    const float* K = k.data() + kv_bh * Sk * D;  // (Sk, D)
    const float* V = v.data() + kv_bh * Sk * D;  // (Sk, D)
    for (int j_tile = 0; j_tile < ceil_div(Sk, Bc); ++j_tile) {  // the GPU's grid
      const int j0 = j_tile * Bc, cols = std::min(Bc, Sk - j0);
      std::vector<float> dK_j(std::size_t(cols) * D, 0.0f), dV_j(std::size_t(cols) * D, 0.0f);

      // GQA/MQA: the query heads that read this KV head, one after the other.
      const std::int64_t h0 = kv_bh / p.kv_heads * p.heads + kv_bh % p.kv_heads * p.group_size();
      for (std::int64_t bh = h0; bh < h0 + p.group_size(); ++bh) {
        const float* Q = q.data() + bh * Sq * D;      // (Sq, D)
        const float* dO = dout.data() + bh * Sq * D;  // (Sq, D)
        float* dQ = dq.data() + bh * Sq * D;          // (Sq, D)
        for (int i_tile = query_tile_begin(j_tile, Br, Bc, Sq, Sk, p.causal); i_tile < ceil_div(Sq, Br);
             ++i_tile) {
          const int i0 = i_tile * Br, rows = std::min(Br, Sq - i0);
          const bool mask = needs_mask(i_tile, j_tile, Br, Bc, Sq, Sk, p.causal);
          // S_ij = Q_i K_j^T and P_ij = exp(scale S_ij - LSE_i): 0 where masked or LSE = +inf.
          std::vector<float> P_ij(std::size_t(rows) * cols), dS_ij(std::size_t(rows) * cols);
          for (int r = 0; r < rows; ++r) {
            const float lse2 = lse[bh * Sq + i0 + r] * kLog2e;
            for (int c = 0; c < cols; ++c) {
              float s = 0.0f;
              for (int d = 0; d < D; ++d) s += Q[std::int64_t{i0 + r} * D + d] * K[std::int64_t{j0 + c} * D + d];
              const bool seen = !mask || !p.causal || fa::causal_visible(i0 + r, j0 + c, Sq, Sk);
              P_ij[r * cols + c] = seen ? std::exp2(s * scale_log2 - lse2) : 0.0f;
            }
          }
          // dV_j += P_ij^T dO_i
          for (int c = 0; c < cols; ++c)
            for (int d = 0; d < D; ++d)
              for (int r = 0; r < rows; ++r) dV_j[c * D + d] += P_ij[r * cols + c] * dO[std::int64_t{i0 + r} * D + d];
          // dP_ij = dO_i V_j^T, dS_ij = P_ij o (dP_ij - D_i)
          for (int r = 0; r < rows; ++r) {
            for (int c = 0; c < cols; ++c) {
              float dp = 0.0f;
              for (int d = 0; d < D; ++d) dp += dO[std::int64_t{i0 + r} * D + d] * V[std::int64_t{j0 + c} * D + d];
              // BEGIN SOLUTION: dS_ij[r, c] = P_ij[r, c] (dp - D_i) (README: where dS comes from)
              dS_ij[r * cols + c] = P_ij[r * cols + c] * (dp - D_row[bh * Sq + i0 + r]);
              // END SOLUTION
            }
          }
          // dQ_i += scale dS_ij K_j: one partial sum per key tile (the GPU's atomicAdd)
          for (int r = 0; r < rows; ++r) {
            for (int d = 0; d < D; ++d) {
              float acc = 0.0f;
              for (int c = 0; c < cols; ++c) acc += dS_ij[r * cols + c] * K[std::int64_t{j0 + c} * D + d];
              dQ[std::int64_t{i0 + r} * D + d] += scale * acc;
            }
          }
          // dK_j += dS_ij^T Q_i (the scale is applied once, when dK_j is written)
          for (int c = 0; c < cols; ++c)
            for (int d = 0; d < D; ++d)
              for (int r = 0; r < rows; ++r) dK_j[c * D + d] += dS_ij[r * cols + c] * Q[std::int64_t{i0 + r} * D + d];
        }
      }
      for (int c = 0; c < cols; ++c) {  // written once, after every query head of the group
        for (int d = 0; d < D; ++d) {
          dk[(kv_bh * Sk + j0 + c) * D + d] = scale * dK_j[c * D + d];
          dv[(kv_bh * Sk + j0 + c) * D + d] = dV_j[c * D + d];
        }
      }
    }
  }
}

}  // namespace backward::model
