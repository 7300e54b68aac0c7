// Hopper's copy engine (sm_90a): mbarriers and TMA tile loads, taught in chapter 09 and used by
// 06 and 08 too (common/tests/test_hopper_gpu.cu checks a box's layout on its own).
//
// A TMA load copies a box of a global tensor into shared memory by itself, one instruction issued
// by one thread, described by a tensor map (CUtensorMap, 128 bytes, made on the host by
// cuTensorMapEncodeTiled and passed to the kernel as a __grid_constant__ parameter). With
// CU_TENSOR_MAP_SWIZZLE_128B it writes the box in the 128-byte swizzle (wgmma_layout.h), so the
// box's inner dimension may be at most 128 bytes: 64 bf16 columns, one atom. Elements outside the
// tensor are written as zeros.
// Completion is counted by an mbarrier in shared memory: a thread announces how many bytes will
// land (arrive.expect_tx), the copies count them down (complete_tx), and the barrier's phase
// flips when all have landed and every expected arrival came; waiters poll try_wait.parity.
#pragma once

#include <cuda.h>  // CUtensorMap and its enums (the types only: the driver is reached through the runtime)
#include <cuda_runtime.h>

#include <cstdint>
#include <stdexcept>
#include <string>

#include "common/cuda/cuda_check.h"

namespace fa::cuda {

// ---- device --------------------------------------------------------------------------------
// sm_90 and newer. Below sm_90 each of these compiles to a trap: a kernel template built for sm_80
// too (06's kTmaKV configurations) may hold a copy-engine path that the host launches only on
// sm_90 and newer.

__device__ __forceinline__ void mbarrier_init(std::uint32_t bar, std::uint32_t arrivals) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(arrivals) : "memory");
#else
  __trap();
#endif
}
// After mbarrier_init and before any other thread or the copy engine uses the barrier (then a
// __syncthreads): makes the initialized barrier visible to them.
__device__ __forceinline__ void mbarrier_init_fence() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
#else
  __trap();
#endif
}
// `count` barriers 8 bytes apart from `bar` (one per pipeline stage), each completed by one arrival
// and the bytes it expects (mbarrier_arrive_expect_tx), then fenced. One thread calls it; a
// __syncthreads must follow before anyone else uses them.
__device__ __forceinline__ void mbarrier_init_stages(std::uint32_t bar, int count) {
  for (int s = 0; s < count; ++s) mbarrier_init(bar + 8 * s, 1);
  mbarrier_init_fence();
}

// One arrival, and `bytes` more to land before the phase completes.
__device__ __forceinline__ void mbarrier_arrive_expect_tx(std::uint32_t bar, std::uint32_t bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
#else
  __trap();
#endif
}

// One arrival without bytes: a consumer telling the producer it is done with a stage (an
// "empty" barrier, initialized with the number of consumers that must arrive).
__device__ __forceinline__ void mbarrier_arrive(std::uint32_t bar) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
#else
  __trap();
#endif
}

// Waits until the phase with parity `phase` (0, 1, 0, ...) of the barrier has completed.
__device__ __forceinline__ void mbarrier_wait(std::uint32_t bar, std::uint32_t phase) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  std::uint32_t done = 0;
  while (!done)
    asm volatile(
        "{\n.reg .pred p;\n"
        "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
        "selp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(bar), "r"(phase)
        : "memory");
#else
  __trap();
#endif
}

// TMA: the box of `map` whose first element is (column c0, row c1) to shared address dst (1024-byte
// aligned for the 128-byte swizzle), counted on barrier bar.
__device__ __forceinline__ void tma_load_2d(std::uint32_t dst, const CUtensorMap* map, int c0, int c1, std::uint32_t bar) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\n" ::"r"(dst),
      "l"(reinterpret_cast<std::uint64_t>(map)), "r"(c0), "r"(c1), "r"(bar)
      : "memory");
#else
  __trap();
#endif
}

// The same for a 3-D map: the box at (column c0, row c1, matrix c2). Attention's tensors as
// [B * H][S][D]: a box never crosses into the next head, and rows past S land as zeros.
__device__ __forceinline__ void tma_load_3d(std::uint32_t dst, const CUtensorMap* map, int c0, int c1, int c2,
                                            std::uint32_t bar) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4}], [%5];\n" ::"r"(dst),
      "l"(reinterpret_cast<std::uint64_t>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(bar)
      : "memory");
#else
  __trap();
#endif
}

