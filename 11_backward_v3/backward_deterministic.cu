// Chapter 11's deterministic mode (kTurns: each key tile's dQ added in a fixed order; launch.cuh),
// in a file of its own so that a parallel build compiles its kernels beside backward_v3.cu's.
#include "11_backward_v3/backward_v3.h"

#include "11_backward_v3/launch.cuh"

namespace backward_v3 {

void backward_deterministic(const fa::Problem& p, const void* q, const void* k, const void* v, const void* o,
                            const float* lse, const void* dout, void* dq, void* dk, void* dv, cudaStream_t stream) {
  backward_with<ChapterConfig, true, true>(chapter().support, p, q, k, v, o, lse, dout, dq, dk, dv, stream);
}

}  // namespace backward_v3
