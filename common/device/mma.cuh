// The tensor-core instructions, one thin wrapper each (sm_80+): ldmatrix, mma.sync, the
// float -> fp16/bf16 pair conversion that feeds P back into the tensor cores, and the 16-byte
// cp.async taking a 32-bit shared address. Taught in chapter 06; used by 06-10. At the
// end, the TF32 mma and the 3xTF32 split that 05's and 08's fp32 kernels up to head dim 128 compute with.
//
// Fragment layouts (PTX ISA, "Matrix Fragments for mma.m16n8k16 with floating point type").
// A warp holds each operand spread over its 32 lanes; g = lane / 4 (groupID) and t = lane % 4
// (threadID_in_group). Each .b32 register holds two 16-bit elements, the lower column first.
//
//   A (16x16, row-major)  a0: (g,   2t..2t+1)    a1: (g+8, 2t..2t+1)
//                         a2: (g,   2t+8..2t+9)  a3: (g+8, 2t+8..2t+9)
//   B (16x8, "col")       b0: (k = 2t..2t+1,   n = g)
//                         b1: (k = 2t+8..2t+9, n = g)
//   C, D (16x8, fp32)     c0, c1: (g, 2t), (g, 2t+1)      c2, c3: (g+8, 2t), (g+8, 2t+1)
//
// ldmatrix.x4 loads four 8x8 matrices of 16-bit elements; lanes 8i .. 8i+7 give the addresses of
// the 8 rows (16 bytes each) of matrix i, and register ri of lane l receives row l / 4, elements
// 2 (l % 4) and 2 (l % 4) + 1 of matrix i: exactly the (g, 2t..2t+1) shape of a0 or c0/c1. With
// .trans, lane l receives column l / 4, rows 2 (l % 4) and 2 (l % 4) + 1 instead: the (k = 2t, n = g)
// shape of b0, read from a row-major matrix whose rows are k.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>
#include <type_traits>

namespace fa::cuda {

// Shared-memory addresses are passed as 32-bit numbers (the .shared window), as ldmatrix wants.
__device__ __forceinline__ std::uint32_t smem_u32(const void* p) {
  return static_cast<std::uint32_t>(__cvta_generic_to_shared(p));
}

// 05's cp_async_16 with the destination as a .shared address: copies 16 bytes global -> shared in
// the background; when `valid` is false it reads nothing and writes 16 zero bytes.
__device__ __forceinline__ void cp_async_16(std::uint32_t dst, const void* src, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(valid ? 16 : 0));
}

