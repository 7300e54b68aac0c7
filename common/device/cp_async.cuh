// cp.async (sm_80+): copies global -> shared memory that run in the background. Taught in
// chapter 05 (K_j and V_j land while the block computes); used by 05, 06, 07, 08 and 10.
#pragma once

#include <cstdint>

namespace fa::cuda {

// Copies 16 bytes global -> shared in the background, without passing through registers; when
// `valid` is false it reads nothing and writes 16 zero bytes (the src-size operand is 0), which
// is how tiles are zero-filled past the end of a sequence or past head_dim. `.cg` caches in L2
// only: a block reads each K/V tile once, so keeping it in L1 would only evict other data.
__device__ __forceinline__ void cp_async_16(void* smem, const void* gmem, bool valid) {
  const auto dst = static_cast<std::uint32_t>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(gmem),
               "r"(valid ? 16 : 0));
}

// The same for one float (any 4-byte alignment; `.cg` allows only 16-byte copies).
__device__ __forceinline__ void cp_async_4(void* smem, const void* gmem, bool valid) {
  const auto dst = static_cast<std::uint32_t>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(dst), "l"(gmem),
               "r"(valid ? 4 : 0));
}

// Closes the group of copies issued so far by this thread.
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }

// Waits until at most `kPending` of this thread's most recent groups are still in flight. Other
// threads' copies become visible only after a __syncthreads() that follows.
template <int kPending>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending) : "memory");
}

}  // namespace fa::cuda
