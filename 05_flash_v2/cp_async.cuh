// cp.async (sm_80+) and the fast exp2, as chapter 05 uses them. Candidates for common/ once a
// later chapter needs them unchanged.
#pragma once

#include <cstdint>

namespace flash_v2 {

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

// 2^x in one MUFU.EX2 instruction (relative error ~2^-22; denormal results flush to 0, far below
// what a softmax term can matter). exp2f() without --use_fast_math adds range fix-ups around it.
__device__ __forceinline__ float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

}  // namespace flash_v2