// Named barriers (ids 1..15; __syncthreads is barrier 0) for groups of warps that take turns:
// barrier_sync<id> waits until `threads` threads have reached barrier `id` (counting itself), either
// waiting there or passing with barrier_arrive, which never waits. Memory accesses before either
// are visible after the sync to the threads that waited.
template <int kId>
__device__ __forceinline__ void barrier_sync(int threads) {
  asm volatile("bar.sync %0, %1;\n" ::"n"(kId), "r"(threads) : "memory");
}
// The same with the id in a register: a group that picks its own barrier at run time.
__device__ __forceinline__ void barrier_sync(int id, int threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
template <int kId>
__device__ __forceinline__ void barrier_arrive(int threads) {
  asm volatile("bar.arrive %0, %1;\n" ::"n"(kId), "r"(threads) : "memory");
}
__device__ __forceinline__ void barrier_arrive(int id, int threads) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

// Four 8x8 matrices of 16-bit elements, shared memory -> registers.
__device__ __forceinline__ void ldmatrix_x4(std::uint32_t (&r)[4], std::uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

// The same, each matrix transposed on the way.
__device__ __forceinline__ void ldmatrix_x4_trans(std::uint32_t (&r)[4], std::uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

// D = A B + D for a 16x16 A and a 16x8 B of type T (half or bf16), accumulated in fp32.
template <class T>
__device__ __forceinline__ void mma_16816(float (&d)[4], const std::uint32_t (&a)[4], std::uint32_t b0,
                                          std::uint32_t b1) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    asm(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
        "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  } else {
    static_assert(std::is_same_v<T, __half>, "fp16 or bf16");
    asm(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
        "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
}

// Two floats -> one register of two T (round to nearest even; one cvt.rn.{bf16x2,f16x2}.f32).
// T = __nv_fp8_e4m3 (chapter 09's FP8 step): two E4M3 bytes in the register's low half, lo's
// first, saturating at 448 (cvt.rn.satfinite.e4m3x2.f32).
template <class T>
__device__ __forceinline__ std::uint32_t pack2(float lo, float hi) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<const std::uint32_t*>(&v);
  } else if constexpr (std::is_same_v<T, __nv_fp8_e4m3>) {
    return __nv_cvt_float2_to_fp8x2(make_float2(lo, hi), __NV_SATFINITE, __NV_E4M3);
  } else {
    const __half2 v = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<const std::uint32_t*>(&v);
  }
}

// Two floats stored at `at` as two T (pack2) or, where T is float, as they are: one 4- or 8-byte
// store (at: even element, so aligned to it).
template <class T>
__device__ __forceinline__ void store2(T* at, float lo, float hi) {
  if constexpr (std::is_same_v<T, float>) *reinterpret_cast<float2*>(at) = make_float2(lo, hi);
  else *reinterpret_cast<std::uint32_t*>(at) = pack2<T>(lo, hi);
}

// TF32, the tensor cores' 32-bit input: an fp32 value with 10 of its 23 mantissa bits. One element
// per register in mma.m16n8k8 (PTX ISA, "Matrix Fragments for mma.m16n8k8" with .tf32; g and t as
// above):
//
//   A (16x8, row-major)  a0: (g, t)   a1: (g+8, t)   a2: (g, t+4)   a3: (g+8, t+4)
//   B (8x8, "col")       b0: (k = t, n = g)          b1: (k = t+4, n = g)
//   C, D (16x8, fp32)    as for m16n8k16
//
// 3xTF32 (CUTLASS's OpMultiplyAddFastF32, what PyTorch's fp32 memory-efficient attention runs on
// sm_80 and newer): each operand is split as x = big + small, big = x rounded to TF32 and small
// = x - big (exact in fp32; the mma reads its top 10 mantissa bits), and a b is taken as
// big_a big_b + big_a small_b + small_a big_b. What is lost, small_a small_b and small's low
// bits, is about 2^-21 of a b against an fp32 FFMA's 2^-24, at a third of the TF32 rate. Rounding
// small to TF32 as well (one cvt more per element) runs at 0.86-0.90x the speed in 05's tf32x3
// step on an H100; both pass the same tests.
struct Tf32Pair {
  std::uint32_t big, small;
};

// x rounded to TF32 (to nearest, ties away from zero), as a .b32 register for mma: half of the
// last kept bit (0x1000) added to x's bits, a carry rounding the magnitude up, then the 13 dropped
// bits cleared. Two integer instructions; cvt.rna.tf32.f32 gives the same bits for every non-NaN
// x but compiles to four on sm_90 (an add, a mask, and a compare and select that keep a NaN a
// NaN), and the split below is most of the 3xTF32 kernels' non-mma work. A NaN x may come out
// as a number here, but never alone: split_tf32's small part, x - big, is then NaN.
__device__ __forceinline__ std::uint32_t to_tf32(float x) { return (__float_as_uint(x) + 0x1000u) & 0xffffe000u; }

__device__ __forceinline__ Tf32Pair split_tf32(float x) {
  const std::uint32_t big = to_tf32(x);
  return {big, __float_as_uint(x - __uint_as_float(big))};  // exact in fp32; the mma truncates it
}

// D = A B + D for a 16x8 A and an 8x8 B in TF32, accumulated in fp32.
__device__ __forceinline__ void mma_1688_tf32(float (&d)[4], std::uint32_t a0, std::uint32_t a1, std::uint32_t a2,
                                              std::uint32_t a3, std::uint32_t b0, std::uint32_t b1) {
  asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 "
      "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// D = A B + D in 3xTF32: the two small products first, so that they are not lost against a
// large accumulator before the big one lands.
__device__ __forceinline__ void mma_1688_3xtf32(float (&d)[4], const Tf32Pair (&a)[4], Tf32Pair b0, Tf32Pair b1) {
  mma_1688_tf32(d, a[0].small, a[1].small, a[2].small, a[3].small, b0.big, b1.big);
  mma_1688_tf32(d, a[0].big, a[1].big, a[2].big, a[3].big, b0.small, b1.small);
  mma_1688_tf32(d, a[0].big, a[1].big, a[2].big, a[3].big, b0.big, b1.big);
}

// The transposed tile, bit for bit: D^T = B^T A^T + D^T, where mma_1688_3xtf32 computed D = A B + D
// with this call's B^T as its A. The same three products in the same order (the small part of
// the other call's A first), over the same 8 columns: each product of two TF32 values is exact
// in fp32 and an mma adds its k terms the same way in any order, so 08's fp32 backward gets
// S_ij^T = K_j Q_i^T with the bits of 05's S_ij = Q_i K_j^T (its tests check it with large
// scores). 05 reads k = t, t + 4 as columns 2t, 2t + 1 of the 8 and 08 as t, t + 4: other
// positions, the same bits (checked on an H100).
__device__ __forceinline__ void mma_1688_3xtf32_transposed(float (&d)[4], const Tf32Pair (&a)[4], Tf32Pair b0,
                                                           Tf32Pair b1) {
  mma_1688_tf32(d, a[0].big, a[1].big, a[2].big, a[3].big, b0.small, b1.small);
  mma_1688_tf32(d, a[0].small, a[1].small, a[2].small, a[3].small, b0.big, b1.big);
  mma_1688_tf32(d, a[0].big, a[1].big, a[2].big, a[3].big, b0.big, b1.big);
}

}  // namespace fa::cuda
