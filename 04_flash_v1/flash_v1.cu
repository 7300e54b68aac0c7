// Chapter 04 -- FlashAttention-1: Algorithm 1 of Dao et al. (2022), written out as the paper has it.
//
// New since 03 (diff -u 03_online_softmax/online_softmax.cu 04_flash_v1/flash_v1.cu):
//   * Tiles. A block stages K_j, V_j (Bc rows each) in shared memory once and reuses them for every
//     query tile Q_i (Br rows) of its (batch, head): each K/V element read from global memory now
//     serves Sq rows instead of one.
//   * The loop order of the paper: K_j, V_j in the OUTER loop (j = 1..Tc), Q_i in the INNER loop
//     (i = 1..Tr). So a row's running statistics cannot stay in registers across j: O_i, l_i, m_i
//     go back to global memory after every (i, j) step and are read again at the next j. l and m
//     live in an O(N) workspace; O_i is stored normalized (divided by l_i) at every step.
//   * S_ij = Q_i K_j^T is a register-tiled product (16 x 16 threads, 4 x 4 elements each, as in
//     02's kernels); row max and row sum take 4 shuffles among the 16 threads of a row.
//   * Br and Bc come from the paper's rule on the shared memory of the GPU (block_sizes.h).
//   * Causal: (i, j) tile pairs with no visible element are skipped; only diagonal tiles mask.
//   * One block per (batch, head), as FlashAttention-1's implementation: grid = B * H.
// Expected effect: K and V traffic drops by a factor ~Br, but every step re-reads and re-writes
// O_i, l_i, m_i, and B * H blocks leave most SMs idle when B * H is small (chapter 05 fixes both).
// Run:  ./build/04_flash_v1/04_flash_v1 --seqlen 1024 --head-dim 64
// The CPU model (model.cpp) is Algorithm 1 with the same tiles and loops, on the host.

#include <algorithm>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>

#include "04_flash_v1/block_sizes.h"
#include "04_flash_v1/flash_v1.h"
#include "common/cuda/cuda_check.h"
#include "common/device/launch.h"
#include "common/device/tiles.h"
#include "common/cuda/device_memory.h"
#include "common/device/warp_reduce.cuh"

