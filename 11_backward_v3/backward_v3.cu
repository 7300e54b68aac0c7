// Chapter 11's backward and its deterministic mode: the chapter's configuration through
// launch.cuh's entry point (the checks, the preparation, the main kernel, the dQ conversion).
#include "11_backward_v3/backward_v3.h"

#include "06_tensor_core/tensor_core.h"  // the forward at D = 96, 192, 256
#include "09_flash_v3/flash_v3.h"          // the forward at D = 64 and 128
#include "11_backward_v3/launch.cuh"

namespace backward_v3 {

namespace {

// The chapter's forward, for O and LSE: 09's at D = 64 and 128; 06's at D = 96, 192 and 256, which
// 09 does not take (any forward's O and LSE serve the backward).
void forward(const fa::Problem& p, const void* q, const void* k, const void* v, void* o, float* lse,
             cudaStream_t stream) {
  if (p.head_dim == 64 || p.head_dim == 128) flash_v3::forward(p, q, k, v, o, lse, stream);
  else tensor_core::forward(p, q, k, v, o, lse, stream);
}

}  // namespace

const fa::BackwardChapter& chapter() {
  static const fa::BackwardChapter c{
      .support = {.chapter = "11_backward_v3",
                  .dtypes = {fa::Dtype::bf16, fa::Dtype::f16},
                  .head_dims = {64, 96, 128, 192, 256},
                  .max_head_dim = 256,
                  .min_compute_capability = 90},
      .forward = forward,
      .backward = backward,
      .test_head_dims = {64, 96, 128, 192, 256},
      .defaults = fa::default_problem(fa::Dtype::bf16),
      .deterministic = backward_deterministic};
  return c;
}

void backward(const fa::Problem& p, const void* q, const void* k, const void* v, const void* o, const float* lse,
              const void* dout, void* dq, void* dk, void* dv, cudaStream_t stream) {
  backward_with<ChapterConfig, false>(chapter().support, p, q, k, v, o, lse, dout, dq, dk, dv, stream);
}

void backward_deterministic(const fa::Problem& p, const void* q, const void* k, const void* v, const void* o,
                            const float* lse, const void* dout, void* dq, void* dk, void* dv, cudaStream_t stream) {
  backward_with<ChapterConfig, true>(chapter().support, p, q, k, v, o, lse, dout, dq, dk, dv, stream);
}

}  // namespace backward_v3
