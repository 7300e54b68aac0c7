// Device memory: RAII buffers, a tracked allocator (so the runner and the benchmarks can
// report peak device memory), and the scratch workspace of chapters that materialize S and P.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "common/problem.h"

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

  void upload(const std::vector<std::uint8_t>& host);
  std::vector<std::uint8_t> download() const;
  // Sets every byte to kPoisonByte, so elements a kernel never writes are caught (host_data.h).
  void poison(cudaStream_t stream = nullptr);

 private:
  void* ptr_ = nullptr;
  std::size_t bytes_ = 0;
};

// A grow-only scratch buffer for chapters 01 and 02, which keep the N x N score matrix in
// global memory. The first forward call allocates it (outside any timed region); later calls
// of the same or a smaller size reuse it. Before growing it checks the free device memory and
// throws std::invalid_argument with the bytes needed and the bytes free.
void* workspace(std::size_t bytes, const std::string& what);
void release_workspace();

// Standard-normal values rounded to `dtype`, generated on the device from a counter-based
// hash (for benchmarks, whose inputs never need a CPU copy).
void fill_random(void* dst, std::int64_t count, Dtype dtype, std::uint64_t seed, cudaStream_t stream);

}  // namespace fa::cuda