namespace flash_v1 {
namespace {

constexpr int kThreads = 256;                // 16 x 16 threads: (ty, tx)
constexpr int kMaxPer = kMaxTile / 16;       // rows (columns) of a 64-tile owned by one thread
constexpr float kInf = std::numeric_limits<float>::infinity();

using fa::cuda::ceil_div;  // common/device/tiles.h


// Copies rows [row0, row0 + n_rows) of a row-major (rows, d) global matrix into a (n_rows, D)
// smem tile with row stride `stride`, zero-filling rows >= rows and columns >= d.
// Consecutive threads read consecutive floats of a row: the loads coalesce.
template <int D>
__device__ void load_tile(float* tile, int stride, const float* m, int rows, int d, int row0, int n_rows) {
  for (int n = threadIdx.x; n < n_rows * D; n += kThreads) {
    const int r = n / D, c = n % D;
    tile[r * stride + c] = row0 + r < rows && c < d ? m[std::int64_t{row0 + r} * d + c] : 0.0f;
  }
}

// One block per (batch, head): blockIdx.x = b * H + h. Thread (ty, tx) owns rows ty + 16r of
// Q_i, S_ij, P_ij and O_i (r < Br/16), columns tx + 16c of S_ij (c < Bc/16) and columns tx + 16e
// of O_i (e < D/16). D is the padded head dim; p.head_dim <= D columns are real.
template <int D>
__global__ void __launch_bounds__(kThreads) flash_v1_kernel(const float* q,  // [B, H, Sq, d] global
                                                            const float* k,  // [B, Hkv, Sk, d] global
                                                            const float* v,  // [B, Hkv, Sk, d] global
                                                            float* o,        // [B, H, Sq, d] global
                                                            float* l,        // [B, H, Sq] global workspace
                                                            float* m,        // [B, H, Sq] global workspace
                                                            float* lse,      // [B, H, Sq] global
                                                            fa::Problem p, float scale, int Br, int Bc) {
  constexpr int kStrideQK = D + 1;  // odd row stride: the 16 rows read at one column hit 16 banks
  const int stride_P = Bc + 16;     // = 16 (mod 32): rows ty and ty + 1 of a warp write opposite bank halves
  extern __shared__ float smem[];
  float* Q_s = smem;                     // (Br, D+1) smem
  float* K_s = Q_s + Br * kStrideQK;     // (Bc, D+1) smem
  float* V_s = K_s + Bc * kStrideQK;     // (Bc, D) smem
  float* P_s = V_s + Bc * D;             // (Br, Bc+16) smem

  const int d = p.head_dim, Sq = p.seqlen_q, Sk = p.seqlen_k;
  const std::int64_t bh = blockIdx.x;
  const std::int64_t kv_bh = p.kv_index(bh);
  const float* Q = q + bh * Sq * d;     // (Sq, d) global
  const float* K = k + kv_bh * Sk * d;  // (Sk, d) global
  const float* V = v + kv_bh * Sk * d;  // (Sk, d) global
  float* O = o + bh * Sq * d;           // (Sq, d) global
  float* l_g = l + bh * Sq;             // (Sq) global
  float* m_g = m + bh * Sq;             // (Sq) global
  const int ty = threadIdx.x / 16, tx = threadIdx.x % 16;
  const int rows = Br / 16, cols = Bc / 16;

  // Line 2: O = 0, l = 0, m = -inf in global memory.
  for (int n = threadIdx.x; n < Sq * d; n += kThreads) O[n] = 0.0f;
  for (int n = threadIdx.x; n < Sq; n += kThreads) {
    l_g[n] = 0.0f;
    m_g[n] = -kInf;
  }
  __syncthreads();  // the initial O, l, m are visible to the whole block before any step reads them

  const int Tr = ceil_div(Sq, Br), Tc = ceil_div(Sk, Bc);
  for (int j = 0; j < Tc; ++j) {  // line 5
    const int j0 = j * Bc;
    __syncthreads();  // every thread is done with K_{j-1}, V_{j-1} before they are overwritten
    load_tile<D>(K_s, kStrideQK, K, Sk, d, j0, Bc);  // line 6
    load_tile<D>(V_s, D, V, Sk, d, j0, Bc);

    for (int i = 0; i < Tr; ++i) {  // line 7
      const int i0 = i * Br;
      const int i_last = min(i0 + Br, Sq) - 1, j_last = min(j0 + Bc, Sk) - 1;
      // Causal: if the last row of Q_i cannot see the first key of K_j, nothing in the tile can.
      if (p.causal && !fa::causal_visible(i_last, j0, Sq, Sk)) continue;  // same for the whole block
      // If the first row sees the last key, every element is visible: only diagonal tiles mask.
      const bool diagonal = p.causal && !fa::causal_visible(i0, j_last, Sq, Sk);

      // Line 8: load Q_i to smem, and m_i, l_i of my rows to registers (O_i follows at line 12).
      load_tile<D>(Q_s, kStrideQK, Q, Sq, d, i0, Br);
      float m_i[kMaxPer], l_i[kMaxPer];
#pragma unroll
      for (int r = 0; r < kMaxPer; ++r) {
        const int row = i0 + ty + 16 * r;
        const bool real = r < rows && row < Sq;
        m_i[r] = real ? m_g[row] : -kInf;
        l_i[r] = real ? l_g[row] : 0.0f;
      }
      __syncthreads();  // Q_i (and on the first step K_j, V_j) is in smem before anyone reads it

      // Line 9: S_ij = scale * Q_i K_j^T, a (Br, Bc) tile; 4 x 4 of it in my registers.
      float S_ij[kMaxPer][kMaxPer] = {};
      // Unroll 4, not D: enough independent loads in flight; a full unroll made ptxas spill.
#pragma unroll 4
      for (int x = 0; x < D; ++x) {
        float a[kMaxPer], b[kMaxPer];
#pragma unroll
        for (int r = 0; r < kMaxPer; ++r) a[r] = r < rows ? Q_s[(ty + 16 * r) * kStrideQK + x] : 0.0f;
#pragma unroll
        for (int c = 0; c < kMaxPer; ++c) b[c] = c < cols ? K_s[(tx + 16 * c) * kStrideQK + x] : 0.0f;
#pragma unroll
        for (int r = 0; r < kMaxPer; ++r)
#pragma unroll
          for (int c = 0; c < kMaxPer; ++c) S_ij[r][c] += a[r] * b[c];
      }

      // Lines 10-11, row by row: m~_ij = rowmax(S_ij), P~_ij = exp(S_ij - m~_ij), l~_ij = rowsum(P~_ij),
      // m_new = max(m_i, m~_ij), l_new = e^(m_i - m_new) l_i + e^(m~_ij - m_new) l~_ij.
      float beta[kMaxPer], inv_l_new[kMaxPer];
      // BEGIN SOLUTION: Algorithm 1's lines 10-11 for this thread's rows: the tile's masked, unnormalized P~_ij for the next product, and the merged statistics line 12 needs (README: Walkthrough)
#pragma unroll
      for (int r = 0; r < kMaxPer; ++r) {
        if (r >= rows) continue;
        const int row = i0 + ty + 16 * r;
        float m_tilde = -kInf;
#pragma unroll
        for (int c = 0; c < kMaxPer; ++c) {
          const int col = j0 + tx + 16 * c;
          const bool seen = c < cols && col < Sk && (!diagonal || fa::causal_visible(row, col, Sq, Sk));
          S_ij[r][c] = seen ? scale * S_ij[r][c] : -kInf;  // exp(-inf) = 0: the key drops out
          m_tilde = fmaxf(m_tilde, S_ij[r][c]);
        }
        m_tilde = fa::cuda::warp_max<16>(m_tilde);  // the 16 lanes tx = 0..15 of this row
        const float m_new = fmaxf(m_i[r], m_tilde);
        // A row that has seen no key yet has m = -inf; subtracting 0 instead gives exp(-inf) = 0,
        // not exp(-inf - -inf) = NaN. Every other row subtracts a max: all exponents are <= 0.
        const float m_tilde_ref = m_tilde == -kInf ? 0.0f : m_tilde;
        const float m_ref = m_new == -kInf ? 0.0f : m_new;
        float l_tilde = 0.0f;
#pragma unroll
        for (int c = 0; c < kMaxPer; ++c) {
          S_ij[r][c] = expf(S_ij[r][c] - m_tilde_ref);  // now P~_ij
          l_tilde += S_ij[r][c];
          if (c < cols) P_s[(ty + 16 * r) * stride_P + tx + 16 * c] = S_ij[r][c];
        }
        l_tilde = fa::cuda::warp_sum<16>(l_tilde);
        const float alpha = expf(m_i[r] - m_ref);  // moves l_i and O_i from max m_i to m_new
        beta[r] = expf(m_tilde - m_ref);           // moves P~_ij from max m~_ij to m_new
        const float l_new = alpha * l_i[r] + beta[r] * l_tilde;
        inv_l_new[r] = l_new > 0.0f ? 1.0f / l_new : 0.0f;  // no key seen yet: O_i stays 0, not 0/0
        // Line 13 (all threads of the row hold the same values; one writes). Every read of line 8
        // came before the __syncthreads above, so no thread of this step still needs the old ones.
        if (tx == 0 && row < Sq) {
          l_g[row] = l_new;
          m_g[row] = m_new;
        }
        l_i[r] *= alpha;  // diag(l_i) e^(m_i - m_new): the weight of the old O_i
      }
      // END SOLUTION
      __syncthreads();  // all of P~_ij is in smem before any row multiplies it by V_j

      // Line 12: O_i <- diag(l_new)^-1 (diag(l_i) e^(m_i - m_new) O_i + e^(m~_ij - m_new) P~_ij V_j).
      // BEGIN SOLUTION: PV = P~_ij V_j (P_s times V_s) for my rows and columns, then line 12 on O in global memory
      float PV[kMaxPer][D / 16] = {};  // (Br, D) tile of P~_ij V_j; 4 x D/16 of it in my registers
      for (int c = 0; c < Bc; ++c) {
        float a[kMaxPer];
#pragma unroll
        for (int r = 0; r < kMaxPer; ++r) a[r] = r < rows ? P_s[(ty + 16 * r) * stride_P + c] : 0.0f;
#pragma unroll
        for (int e = 0; e < D / 16; ++e) {
          const float b = V_s[c * D + tx + 16 * e];  // 16 consecutive words: no bank conflict
#pragma unroll
          for (int r = 0; r < kMaxPer; ++r) PV[r][e] += a[r] * b;
        }
      }
#pragma unroll
      for (int r = 0; r < kMaxPer; ++r) {
        const int row = i0 + ty + 16 * r;
        if (r >= rows || row >= Sq) continue;
#pragma unroll
        for (int e = 0; e < D / 16; ++e) {
          const int col = tx + 16 * e;
          if (col >= d) continue;
          float& O_i = O[std::int64_t{row} * d + col];  // only this thread reads or writes it
          O_i = inv_l_new[r] * (l_i[r] * O_i + beta[r] * PV[r][e]);
        }
      }
      // END SOLUTION
    }
  }
  __syncthreads();  // the last l and m writes are visible before other threads read them

  // LSE = log(sum_j exp(S_ij)) = m + log(l); a row that saw no key keeps O = 0 and gets +inf.
  for (int n = threadIdx.x; n < Sq; n += kThreads)
    lse[bh * Sq + n] = l_g[n] > 0.0f ? m_g[n] + logf(l_g[n]) : kInf;
}

// Br, Bc from the paper's rule on this GPU's shared memory (block_sizes.h), then one launch.
template <int D>
void launch(const fa::Problem& p, const void* q, const void* k, const void* v, void* o, float* lse,
            cudaStream_t stream) {
  int device = 0, smem_optin = 0;
  FA_CUDA_CHECK(cudaGetDevice(&device));
  FA_CUDA_CHECK(cudaDeviceGetAttribute(&smem_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  const BlockSizes b = block_sizes(smem_optin, D);  // M = smem_optin / 4 floats
  const std::size_t smem = smem_floats(b.Br, b.Bc, D) * sizeof(float);
  if (smem > static_cast<std::size_t>(smem_optin))
    throw std::invalid_argument("04_flash_v1: needs " + std::to_string(smem) +
                                " bytes of shared memory per block; this GPU allows " + std::to_string(smem_optin));
  // A block may use more than 48 KB of dynamic shared memory only if the kernel opts in.
  fa::cuda::allow_shared_memory(flash_v1_kernel<D>, static_cast<int>(smem));

  const std::int64_t rows = p.lse_elems();  // B * H * Sq
  float* l = static_cast<float*>(           // [B, H, Sq] global, then m: [B, H, Sq] global
      fa::cuda::workspace(2 * rows * sizeof(float), "04_flash_v1: l and m (2*B*H*Sq floats)"));
  const unsigned blocks = static_cast<unsigned>(std::int64_t{p.batch} * p.heads);  // one per (b, h)
  flash_v1_kernel<D><<<blocks, kThreads, smem, stream>>>(
      static_cast<const float*>(q), static_cast<const float*>(k), static_cast<const float*>(v),
      static_cast<float*>(o), l, l + rows, lse, p, p.scale(), b.Br, b.Bc);
  FA_CHECK_LAUNCH();
}

}  // namespace

const fa::Chapter& chapter() {
  static const fa::Chapter c{
      .support = {.chapter = "04_flash_v1", .dtypes = {fa::Dtype::f32}, .head_dims = {}, .max_head_dim = 256},
      .forward = forward,
      .test_head_dims = {7, 8, 32, 40, 64, 72, 80, 96, 112, 128, 160, 192, 256},
      .defaults = fa::default_problem(fa::Dtype::f32)};
  return c;
}

void forward(const fa::Problem& p, const void* q, const void* k, const void* v, void* o, float* lse,
             cudaStream_t stream) {
  fa::check_forward_args(chapter().support, p, q, k, v, o, lse);
  switch (padded_head_dim(p.head_dim)) {  // head_dim <= 256 was checked above
    case 32: return launch<32>(p, q, k, v, o, lse, stream);
    case 64: return launch<64>(p, q, k, v, o, lse, stream);
    case 96: return launch<96>(p, q, k, v, o, lse, stream);
    case 128: return launch<128>(p, q, k, v, o, lse, stream);
    case 192: return launch<192>(p, q, k, v, o, lse, stream);
    default: return launch<256>(p, q, k, v, o, lse, stream);
  }
}

}  // namespace flash_v1
