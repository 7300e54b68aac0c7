// The CPU model of chapter 03: online_softmax.cu's kernel with the 32 lanes of a warp written
// out as arrays. Float32 throughout, in the kernel's order of operations; std::fma stands where
// nvcc fuses a multiply and an add into one FFMA. Only expf/logf may differ from the GPU's, by
// an ulp or so.
#include "03_online_softmax/model.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>

namespace online_softmax::model {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

// fa::cuda::warp_sum on the host: at each butterfly step lane L adds the value of lane
// L ^ offset, so after five steps every lane holds the same total, added in the GPU's order.
float warp_sum(std::array<float, 32> x) {
  for (int offset = 16; offset > 0; offset /= 2) {
    std::array<float, 32> y;
    for (int lane = 0; lane < 32; ++lane) y[lane] = x[lane] + x[lane ^ offset];
    x = y;
  }
  return x[0];
}

}  // namespace

Update step(RowState& row, float s) {
  Update u{1.0f, 0.0f};
  // BEGIN SOLUTION: fold one score into the running max and sum, so that l stays the sum of exp(s - m) over the keys seen; u reports the rescale factor and s's weight (README: Algorithm, and its worked example)
  if (s > row.m) {                  // the max grows: move l (and, in the caller, O) to the new max
    u.alpha = std::exp(row.m - s);  // exp(m_old - m_new) < 1; exp(-inf) = 0 at the first key
    row.l *= u.alpha;
    row.m = s;
  }
  u.p = std::exp(s - row.m);  // <= 1
  row.l += u.p;
  // END SOLUTION
  return u;
}

void forward(const fa::Problem& p, const std::vector<float>& q, const std::vector<float>& k,
             const std::vector<float>& v, std::vector<float>& o, std::vector<float>& lse) {
  const int D = p.head_dim;
  const float scale = p.scale();
  o.assign(p.o_elems(), 0.0f);
  lse.assign(p.lse_elems(), 0.0f);

  for (std::int64_t row = 0; row < p.lse_elems(); ++row) {  // one warp per row on the GPU
    const int i = row % p.seqlen_q;
    const std::int64_t bh = row / p.seqlen_q;  // b * H + h
    const std::int64_t kv_bh = p.kv_index(bh);
    const float* Q_i = &q[row * D];                  // (D)
    const float* K_bh = &k[kv_bh * p.seqlen_k * D];  // (Sk, D)
    const float* V_bh = &v[kv_bh * p.seqlen_k * D];  // (Sk, D)
    std::vector<float> O_i(D, 0.0f);  // (D) unnormalized: the lanes' O_i registers, side by side
    RowState state;                   // m_i, l_i

    const int n_keys =
        p.causal ? std::clamp(i + p.seqlen_k - p.seqlen_q + 1, 0, p.seqlen_k) : p.seqlen_k;
    for (int j = 0; j < n_keys; ++j) {
      const float* K_j = K_bh + std::int64_t{j} * D;  // (D)
      const float* V_j = V_bh + std::int64_t{j} * D;  // (D)

      std::array<float, 32> part{};  // lane L's share of Q_i . K_j: columns L, L + 32, ...
      for (int d = 0; d < D; ++d) part[d % 32] = std::fma(Q_i[d], K_j[d], part[d % 32]);
      const float S_ij = scale * warp_sum(part);

      const Update u = step(state, S_ij);
      // The kernel multiplies O_i by alpha only when the max grew; alpha = 1 otherwise is exact.
      for (int d = 0; d < D; ++d) O_i[d] = std::fma(u.p, V_j[d], O_i[d] * u.alpha);
    }

    const bool seen = state.m > -kInf;  // false: no visible key, O = 0 and LSE = +inf
    const float inv_l = seen ? 1.0f / state.l : 0.0f;
    for (int d = 0; d < D; ++d) o[row * D + d] = O_i[d] * inv_l;
    lse[row] = seen ? state.m + std::log(state.l) : kInf;
  }
}

}  // namespace online_softmax::model
