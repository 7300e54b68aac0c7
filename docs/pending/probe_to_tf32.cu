// Every 32-bit pattern through cvt.rna.tf32.f32 and through the integer rounding
// (bits + 0x1000) & 0xffffe000 that exp_05_a.patch makes to_tf32 (common/device/mma.cuh):
// counts the non-NaN inputs where the two differ and prints the first few.
//   nvcc -arch=sm_90 -o probe_to_tf32 probe_to_tf32.cu && ./probe_to_tf32
#include <cstdio>
#include <cstdint>

__device__ unsigned long long g_diff, g_nan_diff;
__device__ unsigned g_first[8];

__global__ void probe(std::uint32_t hi) {
  const std::uint32_t x = (hi << 24) | (blockIdx.x * blockDim.x + threadIdx.x);
  const float f = __uint_as_float(x);
  std::uint32_t cvt;
  asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(cvt) : "f"(f));
  const std::uint32_t mine = (x + 0x1000u) & 0xffffe000u;
  if (cvt != mine) {
    if (f != f) {
      atomicAdd(&g_nan_diff, 1ull);
    } else {
      const unsigned long long n = atomicAdd(&g_diff, 1ull);
      if (n < 8) g_first[n] = x;
    }
  }
}

int main() {
  for (std::uint32_t hi = 0; hi < 256; ++hi) probe<<<(1 << 24) / 256, 256>>>(hi);
  unsigned long long diff = 0, nan_diff = 0;
  unsigned first[8] = {};
  cudaMemcpyFromSymbol(&diff, g_diff, sizeof diff);
  cudaMemcpyFromSymbol(&nan_diff, g_nan_diff, sizeof nan_diff);
  cudaMemcpyFromSymbol(first, g_first, sizeof first);
  if (cudaGetLastError() != cudaSuccess) return std::printf("CUDA error\n"), 1;
  std::printf("non-NaN inputs where the two differ: %llu; NaN inputs where they differ: %llu\n", diff, nan_diff);
  for (unsigned long long i = 0; i < diff && i < 8; ++i) std::printf("  0x%08x\n", first[i]);
  return diff == 0 ? 0 : 1;
}
