// The step-by-step versions of chapter 05 (steps.h): the chapter's kernel with one of its changes
// since 04 switched off. step_kernel is flash_v2_kernel (flash_v2.cu) written over the same
// device functions (tile_math.cuh), with each change behind a switch of Config (all on: the
// chapter's kernel). Every head dim up to 128 like the chapter; the tests sweep D = 64 and 128.
#include "05_flash_v2/steps/steps.h"

#include <cstdint>

#include "05_flash_v2/flash_v2.h"
#include "05_flash_v2/tile_math.cuh"

namespace flash_v2::steps {
namespace {

template <bool kSkipCausalTiles_ = true, bool kExp2_ = true, bool kNormalizeOnce_ = true,
          bool kOverlapCopies_ = true, bool kInterleavedLanes_ = true>
struct Config {
  static constexpr bool kSkipCausalTiles = kSkipCausalTiles_;    // off: all key tiles, all causal masked
  static constexpr bool kExp2 = kExp2_;                          // off: natural-log S, p = expf(s - m)
  static constexpr bool kNormalizeOnce = kNormalizeOnce_;        // off: O_i / l_i after every tile (04)
  static constexpr bool kOverlapCopies = kOverlapCopies_;        // off: copy K_j, V_j, wait, compute
  static constexpr bool kInterleavedLanes = kInterleavedLanes_;  // off: (ty, tx) = (lane / 8, lane % 8)
};
using NoCausalSkip = Config<false, true, true, true, true>;
using Expf = Config<true, false, true, true, true>;
using NormalizeEachTile = Config<true, true, false, true, true>;
using NoCopyOverlap = Config<true, true, true, false, true>;
using PlainLanes = Config<true, true, true, true, false>;

template <int kD, class C>
__global__ void __launch_bounds__(Traits<kD>::kThreads, Traits<kD>::kMinBlocks)
    step_kernel(const float* __restrict__ q,  // [B, H, Sq, D] global
                const float* __restrict__ k,  // [B, Hkv, Sk, D] global
                const float* __restrict__ v,  // [B, Hkv, Sk, D] global
                float* __restrict__ o,        // [B, H, Sq, D] global
                float* __restrict__ lse,      // [B, H, Sq] global
                fa::Problem p, float scale_log2, bool vec) {  // scale_log2: scale without kExp2
  using T = Traits<kD>;
  using L = Lanes<C::kInterleavedLanes>;
  constexpr int Br = T::Br, Bc = T::Bc, kStride = T::kStride;
  const std::int64_t bh = grid_row();
  if (bh >= std::int64_t{p.batch} * p.heads) return;
  extern __shared__ float4 smem[];
  float* Q_s = reinterpret_cast<float*>(smem);  // (Br, kD + 4) smem
  float* K_s = Q_s + Br * kStride;              // (Bc, kD + 4) smem
  float* V_s = K_s + Bc * kStride;              // (Bc, kD) smem
  float* P_s = V_s + Bc * kD;                   // (warps, Bc, 16) smem
  const int warp = threadIdx.x / 32;
  const L lanes(threadIdx.x % 32);
  const int ty = lanes.ty, tx = lanes.tx;
  const int Sq = p.seqlen_q, Sk = p.seqlen_k, D = p.head_dim;
  const int i_tile = p.causal ? gridDim.x - 1 - blockIdx.x : blockIdx.x;
  const int i0 = i_tile * Br;
  const int i_first = i0 + 16 * warp + ty;
  const std::int64_t kv_bh = p.kv_index(bh);
  const float* Q_g = q + (bh * Sq + i0) * D;
  const float* K_g = k + kv_bh * Sk * D;
  const float* V_g = v + kv_bh * Sk * D;
  const float* Q_w = Q_s + (16 * warp + ty) * kStride;
  float* P_w = P_s + warp * Bc * 16;
  // Without kSkipCausalTiles, causal visits every key tile too and masks all of them element-wise.
  const int Tc_end = C::kSkipCausalTiles ? key_tile_end(i_tile, Br, Bc, Sq, Sk, p.causal) : ceil_div(Sk, Bc);

  // Without kOverlapCopies, K_0 is copied in the loop.
  if (C::kOverlapCopies && Tc_end > 0) load_tile_async<kD, Bc, kStride, T::kThreads>(K_s, K_g, Sk, D, vec);
  cp_async_commit();
  stage_q<kD>(Q_s, Q_g, Sq - i0, D);

  OutTile<kD> O_i = {};
  float m_i[4], l_i[4];
  for (int a = 0; a < 4; ++a) m_i[a] = -kInf, l_i[a] = 0.0f;
  float l_div[4] = {};  // without kNormalizeOnce: the row sums O_i is divided by

  for (int j_tile = 0; j_tile < Tc_end; ++j_tile) {
    const int j0 = j_tile * Bc;
    if constexpr (!C::kOverlapCopies) {  // copy K_j and V_j, and compute only once both have landed
      __syncthreads();                   // every warp is done with K_s and V_s of tile j-1
      load_tile_async<kD, Bc, kStride, T::kThreads>(K_s, K_g + j0 * D, Sk - j0, D, vec);
      load_tile_async<kD, Bc, kD, T::kThreads>(V_s, V_g + j0 * D, Sk - j0, D, vec);
      cp_async_commit();
    }
    cp_async_wait<0>();  // K_j (without kOverlapCopies, and V_j) has landed for this thread
    __syncthreads();     // ... and for everyone; every warp is done with P_ij V_j-1
    if constexpr (C::kOverlapCopies) {
      load_tile_async<kD, Bc, kD, T::kThreads>(V_s, V_g + j0 * D, Sk - j0, D, vec);
      cp_async_commit();
    }

    ScoreTile<kD> S_ij;
    tile_scores<kD>(S_ij, Q_w, K_s, tx);
    if ((!C::kSkipCausalTiles && p.causal) || needs_mask(i_tile, j_tile, Br, Bc, Sq, Sk, p.causal))
      mask_scores<kD>(S_ij, i_first, j0, tx, p);
    if constexpr (!C::kNormalizeOnce) {  // 04's way: O_i is kept divided by l_i; undo it before the rescale
#pragma unroll
      for (int a = 0; a < 4; ++a) {
#pragma unroll
        for (int e = 0; e < 4 * T::kChunks; ++e) O_i[a][e] *= l_div[a];
      }
    }
    softmax_step<kD, C::kExp2, L>(S_ij, m_i, l_i, O_i, scale_log2);
    store_p<kD>(P_w, S_ij, ty, tx);

    if constexpr (C::kOverlapCopies) {
      cp_async_wait<0>();  // V_j has landed for this thread
      __syncthreads();     // ... and for everyone (and the P_w stores); every warp is done with K_s
      if (j_tile + 1 < Tc_end)
        load_tile_async<kD, Bc, kStride, T::kThreads>(K_s, K_g + (j0 + Bc) * D, Sk - j0 - Bc, D, vec);
      cp_async_commit();
    } else {
      __syncwarp();  // the P_w stores are visible to the warp's lanes (V_j landed at the top)
    }
    accumulate_pv<kD>(O_i, P_w, V_s, ty, tx);
    if constexpr (!C::kNormalizeOnce) {  // 04: O_i divided by the row's sum after every key tile
#pragma unroll
      for (int a = 0; a < 4; ++a) {
        l_div[a] = L::template row_reduce<false>(l_i[a]);
        const float inv_l = l_div[a] > 0.0f ? 1.0f / l_div[a] : 0.0f;  // no key seen yet: O_i stays 0
#pragma unroll
        for (int e = 0; e < 4 * T::kChunks; ++e) O_i[a][e] *= inv_l;
      }
    }
  }
  write_rows<kD, C::kExp2, L, !C::kNormalizeOnce>(O_i, m_i, l_i, o + bh * Sq * D, lse + bh * Sq, i_first, tx, p,
                                                  scale_log2, vec);
}

template <class C>
void forward(const fa::Problem& p, const void* q, const void* k, const void* v, void* o, float* lse,
             cudaStream_t stream) {
  static const fa::Support support{.chapter = "05_flash_v2 (steps)", .dtypes = {fa::Dtype::f32}, .max_head_dim = 128};
  const bool vec = prepare_forward(support, p, q, k, v, o, lse);
  with_head_dim<32, 64, 96, 128>(p.head_dim, [&](auto d) {  // any head dim: the next size up
    constexpr int kD = decltype(d)::value;
    launch<kD, C::kExp2>(step_kernel<kD, C>, p, static_cast<const float*>(q), static_cast<const float*>(k),
                         static_cast<const float*>(v), static_cast<float*>(o), lse, vec, stream);
  });
}

template <class C>
Step make(const std::string& name, const std::string& what) {
  return {.name = name,
          .what = what,
          .chapter = {.support = {.chapter = "05_flash_v2." + name, .dtypes = {fa::Dtype::f32}, .max_head_dim = 128},
                      .forward = forward<C>,
                      .test_head_dims = {64, 128},
                      .defaults = fa::default_problem(fa::Dtype::f32)}};
}

// The chapter's FFMA kernel (flash_v2.cu), which the steps change, as a step, named as the steps are.
Step chapter_step() {
  fa::Chapter c = ffma_chapter();
  c.support.chapter = "05_flash_v2.chapter";
  return {.name = "chapter", .what = "nothing: the chapter's FFMA kernel (flash_v2.cu)", .chapter = c};
}

}  // namespace

const std::vector<Step>& all() {
  static const std::vector<Step> steps = {
      chapter_step(),
      make<NoCausalSkip>("no_causal_skip", "causal tile skipping: every key tile visited, every causal tile masked"),
      make<Expf>("expf", "exp2: the scale without log2(e), S in natural-log units, p = expf(s c - m c)"),
      make<NormalizeEachTile>("normalize_each_tile", "normalize once: O_i divided by l_i after every key tile, as in 04"),
      make<NoCopyOverlap>("no_copy_overlap", "the cp.async overlap: copy K_j and V_j, wait for both, then compute"),
      make<PlainLanes>("plain_lanes", "the interleaved lane order: ty = lane / 8, tx = lane % 8 (4-pass K, V loads)"),
  };
  return steps;
}

}  // namespace flash_v2::steps
