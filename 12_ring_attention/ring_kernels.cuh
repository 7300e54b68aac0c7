// Chapter 12's own kernels: the ring's bookkeeping around chapter 09's and 11's calls. Nothing
// here attends: the LSE merge of a chunk pair's (O, LSE) into the query chunk's running result,
// the fp32 sums of the backward's parts, and the conversions at the end.
//
// Why a merge of its own: chapter 10's combine (combine_kernel) is a whole kernel over 10's split
// workspace (every piece of a row side by side, SplitParams) behind a programmatic-dependent-launch
// wait, not a device function. The merge below is 10's formula (split_plan.h, combine_row) for two
// pieces, applied as each pair arrives, so that the pieces never need to be stored together:
//   M = max(LSE_acc, LSE_p);  w_acc = e^(LSE_acc - M), w_p = e^(LSE_p - M)
//   O_acc = (w_acc O_acc + w_p O_p) / (w_acc + w_p);  LSE_acc = M + log(w_acc + w_p)
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <limits>

namespace ring_attention {

constexpr int kRowsPerBlock = 8;  // the merge: one warp a row, 8 warps a block

// One warp a row of the query chunk; lane c holds columns c, c + 32, ... O_acc is kept normalized
// (divided by its own softmax sum), as a pair's O_p is. LSE_acc = -inf: no key seen yet; a pair's
// LSE_p = +inf: its row saw no key (problem.h's convention), so it weighs nothing.
template <class T>
__global__ void __launch_bounds__(32 * kRowsPerBlock)
    merge_kernel(float* o_acc, float* lse_acc, const T* o_p, const float* lse_p, std::int64_t rows, int d) {
  // o_acc: [rows, d] fp32   lse_acc: [rows] fp32   o_p: [rows, d] T   lse_p: [rows] float
  constexpr float kInf = std::numeric_limits<float>::infinity();
  const std::int64_t row = std::int64_t{blockIdx.x} * kRowsPerBlock + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= rows) return;  // the whole warp: one row a warp
  const float a = lse_acc[row], b = lse_p[row];
  if (b == kInf) return;  // the pair saw no key for this row
  const float m = fmaxf(a, b);  // finite: b is
  const float w_acc = __expf(a - m), w_p = __expf(b - m);  // e^-inf = 0 before the first pair
  const float inv = 1.0f / (w_acc + w_p);
  for (int c = lane; c < d; c += 32) {
    float* x = o_acc + row * d + c;
    *x = (w_acc * *x + w_p * static_cast<float>(o_p[row * d + c])) * inv;
  }
  __syncwarp();  // every lane has read lse_acc[row] before lane 0 overwrites it
  if (lane == 0) lse_acc[row] = m + logf(w_acc + w_p);
}

// acc += part, element by element (a pair's fp32 dQ, dK or dV part into the sums).
__global__ void __launch_bounds__(256) accumulate_kernel(float* acc, const float* part, std::int64_t n) {
  for (std::int64_t i = std::int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n;
       i += std::int64_t{gridDim.x} * blockDim.x)
    acc[i] += part[i];
}

// The fp32 sums rounded to T, once, at the end.
template <class T>
__global__ void __launch_bounds__(256) convert_kernel(const float* acc, T* out, std::int64_t n) {
  for (std::int64_t i = std::int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n;
       i += std::int64_t{gridDim.x} * blockDim.x)
    out[i] = static_cast<T>(acc[i]);
}

// The merged LSE as the chapter API returns it: a row that saw no key has +inf (problem.h), not
// the running merge's -inf. lse_acc = -inf fills the merge's start (no key seen).
__global__ void __launch_bounds__(256) finish_lse_kernel(const float* lse_acc, float* lse, std::int64_t n) {
  constexpr float kInf = std::numeric_limits<float>::infinity();
  for (std::int64_t i = std::int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n;
       i += std::int64_t{gridDim.x} * blockDim.x)
    lse[i] = lse_acc[i] == -kInf ? kInf : lse_acc[i];
}
__global__ void __launch_bounds__(256) fill_kernel(float* x, float value, std::int64_t n) {
  for (std::int64_t i = std::int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n;
       i += std::int64_t{gridDim.x} * blockDim.x)
    x[i] = value;
}

}  // namespace ring_attention
