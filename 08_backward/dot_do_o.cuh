// The backward's preprocessing, shared by the fp32 kernel (backward.cu) and the tensor-core one
// (backward_tc.cu): D_i = rowsum(dO_i o O_i) in fp32, and the fp32 dQ the main kernel adds into
// set to 0.
//
// dS_ij = P_ij o (dP_ij - D_i) needs rowsum(P_i o dP_i) over every key of row i, which no single
// key tile has; it equals rowsum(dO_i o O_i) (README: Algorithm), one D-long dot product per row.
#pragma once

#include <cstdint>

#include "common/cuda/cuda_check.h"
#include "common/device/grid.cuh"
#include "common/host/problem.h"  // Strides, row_offset
#include "common/device/warp_reduce.cuh"

namespace backward {

constexpr int kPreWarps = 8;  // rows per block: one warp each

// T: float, __half or __nv_bfloat16 (O and dO as the forward wrote them). kBshd: O and dO are
// [B, Sq, H, D] (strides s, H = heads; f16/bf16 only).
template <class T, bool kBshd = false>
__global__ void __launch_bounds__(32 * kPreWarps)
    dot_do_o_kernel(const T* __restrict__ o,     // [B, H, Sq, D] global
                    const T* __restrict__ dout,  // [B, H, Sq, D] global
                    float* __restrict__ D_row,   // [B, H, Sq] global
                    float* __restrict__ dq,      // [B, H, dq_rows, dq_cols] global, fp32: rows < Sq zeroed here
                    std::int64_t rows, int D, int dq_cols, int Sq, int dq_rows, fa::Strides s, int heads) {
  const std::int64_t row = blockIdx.x * std::int64_t{kPreWarps} + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= rows) return;  // the whole warp leaves: the shuffles below always see 32 lanes
  // dq_rows >= Sq and dq_cols >= D: the tensor-core kernel pads to whole query tiles and its tile width
  float* dq_row = dq + (row / Sq * dq_rows + row % Sq) * dq_cols;
  const std::int64_t at = kBshd ? fa::row_offset(s, heads, row / Sq, row % Sq) : row * D;  // row's first element
  float acc = 0.0f;
  for (int c = lane; c < D; c += 32) acc = fmaf(static_cast<float>(dout[at + c]), static_cast<float>(o[at + c]), acc);
  for (int c = lane; c < dq_cols; c += 32) dq_row[c] = 0.0f;
  acc = fa::cuda::warp_sum(acc);
  if (lane == 0) D_row[row] = acc;
}

// bshd: O and dO as [B, Sq, H, D] with these strides, H = heads (null: [B, H, Sq, D]).
template <class T>
void dot_do_o(const T* o, const T* dout, float* D_row, float* dq, std::int64_t rows, int D, int dq_cols, int Sq,
              int dq_rows, cudaStream_t stream, const fa::Strides* bshd = nullptr, int heads = 1) {
  const unsigned blocks = fa::cuda::blocks_1d((rows + kPreWarps - 1) / kPreWarps, "08_backward");
  if (bshd)
    dot_do_o_kernel<T, true><<<blocks, 32 * kPreWarps, 0, stream>>>(o, dout, D_row, dq, rows, D, dq_cols, Sq, dq_rows,
                                                                    *bshd, heads);
  else
    dot_do_o_kernel<T><<<blocks, 32 * kPreWarps, 0, stream>>>(o, dout, D_row, dq, rows, D, dq_cols, Sq, dq_rows, {}, 1);
  FA_CHECK_LAUNCH();
}

}  // namespace backward
