// Chapter 06's forward: the checks, then one launch of the head dim's configuration.
#include "06_tensor_core/tensor_core.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "06_tensor_core/tensor_core.cuh"

namespace tensor_core {
namespace {

// The tile width for head dim D (a multiple of 8): the next of 32, 64, 96, 128, 192, 256. The
// columns D .. kD - 1 are zero-filled in shared memory and never read from or written to global
// memory (copy_tile, write_rows); README: "Every head dim".
template <class T, int kD>
void launch_tile(const fa::Problem& p, const Params& prm, cudaStream_t stream) {
  if (p.head_dim == kD) return launch<ChapterConfig<T, kD>>(prm, stream);  // the head dim a constant
  launch<ChapterConfig<T, kD, /*kPadded=*/true>>(prm, stream);
}

template <class T>
void dispatch(const fa::Problem& p, const Params& prm, cudaStream_t stream) {
  const int d = p.head_dim;
  if (d <= 32) return launch_tile<T, 32>(p, prm, stream);
  if (d <= 64) return launch_tile<T, 64>(p, prm, stream);
  if (d <= 96) return launch_tile<T, 96>(p, prm, stream);
  if (d <= 128) return launch_tile<T, 128>(p, prm, stream);
  if (d <= 192) return launch_tile<T, 192>(p, prm, stream);
  return launch_tile<T, 256>(p, prm, stream);
}

}  // namespace

const fa::Chapter& chapter() {
  static const fa::Chapter c{
      .support = {.chapter = "06_tensor_core",
                  .dtypes = {fa::Dtype::bf16, fa::Dtype::f16},
                  .head_dims = {},
                  .max_head_dim = 256,
                  .head_dim_multiple = 8},
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
