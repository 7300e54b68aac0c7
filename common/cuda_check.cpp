#include "common/cuda_check.h"

#include <sstream>

namespace fa::cuda {

void throw_error(cudaError_t err, const char* expr, const char* file, int line) {
  std::ostringstream s;
  s << "CUDA error " << cudaGetErrorName(err) << " (" << cudaGetErrorString(err) << ") in `"
    << expr << "` at " << file << ":" << line;
  throw Error(s.str());
}

std::string unavailable_reason() {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    cudaGetLastError();  // clear it, so later checks do not report this one
    return std::string("no usable CUDA device (") + cudaGetErrorString(err) + ")";
  }
  if (count == 0) return "no CUDA device on this machine";
  return {};
}

int compute_capability() {
  int device = 0, major = 0, minor = 0;
  FA_CUDA_CHECK(cudaGetDevice(&device));
  FA_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  FA_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
  return 10 * major + minor;
}

void require_compute_capability(int min_cc, const char* chapter, const char* why) {
  const int cc = compute_capability();
  if (cc < min_cc) {
    std::ostringstream s;
    s << chapter << " needs a GPU of compute capability " << min_cc / 10 << "." << min_cc % 10
      << " or newer (" << why << "); this one is " << cc / 10 << "." << cc % 10;
    throw std::invalid_argument(s.str());
  }
}

}  // namespace fa::cuda
