// Chapter 10's forward: the checks, the split plan, the split-KV launch and (with several pieces)
// the combine.
#include "10_decoding/decoding.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>
#include <type_traits>

#include "10_decoding/launch.cuh"
#include "common/cuda/cuda_check.h"
#include "common/device/launch.h"
#include "common/cuda/device_memory.h"  // workspace

namespace decoding {
namespace {

template <class F>
void with_type_and_dim(const fa::Problem& p, F&& f) {
  auto by_dim = [&](auto type) {
    using T = decltype(type);
    if (p.head_dim == 64) f(T{}, std::integral_constant<int, 64>{});
    else if (p.head_dim == 128) f(T{}, std::integral_constant<int, 128>{});
    else f(T{}, std::integral_constant<int, 256>{});  // Q's tile and a 3-stage K/V ring: 224 KiB
  };
  if (p.dtype == fa::Dtype::bf16) by_dim(__nv_bfloat16{});
  else by_dim(__half{});
}

}  // namespace

const fa::Chapter& chapter() {
  static const fa::Chapter c{
      .support = {.chapter = "10_decoding",
                  .dtypes = {fa::Dtype::bf16, fa::Dtype::f16},
                  .head_dims = {64, 128, 256},
                  .max_head_dim = 256},
      .forward = forward,
      .test_head_dims = {64, 128, 256},
      .defaults = fa::default_problem(fa::Dtype::bf16)};
  return c;
}

Plan plan(const fa::Problem& p) {
  p.validate();
  if ((p.head_dim != 64 && p.head_dim != 128 && p.head_dim != 256) || p.dtype == fa::Dtype::f32)
    throw std::invalid_argument("10_decoding: plans bf16 / f16 problems of head dim 64, 128 or 256");
  Plan out{};
  with_type_and_dim(p, [&](auto type, auto kd) { out = plan_for<decltype(type), decltype(kd)::value>(p); });
  return out;
}

void forward(const fa::Problem& p, const void* q, const void* k, const void* v, void* o, float* lse,
             cudaStream_t stream) {
  fa::check_forward_args(chapter().support, p, q, k, v, o, lse);
  const Params base = fa2::make_params(p, q, k, v, o, lse, "10_decoding");
  with_type_and_dim(p, [&](auto type, auto kd) { run<decltype(type), decltype(kd)::value>(p, base, stream); });
}

void forward_with_options(const fa::Problem& p, const void* q, const void* k, const void* v, void* o, float* lse,
                          const fa::ScoreOptions& options, cudaStream_t stream) {
  fa::check_forward_args(chapter().support, p, q, k, v, o, lse);
  fa::check_score_options(p, options, "10_decoding");
  const Params base = fa2::make_params(p, q, k, v, o, lse, "10_decoding");
  const DeviceCopy<float> slopes(options.alibi_slopes, stream), sinks(options.sink_logits, stream);
  const Extras x{.softcap = static_cast<float>(options.softcap), .alibi_slopes = slopes.get(), .sink_logits = sinks.get()};
  with_type_and_dim(p, [&](auto type, auto kd) { run<decltype(type), decltype(kd)::value>(p, base, stream, x); });
}

void forward_with_cache(const fa::Problem& p, const void* q, const void* k_new, const void* v_new, const KVCache& cache,
                        void* o, float* lse, const fa::ScoreOptions& options, cudaStream_t stream) {
  auto fail = [](const std::string& what) { throw std::invalid_argument("10_decoding (KV cache): " + what); };
  if (static_cast<int>(cache.seqlens.size()) != p.batch)
    fail("seqlens needs one length per sequence (" + std::to_string(p.batch) + "), got " +
         std::to_string(cache.seqlens.size()));
  if (cache.capacity < 1) fail("capacity must be >= 1");
  std::vector<int> keys(p.batch);  // sequence b attends to its cached tokens and this step's
  for (int b = 0; b < p.batch; ++b) {
    if (cache.seqlens[b] < 0 || cache.seqlens[b] > cache.capacity - p.seqlen_q)
      fail("sequence " + std::to_string(b) + " has " + std::to_string(cache.seqlens[b]) + " cached tokens; with " +
           std::to_string(p.seqlen_q) + " new ones it needs 0 <= cached <= capacity - seqlen_q = " +
           std::to_string(cache.capacity - p.seqlen_q));
    keys[b] = cache.seqlens[b] + p.seqlen_q;
  }
  fa::Problem pk = p;  // as the kernel sees it: the longest sequence sizes the plan
  pk.seqlen_k = *std::max_element(keys.begin(), keys.end());
  fa::check_forward_args(chapter().support, pk, q, cache.k, cache.v, o, lse);
  if (!k_new || !v_new) fail("k_new and v_new must not be null");
  if (!aligned16(k_new) || !aligned16(v_new)) fail("k_new and v_new must be 16-byte aligned");
  fa::check_score_options(pk, options, "10_decoding");
  const Params base = fa2::make_params(pk, q, cache.k, cache.v, o, lse, "10_decoding");
  const DeviceCopy<int> cached(cache.seqlens, stream), lengths(keys, stream);
  const DeviceCopy<float> slopes(options.alibi_slopes, stream), sinks(options.sink_logits, stream);
  const Extras x{.kv_rows = cache.capacity,
                 .seqlens_k = lengths.get(),
                 .softcap = static_cast<float>(options.softcap),
                 .alibi_slopes = slopes.get(),
                 .sink_logits = sinks.get()};
  with_type_and_dim(pk, [&](auto type, auto kd) {
    using T = decltype(type);
    constexpr int kD = decltype(kd)::value;
    const std::int64_t chunks = std::int64_t{p.batch} * p.kv_heads * p.seqlen_q * (kD * 2 / 16);
    append_kernel<T, kD><<<blocks_1d((chunks + 255) / 256, "10_decoding (append)"), 256, 0, stream>>>(
        static_cast<const T*>(k_new), static_cast<const T*>(v_new), static_cast<T*>(cache.k),
        static_cast<T*>(cache.v), cached.get(), p.kv_heads, p.seqlen_q, cache.capacity, chunks);
    FA_CHECK_LAUNCH();
    run<T, kD>(pk, base, stream, x);
  });
}

}  // namespace decoding
