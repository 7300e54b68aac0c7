#include "common/cuda/device_memory.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <string>
#include <unordered_map>

#include "common/cuda/cuda_check.h"
#include "common/host/host_data.h"

namespace fa::cuda {
namespace {

struct Tracker {
  std::mutex mutex;
  std::unordered_map<void*, std::size_t> sizes;
  MemoryStats stats;
};
Tracker& tracker() {
  static Tracker t;
  return t;
}

struct Workspace {
  void* ptr = nullptr;
  std::size_t bytes = 0;
};
Workspace& the_workspace() {
  static Workspace w;
  return w;
}

// The installed WorkspaceSource of this thread (none: take is nullptr).
struct Source {
  WorkspaceSource::Take take = nullptr;
  void* context = nullptr;
};
thread_local Source the_source;

std::string mib(std::size_t bytes) {
  std::ostringstream s;
  s.precision(1);
  s << std::fixed << bytes / 1048576.0 << " MiB";
  return s.str();
}

// Same generator as host_data.cpp's seeded_normal (SplitMix64 + Box-Muller), on the device.
__device__ unsigned long long splitmix64(unsigned long long x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

template <class T>
__global__ void fill_normal_kernel(T* dst, std::int64_t count, unsigned long long seed) {
  for (std::int64_t n = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; n < count;
       n += std::int64_t{gridDim.x} * blockDim.x) {
    const unsigned long long a = splitmix64(seed * 0x632BE59BD9B4E019ull + 2 * n);
    const unsigned long long b = splitmix64(seed * 0x632BE59BD9B4E019ull + 2 * n + 1);
    const float u1 = (static_cast<float>(a >> 40) + 1.0f) * 0x1.0p-24f;  // (0, 1]
    const float u2 = static_cast<float>(b >> 40) * 0x1.0p-24f;
    const float x = sqrtf(-2.0f * logf(u1)) * cospif(2.0f * u2);
    if constexpr (std::is_same_v<T, float>) dst[n] = x;
    if constexpr (std::is_same_v<T, __half>) dst[n] = __float2half_rn(x);
    if constexpr (std::is_same_v<T, __nv_bfloat16>) dst[n] = __float2bfloat16_rn(x);
    if constexpr (std::is_same_v<T, __nv_fp8_e4m3>) dst[n] = __nv_fp8_e4m3(x);  // rounded, saturating at 448
  }
}

}  // namespace

void* device_alloc(std::size_t bytes) {
  void* ptr = nullptr;
  FA_CUDA_CHECK(cudaMalloc(&ptr, bytes));
  Tracker& t = tracker();
  std::lock_guard<std::mutex> lock(t.mutex);
  t.sizes[ptr] = bytes;
  t.stats.current += bytes;
  t.stats.peak = std::max(t.stats.peak, t.stats.current);
  return ptr;
}

void device_free(void* ptr) {
  if (!ptr) return;
  {
    Tracker& t = tracker();
    std::lock_guard<std::mutex> lock(t.mutex);
    t.stats.current -= t.sizes[ptr];
    t.sizes.erase(ptr);
  }
  cudaFree(ptr);  // not checked: called from destructors, and a failure here cannot be acted on
}

MemoryStats memory_stats() {
  Tracker& t = tracker();
  std::lock_guard<std::mutex> lock(t.mutex);
  return t.stats;
}

void reset_peak() {
  Tracker& t = tracker();
  std::lock_guard<std::mutex> lock(t.mutex);
  t.stats.peak = t.stats.current;
}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    device_free(ptr_);
    ptr_ = other.ptr_;
    bytes_ = other.bytes_;
    other.ptr_ = nullptr;
    other.bytes_ = 0;
  }
  return *this;
}

void DeviceBuffer::upload(const std::vector<std::uint8_t>& host) { upload(host.data(), host.size()); }

void DeviceBuffer::upload(const void* host, std::size_t bytes) {
  if (bytes != bytes_) throw std::invalid_argument("DeviceBuffer::upload: size mismatch");
  if (bytes == 0) return;
  FA_CUDA_CHECK(cudaMemcpy(ptr_, host, bytes_, cudaMemcpyHostToDevice));
  FA_CUDA_CHECK(cudaDeviceSynchronize());  // the DMA from the staging buffer has landed
}

std::vector<std::uint8_t> DeviceBuffer::download() const {
  std::vector<std::uint8_t> host(bytes_);
  FA_CUDA_CHECK(cudaDeviceSynchronize());  // kernels on non-blocking streams are done writing
  if (bytes_ > 0) FA_CUDA_CHECK(cudaMemcpy(host.data(), ptr_, bytes_, cudaMemcpyDeviceToHost));
  return host;
}

