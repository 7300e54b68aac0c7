// Host-side launch helpers every tiled chapter needs. Taught in chapter 04 (the first kernel with
// more than 48 KB of shared memory) and chapter 05 (16-byte copies need 16-byte aligned rows).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>

#include "common/cuda/cuda_check.h"

namespace fa::cuda {

// True when ptr may be read with 16-byte loads and cp.async copies.
inline bool aligned16(const void* ptr) { return reinterpret_cast<std::uintptr_t>(ptr) % 16 == 0; }

// A block may use more than 48 KB of dynamic shared memory only if its kernel opts in (once per
// kernel and device; repeating it is harmless). A block that needs more than this GPU allows (an
// H100 227 KiB, an A100 163 KiB) is refused here, by size, instead of failing at the launch.
template <class Kernel>
void allow_shared_memory(Kernel* kernel, int bytes) {
  int device = 0, limit = 0;
  FA_CUDA_CHECK(cudaGetDevice(&device));
  FA_CUDA_CHECK(cudaDeviceGetAttribute(&limit, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  if (bytes > limit)
    throw std::invalid_argument("a kernel needs " + std::to_string(bytes) +
                                " bytes of shared memory a block; this GPU allows " + std::to_string(limit));
  FA_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
}

namespace detail {
// The (kernel, device) pairs that have opted in, behind their lock.
struct OptIns {
  std::mutex mutex;
  std::set<std::pair<const void*, int>> done;
};
inline OptIns& opt_ins() {
  static OptIns registry;
  return registry;
}
}  // namespace detail

// allow_shared_memory once per kernel and device, for launchers that run on every call: an opt-in
// holds on the device it was made on only, so a process that launches on several GPUs (chapter
// 12's ring) opts in on each. The key is the kernel's own address, never a static flag in a
// launcher template: nvcc gives a __global__ template's host stub internal linkage, so two .cu
// files that instantiate one launcher launch two kernels (one per file), while the linker keeps
// one copy of the launcher's statics; a flag set by the first file's kernel would skip the
// second's opt-in, and its launch would fail. A refused size is not recorded: it throws each call.
template <class Kernel>
void allow_shared_memory_once(Kernel* kernel, int bytes) {
  int device = 0;
  FA_CUDA_CHECK(cudaGetDevice(&device));
  const std::pair<const void*, int> key{reinterpret_cast<const void*>(kernel), device};
  detail::OptIns& registry = detail::opt_ins();
  const std::lock_guard<std::mutex> lock(registry.mutex);
  if (registry.done.count(key)) return;
  allow_shared_memory(kernel, bytes);
  registry.done.insert(key);
}

// Calls f(std::integral_constant<int, kD>{}) for the first of kDims (ascending) that is >= head_dim:
// a kernel instantiated for kD runs any smaller head dim with its extra columns zero-filled (05,
// 08). The caller has checked head_dim <= the last of kDims.
template <int... kDims, class F>
void with_head_dim(int head_dim, F&& f) {
  bool done = false;
  ((done = done || (head_dim <= kDims && (f(std::integral_constant<int, kDims>{}), true))), ...);
}

// Launches kernel<<<grid, block, smem, stream>>>(args...) as a programmatic dependent launch
// (Hopper and newer; taught in chapter 10): the GPU may start its blocks while the kernel before
// it in the stream is still finishing, instead of after it has fully drained. The kernel must
// call wait_on_prerequisites() (grid.cuh) before it reads anything the earlier kernel writes.
// On an older GPU it is an ordinary launch.
template <class... KernelArgs, class... Args>
void launch_dependent(void (*kernel)(KernelArgs...), dim3 grid, dim3 block, int smem, cudaStream_t stream,
                      Args&&... args) {
  static const bool hopper = [] {
    int device = 0, major = 0;
    FA_CUDA_CHECK(cudaGetDevice(&device));
    FA_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
    return major >= 9;
  }();
  cudaLaunchAttribute attr{};
  attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr.val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t config{};
  config.gridDim = grid, config.blockDim = block, config.dynamicSmemBytes = static_cast<std::size_t>(smem);
  config.stream = stream, config.attrs = &attr, config.numAttrs = hopper ? 1 : 0;
  FA_CUDA_CHECK(cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...));
}

}  // namespace fa::cuda
