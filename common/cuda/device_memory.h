// Device memory: RAII buffers, a tracked allocator (so the runner and the benchmarks can
// report peak device memory), and the scratch workspace of chapters that materialize S and P.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "common/host/problem.h"

namespace fa::cuda {

void* device_alloc(std::size_t bytes);  // cudaMalloc, counted
void device_free(void* ptr);

struct MemoryStats {
  std::size_t current = 0;  // bytes held now through device_alloc
  std::size_t peak = 0;     // most held at once since the last reset_peak()
};
MemoryStats memory_stats();
void reset_peak();

// Owns `bytes` of device memory; freed when it goes out of scope.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(std::size_t bytes) : ptr_(bytes ? device_alloc(bytes) : nullptr), bytes_(bytes) {}
  ~DeviceBuffer() { device_free(ptr_); }
  DeviceBuffer(DeviceBuffer&& other) noexcept : ptr_(other.ptr_), bytes_(other.bytes_) {
    other.ptr_ = nullptr;
    other.bytes_ = 0;
  }
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void* get() const { return ptr_; }
  template <class T>
  T* as() const { return static_cast<T*>(ptr_); }
  std::size_t bytes() const { return bytes_; }

  // Both wait for the device: upload returns once the bytes are in device memory, so a kernel on
  // any stream may read them (a plain cudaMemcpy from pageable memory may return before its DMA
  // has finished, and work on a cudaStreamNonBlocking stream is not ordered after it); download
  // first waits for all device work, on every stream, then copies.
  void upload(const std::vector<std::uint8_t>& host);
  void upload(const void* host, std::size_t bytes);
  std::vector<std::uint8_t> download() const;
  // Sets every byte to kPoisonByte, so elements a kernel never writes are caught (host_data.h).
  void poison(cudaStream_t stream = nullptr);

 private:
  void* ptr_ = nullptr;
  std::size_t bytes_ = 0;
};

// An owned cudaStreamNonBlocking stream: one that does not synchronize with the legacy default
// stream, as frameworks use them. The tests run every kernel on one.
class Stream {
 public:
  Stream();
  ~Stream();
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  cudaStream_t get() const { return stream_; }

 private:
  cudaStream_t stream_ = nullptr;
};

// The GPU's plain read, the ceiling of a kernel bound by memory (chapter 10's decode rows are
// measured against it in the same run): every 16 bytes of src loaded once through the read-only
// path (ld.global.nc), four independent loads in flight per thread, 2048 threads an SM. On an
// H200 streaming loads (ld.global.cs) read 3.5% slower, and more loads in flight or other grids
// no faster. The loaded words fold into one
// that is stored to *sink only if it equals a constant, so the loads cannot be optimized away and
// nothing else is written. bytes: a multiple of 16; src 16-byte aligned.
void read_every_byte(const void* src, std::size_t bytes, std::uint32_t* sink, cudaStream_t stream = nullptr);

// A grow-only scratch buffer for chapters 01 and 02, which keep the N x N score matrix in
// global memory. The first forward call allocates it (outside any timed region); later calls
// of the same or a smaller size reuse it. Before growing it checks the free device memory and
// throws std::invalid_argument with the bytes needed and the bytes free.
void* workspace(std::size_t bytes, const std::string& what);
void release_workspace();

// Where workspace() takes its memory from on this thread while a WorkspaceSource lives: a host
// program with an allocator of its own installs one around its calls (the PyTorch extension:
// PyTorch's caching allocator, whose blocks are reused in stream order and which CUDA-graph capture
// understands, where the grow-only buffer would call cudaMalloc inside a capture and could free a
// buffer a captured graph still uses). take(bytes, context) returns memory that stays valid until
// the work queued on the call's stream is done; sources nest, the innermost wins.
class WorkspaceSource {
 public:
  using Take = void* (*)(std::size_t bytes, void* context);
  WorkspaceSource(Take take, void* context);
  ~WorkspaceSource();
  WorkspaceSource(const WorkspaceSource&) = delete;
  WorkspaceSource& operator=(const WorkspaceSource&) = delete;

 private:
  Take take_, outer_take_;
  void *context_, *outer_context_;
};
// A chapter that carves several arrays out of the workspace (08, 11) rounds each to 256 bytes, so
// that every part starts aligned for vector and bulk-copy access.
constexpr std::size_t workspace_part(std::size_t bytes) { return (bytes + 255) / 256 * 256; }

// Standard-normal values rounded to `dtype`, generated on the device from a counter-based
// hash (for benchmarks, whose inputs never need a CPU copy).
void fill_random(void* dst, std::int64_t count, Dtype dtype, std::uint64_t seed, cudaStream_t stream);
// The same as E4M3 bytes (chapter 09's FP8 step; saturating at 448, so no NaN code).
void fill_random_e4m3(void* dst, std::int64_t count, std::uint64_t seed, cudaStream_t stream);

}  // namespace fa::cuda
