#include "common/cuda/cuda_check.h"

#include <filesystem>
#include <sstream>
#include <system_error>

namespace fa::cuda {

void throw_error(cudaError_t err, const char* expr, const char* file, int line) {
  std::ostringstream s;
  s << "CUDA error " << cudaGetErrorName(err) << " (" << cudaGetErrorString(err) << ") in `"
    << expr << "` at " << file << ":" << line;
  throw Error(s.str());
}

namespace {

std::string version_string(int v) {  // 12040 -> "12.4" (CUDA's 1000 * major + 10 * minor)
  return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10);
}

// Whether this machine shows any sign of an NVIDIA GPU: the kernel driver's entries (Linux) or
// WSL's GPU device. Without one, every CUDA error below means "no GPU", whatever its name says.
bool nvidia_device_present() {
  namespace fs = std::filesystem;
  std::error_code ec;  // an unreadable path counts as absent, never throws
  return fs::exists("/proc/driver/nvidia", ec) || fs::exists("/dev/nvidiactl", ec) ||
         fs::exists("/dev/dxg", ec);
}

}  // namespace

std::string unavailable_reason() {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err == cudaSuccess && count > 0) return {};
  int driver = 0, runtime = 0;
  cudaDriverGetVersion(&driver);  // 0 when no NVIDIA driver is installed
  cudaRuntimeGetVersion(&runtime);
  cudaGetLastError();  // clear the error, so later checks do not report this one
  // A machine without a GPU (and so without a driver) reports cudaErrorInsufficientDriver, the
  // same error as an outdated driver: tell them apart by the driver's presence.
  if (err == cudaSuccess || err == cudaErrorNoDevice || driver == 0 || !nvidia_device_present())
    return "no NVIDIA GPU found";
  if (err == cudaErrorInsufficientDriver && driver < runtime)
    return "the NVIDIA driver supports CUDA " + version_string(driver) + ", older than the CUDA " +
           version_string(runtime) + " runtime this program was built with (update the driver)";
  return std::string("no usable CUDA device (") + cudaGetErrorString(err) + "; driver CUDA " +
         version_string(driver) + ", runtime CUDA " + version_string(runtime) + ")";
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
