// The step v6_fp8 (fp8.h): the chapter's kernel as Fp8<WsConfig> (below, on config.cuh's WsConfig),
// whose producer warps transpose V in shared memory into the key order of P's E4M3 fragments.
#include "09_flash_v3/steps/fp8.h"

#include <cuda_fp16.h>

#include <cmath>
#include <cstdint>
#include <stdexcept>

#include "09_flash_v3/launch.cuh"  // launch, and through it the kernel

namespace flash_v3::steps {
namespace {

constexpr int kD = 128;
// A configuration C on FP8 inputs (steps/fp8.cu, FlashAttention-3's FP8 forward): Q_i and K_j in
// E4M3, one byte an element, and V_j^T, the (D, keys) tile of V transposed with its keys in
// fp8_pv_key's order (the producer's warps 1-3 write it from V_j's staging slot: pipeline.cuh,
// transpose_v), so that all three are the K-major operands FP8's wgmma takes (issue_scores,
// issue_pv). T is O's type (f16). At D = 128 and Bc = 128 a row of Q, K, V or V^T is 128 bytes,
// one atom of the swizzle; the K and V stages take half the bytes of bf16's.
// A Q slot keeps its bf16 size: the epilogue stages O_i (in T) there, each consumer group
// over its own rows of Q_i only (the group's 64 fp8 rows are the first 8 KiB of its O rows).
template <class C>
struct Fp8 : C {
  static_assert(C::kD == 128 && C::Bc == 128, "the FP8 step: D = 128, Bc = 128");
  static constexpr bool kFp8 = true;
  // The consumers' fragments, with P leaving the softmax as E4M3 (pack2's FP8 form), two keys to
  // a register's low half, which pack_e4m3 pairs up into P V's A fragments.
  using Tile = fa2::Config<__nv_fp8_e4m3, C::kD, C::Bc, /*kMTiles=*/1>;
  static constexpr std::uint32_t kQTxBytes = C::Br * C::kD;  // Q_i in E4M3
  static constexpr std::uint32_t kTileBytes = C::Bc * C::kD;  // K_j or V_j^T in E4M3
  static constexpr std::uint32_t kK = C::kQSlots * C::kQBytes;
  static constexpr std::uint32_t kV = kK + C::kStages * kTileBytes;         // the ring's V_j^T
  static constexpr std::uint32_t kStagedV = kV + C::kStages * kTileBytes;  // two slots of V_j as it lies
  static constexpr int kSmemBytes = C::kQSlots * C::kQBytes + (2 * C::kStages + 2) * kTileBytes + 1024;
  // The producer's warps 1-3 transpose V (transpose_v): 128 x 56 + 256 x 224 = 64,512 registers.
  static constexpr int kProducerRegs = 56, kConsumerRegs = 224;
};
// The chapter's kernel on E4M3 (Fp8<C>): 128 x 128 tiles, ping-pong, persistent, four K/V stages
// (a stage is half of bf16's bytes); the intra-warpgroup overlap without a mask, and without it
// under a causal mask, as the chapter chooses at D = 128.
template <bool kOverlap>
using Fp8Config = Fp8<WsConfig<__half, kD, /*kStages=*/4, /*kPingPong=*/true, /*kPersistent=*/true, /*kBc=*/128,
                               kOverlap>>;

}  // namespace

const fa::Support& fp8_support() {
  static const fa::Support s{.chapter = "09_flash_v3.v6_fp8",
                             .dtypes = {fa::Dtype::f16},  // O's; the inputs are E4M3
                             .head_dims = {kD},
                             .max_head_dim = kD};
  return s;
}

void forward_fp8(const fa::Problem& p, const void* q, const void* k, const void* v, Fp8Scales scales, void* o,
                 float* lse, cudaStream_t stream) {
  fa::check_forward_args(fp8_support(), p, q, k, v, o, lse);
  for (float s : {scales.q, scales.k, scales.v})
    if (!(std::isfinite(s) && s > 0.0f))
      throw std::invalid_argument("09_flash_v3.v6_fp8: the scales of Q, K and V must be finite and > 0");
  if (fa::cuda::compute_capability() != 90)
    throw std::invalid_argument("09_flash_v3.v6_fp8: needs a Hopper GPU (compute capability 9.0: FP8 wgmma, TMA); "
                                "this one is " + std::to_string(fa::cuda::compute_capability()));
  Params prm = fa2::make_params(p, q, k, v, o, lse, "09_flash_v3.v6_fp8");
  prm.scale_log2 *= scales.q * scales.k;  // S = (q Q8) (k K8)^T: the scales join the softmax scale
  const Fp8Args args{scales.v};
  if (p.causal) launch<Fp8Config<false>>(p, q, k, v, prm, stream, args);
  else launch<Fp8Config<true>>(p, q, k, v, prm, stream, args);
}

}  // namespace flash_v3::steps
