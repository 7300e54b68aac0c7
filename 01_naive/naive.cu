// Chapter 01 -- naive attention: three kernels, as one first writes them.
//
//   1. S = scale * Q K^T    one thread per element of S, reading Q and K from global memory
//   2. P = softmax(S)       one thread per row: max, sum of exp, normalize (and LSE)
//   3. O = P V              one thread per element of O
//
// S (overwritten in place by P) is a [B, H, Sq, Sk] float tensor in global memory: its size
// grows with the square of the sequence length, which is what chapters 03-05 get rid of.
// Run:  ./build/01_naive/01_naive --seqlen 1024 --head-dim 64

#include <cstdint>
#include <limits>

#include "01_naive/naive.h"
#include "common/cuda/cuda_check.h"
#include "common/device/grid.cuh"
#include "common/device/tiles.h"  // ceil_div
#include "common/cuda/device_memory.h"

namespace naive {
namespace {

constexpr int kThreads = 256;
constexpr float kInf = std::numeric_limits<float>::infinity();

// S[bh, i, j] = scale * dot(Q[bh, i, :], K[bh / group, j, :]); masked entries are -inf.
__global__ void scores_kernel(const float* q,  // [B, H, Sq, D] global
                              const float* k,  // [B, Hkv, Sk, D] global
                              float* s,        // [B, H, Sq, Sk] global
                              fa::Problem p, float scale) {
  const std::int64_t n = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x;
  if (n >= std::int64_t{p.batch} * p.heads * p.seqlen_q * p.seqlen_k) return;
  const int j = n % p.seqlen_k;  // consecutive threads take consecutive keys: S writes coalesce
  const int i = (n / p.seqlen_k) % p.seqlen_q;
  const std::int64_t bh = n / (std::int64_t{p.seqlen_k} * p.seqlen_q);  // b * H + h
  const std::int64_t kv_bh = p.kv_index(bh);

  // BEGIN SOLUTION: s[n] = scale * Q_i . K_j (rows i of Q[bh], j of K[kv_bh]), or -inf if causal hides j
  if (p.causal && !fa::causal_visible(i, j, p.seqlen_q, p.seqlen_k)) {
    s[n] = -kInf;  // exp(-inf) = 0: the key drops out of the softmax
    return;
  }
  const float* q_i = q + (bh * p.seqlen_q + i) * p.head_dim;     // (D) global
  const float* k_j = k + (kv_bh * p.seqlen_k + j) * p.head_dim;  // (D) global
  float dot = 0.0f;
  for (int d = 0; d < p.head_dim; ++d) dot += q_i[d] * k_j[d];
  s[n] = scale * dot;
  // END SOLUTION
}

// Row-wise softmax of S in place (S becomes P), and LSE = m + log(l) per row.
// Subtracting the row max m before exp keeps every exp() <= 1, so it cannot overflow.
__global__ void softmax_kernel(float* s,    // [B*H*Sq, Sk] global, in: S, out: P
                               float* lse,  // [B*H*Sq] global
                               std::int64_t rows, int seqlen_k) {
  const std::int64_t row = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x;
  if (row >= rows) return;
  float* s_row = s + row * seqlen_k;
  // BEGIN SOLUTION: softmax of s_row in place, lse[row] = m + log(l); an all -inf row: P = 0, LSE = +inf
  float m = -kInf;
  for (int j = 0; j < seqlen_k; ++j) m = fmaxf(m, s_row[j]);
  if (m == -kInf) {  // the row sees no key: P = 0, LSE = +inf (see common/host/problem.h)
    for (int j = 0; j < seqlen_k; ++j) s_row[j] = 0.0f;
    lse[row] = kInf;
    return;
  }
  float l = 0.0f;
  for (int j = 0; j < seqlen_k; ++j) l += expf(s_row[j] - m);
  for (int j = 0; j < seqlen_k; ++j) s_row[j] = expf(s_row[j] - m) / l;
  lse[row] = m + logf(l);
  // END SOLUTION
}

// O[bh, i, d] = sum_j P[bh, i, j] * V[bh / group, j, d]
__global__ void output_kernel(const float* prob,  // [B, H, Sq, Sk] global
                              const float* v,     // [B, Hkv, Sk, D] global
                              float* o,           // [B, H, Sq, D] global
                              fa::Problem p) {
  const std::int64_t n = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x;
  if (n >= p.o_elems()) return;
  const int d = n % p.head_dim;  // consecutive threads take consecutive d: V reads coalesce
  const int i = (n / p.head_dim) % p.seqlen_q;
  const std::int64_t bh = n / (std::int64_t{p.head_dim} * p.seqlen_q);
  const std::int64_t kv_bh = p.kv_index(bh);

  // BEGIN SOLUTION: O[n] = sum_j P[bh, i, j] * V[kv_bh, j, d]
  const float* p_i = prob + (bh * p.seqlen_q + i) * p.seqlen_k;  // (Sk) global
  const float* v_bh = v + kv_bh * p.seqlen_k * p.head_dim;       // (Sk, D) global
  float acc = 0.0f;
  for (int j = 0; j < p.seqlen_k; ++j) acc += p_i[j] * v_bh[std::int64_t{j} * p.head_dim + d];
  o[n] = acc;
  // END SOLUTION
}

}  // namespace

const fa::Chapter& chapter() {
  static const fa::Chapter c{
      .support = {.chapter = "01_naive", .dtypes = {fa::Dtype::f32}, .head_dims = {}, .max_head_dim = 256},
      .forward = forward,
      .test_head_dims = {7, 8, 32, 40, 64, 72, 80, 96, 112, 128, 160, 192, 256},
      .defaults = fa::default_problem(fa::Dtype::f32)};
  return c;
}

void forward(const fa::Problem& p, const void* q, const void* k, const void* v, void* o, float* lse,
             cudaStream_t stream) {
  fa::check_forward_args(chapter().support, p, q, k, v, o, lse);
  const std::int64_t s_elems = std::int64_t{p.batch} * p.heads * p.seqlen_q * p.seqlen_k;
  float* s = static_cast<float*>(
      fa::cuda::workspace(s_elems * sizeof(float), "01_naive: the score matrix S (B*H*Sq*Sk floats)"));

  scores_kernel<<<fa::cuda::blocks_1d(fa::cuda::ceil_div<std::int64_t>(s_elems, kThreads), "01_naive"), kThreads, 0, stream>>>(
      static_cast<const float*>(q), static_cast<const float*>(k), s, p, p.scale());
  FA_CHECK_LAUNCH();
  softmax_kernel<<<fa::cuda::blocks_1d(fa::cuda::ceil_div<std::int64_t>(p.lse_elems(), kThreads), "01_naive"), kThreads, 0, stream>>>(
      s, lse, p.lse_elems(), p.seqlen_k);
  FA_CHECK_LAUNCH();
  output_kernel<<<fa::cuda::blocks_1d(fa::cuda::ceil_div<std::int64_t>(p.o_elems(), kThreads), "01_naive"), kThreads, 0, stream>>>(
      s, static_cast<const float*>(v), static_cast<float*>(o), p);
  FA_CHECK_LAUNCH();
}

}  // namespace naive
