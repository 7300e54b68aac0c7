// Chapter 06's forward: the checks, then one launch of the head dim's configuration.
#include "06_tensor_core/tensor_core.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "06_tensor_core/tensor_core.cuh"

namespace tensor_core {
namespace {

template <class T>
void dispatch(const fa::Problem& p, const Params& prm, cudaStream_t stream) {
  switch (p.head_dim) {
    case 32: return launch<ChapterConfig<T, 32>>(prm, stream);
    case 64: return launch<ChapterConfig<T, 64>>(prm, stream);
    case 96: return launch<ChapterConfig<T, 96>>(prm, stream);
    case 128: return launch<ChapterConfig<T, 128>>(prm, stream);
    case 256: return launch<ChapterConfig<T, 256>>(prm, stream);
  }
}

}  // namespace

const fa::Chapter& chapter() {
  static const fa::Chapter c{
      .support = {.chapter = "06_tensor_core",
                  .dtypes = {fa::Dtype::bf16, fa::Dtype::f16},
                  .head_dims = {32, 64, 96, 128, 256},
                  .max_head_dim = 256},
      .forward = forward,
      .test_head_dims = {32, 64, 96, 128, 256},
      .defaults = fa::default_problem(fa::Dtype::bf16)};
  return c;
}

void forward(const fa::Problem& p, const void* q, const void* k, const void* v, void* o, float* lse,
             cudaStream_t stream) {
  fa::check_forward_args(chapter().support, p, q, k, v, o, lse);
  const Params prm = make_params(p, q, k, v, o, lse, "06_tensor_core");
  if (p.dtype == fa::Dtype::bf16) dispatch<__nv_bfloat16>(p, prm, stream);
  else dispatch<__half>(p, prm, stream);
}

}  // namespace tensor_core
