// Chapter 02 -- tiled attention: the same three steps as 01, made to respect the memory system.
//
// New since 01 (diff -u 01_naive/naive.cu 02_tiled/tiled.cu):
//   * S = Q K^T and O = P V are tiled matrix products: a block stages a (64 x 16) slice of each
//     operand in shared memory with coalesced loads, and each thread accumulates a 4 x 4 tile
//     of the result in registers, so every value loaded from global memory is used 64 times.
//   * The shared tiles are stored transposed with a row stride of 66 floats: stride = 2 (mod 32)
//     spreads the stores over all 32 banks, and the reads are broadcasts or 16 consecutive words,
//     so neither side has bank conflicts (README: the Nsight Compute counters).
//   * Softmax gives each row a warp instead of a thread: lanes read consecutive keys (coalesced)
//     and combine their partial max and sum with shuffles.
// Expected effect: the two products become compute-bound instead of latency-bound; S and P
// still cost O(N^2) memory and traffic.
// Run:  ./build/02_tiled/02_tiled --seqlen 1024 --head-dim 64

#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>

#include "02_tiled/tiled.h"
#include "common/cuda/cuda_check.h"
#include "common/device/grid.cuh"
#include "common/device/tiles.h"
#include "common/cuda/device_memory.h"
#include "common/device/warp_reduce.cuh"

