// Chapter 09's forward: the checks, then one launch of the head dim's kernel (which makes its tensor maps).
// D = 96, 128, 192 and 256: the warp-specialized, ping-pong kernel of flash_v3.cuh (ChapterConfig
// says which tiles at which head dim; D = 96 keeps the D = 128 tiles in shared memory, its columns
// 96-127 zeros, and multiplies 96 columns only); at D = 96 and 128 a causal mask runs it without
// the intra-warpgroup overlap (step v4), which measured
// faster there on an H200 (README, "Which kernel for which head dim"). D = 64: step v1's one
// warpgroup a block (steps/one_warpgroup.cuh), measured faster there on every shape (README, "Which
// kernel for which head dim"): its blocks are small (41 KiB of shared memory, 114 registers a
// thread), so four share an SM, and the warp schedulers interleave their GEMMs and softmaxes
// without any hand-made schedule; it takes a sliding window, a packed batch of sequences (varlen)
// and the logit softcap as the other kernel does. A softcap runs kernels of its own (Softcap<C>,
// v1's kSoftcap), so that the others keep their code.
#include "09_flash_v3/flash_v3.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <stdexcept>
#include <string>
#include <type_traits>

#include "09_flash_v3/launch.cuh"  // launch, and through it the kernel (flash_v3.cuh)
#include "09_flash_v3/steps/one_warpgroup.cuh"

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
  // kBshd: [B, S, H, D] tensors, read and written through 4-D tensor maps (launch.cuh: make_maps)
  // by kernels of their own, so that the [B, H, S, D] kernels keep their 3-D maps' code. kVarlen:
  // a packed batch of sequences, [1, total, H, D], by kernels of its own as well; a softcap too
  // (not with a packed batch).
  if (p.has_softcap() && p.is_varlen())
    throw std::invalid_argument("09_flash_v3: a logit softcap on a packed batch of sequences is not supported");
  auto with_softcap = [&](auto type, auto bshd) {
    using T = decltype(type);
    constexpr bool kBshd = decltype(bshd)::value;
    switch (p.head_dim) {
      case 64: steps::launch_one_warpgroup<steps::V1Config<T, 64>, kBshd, false, false, true>(p, q, k, v, prm, stream); break;
      case 192: launch<Softcap<ChapterConfig<T, 192>>, kBshd>(p, q, k, v, prm, stream); break;
      case 256: launch<Softcap<ChapterConfig<T, 256>>, kBshd>(p, q, k, v, prm, stream); break;
      default: launch<Softcap<ChapterConfig<T, 128>>, kBshd>(p, q, k, v, prm, stream);  // 96: zero-filled to 128
    }
  };
  auto run = [&](auto type, auto bshd, auto varlen) {
    using T = decltype(type);
    constexpr bool kBshd = decltype(bshd)::value, kVarlen = decltype(varlen)::value;
    if (!kVarlen && p.has_softcap()) return with_softcap(type, bshd);
    switch (p.head_dim) {
      case 64:  // v1, one warpgroup a block: at D = 64 the fastest step (README: How we got here)
        if (!kVarlen && p.has_window())
          steps::launch_one_warpgroup<steps::V1Config<T, 64>, kBshd, false, true>(p, q, k, v, prm, stream);
        else steps::launch_one_warpgroup<steps::V1Config<T, 64>, kBshd, kVarlen>(p, q, k, v, prm, stream);
        break;
      case 192: launch<ChapterConfig<T, 192>, kBshd, kVarlen>(p, q, k, v, prm, stream); break;
      case 256: launch<ChapterConfig<T, 256>, kBshd, kVarlen>(p, q, k, v, prm, stream); break;
      case 96:  // causal without the intra-warpgroup overlap (v4), as at D = 128
        if (p.causal) launch<ChapterConfig<T, 96, /*kOverlap=*/false>, kBshd, kVarlen>(p, q, k, v, prm, stream);
        else launch<ChapterConfig<T, 96>, kBshd, kVarlen>(p, q, k, v, prm, stream);
        break;
      default:  // 128; causal without the intra-warpgroup overlap (v4)
        if (p.causal) launch<ChapterConfig<T, 128, /*kOverlap=*/false>, kBshd, kVarlen>(p, q, k, v, prm, stream);
        else launch<ChapterConfig<T, 128>, kBshd, kVarlen>(p, q, k, v, prm, stream);
    }
  };
  auto layout = [&](auto type) {
    if (p.is_varlen()) run(type, std::true_type{}, std::true_type{});  // validate(): varlen is bshd
    else if (p.layout == fa::Layout::bshd) run(type, std::true_type{}, std::false_type{});
    else run(type, std::false_type{}, std::false_type{});
  };
  if (p.dtype == fa::Dtype::bf16) layout(__nv_bfloat16{});
  else layout(__half{});
}

}  // namespace flash_v3
