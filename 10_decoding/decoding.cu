// Chapter 10's forward: the checks, the split plan, the split-KV launch and (with several pieces)
// the combine.
#include "10_decoding/decoding.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <stdexcept>
#include <type_traits>

#include "10_decoding/decoding.cuh"
#include "common/cuda_check.h"
#include "common/device/launch.h"
#include "common/device_memory.h"  // workspace

namespace decoding {
namespace {

constexpr int kBr = 64, kBc = 64;  // DecodeConfig's tile

// The plan's slots: the SM count, one CTA an SM (split_plan.h says why). The first call also lets
// the kernel have its shared memory (above 48 KB a kernel must opt in).
template <class C>
int plan_slots() {
  static const int n = [] {
    allow_shared_memory(split_kv_kernel<C>, smem_bytes<C>());
    int device = 0, sms = 0;
    FA_CUDA_CHECK(cudaGetDevice(&device));
    FA_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    return sms;
  }();
  return n;
}

template <class T, int kD>
Plan plan_for(const fa::Problem& p) {
  using C = DecodeConfig<T, kD>;
  static_assert(C::Br == kBr && C::Bc == kBc);
  Plan pl{};
  pl.row_tiles = ceil_div(packed_rows(p.group_size(), p.seqlen_q), kBr);
  pl.tiles = std::int64_t{p.batch} * p.kv_heads * pl.row_tiles;
  const SplitPlan sp = plan_splits(pl.tiles, ceil_div(p.seqlen_k, kBc), plan_slots<C>());
  pl.splits = sp.splits;
  pl.keys_per_split = sp.blocks_per_split * kBc;
  return pl;
}

template <class T, int kD>
void run(const fa::Problem& p, const Params& base, cudaStream_t stream) {
  using C = DecodeConfig<T, kD>;
  const Plan pl = plan_for<T, kD>(p);
  SplitParams prm{.base = base,
                  .kv_heads = p.kv_heads,
                  .row_tiles = pl.row_tiles,
                  .tiles = pl.tiles,
                  .splits = pl.splits,
                  .keys_per_split = pl.keys_per_split,
                  .o_part = nullptr,
                  .lse_part = nullptr};
  const std::int64_t out_rows = std::int64_t{p.batch} * p.heads * p.seqlen_q;
  if (pl.splits > 1) {  // the pieces' partial O, then their LSE, for the combine
    const std::int64_t parts = out_rows * pl.splits;
    prm.o_part = static_cast<float*>(fa::cuda::workspace((parts * kD + parts) * sizeof(float),
                                                         "10_decoding: the pieces' partial O and LSE (fp32)"));
    prm.lse_part = prm.o_part + parts * kD;
  }
  const dim3 grid = fa::cuda::tiles_by_rows(pl.splits, pl.tiles, "10_decoding");
  split_kv_kernel<C><<<grid, C::kThreads, smem_bytes<C>(), stream>>>(prm);
  FA_CHECK_LAUNCH();
  if (pl.splits > 1) {  // its blocks start while the split kernel's last blocks finish
    launch_dependent(combine_kernel<T, kD>, fa::cuda::blocks_1d((out_rows + 7) / 8, "10_decoding (combine)"), 256, 0,
                     stream, prm, out_rows);
  }
}

template <class F>
void with_type_and_dim(const fa::Problem& p, F&& f) {
  auto by_dim = [&](auto type) {
    using T = decltype(type);
    if (p.head_dim == 64) f(T{}, std::integral_constant<int, 64>{});
    else f(T{}, std::integral_constant<int, 128>{});
  };
  if (p.dtype == fa::Dtype::bf16) by_dim(__nv_bfloat16{});
  else by_dim(__half{});
}

}  // namespace

const fa::Chapter& chapter() {
  static const fa::Chapter c{
      .support = {.chapter = "10_decoding",
                  .dtypes = {fa::Dtype::bf16, fa::Dtype::f16},
                  .head_dims = {64, 128},
                  .max_head_dim = 128},
      .forward = forward,
      .test_head_dims = {64, 128},
      .defaults = fa::default_problem(fa::Dtype::bf16)};
  return c;
}

Plan plan(const fa::Problem& p) {
  p.validate();
  if ((p.head_dim != 64 && p.head_dim != 128) || p.dtype == fa::Dtype::f32)
    throw std::invalid_argument("10_decoding: plans bf16 / f16 problems of head dim 64 or 128");
  Plan out{};
  with_type_and_dim(p, [&](auto type, auto kd) { out = plan_for<decltype(type), decltype(kd)::value>(p); });
  return out;
}

void forward(const fa::Problem& p, const void* q, const void* k, const void* v, void* o, float* lse,
             cudaStream_t stream) {
  fa::check_forward_args(chapter().support, p, q, k, v, o, lse);
  const Params base = tensor_core::make_params(p, q, k, v, o, lse, "10_decoding");
  with_type_and_dim(p, [&](auto type, auto kd) { run<decltype(type), decltype(kd)::value>(p, base, stream); });
}

}  // namespace decoding
