// 09's kernels for bf16 (dispatch.cuh says why they have a file per dtype).
#include "09_flash_v3/dispatch.cuh"

namespace flash_v3 {

void forward_bf16(const fa::Problem& p, const void* q, const void* k, const void* v, const Params& prm,
                  cudaStream_t stream) {
  forward_for<__nv_bfloat16>(p, q, k, v, prm, stream);
}

}  // namespace flash_v3