Stream::Stream() { FA_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking)); }

Stream::~Stream() { cudaStreamDestroy(stream_); }  // not checked: a destructor cannot act on it

void DeviceBuffer::poison(cudaStream_t stream) {
  FA_CUDA_CHECK(cudaMemsetAsync(ptr_, kPoisonByte, bytes_, stream));
}

WorkspaceSource::WorkspaceSource(Take take, void* context)
    : take_(take), outer_take_(the_source.take), context_(context), outer_context_(the_source.context) {
  the_source = {take_, context_};
}
WorkspaceSource::~WorkspaceSource() { the_source = {outer_take_, outer_context_}; }

void* workspace(std::size_t bytes, const std::string& what) {
  if (the_source.take != nullptr) {
    void* p = the_source.take(bytes, the_source.context);
    if (p == nullptr && bytes > 0) throw std::runtime_error(what + ": the installed workspace source returned no memory");
    return p;
  }
  Workspace& w = the_workspace();
  if (bytes <= w.bytes) return w.ptr;
  release_workspace();
  std::size_t free = 0, total = 0;
  FA_CUDA_CHECK(cudaMemGetInfo(&free, &total));
  if (bytes > free) {
    throw std::invalid_argument(what + " needs " + std::to_string(bytes) + " bytes (" + mib(bytes) +
                                ") of device memory, but only " + std::to_string(free) + " bytes (" +
                                mib(free) + ") are free");
  }
  w.ptr = device_alloc(bytes);
  w.bytes = bytes;
  return w.ptr;
}

void release_workspace() {
  Workspace& w = the_workspace();
  device_free(w.ptr);
  w = Workspace{};
}

namespace {

__global__ void __launch_bounds__(512) read_kernel(const uint4* src, std::int64_t n, std::uint32_t* sink) {
  constexpr int kInFlight = 4;
  const std::int64_t stride = std::int64_t{gridDim.x} * blockDim.x;
  std::int64_t i = std::int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  std::uint32_t fold = 0;
  for (; i + (kInFlight - 1) * stride < n; i += kInFlight * stride) {
    uint4 v[kInFlight];
#pragma unroll
    for (int u = 0; u < kInFlight; ++u) v[u] = __ldg(src + i + u * stride);  // all issued, then used
#pragma unroll
    for (int u = 0; u < kInFlight; ++u) fold ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
  }
  for (; i < n; i += stride) {
    const uint4 v = __ldg(src + i);
    fold ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (fold == 0x9E3779B9u) *sink = fold;  // depends on every load; true for almost no data
}

}  // namespace

void read_every_byte(const void* src, std::size_t bytes, std::uint32_t* sink, cudaStream_t stream) {
  if (bytes % 16 != 0 || reinterpret_cast<std::uintptr_t>(src) % 16 != 0)
    throw std::invalid_argument("read_every_byte: needs a 16-byte aligned src and a multiple of 16 bytes; got " +
                                std::to_string(bytes) + " bytes");
  static const int sms = [] {  // asked once: the benchmark times this call
    int device = 0, n = 0;
    FA_CUDA_CHECK(cudaGetDevice(&device));
    FA_CUDA_CHECK(cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, device));
    return n;
  }();
  read_kernel<<<4 * sms, 512, 0, stream>>>(static_cast<const uint4*>(src), static_cast<std::int64_t>(bytes / 16), sink);
  FA_CHECK_LAUNCH();
}

void fill_random(void* dst, std::int64_t count, Dtype dtype, std::uint64_t seed, cudaStream_t stream) {
  const int threads = 256, blocks = 1024;  // grid-stride loop: any count
  switch (dtype) {
    case Dtype::f32:
      fill_normal_kernel<<<blocks, threads, 0, stream>>>(static_cast<float*>(dst), count, seed);
      break;
    case Dtype::f16:
      fill_normal_kernel<<<blocks, threads, 0, stream>>>(static_cast<__half*>(dst), count, seed);
      break;
    case Dtype::bf16:
      fill_normal_kernel<<<blocks, threads, 0, stream>>>(static_cast<__nv_bfloat16*>(dst), count, seed);
      break;
  }
  FA_CHECK_LAUNCH();
}

void fill_random_e4m3(void* dst, std::int64_t count, std::uint64_t seed, cudaStream_t stream) {
  fill_normal_kernel<<<1024, 256, 0, stream>>>(static_cast<__nv_fp8_e4m3*>(dst), count, seed);
  FA_CHECK_LAUNCH();
}

}  // namespace fa::cuda
