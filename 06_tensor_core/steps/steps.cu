// The step-by-step versions of chapter 06 (steps.h): one Config per step and head dim, and the
// head dim 512 alternative (split_d.cuh) with its own forward.
#include "06_tensor_core/steps/steps.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <stdexcept>
#include <type_traits>

#include "06_tensor_core/steps/pingpong.cuh"
#include "06_tensor_core/steps/split_d.cuh"
#include "06_tensor_core/steps/tma_kv.cuh"
#include "06_tensor_core/tensor_core.cuh"

namespace tensor_core::steps {
namespace {

using bf16 = __nv_bfloat16;
//                         T,    D,  Bc, kMTiles, kStages, kSwizzle, kQInRegs, kLazyRescale, kPadded, kTmaKV
using V1_64 = Config<bf16, 64, 64, 2, 1, false, false>;    // ldmatrix + mma, plain row-major smem
using V1_128 = Config<bf16, 128, 64, 2, 1, false, false>;
using V2_64 = Config<bf16, 64, 64, 2, 1, true, false>;     // + XOR swizzle
using V2_128 = Config<bf16, 128, 64, 2, 1, true, false>;
using V3_64 = Config<bf16, 64, 64, 2, 2, true, false>;     // + double-buffered K/V
using V3_128 = Config<bf16, 128, 64, 2, 2, true, false>;
using V4_64 = Config<bf16, 64, 64, 2, 2, true, true>;      // + Q_i's fragments kept in registers
using V5_64 = Config<bf16, 64, 128, 2, 2, true, false>;    // v3 with Bc = 128: the chapter's kernel at D = 64
using V6_64 = Config<bf16, 64, 128, 2, 2, true, false, true>;   // v5 + lazy rescale
using V6_128 = Config<bf16, 128, 64, 2, 2, true, false, true>;  // v3 + lazy rescale: the chapter's D = 128
using V7_64 = Config<bf16, 64, 128, 2, 2, true, false, false, false, true>;  // the chapter's tiles + K/V by
using V7_128 = Config<bf16, 128, 64, 2, 2, true, false, true, false, true>;  // the copy engine (sm_90)
using Pp_64 = PingPong<V5_64>;     // alternative: v5 / v3 in two groups
using Pp_128 = PingPong<V3_128>;   // of 4 warps that take turns (pingpong.cuh)
using Bc32_64 = Config<bf16, 64, 32, 2, 2, true, false>;   // alternative: 128 x 32 (fewer registers)
using Bc32_128 = Config<bf16, 128, 32, 2, 2, true, false>;

// The chapter's launch, or the ping-pong or copy-engine kernel's for their configurations.
template <class C>
void launch_step(const fa::Problem& p, const Params& prm, const void* k, const void* v, cudaStream_t stream) {
  if constexpr (IsPingPong<C>::value) launch_pingpong<C>(prm, stream);
  else if constexpr (C::kTmaKV) launch_tma_kv<C>(prm, k, v, /*bf16=*/true, std::int64_t{p.batch} * p.kv_heads, stream);
  else launch<C>(prm, stream);
}

// C128 = void: the step has no D = 128 version.
template <class C64, class C128>
void forward(const fa::Problem& p, const void* q, const void* k, const void* v, void* o, float* lse,
             cudaStream_t stream) {
  static const fa::Support support{"06_tensor_core (steps)", {fa::Dtype::bf16},
                                   std::is_void_v<C128> ? std::vector<int>{64} : std::vector<int>{64, 128}, 128};
  fa::check_forward_args(support, p, q, k, v, o, lse);
  const Params prm = make_params(p, q, k, v, o, lse, "06_tensor_core (steps)");
  if (p.head_dim == 64) {
    launch_step<C64>(p, prm, k, v, stream);
  } else if constexpr (!std::is_void_v<C128>) {
    launch_step<C128>(p, prm, k, v, stream);
  }
}

// min_cc: the compute capability the step needs (its tests skip below it).
template <class C64, class C128 = void>
Step make(const std::string& name, const std::string& what, int min_cc = 0) {
  const std::vector<int> dims = std::is_void_v<C128> ? std::vector<int>{64} : std::vector<int>{64, 128};
  fa::Problem defaults = fa::default_problem(fa::Dtype::bf16);
  return {.name = name,
          .what = what,
          .chapter = {.support = {.chapter = "06_tensor_core." + name, .dtypes = {fa::Dtype::bf16}, .head_dims = dims, .max_head_dim = 128,
                                  .min_compute_capability = min_cc},
                      .forward = forward<C64, C128>,
                      .test_head_dims = dims,
                      .defaults = defaults}};
}

// alt_split_d512: head dim 512 only, bf16 and f16 (split_d.cuh).
const fa::Support& split_d512_support() {
  static const fa::Support support{.chapter = "06_tensor_core.alt_split_d512",
                                   .dtypes = {fa::Dtype::bf16, fa::Dtype::f16},
                                   .head_dims = {512},
                                   .max_head_dim = 512};
  return support;
}

void forward_split_d512(const fa::Problem& p, const void* q, const void* k, const void* v, void* o, float* lse,
                        cudaStream_t stream) {
  fa::check_forward_args(split_d512_support(), p, q, k, v, o, lse);
  const Params prm = make_params(p, q, k, v, o, lse, "06_tensor_core (steps)");
  if (p.dtype == fa::Dtype::bf16) launch_split_d<SplitD512<bf16>>(prm, stream);
  else launch_split_d<SplitD512<__half>>(prm, stream);
}

Step make_split_d512() {
  fa::Problem defaults = fa::default_problem(fa::Dtype::bf16);
  defaults.head_dim = 512;
  return {.name = "alt_split_d512",
          .what = "D = 512: 8 warps split S_ij by keys and O_i by columns, row max shared through smem (Br = Bc = 64)",
          .chapter = {.support = split_d512_support(),
                      .forward = forward_split_d512,
                      .test_head_dims = {512},
                      .defaults = defaults}};
}

// alt_split_d576_512: DeepSeek's MLA head dims, 576 for Q and K, 512 for V (split_d.cuh with 64
// extra dims), bf16 and f16.
const fa::Support& split_d576_support() {
  static const fa::Support support{.chapter = "06_tensor_core.alt_split_d576_512",
                                   .dtypes = {fa::Dtype::bf16, fa::Dtype::f16},
                                   .head_dims = {576},
                                   .max_head_dim = 576,
                                   .head_dim_v = 512};
  return support;
}

void forward_split_d576(const fa::Problem& p, const void* q, const void* k, const void* v, void* o, float* lse,
                        cudaStream_t stream) {
  fa::check_forward_args(split_d576_support(), p, q, k, v, o, lse);
  const Params prm = make_params(p, q, k, v, o, lse, "06_tensor_core (steps)");
  if (p.dtype == fa::Dtype::bf16) launch_split_d<SplitD512<bf16, 64>>(prm, stream);
  else launch_split_d<SplitD512<__half, 64>>(prm, stream);
}

Step make_split_d576() {
  fa::Problem defaults = fa::default_problem(fa::Dtype::bf16);
  defaults.head_dim = 576;
  defaults.head_dim_v = 512;
  return {.name = "alt_split_d576_512",
          .what = "MLA's head dims: S over 576 (the last 64 from tiles of their own), O over 512; as alt_split_d512",
          .chapter = {.support = split_d576_support(),
                      .forward = forward_split_d576,
                      .test_head_dims = {576},
                      .defaults = defaults}};
}

}  // namespace

const std::vector<Step>& all() {
  static const std::vector<Step> steps = {
      make<V1_64, V1_128>("v1_plain", "mma.sync + ldmatrix, row-major smem, load K_j/V_j then compute"),
      make<V2_64, V2_128>("v2_swizzle", "+ XOR-swizzled smem (conflict-free ldmatrix)"),
      make<V3_64, V3_128>("v3_pipeline", "+ K/V double buffer: tile j+1 loads during tile j"),
      make<V4_64>("v4_q_in_registers", "+ Q_i's A fragments loaded once (D = 64 only: D = 128 has no registers left)"),
      make<V5_64>("v5_bc128", "v3 with Bc = 128, FlashAttention-2's D = 64 tiles (no registers left for Q_i)"),
      make<V6_64, V6_128>("v6_lazy_rescale", "v5 / v3 + O_i rescaled only when some row's max grew (the chapter's kernel at D = 128)"),
      make<V7_64, V7_128>("v7_tma_kv", "the chapter's kernel with K_j, V_j by Hopper's copy engine (TMA; sm_90 only)", 90),
      make<Pp_64, Pp_128>("alt_pingpong", "v5 / v3 with 8 warps in two groups of 4 that take turns on the tensor cores (Br = 256)"),
      make<Bc32_64, Bc32_128>("alt_bc32", "v3 with Bc = 32 (fewer registers, twice the softmax bookkeeping per key)"),
      make_split_d512(),
      make_split_d576(),
  };
  return steps;
}

}  // namespace tensor_core::steps