// The same for a 4-D map: the box at (column c0, row c1, head c2, batch c3). Attention's tensors as
// (B, H, S, D) with the strides of their layout (fa::Problem::layout: [B, H, S, D] or [B, S, H, D]):
// a box never crosses into the next head, and rows past S land as zeros.
__device__ __forceinline__ void tma_load_4d(std::uint32_t dst, const CUtensorMap* map, int c0, int c1, int c2, int c3,
                                            std::uint32_t bar) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4, %5}], [%6];\n" ::"r"(dst),
      "l"(reinterpret_cast<std::uint64_t>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(bar)
      : "memory");
#else
  __trap();
#endif
}

// The other direction, a box of shared memory (in the map's 128-byte swizzle) to global memory at
// (column c0, row c1, matrix c2); rows past the matrix's end are not written. Tracked in the
// calling thread's bulk group (bulk_commit / bulk_wait_read below). The generic-proxy stores that
// filled the box must be fenced (fence_proxy_async, wgmma.cuh) and synchronized first.
__device__ __forceinline__ void tma_store_3d(const CUtensorMap* map, int c0, int c1, int c2, std::uint32_t src) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("cp.async.bulk.tensor.3d.global.shared::cta.bulk_group [%0, {%1, %2, %3}], [%4];\n" ::"l"(
                   reinterpret_cast<std::uint64_t>(map)),
               "r"(c0), "r"(c1), "r"(c2), "r"(src)
               : "memory");
#else
  __trap();
#endif
}

// The same for a 4-D map: (column c0, row c1, head c2, batch c3), rows past S not written.
__device__ __forceinline__ void tma_store_4d(const CUtensorMap* map, int c0, int c1, int c2, int c3, std::uint32_t src) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("cp.async.bulk.tensor.4d.global.shared::cta.bulk_group [%0, {%1, %2, %3, %4}], [%5];\n" ::"l"(
                   reinterpret_cast<std::uint64_t>(map)),
               "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(src)
               : "memory");
#else
  __trap();
#endif
}

// ---- host ----------------------------------------------------------------------------------

// A tensor map of `rank` dimensions (dims innermost first, strides in bytes between the elements of
// dimensions 1 .. rank - 1) of `elem_bytes`-byte elements of `type`, boxes of (box_rows, box_cols)
// and 1 along the outer dimensions, in the 128-byte swizzle: box_cols * elem_bytes <= 128, rows of
// 16-byte multiples, strides of 16-byte multiples.
// cuTensorMapEncodeTiled is a driver function: it is looked up through the runtime
// (cudaGetDriverEntryPointByVersion), so nothing links libcuda.
inline CUtensorMap encode_tma(CUtensorMapDataType type, std::uint32_t elem_bytes, const void* base, cuuint32_t rank,
                              const cuuint64_t* dims, const cuuint64_t* strides, std::uint32_t box_rows,
                              std::uint32_t box_cols) {
  using Encode = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*,
                              const cuuint64_t*, const cuuint32_t*, const cuuint32_t*, CUtensorMapInterleave,
                              CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);
  static const Encode encode = [] {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult found{};
    FA_CUDA_CHECK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &found));
    if (found != cudaDriverEntryPointSuccess || fn == nullptr)
      throw std::runtime_error("cuTensorMapEncodeTiled is not available from this driver");
    return reinterpret_cast<Encode>(fn);
  }();
  if (box_cols * elem_bytes > 128 || (dims[0] * elem_bytes) % 16 != 0)
    throw std::invalid_argument("make_tma: a 128-byte-swizzled box is at most 128 bytes wide; rows must be 16-byte multiples");
  for (cuuint32_t d = 0; d + 1 < rank; ++d)
    if (strides[d] % 16 != 0) throw std::invalid_argument("make_tma: strides must be multiples of 16 bytes");
  CUtensorMap map{};
  const cuuint32_t box[5] = {box_cols, box_rows, 1, 1, 1};
  const cuuint32_t steps[5] = {1, 1, 1, 1, 1};
  const CUresult r = encode(&map, type, rank, const_cast<void*>(base), dims, strides, box, steps,
                            CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                            CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
                            CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);  // out of bounds: zeros
  if (r != CUDA_SUCCESS) throw std::runtime_error("cuTensorMapEncodeTiled failed with CUresult " + std::to_string(r));
  return map;
}

// A 3-D tensor map of `matrices` row-major (rows, cols) matrices of `elem_bytes`-byte elements of
// `type`, one after the other, boxes of (box_rows, box_cols) in the 128-byte swizzle (with rank 2
// and matrices 1: a 2-D map of one matrix).
inline CUtensorMap make_tma_of(CUtensorMapDataType type, std::uint32_t elem_bytes, const void* base,
                               std::uint64_t matrices, std::uint64_t rows, std::uint64_t cols, std::uint32_t box_rows,
                               std::uint32_t box_cols, cuuint32_t rank = 3) {
  const cuuint64_t dims[3] = {cols, rows, matrices};                            // innermost first
  const cuuint64_t strides[2] = {cols * elem_bytes, rows * cols * elem_bytes};  // bytes between rows, between matrices
  return encode_tma(type, elem_bytes, base, rank, dims, strides, box_rows, box_cols);
}

