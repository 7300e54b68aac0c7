// The step-by-step versions of chapter 09 (steps.h): one launch per step, dtype and head dim.
#include "09_flash_v3/steps/steps.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <string>

#include "09_flash_v3/launch.cuh"  // launch, and through it the kernel (flash_v3.cuh)
#include "09_flash_v3/steps/one_warpgroup.cuh"

namespace flash_v3::steps {
namespace {

// kStep 1: one warpgroup; 2: warp specialized; 3: + ping-pong; 4: + persistent; 5: + the softmax
// overlapped with the group's own P V (the chapter's kernel at D = 128); 7: step 4 with three
// consumer warpgroups (ThreeConsumerConfig; at D = 64 the chapter launches it, or step 1 under a
// short causal mask). Step 6 is the FP8 forward (fp8.h), an entry point of its own.
template <int kStep, class T, int kD>
void launch_step(const fa::Problem& p, const void* q, const void* k, const void* v, const Params& prm,
                 cudaStream_t stream) {
  if constexpr (kStep == 1) launch_one_warpgroup<V1Config<T, kD>>(p, q, k, v, prm, stream);
  else if constexpr (kStep == 2) launch<WsConfig<T, kD, ChapterConfig<T, kD>::kStages, false, false>>(p, q, k, v, prm, stream);
  else if constexpr (kStep == 3) launch<WsConfig<T, kD, ChapterConfig<T, kD>::kStages, true, false>>(p, q, k, v, prm, stream);
  else if constexpr (kStep == 4) launch<ChapterConfig<T, kD, /*kOverlap=*/false>>(p, q, k, v, prm, stream);
  else if constexpr (kStep == 5) launch<ChapterConfig<T, kD>>(p, q, k, v, prm, stream);
  else launch<ThreeConsumerConfig<T, kD>>(p, q, k, v, prm, stream);
}

const fa::Support& support() {
  static const fa::Support s{.chapter = "09_flash_v3 (steps)",
                             .dtypes = {fa::Dtype::bf16, fa::Dtype::f16},
                             .head_dims = {64, 128},
                             .max_head_dim = 128};
  return s;
}

template <int kStep>
void forward(const fa::Problem& p, const void* q, const void* k, const void* v, void* o, float* lse,
             cudaStream_t stream) {
  fa::check_forward_args(support(), p, q, k, v, o, lse);
  fa::cuda::require_compute_capability(90, "09_flash_v3 (steps)", "it uses wgmma and TMA, built for sm_90a");
  const Params prm = fa2::make_params(p, q, k, v, o, lse, "09_flash_v3 (steps)");
  auto run = [&](auto type) {
    using T = decltype(type);
    if (p.head_dim == 64) launch_step<kStep, T, 64>(p, q, k, v, prm, stream);
    else launch_step<kStep, T, 128>(p, q, k, v, prm, stream);
  };
  if (p.dtype == fa::Dtype::bf16) run(__nv_bfloat16{});
  else run(__half{});
}

template <int kStep>
Step make(const std::string& name, const std::string& what) {
  fa::Support s = support();
  s.chapter = "09_flash_v3." + name;
  return {.name = name,
          .what = what,
          .chapter = {.support = s,
                      .forward = forward<kStep>,
                      .test_head_dims = {64, 128},
                      .defaults = fa::default_problem(fa::Dtype::bf16)}};
}

}  // namespace

const std::vector<Step>& all() {
  static const std::vector<Step> steps = {
      make<1>("v1_one_warpgroup", "06's algorithm on wgmma (S: SS form, P V: RS form) and TMA, one warpgroup, Br = Bc = 64"),
      make<2>("v2_warp_specialized", "+ a producer warpgroup (TMA ring, full/empty mbarriers, setmaxnreg), two consumers, Br = Bc = 128"),
      make<3>("v3_pingpong", "+ the consumers take turns on the tensor cores (named barriers)"),
      make<4>("v4_persistent", "+ one block per SM walks the tiles (not causal): the next tile's copies fly under this one's end"),
      make<5>("v5_overlap", "+ a consumer's softmax runs under its own P V, which lands after it (the chapter's kernel at D = 128)"),
      make<7>("v7_three_consumers", "v4 with three consumers of 64 rows (Br = 192) taking turns in a ring, Bc = 128 at D = 64 (the chapter's kernel there without a causal mask)"),
  };
  return steps;
}

}  // namespace flash_v3::steps
