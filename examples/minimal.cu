// Start here: the whole API on one page. Allocate Q, K, V; call one chapter's forward; compare
// its O and LSE with the float64 reference. Every chapter's tests do the same over many shapes.
//   cmake --build build --target minimal && ./build/examples/minimal      (or: ctest -R minimal)
//
// Why chapter 06 in bf16: bf16 is what models run attention in, and 06's tensor-core kernel (sm_80
// or newer) is the one 07 and 08 build on. Every chapter's forward has the same signature
// (common/harness/chapter.h): flash_v2::forward with .dtype = fa::Dtype::f32 runs chapter 05 instead.
#include <cstdio>
#include <exception>
#include <optional>
#include <string>

#include "06_tensor_core/tensor_core.h"
#include "common/cuda/cuda_check.h"
#include "common/cuda/device_memory.h"
#include "common/host/forward_check.h"
#include "common/host/host_data.h"

int main() {
  const fa::Problem p{.batch = 2,
                      .heads = 8,        // query heads
                      .kv_heads = 2,     // GQA: each K/V head serves 4 query heads
                      .seqlen_q = 1000,  // a length no tile size divides
                      .seqlen_k = 1000,
                      .head_dim = 64,
                      .causal = true,
                      .softmax_scale = std::nullopt,  // the default, 1 / sqrt(head_dim)
                      .dtype = fa::Dtype::bf16};
  const std::string reason = fa::cuda::unavailable_reason();
  if (!reason.empty()) {
    // gtest's two lines for a skipped test, so scripts/run_ctest.sh counts this reason with theirs.
    std::printf("examples/minimal.cu: Skipped\nGPU test skipped: %s\n", reason.c_str());
    return 77;  // ctest reads 77 as "skipped" (SKIP_RETURN_CODE, examples/CMakeLists.txt)
  }
  try {
    // Seeded standard-normal inputs, rounded to bf16: the GPU and the reference see the same values.
    const fa::HostInputs in = fa::make_inputs(p, /*seed=*/2024);
    const std::size_t elem = fa::dtype_size(p.dtype);  // 2 bytes
    fa::cuda::DeviceBuffer q(p.q_elems() * elem);   // [B, H, Sq, D]   bf16
    fa::cuda::DeviceBuffer k(p.kv_elems() * elem);  // [B, Hkv, Sk, D] bf16
    fa::cuda::DeviceBuffer v(p.kv_elems() * elem);  // [B, Hkv, Sk, D] bf16
    fa::cuda::DeviceBuffer o(p.o_elems() * elem);   // [B, H, Sq, D]   bf16
    fa::cuda::DeviceBuffer lse(p.lse_elems() * sizeof(float));  // [B, H, Sq] float
    q.upload(fa::encode(in.q, p.dtype));
    k.upload(fa::encode(in.k, p.dtype));
    v.upload(fa::encode(in.v, p.dtype));

    tensor_core::forward(p, q.get(), k.get(), v.get(), o.get(), lse.as<float>(), /*stream=*/nullptr);

    // download() waits for the kernel; check_forward applies the tolerances of p.dtype.
    const fa::ForwardCheck check = fa::check_forward(p, in, o.download(), lse.download());
    std::printf("%s\n%s\n%s\n", p.describe().c_str(), check.summary().c_str(), check.pass() ? "PASS" : "FAIL");
    return check.pass() ? 0 : 1;
  } catch (const std::exception& e) {  // a refused problem (std::invalid_argument) or a CUDA error
    std::fprintf(stderr, "minimal: %s\n", e.what());
    return 1;
  }
}