// The 4-D map of a bf16 or fp16 attention tensor (B, H, S, D) whose rows, heads and batches lie
// row_stride, head_stride and batch_stride elements apart (fa::Problem's Strides: [B, H, S, D] and
// [B, S, H, D] alike), boxes of (box_rows, box_cols) of one head: tma_load_4d, tma_store_4d.
inline CUtensorMap make_tma_4d(const void* base, bool bf16, std::uint64_t batch, std::uint64_t heads,
                               std::uint64_t rows, std::uint64_t cols, std::int64_t batch_stride,
                               std::int64_t head_stride, std::int64_t row_stride, std::uint32_t box_rows,
                               std::uint32_t box_cols) {
  const cuuint64_t dims[4] = {cols, rows, heads, batch};  // innermost first
  const cuuint64_t strides[3] = {cuuint64_t(row_stride) * 2, cuuint64_t(head_stride) * 2, cuuint64_t(batch_stride) * 2};
  return encode_tma(bf16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 2, base, 4, dims,
                    strides, box_rows, box_cols);
}

// The map of bf16 or fp16 matrices (2-byte elements; box_cols <= 64).
inline CUtensorMap make_tma(const void* base, bool bf16, std::uint64_t matrices, std::uint64_t rows,
                            std::uint64_t cols, std::uint32_t box_rows, std::uint32_t box_cols, cuuint32_t rank = 3) {
  return make_tma_of(bf16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 2, base, matrices, rows,
                     cols, box_rows, box_cols, rank);
}

// The map of fp32 matrices (box_cols <= 32): a reduction's target (tma_reduce_add_3d).
inline CUtensorMap make_tma_f32(const float* base, std::uint64_t matrices, std::uint64_t rows, std::uint64_t cols,
                                std::uint32_t box_rows, std::uint32_t box_cols) {
  return make_tma_of(CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 4, base, matrices, rows, cols, box_rows, box_cols);
}

// The 2-D map of one row-major (rows, cols) matrix.
inline CUtensorMap make_tma_2d(const void* base, bool bf16, std::uint64_t rows, std::uint64_t cols,
                               std::uint32_t box_rows, std::uint32_t box_cols) {
  return make_tma(base, bf16, 1, rows, cols, box_rows, box_cols, 2);
}

// Bulk reductions by the copy engine (sm_90): dst[i] += src[i] in fp32 over `bytes` bytes (a
// multiple of 16; both addresses 16-byte aligned), from shared memory to global memory. The ops a
// thread issues go into its bulk group when it calls bulk_commit; bulk_wait_read<N> returns once
// all but N of its groups have read their shared memory (the buffer may be rewritten), bulk_wait<N>
// once they are complete. Shared-memory stores of other threads must be fenced (fence_proxy_async,
// wgmma.cuh) and synchronized before the reduction reads them.
// sm_90 and newer only: on older GPUs these trap (callers check kHasBulkCopy).
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
constexpr bool kHasBulkCopy = false;
#else
constexpr bool kHasBulkCopy = true;
#endif
__device__ __forceinline__ void bulk_reduce_add_f32(float* dst, std::uint32_t src, std::uint32_t bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [%0], [%1], %2;\n" ::"l"(dst), "r"(src),
               "r"(bytes)
               : "memory");
#else
  __trap();
#endif
}
// The copy engine adds a box of shared memory (in the map's 128-byte swizzle) into global memory at
// (column c0, row c1, matrix c2), element by element in the map's type (fp32 here); tracked in the
// calling thread's bulk group like bulk_reduce_add_f32.
__device__ __forceinline__ void tma_reduce_add_3d(const CUtensorMap* map, int c0, int c1, int c2, std::uint32_t src) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("cp.reduce.async.bulk.tensor.3d.global.shared::cta.add.tile.bulk_group [%0, {%1, %2, %3}], [%4];\n" ::"l"(
                   reinterpret_cast<std::uint64_t>(map)),
               "r"(c0), "r"(c1), "r"(c2), "r"(src)
               : "memory");
#else
  __trap();
#endif
}
__device__ __forceinline__ void bulk_commit() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
#endif
}
template <int N>
__device__ __forceinline__ void bulk_wait_read() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("cp.async.bulk.wait_group.read %0;\n" ::"n"(N) : "memory");
#endif
}
template <int N>
__device__ __forceinline__ void bulk_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("cp.async.bulk.wait_group %0;\n" ::"n"(N) : "memory");
#endif
}

}  // namespace fa::cuda
