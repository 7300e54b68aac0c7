// Chapter 10's steps (steps.h): the stream-K forward's host side.
#include "10_decoding/steps/steps.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "10_decoding/launch.cuh"  // plan_slots
#include "10_decoding/steps/stream_k.cuh"
#include "common/cuda/cuda_check.h"
#include "common/device/launch.h"
#include "common/cuda/device_memory.h"

namespace decoding::steps {
namespace {

const fa::Support& support() {
  static const fa::Support s{.chapter = "10_decoding.stream_k",
                             .dtypes = {fa::Dtype::bf16, fa::Dtype::f16},
                             .head_dims = {64, 128},
                             .max_head_dim = 128};
  return s;
}

// One CTA per SM, as the chapter's plan (plan_slots); the first call also lets the kernel have its
// shared memory.
template <class C>
int ctas() {
  allow_shared_memory_once(stream_k_kernel<C>, smem_bytes<C>());
  return plan_slots();
}

template <class T, int kD>
void run(const fa::Problem& p, const Params& base, cudaStream_t stream) {
  using C = DecodeConfig<T, kD>;
  const int row_tiles = ceil_div(packed_rows(p.group_size(), p.seqlen_q), C::Br);
  const StreamK sk{.tiles = std::int64_t{p.batch} * p.kv_heads * row_tiles,
                   .key_blocks = ceil_div(p.seqlen_k, C::Bc),
                   .ctas = ctas<C>()};
  SplitParams prm{.base = base,
                  .kv_heads = p.kv_heads,
                  .row_tiles = row_tiles,
                  .tiles = sk.tiles,
                  .splits = max_pieces(sk),  // pieces per row in the workspace (the combine's `splits`)
                  .keys_per_split = 0,       // unused: the schedule cuts the key ranges
                  .o_part = nullptr,
                  .lse_part = nullptr,
                  .kv_rows = p.seqlen_k,
                  .seqlens_k = nullptr,
                  .softcap = 0.0f,
                  .alibi_slopes = nullptr,
                  .sink_logits = nullptr};
  const std::int64_t out_rows = std::int64_t{p.batch} * p.heads * p.seqlen_q, parts = out_rows * prm.splits;
  prm.o_part = static_cast<float*>(fa::cuda::workspace((parts * kD + parts) * sizeof(float),
                                                       "10_decoding.stream_k: the pieces' partial O and LSE (fp32)"));
  prm.lse_part = prm.o_part + parts * kD;
  stream_k_kernel<C><<<sk.ctas, C::kThreads, smem_bytes<C>(), stream>>>(prm, sk);
  FA_CHECK_LAUNCH();
  launch_dependent(combine_kernel<T, kD, false>, fa::cuda::blocks_1d((out_rows + 7) / 8, "10_decoding.stream_k (combine)"),
                   256, 0, stream, prm, out_rows);
}

void forward(const fa::Problem& p, const void* q, const void* k, const void* v, void* o, float* lse,
             cudaStream_t stream) {
  fa::check_forward_args(support(), p, q, k, v, o, lse);
  const Params base = fa2::make_params(p, q, k, v, o, lse, "10_decoding.stream_k");
  auto by_dim = [&](auto type) {
    using T = decltype(type);
    if (p.head_dim == 64) run<T, 64>(p, base, stream);
    else run<T, 128>(p, base, stream);
  };
  if (p.dtype == fa::Dtype::bf16) by_dim(__nv_bfloat16{});
  else by_dim(__half{});
}

}  // namespace

const std::vector<Step>& all() {
  static const std::vector<Step> steps = {
      {.name = "stream_k",
       .what = "persistent CTAs over even shares of (tile, key tile) units; the combine as the fix-up",
       .chapter = {.support = support(),
                   .forward = forward,
                   .test_head_dims = {64, 128},
                   .defaults = fa::default_problem(fa::Dtype::bf16)}}};
  return steps;
}

}  // namespace decoding::steps
