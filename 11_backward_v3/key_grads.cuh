// Chapter 11's dK and dV as a consumer thread ends with them: every Config::kFlushSteps steps of a
// long walk into fp32 sums in global memory (flush_after_step), back into the registers at the
// end and stored once (finish_key_grads). Both kernels (backward_v3.cuh, wide.cuh) call them.
#pragma once

#include <cstdint>

#include "11_backward_v3/block.cuh"  // Params (config.cuh), Config
#include "common/device/mma.cuh"     // store2
#include "common/device/tiles.h"     // ceil_div

namespace backward_v3 {

using namespace fa::cuda;

// A long walk's dK and dV: thread tid of consumer group w adds its accumulators (kRegs floats
// each) into its float4s of the block's sums (kRegs / 2 of them, 128 threads apart, so a warp's
// accesses are contiguous), storing them on the first flush, and zeroes the accumulators. The adds
// are the CUDA cores' fp32 adds, rounded to nearest; unflush_key_grads brings the sums back
// before the store. A key tile's sums: 2 groups x 128 threads x kD floats at most.
template <class C>
__device__ __forceinline__ float4* key_grad_sums(const Params& prm, std::int64_t kv_bh, int j, int w) {
  const std::int64_t block = kv_bh * ceil_div(prm.seqlen_k, C::Bc) + j;
  return reinterpret_cast<float4*>(prm.kv_partial) + (block * 2 + w) * (C::kD / 4) * 128;
}
template <int kRegs>
__device__ __forceinline__ void flush_key_grads(float4* sums, int tid, bool first, float (&dk)[kRegs],
                                                float (&dv)[kRegs]) {
#pragma unroll
  for (int q = 0; q < kRegs / 2; ++q) {
    float* regs = q < kRegs / 4 ? dk + 4 * q : dv + 4 * (q - kRegs / 4);
    float4 x = first ? make_float4(0.0f, 0.0f, 0.0f, 0.0f) : sums[q * 128 + tid];
    x.x += regs[0], x.y += regs[1], x.z += regs[2], x.w += regs[3];
    sums[q * 128 + tid] = x;
    regs[0] = regs[1] = regs[2] = regs[3] = 0.0f;
  }
}
template <int kRegs>
__device__ __forceinline__ void unflush_key_grads(const float4* sums, int tid, float (&dk)[kRegs], float (&dv)[kRegs]) {
#pragma unroll
  for (int q = 0; q < kRegs / 2; ++q) {
    float* regs = q < kRegs / 4 ? dk + 4 * q : dv + 4 * (q - kRegs / 4);
    const float4 x = sums[q * 128 + tid];
    regs[0] += x.x, regs[1] += x.y, regs[2] += x.z, regs[3] += x.w;
  }
}

// dK_j = scale x (the sum of dS^T Q) and dV_j, once, from a consumer thread's registers: its rows
// key0 and key0 + 8, columns col0 + 8 c + 2 t and + 1 (the accumulator layout of kRegs / 4 x 8
// columns from col0).
template <class C, int kRegs>
__device__ __forceinline__ void store_key_grads(const Params& prm, std::int64_t kv_bh, int key0, int t, int col0,
                                                const float (&dk)[kRegs], const float (&dv)[kRegs]) {
  using G = GradT<C>;           // T, or float (F32Grads)
  const int d = prm.head_dim;  // columns from d on are padding, not stored
  G *dk_g, *dv_g;               // key 0 of the slice
  std::int64_t k_row = 0, v_row = 0;  // [B, Sk, Hkv, D]: elements between keys
  if constexpr (C::kBshd) {     // [B, Sk, Hkv, D]: dK lies as K, dV as V
    const BshdParams& bp = bshd_params(prm);
    const int kv_heads = bp.heads / prm.group_size;
    const int batch = static_cast<int>(kv_bh) / kv_heads, head = static_cast<int>(kv_bh) % kv_heads;
    dk_g = static_cast<G*>(prm.dk) + batch * bp.k_strides.batch + head * bp.k_strides.head;
    dv_g = static_cast<G*>(prm.dv) + batch * bp.v_strides.batch + head * bp.v_strides.head;
    k_row = bp.k_strides.row;
    v_row = bp.v_strides.row;
  } else {  // [B, Hkv, Sk, D]: rows d apart
    dk_g = static_cast<G*>(prm.dk) + kv_bh * prm.seqlen_k * d;
    dv_g = static_cast<G*>(prm.dv) + kv_bh * prm.seqlen_k * d;
  }
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int key = key0 + 8 * h;
    if (key >= prm.seqlen_k) continue;
#pragma unroll
    for (int c = 0; c < kRegs / 4; ++c) {
      if (col0 + 8 * c >= d) continue;
      const std::int64_t at = std::int64_t{key} * d + col0 + 8 * c + 2 * t;  // [B, Hkv, Sk, D]
      const std::int64_t at_k = C::kBshd ? key * k_row + col0 + 8 * c + 2 * t : at;
      const std::int64_t at_v = C::kBshd ? key * v_row + col0 + 8 * c + 2 * t : at;
      store2(dk_g + at_k, dk[4 * c + 2 * h] * prm.scale, dk[4 * c + 2 * h + 1] * prm.scale);
      store2(dv_g + at_v, dv[4 * c + 2 * h], dv[4 * c + 2 * h + 1]);
    }
  }
}

// The end of a step of a long walk: every kFlushSteps steps dK and dV into their fp32 sums (the
// caller has waited for the step's wgmmas). And the end of the walk: the sums back, then the store.
template <class C, int kRegs>
__device__ __forceinline__ void flush_after_step(const Params& prm, std::int64_t kv_bh, int j, int w, int tid,
                                                 int step, float (&dk)[kRegs], float (&dv)[kRegs]) {
  if (prm.kv_partial != nullptr && (step + 1) % C::kFlushSteps == 0)
    flush_key_grads(key_grad_sums<C>(prm, kv_bh, j, w), tid, step + 1 == C::kFlushSteps, dk, dv);
}
template <class C, int kRegs>
__device__ __forceinline__ void finish_key_grads(const Params& prm, std::int64_t kv_bh, int j, int w, int tid,
                                                 int n_steps, int key0, int t, int col0, float (&dk)[kRegs],
                                                 float (&dv)[kRegs]) {
  if (prm.kv_partial != nullptr && n_steps >= C::kFlushSteps) unflush_key_grads(key_grad_sums<C>(prm, kv_bh, j, w), tid, dk, dv);
  store_key_grads<C>(prm, kv_bh, key0, t, col0, dk, dv);
}

}  // namespace backward_v3
