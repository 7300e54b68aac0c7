// Chapter 09's forward: the checks, then one launch of the head dim's kernel (dispatch.cuh says
// which kernel runs which problem; the launch makes its tensor maps).
#include "09_flash_v3/flash_v3.h"

#include <stdexcept>
#include <string>

#include "09_flash_v3/dispatch.cuh"  // forward_bf16, forward_f16

namespace flash_v3 {

const fa::Chapter& chapter() {
  static const fa::Chapter c{
      .support = {.chapter = "09_flash_v3",
                  .dtypes = {fa::Dtype::bf16, fa::Dtype::f16},
                  .head_dims = {64, 96, 128, 192, 256},
                  .max_head_dim = 256,
                  .bshd_dtypes = {fa::Dtype::bf16, fa::Dtype::f16},  // [B, S, H, D] too: the tensor maps' strides
                  .window = true,
                  .softcap = true,        // Gemma 2's logit softcap: the consumers cap each tile's scores
                  .input_strides = true,  // Q, K, V through the tensor maps' strides: any 16-byte multiples
                  .varlen = true},  // a packed batch of sequences: the tile walk goes through them
      .forward = forward,
      .test_head_dims = {64, 96, 128, 192, 256},
      .defaults = fa::default_problem(fa::Dtype::bf16)};
  return c;
}

void forward(const fa::Problem& p, const void* q, const void* k, const void* v, void* o, float* lse,
             cudaStream_t stream) {
  fa::check_forward_args(chapter().support, p, q, k, v, o, lse);
  // wgmma and TMA exist on sm_90 only, and the kernels are built for sm_90a: any other GPU would
  // fail at launch with "no kernel image"; say why instead.
  if (fa::cuda::compute_capability() != 90)
    throw std::invalid_argument("09_flash_v3: needs a Hopper GPU (compute capability 9.0: wgmma, TMA); this one is " +
                                std::to_string(fa::cuda::compute_capability()));
  const Params prm = fa2::make_params(p, q, k, v, o, lse, "09_flash_v3");
  if (p.has_softcap() && p.is_varlen())
    throw std::invalid_argument("09_flash_v3: a logit softcap on a packed batch of sequences is not supported");
  if (p.dtype == fa::Dtype::bf16) forward_bf16(p, q, k, v, prm, stream);
  else forward_f16(p, q, k, v, prm, stream);
}

}  // namespace flash_v3
