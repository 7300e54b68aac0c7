// Chapter 03 -- online softmax: attention in one pass over the keys, with no S or P in memory.
//
// New since 02 (diff -u 02_tiled/tiled.cu 03_online_softmax/online_softmax.cu):
//   * One kernel instead of three. A warp owns one query row i and streams over its keys j,
//     keeping in registers a running max m_i, a running sum l_i = sum_j exp(S_ij - m_i) and an
//     unnormalized output O_i = sum_j exp(S_ij - m_i) V_j. When a new score raises m_i, l_i and
//     O_i are rescaled by exp(m_old - m_new); O_i is divided by l_i once, at the end.
//   * The [B, H, Sq, Sk] score matrix and its workspace are gone: extra memory is zero, not
//     B*H*Sq*Sk*4 bytes (32 GiB at seqlen 16k, D = 64 on the benchmark shapes).
//   * A causal row stops at its last visible key instead of computing and masking the rest.
//   * Not new yet: each warp reads all of K and V from global memory for its own row, and only
//     the L1 and L2 caches catch the reuse between rows. Chapter 04 stages K_j and V_j in shared
//     memory once for a whole block of rows.
// Expected effect: one read of K and V per row and no S/P round trips through DRAM, so long
// sequences fit and run; the per-key warp reduction and the K/V traffic are what limit it.
// Run:  ./build/03_online_softmax/03_online_softmax --seqlen 1024 --head-dim 64
// The CPU model (model.cpp) is this kernel written out on the host, one loop per loop.

#include <cstdint>
#include <limits>

#include "03_online_softmax/online_softmax.h"
#include "common/cuda/cuda_check.h"
#include "common/device/grid.cuh"
#include "common/device/warp_reduce.cuh"

