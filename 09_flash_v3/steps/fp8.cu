// The step v6_fp8 (fp8.h): V transposed into the key order of P's E4M3 fragments, then the
// chapter's kernel as Fp8<WsConfig> (below, on config.cuh's WsConfig).
#include "09_flash_v3/steps/fp8.h"

#include <cuda_fp16.h>

#include <cmath>
#include <cstdint>
#include <stdexcept>

#include "09_flash_v3/launch.cuh"  // launch, and through it the kernel
#include "common/device/wgmma_layout.h"  // fp8_pv_key

namespace flash_v3::steps {
namespace {

constexpr int kD = 128;
constexpr int kTransposeKeys = 128;  // keys a block of transpose_v_kernel takes

// V [B * Hkv][Sk][D] E4M3 -> V^T [B * Hkv][D][cols], cols = fp8_vt_cols(Sk): column key0 + c of a
// 32-key block holds key key0 + fp8_pv_key(c), the order P's E4M3 fragments hold the keys in
// (wgmma_layout.h), and columns of keys past Sk hold zeros (P is 0 there, and 0 x 0 stays 0 where
// garbage could be NaN). A block takes 128 keys of one (batch, KV head): their rows into shared
// memory in 16-byte pieces. Then warp w takes keys 16 w .. 16 w + 15 and lane l the columns
// 4 l .. 4 l + 3 of D: one 4-byte word of each of the 16 keys (the 32 lanes read 32 consecutive
// words of a row, no bank conflicts), four 4 x 4 byte transposes (prmt), and one 16-byte store to
// each of V^T's rows 4 l .. 4 l + 3. (Gathering single bytes instead measures 54 us at 8k tokens
// and 16 heads on an H200, this 37 us.)
__global__ void __launch_bounds__(256) transpose_v_kernel(const std::uint8_t* v, std::uint8_t* vt, int seqlen_k,
                                                          std::int64_t cols, std::int64_t key_blocks) {
  __shared__ __align__(16) std::uint8_t tile[kTransposeKeys][kD];
  const std::int64_t bh = blockIdx.x / key_blocks;
  const int key0 = static_cast<int>(blockIdx.x % key_blocks) * kTransposeKeys;
  const std::uint8_t* src = v + (bh * seqlen_k + key0) * kD;
#pragma unroll
  for (int n = 0; n < kTransposeKeys * kD / 16 / 256; ++n) {
    const int i = threadIdx.x + 256 * n, r = i / (kD / 16), c = i % (kD / 16);
    uint4 x = make_uint4(0, 0, 0, 0);
    if (key0 + r < seqlen_k) x = *reinterpret_cast<const uint4*>(src + r * kD + 16 * c);
    *reinterpret_cast<uint4*>(&tile[r][16 * c]) = x;
  }
  __syncthreads();
  const int c0 = 16 * (threadIdx.x / 32), lane = threadIdx.x % 32;
  if (key0 + c0 >= cols) return;
  std::uint32_t w[16];  // w[c]: key c0 + fp8_pv_key(c)'s bytes 4 lane .. 4 lane + 3
#pragma unroll
  for (int c = 0; c < 16; ++c)
    w[c] = *reinterpret_cast<const std::uint32_t*>(&tile[c0 + fa::cuda::fp8_pv_key(c)][4 * lane]);
  std::uint32_t out[4][4];  // out[e][q]: row 4 lane + e, columns c0 + 4 q .. + 3
#pragma unroll
  for (int q = 0; q < 4; ++q) {
    const std::uint32_t* x = w + 4 * q;
    const std::uint32_t lo01 = __byte_perm(x[0], x[1], 0x5140), hi01 = __byte_perm(x[0], x[1], 0x7362);
    const std::uint32_t lo23 = __byte_perm(x[2], x[3], 0x5140), hi23 = __byte_perm(x[2], x[3], 0x7362);
    out[0][q] = __byte_perm(lo01, lo23, 0x5410);  // byte 0 of each of the four keys
    out[1][q] = __byte_perm(lo01, lo23, 0x7632);
    out[2][q] = __byte_perm(hi01, hi23, 0x5410);
    out[3][q] = __byte_perm(hi01, hi23, 0x7632);
  }
#pragma unroll
  for (int e = 0; e < 4; ++e)
    *reinterpret_cast<uint4*>(vt + (bh * kD + 4 * lane + e) * cols + key0 + c0) =
        make_uint4(out[e][0], out[e][1], out[e][2], out[e][3]);
}

// A configuration C on FP8 inputs (steps/fp8.cu, FlashAttention-3's FP8 forward): Q_i and K_j in
// E4M3, one byte an element, and V_j^T, the (D, keys) tile of V transposed with its keys in
// fp8_pv_key's order (steps/fp8.cu transposes V before the kernel), so that all three are the
// K-major operands FP8's wgmma takes (issue_scores, issue_pv). T is O's type (f16). At D = 128 and Bc = 128 a row of Q, K or
// V^T is 128 bytes, one atom of the swizzle; the K and V stages take half the bytes of bf16's.
// A Q slot keeps its bf16 size: the epilogue stages O_i (in T) there, each consumer group
// over its own rows of Q_i only (the group's 64 fp8 rows are the first 8 KiB of its O rows).
template <class C>
struct Fp8 : C {
  static_assert(C::kD == 128 && C::Bc == 128, "the FP8 step: D = 128, Bc = 128");
  static constexpr bool kFp8 = true;
  // With the overlap a vote on the whole tile keeps every score and every E4M3 key live at once,
  // and ptxas spills inside the turn (96 bytes): one vote a row there. Without it, one a tile.
  static constexpr bool kRowVote = C::kOverlap;
  // The consumers' fragments (06's, for the scores and the mask); P leaves the softmax straight into
  // P V's E4M3 A fragments (pipeline.cuh: StoreP).
  using Tile = fa2::Config<__nv_fp8_e4m3, C::kD, C::Bc, /*kMTiles=*/1>;
  static constexpr std::uint32_t kQTxBytes = C::Br * C::kD;  // Q_i in E4M3
  static constexpr std::uint32_t kTileBytes = C::Bc * C::kD;  // K_j or V_j^T in E4M3
  static constexpr std::uint32_t kK = C::kQSlots * C::kQBytes;
  static constexpr std::uint32_t kV = kK + C::kStages * kTileBytes;
  static constexpr int kSmemBytes = C::kQSlots * C::kQBytes + 2 * C::kStages * kTileBytes + 1024;
};
// The chapter's kernel on E4M3 (Fp8<C>): 128 x 128 tiles, ping-pong, persistent, four K/V stages
// (a stage is half of bf16's bytes), without the intra-warpgroup overlap (step v4's turns) with
// or without a mask: without one v4 measured 1.02-1.03x of the overlap at 4k-16k (H200, two
// rounds in one call), and under the causal mask it is faster too (fp8.md).
using Fp8Config = Fp8<WsConfig<__half, kD, /*kStages=*/4, /*kPingPong=*/true, /*kPersistent=*/true, /*kBc=*/128,
                               /*kOverlap=*/false>>;

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
  const std::int64_t kv = std::int64_t{p.batch} * p.kv_heads, cols = fp8_vt_cols(p.seqlen_k);
  auto* vt = static_cast<std::uint8_t*>(fa::cuda::workspace(static_cast<std::size_t>(kv * kD * cols),
                                                            "09_flash_v3.v6_fp8's V^T"));
  const std::int64_t key_blocks = (cols + kTransposeKeys - 1) / kTransposeKeys;
  if (kv * key_blocks > 0x7FFFFFFF) throw std::invalid_argument("09_flash_v3.v6_fp8: K and V too large for one grid");
  transpose_v_kernel<<<static_cast<unsigned>(kv * key_blocks), 256, 0, stream>>>(
      static_cast<const std::uint8_t*>(v), vt, p.seqlen_k, cols, key_blocks);
  FA_CHECK_LAUNCH();
  const Fp8Args args{scales.v};
  launch<Fp8Config>(p, q, k, vt, prm, stream, args);
}

}  // namespace flash_v3::steps
