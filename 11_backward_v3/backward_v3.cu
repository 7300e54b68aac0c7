// Chapter 11's backward and its fp32-gradient mode: the chapter's configuration through launch.cuh's
// entry point (the checks, the preparation, the main kernel, the dQ conversion). The deterministic
// mode is backward_deterministic.cu's, a file of its own so that a parallel build compiles its
// kernels beside these (the two are the chapter's longest compiles).
#include "11_backward_v3/backward_v3.h"

#include "09_flash_v3/flash_v3.h"  // the forward
#include "11_backward_v3/launch.cuh"

namespace backward_v3 {

namespace {

// The chapter's forward, for O and LSE: 09's, which takes the same head dims and windows.
void forward(const fa::Problem& p, const void* q, const void* k, const void* v, void* o, float* lse,
             cudaStream_t stream) {
  flash_v3::forward(p, q, k, v, o, lse, stream);
}

}  // namespace

const fa::BackwardChapter& chapter() {
  static const fa::BackwardChapter c{
      .support = {.chapter = "11_backward_v3",
                  .dtypes = {fa::Dtype::bf16, fa::Dtype::f16},
                  .head_dims = {64, 96, 128, 192, 256},
                  .max_head_dim = 256,
                  .bshd_dtypes = {fa::Dtype::bf16, fa::Dtype::f16},  // [B, S, H, D] too: strides and tensor maps
                  .min_compute_capability = 90,
                  .window = true,
                  .softcap = true,        // Gemma 2's logit softcap: Softcap<C> kernels (cap_scores, cap_slope)
                  .input_strides = true,  // Q, K, V through the tensor maps' strides: any 16-byte multiples
                  .varlen = true},        // a packed batch: the grid runs over the sequences' key tiles
      .forward = forward,
      .backward = backward,
      .test_head_dims = {64, 96, 128, 192, 256},
      .defaults = fa::default_problem(fa::Dtype::bf16),
      .deterministic = backward_deterministic};
  return c;
}

void backward(const fa::Problem& p, const void* q, const void* k, const void* v, const void* o, const float* lse,
              const void* dout, void* dq, void* dk, void* dv, cudaStream_t stream) {
  backward_with<ChapterConfig, false, true>(chapter().support, p, q, k, v, o, lse, dout, dq, dk, dv, stream);
}

void backward_f32(const fa::Problem& p, const void* q, const void* k, const void* v, const void* o, const float* lse,
                  const void* dout, float* dq, float* dk, float* dv, cudaStream_t stream) {
  fa::check_backward_args(chapter().support, p, q, k, v, o, lse, dout, dq, dk, dv);
  const std::string why = p.layout != fa::Layout::bhsd ? "[B, S, H, D] tensors"
                          : p.head_dim > 128          ? "head dim " + std::to_string(p.head_dim)
                          : p.has_softcap()           ? "a logit softcap"
                          : p.is_varlen()             ? "a packed batch of sequences"
                                                      : "";
  if (!why.empty()) throw std::invalid_argument("11_backward_v3: fp32 gradients do not take " + why);
  if (fa::cuda::compute_capability() != 90)
    throw std::invalid_argument("11_backward_v3: needs a Hopper GPU (compute capability 9.0: wgmma, TMA)");
  auto dtype = [&](auto type) {  // F32Grads (config.cuh): the chapter's kernels, fp32 stores
    using T = decltype(type);
    if (p.head_dim == 64) detail::run_layout<F32Grads<Config<T, 64>>, false>(p, q, k, v, o, lse, dout, dq, dk, dv, stream);
    else detail::run_layout<F32Grads<Config<T, 128>>, false>(p, q, k, v, o, lse, dout, dq, dk, dv, stream);
  };
  if (p.dtype == fa::Dtype::bf16) dtype(__nv_bfloat16{});
  else dtype(__half{});
}

}  // namespace backward_v3
