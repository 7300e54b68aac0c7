// Warp-wide reductions with register shuffles (introduced in chapter 02; reused from 03 on).
// After log2(kWidth) butterfly steps every lane holds the result of its group of kWidth
// consecutive lanes: no shared memory and no __syncthreads, because the lanes of a warp exchange
// registers directly. kWidth = 32 reduces the whole warp (02, 03); chapter 04 reduces the 16
// lanes that share a row of S_ij (kWidth = 16). xor offsets below kWidth never leave the group.
#pragma once

namespace fa::cuda {

template <int kWidth = 32>
__device__ __forceinline__ float warp_max(float x) {
  static_assert(kWidth >= 1 && kWidth <= 32 && (kWidth & (kWidth - 1)) == 0, "a power of two <= 32");
  for (int offset = kWidth / 2; offset > 0; offset /= 2) x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, offset));
  return x;
}

template <int kWidth = 32>
__device__ __forceinline__ float warp_sum(float x) {
  static_assert(kWidth >= 1 && kWidth <= 32 && (kWidth & (kWidth - 1)) == 0, "a power of two <= 32");
  for (int offset = kWidth / 2; offset > 0; offset /= 2) x += __shfl_xor_sync(0xffffffffu, x, offset);
  return x;
}

}  // namespace fa::cuda
