// Times device work with CUDA events: the GPU stamps each event when the stream reaches it,
// so host-side launch overhead and asynchrony do not distort the numbers.
#pragma once

#include <cuda_runtime_api.h>

#include <algorithm>
#include <vector>

#include "common/cuda/cuda_check.h"

namespace fa::cuda {

class GpuTimer {
 public:
  explicit GpuTimer(cudaStream_t stream = nullptr) : stream_(stream) {
    FA_CUDA_CHECK(cudaEventCreate(&start_));
    FA_CUDA_CHECK(cudaEventCreate(&stop_));
  }
  ~GpuTimer() {
    cudaEventDestroy(start_);
    cudaEventDestroy(stop_);
  }
  GpuTimer(const GpuTimer&) = delete;
  GpuTimer& operator=(const GpuTimer&) = delete;

  void start() { FA_CUDA_CHECK(cudaEventRecord(start_, stream_)); }
  // Waits for the stream to reach the stop event, then returns the elapsed milliseconds.
  float stop_ms() {
    FA_CUDA_CHECK(cudaEventRecord(stop_, stream_));
    FA_CUDA_CHECK(cudaEventSynchronize(stop_));
    float ms = 0;
    FA_CUDA_CHECK(cudaEventElapsedTime(&ms, start_, stop_));
    return ms;
  }

 private:
  cudaStream_t stream_;
  cudaEvent_t start_{}, stop_{};
};

// Runs `work` `warmup` times untimed, then `iters` times timed one by one; returns the median
// milliseconds (robust to the odd slow run from clocks ramping or another process).
template <class Work>
float median_ms(Work&& work, int iters, int warmup = 3, cudaStream_t stream = nullptr) {
  for (int n = 0; n < warmup; ++n) work();
  GpuTimer timer(stream);
  std::vector<float> times;
  for (int n = 0; n < iters; ++n) {
    timer.start();
    work();
    times.push_back(timer.stop_ms());
  }
  std::nth_element(times.begin(), times.begin() + times.size() / 2, times.end());
  return times[times.size() / 2];
}

}  // namespace fa::cuda
