// Warp-wide reductions with register shuffles (introduced in chapter 02; reused from 03 on).
// After log2(32) = 5 butterfly steps every lane holds the result: no shared memory, no
// __syncthreads, because the 32 lanes of a warp exchange registers directly.
#pragma once

namespace fa::cuda {

__device__ __forceinline__ float warp_max(float x) {
  for (int offset = 16; offset > 0; offset /= 2) x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, offset));
  return x;
}

__device__ __forceinline__ float warp_sum(float x) {
  for (int offset = 16; offset > 0; offset /= 2) x += __shfl_xor_sync(0xffffffffu, x, offset);
  return x;
}

}  // namespace fa::cuda
