// Chapter 06's forward: the checks, then one launch of the head dim's configuration.
#include "06_tensor_core/tensor_core.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "06_tensor_core/tensor_core.cuh"

namespace tensor_core {
namespace {

// The tile for head dim D (a multiple of 8): with_tile (tensor_core.cuh) picks the next of 32, 64,
// 96, 128, 192, 256. The columns D .. kD - 1 are zero-filled in shared memory and never read from
// or written to global memory (copy_tile, write_rows); tiles.md: "Every head dim".
template <class T>
void dispatch(const fa::Problem& p, const Params& prm, cudaStream_t stream) {
  with_tile(p.head_dim, [&](auto kd, auto padded) {
    using C = ChapterConfig<T, decltype(kd)::value, decltype(padded)::value>;
    if (p.layout == fa::Layout::bshd) launch<C, true>(prm, stream);  // [B, S, H, D]: BlockInputs' strides
    else launch<C, false>(prm, stream);
  });
}

}  // namespace

const fa::Chapter& chapter() {
  static const fa::Chapter c{
      .support = {.chapter = "06_tensor_core",
                  .dtypes = {fa::Dtype::bf16, fa::Dtype::f16},
                  .head_dims = {},
                  .max_head_dim = 256,
                  .head_dim_multiple = 8,
                  .bshd_dtypes = {fa::Dtype::bf16, fa::Dtype::f16}},  // [B, S, H, D] too: Params' strides
      .forward = forward,
      .test_head_dims = {8, 32, 40, 64, 72, 80, 96, 112, 128, 160, 192, 256},
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
