// Every CUDA call is checked; every kernel launch is followed by FA_CHECK_LAUNCH().
// A failure throws fa::cuda::Error naming the expression, the file and the line.
#pragma once

#include <cuda_runtime_api.h>

#include <stdexcept>
#include <string>

namespace fa::cuda {

struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

[[noreturn]] void throw_error(cudaError_t err, const char* expr, const char* file, int line);

inline void check(cudaError_t err, const char* expr, const char* file, int line) {
  if (err != cudaSuccess) throw_error(err, expr, file, line);
}

// Empty when a CUDA GPU can run our kernels; otherwise why not, in words ("no CUDA device",
// "driver too old", ...). Tests skip with this message.
std::string unavailable_reason();

// Compute capability of the current device as 10 * major + minor (90 for an H100).
int compute_capability();

// Throws std::invalid_argument when the current GPU is older than `min_cc`, naming both.
void require_compute_capability(int min_cc, const char* chapter, const char* why);

}  // namespace fa::cuda

#define FA_CUDA_CHECK(expr) ::fa::cuda::check((expr), #expr, __FILE__, __LINE__)
// Launch errors (bad configuration, too much shared memory) surface here, at the launch site.
#define FA_CHECK_LAUNCH() ::fa::cuda::check(cudaGetLastError(), "kernel launch", __FILE__, __LINE__)
