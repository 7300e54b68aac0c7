// 08's tensor-core backward for bf16 (backward_tc_host.cuh says why it has a file per dtype).
#include "08_backward/backward_tc_host.cuh"

namespace backward::tc_host {

void run_bf16(const fa::Problem& p, const void* q, const void* k, const void* v, const void* o, const float* lse,
              const void* dout, void* dq, void* dk, void* dv, bool deterministic, const DeviceSparseWalk* walk,
              cudaStream_t stream) {
  run_dtype<__nv_bfloat16>(p, q, k, v, o, lse, dout, dq, dk, dv, deterministic, walk, stream);
}

}  // namespace backward::tc_host