namespace online_softmax {
namespace {

constexpr int kWarps = 8;  // query rows per block: one warp each
constexpr int kThreads = 32 * kWarps;
constexpr float kInf = std::numeric_limits<float>::infinity();

// One warp per query row i; lane `lane` owns the columns d = lane + 32c (c < kC) of Q_i, O_i and
// of every K_j, V_j row, so consecutive lanes read consecutive floats and every row load is
// coalesced. kC = ceil(D / 32) is a template parameter so that Q_i and O_i are register arrays
// with constant indices; columns d >= D (the tail when D is not a multiple of 32) are skipped.
//
// Why one key per step: a variant gives each lane its own key of a chunk of 32 (a full D-long
// dot product per lane, then one max and one rescale per chunk). It needs fewer shuffles and
// exponentials, but then every lane reads a different K row and one warp load touches 32 cache
// lines instead of one; that pays only once K_j sits in shared memory, which is chapter 04.
// Here every load is coalesced and the loop body is the algorithm, one key at a time.
//
// grid: ceil(B*H*Sq / kWarps) blocks of kThreads; warp w of block x takes row x * kWarps + w.
template <int kC>
__global__ void __launch_bounds__(kThreads) online_softmax_kernel(
    const float* q,  // [B, H, Sq, D] global
    const float* k,  // [B, Hkv, Sk, D] global
    const float* v,  // [B, Hkv, Sk, D] global
    float* o,        // [B, H, Sq, D] global
    float* lse,      // [B, H, Sq] global
    fa::Problem p, float scale) {
  // This warp's query row: (b*H + h)*Sq + i.
  const std::int64_t row = (blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  if (row >= p.lse_elems()) return;  // the whole warp leaves together, so the shuffles below stay full
  const int D = p.head_dim;
  const int i = row % p.seqlen_q;
  const std::int64_t bh = row / p.seqlen_q;  // b * H + h
  const std::int64_t kv_bh = p.kv_index(bh);
  const float* K_bh = k + kv_bh * p.seqlen_k * D;  // (Sk, D) global
  const float* V_bh = v + kv_bh * p.seqlen_k * D;  // (Sk, D) global

  float Q_i[kC];       // (D) registers, spread over the lanes; 0 in the tail
  float O_i[kC] = {};  // (D) registers, unnormalized: sum_j exp(S_ij - m_i) V_j
  for (int c = 0; c < kC; ++c) {
    const int d = lane + 32 * c;
    Q_i[c] = d < D ? q[row * D + d] : 0.0f;
  }
  float m_i = -kInf;  // running max of S_ij over the keys seen so far
  float l_i = 0.0f;   // running sum of exp(S_ij - m_i) over the keys seen so far

  // The keys row i sees are a prefix 0 .. n_keys-1: fa::causal_visible(i, j) is j <= i + Sk - Sq.
  // Under causal masking with Sq > Sk the first Sq - Sk rows see none (n_keys = 0).
  const int n_keys =
      p.causal ? max(0, min(p.seqlen_k, i + p.seqlen_k - p.seqlen_q + 1)) : p.seqlen_k;
  for (int j = 0; j < n_keys; ++j) {
    const float* K_j = K_bh + std::int64_t{j} * D;  // (D) global
    const float* V_j = V_bh + std::int64_t{j} * D;  // (D) global

    // BEGIN SOLUTION: S_ij = scale * Q_i . K_j: each lane its columns d, then a warp sum
    // STUB: const float S_ij = 0.0f;
    float part = 0.0f;  // this lane's share of Q_i . K_j
    for (int c = 0; c < kC; ++c) {
      const int d = lane + 32 * c;
      if (d < D) part += Q_i[c] * K_j[d];
    }
    const float S_ij = scale * fa::cuda::warp_sum(part);  // every lane holds the same score
    // END SOLUTION

    // BEGIN SOLUTION: if S_ij > m_i, rescale l_i, O_i to the new max; then add P_ij to l_i, P_ij V_j to O_i
    // The online softmax step (README: Algorithm). Every lane holds the same S_ij and m_i, so
    // this branch is warp-uniform and never diverges; it is also rare, since the running max of
    // n random scores grows only about ln(n) times.
    if (S_ij > m_i) {
      // exp(m_old - m_new) < 1 moves l_i and O_i from the old max to the new one.
      // At the first key m_old = -inf: alpha = exp(-inf) = 0 times l_i = O_i = 0, no NaN.
      const float alpha = expf(m_i - S_ij);
      l_i *= alpha;
      for (int c = 0; c < kC; ++c) O_i[c] *= alpha;
      m_i = S_ij;
    }
    // S_ij - m_i <= 0, so P_ij <= 1 and neither P_ij nor the sums can overflow. expf, not exp2f
    // with log2(e) folded into the scale (FlashAttention's trick, one FFMA + one MUFU.EX2): at
    // most two exponentials per key sit next to a 5-shuffle reduction here, so we keep natural
    // units, the ones the README's worked example is written in.
    const float P_ij = expf(S_ij - m_i);
    l_i += P_ij;
    for (int c = 0; c < kC; ++c) {
      const int d = lane + 32 * c;
      if (d < D) O_i[c] += P_ij * V_j[d];
    }
    // END SOLUTION
  }

  // Normalize once. A row that saw no key has m_i = -inf, l_i = 0 and O_i = 0: it writes O = 0
  // and LSE = +inf (the convention of common/host/problem.h) instead of 0 / 0.
  const bool seen = m_i > -kInf;
  const float inv_l = seen ? 1.0f / l_i : 0.0f;
  for (int c = 0; c < kC; ++c) {
    const int d = lane + 32 * c;
    if (d < D) o[row * D + d] = O_i[c] * inv_l;
  }
  if (lane == 0) lse[row] = seen ? m_i + logf(l_i) : kInf;  // log(sum_j exp(S_ij)) = m_i + log(l_i)
}

template <int kC>
void launch(const fa::Problem& p, const void* q, const void* k, const void* v, void* o, float* lse,
            cudaStream_t stream) {
  const std::int64_t blocks = (p.lse_elems() + kWarps - 1) / kWarps;
  online_softmax_kernel<kC><<<fa::cuda::blocks_1d(blocks, "03_online_softmax"), kThreads, 0, stream>>>(
      static_cast<const float*>(q), static_cast<const float*>(k), static_cast<const float*>(v),
      static_cast<float*>(o), lse, p, p.scale());
  FA_CHECK_LAUNCH();
}

}  // namespace

const fa::Chapter& chapter() {
  static const fa::Chapter c{
      .support = {.chapter = "03_online_softmax", .dtypes = {fa::Dtype::f32}, .head_dims = {}, .max_head_dim = 256},
      .forward = forward,
      .test_head_dims = {7, 8, 32, 40, 64, 72, 80, 96, 112, 128, 160, 192, 256},
      .defaults = fa::default_problem(fa::Dtype::f32)};
  return c;
}

void forward(const fa::Problem& p, const void* q, const void* k, const void* v, void* o, float* lse,
             cudaStream_t stream) {
  fa::check_forward_args(chapter().support, p, q, k, v, o, lse);
  switch ((p.head_dim + 31) / 32) {  // columns per lane: head_dim <= 32, 64, ..., 256
    case 1: return launch<1>(p, q, k, v, o, lse, stream);
    case 2: return launch<2>(p, q, k, v, o, lse, stream);
    case 3: return launch<3>(p, q, k, v, o, lse, stream);
    case 4: return launch<4>(p, q, k, v, o, lse, stream);
    case 5: return launch<5>(p, q, k, v, o, lse, stream);
    case 6: return launch<6>(p, q, k, v, o, lse, stream);
    case 7: return launch<7>(p, q, k, v, o, lse, stream);
    default: return launch<8>(p, q, k, v, o, lse, stream);  // head_dim <= 256 was checked above
  }
}

}  // namespace online_softmax