namespace tiled {
namespace {

constexpr int kTile = 64;           // rows and columns of the result tile of one block
constexpr int kBK = 16;             // depth of one shared-memory slice of the operands
constexpr int kThreads = 256;       // 16 x 16 threads, each owning 4 x 4 results
constexpr int kStride = kTile + 2;  // smem row stride: = 2 (mod 32) makes transposed stores conflict-free
constexpr float kInf = std::numeric_limits<float>::infinity();

using fa::cuda::ceil_div;  // common/device/tiles.h

// Stages rows [row0, row0 + 64) x columns [col0, col0 + 16) of a row-major (rows, cols) matrix
// into tile[col][row] (transposed), zero-filling outside the matrix. Consecutive threads read
// consecutive columns of a row: 16 threads share one 64-byte segment.
__device__ void load_transposed(float (&tile)[kBK][kStride], const float* m, int rows, int cols,
                                int row0, int col0) {
  for (int n = threadIdx.x; n < kTile * kBK; n += kThreads) {
    const int r = n / kBK, c = n % kBK;
    const bool inside = row0 + r < rows && col0 + c < cols;
    tile[c][r] = inside ? m[std::int64_t{row0 + r} * cols + col0 + c] : 0.0f;
  }
}

// S_ij = scale * Q_i K_j^T for one (64 x 64) tile of S; masked entries are -inf.
// grid: ceil(Sk/64) along x, by B*H*ceil(Sq/64) rows (query tile, then (b, h)) over y and z
__global__ void __launch_bounds__(kThreads) scores_kernel(const float* q,  // [B, H, Sq, D] global
                                                          const float* k,  // [B, Hkv, Sk, D] global
                                                          float* s,        // [B, H, Sq, Sk] global
                                                          fa::Problem p, float scale) {
  __shared__ float Q_s[kBK][kStride];  // (16, 64) smem: a d-slice of Q_i, transposed
  __shared__ float K_s[kBK][kStride];  // (16, 64) smem: a d-slice of K_j, transposed
  const std::int64_t row = fa::cuda::grid_row(), q_tiles = ceil_div(p.seqlen_q, kTile);
  if (row >= q_tiles * p.batch * p.heads) return;  // a spare block of the grid (common/device/grid.cuh)
  const std::int64_t bh = row / q_tiles;
  const int i0 = static_cast<int>(row % q_tiles) * kTile, j0 = blockIdx.x * kTile;
  const int ty = threadIdx.x / 16, tx = threadIdx.x % 16;  // rows ty + 16r, columns tx + 16c
  const float* Q_bh = q + bh * p.seqlen_q * p.head_dim;                 // (Sq, D) global
  const float* K_bh = k + p.kv_index(bh) * p.seqlen_k * p.head_dim;  // (Sk, D) global

  float acc[4][4] = {};  // (4, 4) registers
  for (int d0 = 0; d0 < p.head_dim; d0 += kBK) {
    // BEGIN SOLUTION: stage the d0 slices of Q_i, K_j in Q_s, K_s; add this thread's 4 x 4 products to acc
    load_transposed(Q_s, Q_bh, p.seqlen_q, p.head_dim, i0, d0);
    load_transposed(K_s, K_bh, p.seqlen_k, p.head_dim, j0, d0);
    __syncthreads();  // both slices are complete before anyone reads them
    for (int d = 0; d < kBK; ++d) {
      float a[4], b[4];
      for (int r = 0; r < 4; ++r) a[r] = Q_s[d][ty + 16 * r];  // two addresses per warp: broadcast
      for (int c = 0; c < 4; ++c) b[c] = K_s[d][tx + 16 * c];  // 16 consecutive words: no conflict
      for (int r = 0; r < 4; ++r)
        for (int c = 0; c < 4; ++c) acc[r][c] += a[r] * b[c];
    }
    __syncthreads();  // everyone is done reading before the next slice overwrites the tiles
    // END SOLUTION
  }
  for (int r = 0; r < 4; ++r) {
    for (int c = 0; c < 4; ++c) {
      const int i = i0 + ty + 16 * r, j = j0 + tx + 16 * c;
      if (i >= p.seqlen_q || j >= p.seqlen_k) continue;
      const bool seen = !p.causal || fa::causal_visible(i, j, p.seqlen_q, p.seqlen_k);
      s[(bh * p.seqlen_q + i) * p.seqlen_k + j] = seen ? scale * acc[r][c] : -kInf;
    }
  }
}

// Row-wise softmax of S in place (S becomes P) and LSE, one warp per row.
__global__ void softmax_kernel(float* s,    // [B*H*Sq, Sk] global, in: S, out: P
                               float* lse,  // [B*H*Sq] global
                               std::int64_t rows, int seqlen_k) {
  const std::int64_t row = (blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  if (row >= rows) return;  // the whole warp leaves together, so the shuffles below stay full
  float* s_row = s + row * seqlen_k;
  // BEGIN SOLUTION: the softmax of 01, the keys strided over the 32 lanes; max and sum by warp shuffles
  float m = -kInf;
  for (int j = lane; j < seqlen_k; j += 32) m = fmaxf(m, s_row[j]);
  m = fa::cuda::warp_max(m);
  if (m == -kInf) {  // the row sees no key: P = 0, LSE = +inf (see common/host/problem.h)
    for (int j = lane; j < seqlen_k; j += 32) s_row[j] = 0.0f;
    if (lane == 0) lse[row] = kInf;
    return;
  }
  float l = 0.0f;
  for (int j = lane; j < seqlen_k; j += 32) l += expf(s_row[j] - m);
  l = fa::cuda::warp_sum(l);
  const float inv_l = 1.0f / l;
  for (int j = lane; j < seqlen_k; j += 32) s_row[j] = expf(s_row[j] - m) * inv_l;
  if (lane == 0) lse[row] = m + logf(l);
  // END SOLUTION
}

// O = P V for one (64 rows x 64 head-dim columns) tile of O.
// grid: ceil(D/64) along x, by B*H*ceil(Sq/64) rows over y and z, as scores_kernel
__global__ void __launch_bounds__(kThreads) output_kernel(const float* prob,  // [B, H, Sq, Sk] global
                                                          const float* v,     // [B, Hkv, Sk, D] global
                                                          float* o,           // [B, H, Sq, D] global
                                                          fa::Problem p) {
  __shared__ float P_s[kBK][kStride];  // (16, 64) smem: 16 keys of P_i, transposed
  __shared__ float V_s[kBK][kStride];  // (16, 64) smem: 16 rows of V_j, as they are
  const std::int64_t row = fa::cuda::grid_row(), q_tiles = ceil_div(p.seqlen_q, kTile);
  if (row >= q_tiles * p.batch * p.heads) return;  // a spare block of the grid
  const std::int64_t bh = row / q_tiles;
  const int i0 = static_cast<int>(row % q_tiles) * kTile, c0 = blockIdx.x * kTile;
  const int ty = threadIdx.x / 16, tx = threadIdx.x % 16;
  const float* P_bh = prob + bh * p.seqlen_q * p.seqlen_k;              // (Sq, Sk) global
  const float* V_bh = v + p.kv_index(bh) * p.seqlen_k * p.head_dim;  // (Sk, D) global

  float acc[4][4] = {};
  for (int j0 = 0; j0 < p.seqlen_k; j0 += kBK) {
    // BEGIN SOLUTION: stage 16 keys of P_i (transposed) and V_j in P_s, V_s; add the 4 x 4 products to acc
    load_transposed(P_s, P_bh, p.seqlen_q, p.seqlen_k, i0, j0);
    for (int n = threadIdx.x; n < kBK * kTile; n += kThreads) {  // 64 threads read one V row segment
      const int jj = n / kTile, c = n % kTile;
      const bool inside = j0 + jj < p.seqlen_k && c0 + c < p.head_dim;
      V_s[jj][c] = inside ? V_bh[std::int64_t{j0 + jj} * p.head_dim + c0 + c] : 0.0f;
    }
    __syncthreads();  // both slices are complete before anyone reads them
    for (int jj = 0; jj < kBK; ++jj) {
      float a[4], b[4];
      for (int r = 0; r < 4; ++r) a[r] = P_s[jj][ty + 16 * r];
      for (int c = 0; c < 4; ++c) b[c] = V_s[jj][tx + 16 * c];
      for (int r = 0; r < 4; ++r)
        for (int c = 0; c < 4; ++c) acc[r][c] += a[r] * b[c];
    }
    __syncthreads();  // everyone is done reading before the next slice overwrites the tiles
    // END SOLUTION
  }
  for (int r = 0; r < 4; ++r) {
    for (int c = 0; c < 4; ++c) {
      const int i = i0 + ty + 16 * r, col = c0 + tx + 16 * c;
      if (i < p.seqlen_q && col < p.head_dim) o[(bh * p.seqlen_q + i) * p.head_dim + col] = acc[r][c];
    }
  }
}

}  // namespace

const fa::Chapter& chapter() {
  static const fa::Chapter c{
      .support = {.chapter = "02_tiled", .dtypes = {fa::Dtype::f32}, .head_dims = {}, .max_head_dim = 256},
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
      fa::cuda::workspace(s_elems * sizeof(float), "02_tiled: the score matrix S (B*H*Sq*Sk floats)"));
  // Rows of 64 queries of every (b, h): more than grid y's 65,535 for many heads or long sequences.
  const std::int64_t tile_rows = std::int64_t{ceil_div(p.seqlen_q, kTile)} * p.batch * p.heads;

  scores_kernel<<<fa::cuda::tiles_by_rows(ceil_div(p.seqlen_k, kTile), tile_rows, "02_tiled"), kThreads, 0,
                  stream>>>(static_cast<const float*>(q), static_cast<const float*>(k), s, p, p.scale());
  FA_CHECK_LAUNCH();
  const std::int64_t rows_per_block = kThreads / 32;
  softmax_kernel<<<fa::cuda::blocks_1d((p.lse_elems() + rows_per_block - 1) / rows_per_block, "02_tiled"),
                   kThreads, 0, stream>>>(s, lse, p.lse_elems(), p.seqlen_k);
  FA_CHECK_LAUNCH();
  output_kernel<<<fa::cuda::tiles_by_rows(ceil_div(p.head_dim, kTile), tile_rows, "02_tiled"), kThreads, 0, stream>>>(
      s, static_cast<const float*>(v), static_cast<float*>(o), p);
  FA_CHECK_LAUNCH();
}

}  // namespace tiled
