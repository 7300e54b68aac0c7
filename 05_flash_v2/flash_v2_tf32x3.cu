// Chapter 05's forward for f32 at head dims up to 128 (flash_v2.h, on_tensor_cores): the same
// FlashAttention-2 loop as flash_v2_kernel, the lesson, with both products on the tensor cores in
// fp32's accuracy (3xTF32, common/device/mma.cuh) instead of FFMA chains. PyTorch's fp32
// memory-efficient backend computes this way; the FFMA kernel stays under the FMA pipe's 67
// TFLOP/s and, at D = 128, under that backend (README: fp32 on the tensor cores). Above D = 128
// the chapter runs the FFMA kernel, which `05_flash_v2 --ffma` runs at every head dim.
//
// What changes against flash_v2_kernel:
//   * A warp's 16 query rows are one mma tile: lane (g, t) = (lane / 4, lane % 4) holds rows g
//     and g + 8 of the warp, keys 8n + 2t and 8n + 2t + 1 of S_ij's n-tile n.
//   * S_ij = Q_i K_j^T: per 8 head-dim columns, Q_i's A fragment is split once and each 8-key
//     n-tile of K_j takes one 3xTF32 product (3 mma.m16n8k8). There too k is read in another
//     order, k = t as column 2t and k = t + 4 as column 2t + 1 of the 8, in A and B alike, so
//     that a lane's two values are one float2. Each mma gets the same 8 products, in other
//     positions, and S_ij has the same bits as with k = t, t + 4 (checked on an H100), so 08's
//     fp32 backward, which recomputes S_ij in that order, pairs with it.
//   * O_i += P_ij V_j straight from the registers: the k index of an mma is a sum index, so it
//     may be permuted as long as A and B agree. S_ij's accumulator holds keys 2t and 2t + 1 of
//     each 8-key tile, and A wants k = t and t + 4: read k = t as key 2t and k = t + 4 as key
//     2t + 1, and load V_j's rows 2t and 2t + 1 for b0 and b1. No shuffle, no shared P.
//   * Each 8-column step of S_ij and each tile's P_ij V_j is summed from zero and added to S_ij,
//     O_i in fp32: fed straight through the mma's accumulator, O's error would be several times
//     the FFMA kernel's (README: fp32 on the tensor cores).
//   * O_i += P_ij V_j takes four column tiles at a time: a lane's b values of tiles 4b .. 4b + 3
//     are one float4 of V_j's row (O_i's layout at its declaration).
//   * Bc = 64 keys a tile. V_j's rows are kD + 4 floats apart, K_j's kD + 8, so that the float4
//     and float2 loads are free of bank conflicts; Q_i's float2 loads are not (2-way: stage_q
//     writes its rows kD + 4 apart), at 2 loads per 8 columns against K_j's 8. 100 KiB at
//     kD = 128, 2 blocks (8 warps) an SM.
//   * Most of the work besides the mma is the split of each operand into its two TF32 parts:
//     to_tf32 (common/device/mma.cuh) rounds with two integer instructions, where cvt.rna.tf32
//     compiles to four. The split, the float2 and float4 loads and the four column tiles
//     together cut the instructions a warp issues per key tile at D = 128 by about a quarter
//     (tf32x3.md: Fewer instructions).
// Not changed: the cp.async staggering of K_j and V_j, the causal tile skip, the exp2 softmax with
// the max rounded once, the epilogue's LSE in double.
#include <cstdint>

#include "05_flash_v2/flash_v2.h"
#include "05_flash_v2/tile_math.cuh"
#include "common/device/mma.cuh"

namespace flash_v2 {
namespace {

template <int kD>
struct Tf32Traits {
  static constexpr int kWarps = 4;
  static constexpr int kThreads = 32 * kWarps;
  static constexpr int Br = 16 * kWarps;  // query rows per block: one 16-row mma tile per warp
  static constexpr int Bc = 64;           // keys per tile
  static constexpr int kStride = kD + 4;   // Q_s and V_s rows: = 4 (mod 32) floats
  static constexpr int kStrideK = kD + 8;  // K_s rows: = 8 (mod 32), for its float2 loads
  static constexpr int kSmemBytes = ((Br + Bc) * kStride + Bc * kStrideK) * sizeof(float);
  static constexpr int kKeyTiles = Bc / 8;  // 8-key n-tiles of S_ij
  static constexpr int kColTiles = kD / 8;  // 8-column n-tiles of O_i
  static_assert(Br == Traits<kD>::Br && kThreads == Traits<kD>::kThreads && kStride == Traits<kD>::kStride,
                "stage_q (tile_math.cuh) writes Q_s in Traits' shape");
};

template <int kD>
__global__ void __launch_bounds__(Tf32Traits<kD>::kThreads, 2)
    tf32x3_kernel(const float* __restrict__ q,  // [B, H, Sq, D] global
                  const float* __restrict__ k,  // [B, Hkv, Sk, D] global
                  const float* __restrict__ v,  // [B, Hkv, Sk, D] global
                  float* __restrict__ o,        // [B, H, Sq, D] global
                  float* __restrict__ lse,      // [B, H, Sq] global
                  fa::Problem p, float scale_log2, bool vec) {
  using T = Tf32Traits<kD>;
  constexpr int Br = T::Br, Bc = T::Bc, kStride = T::kStride;
  const std::int64_t bh = grid_row();
  if (bh >= std::int64_t{p.batch} * p.heads) return;
  extern __shared__ float4 smem[];
  float* Q_s = reinterpret_cast<float*>(smem);  // (Br, kD + 4) smem: Q_i
  float* K_s = Q_s + Br * kStride;              // (Bc, kD + 8) smem: K_j
  float* V_s = K_s + Bc * T::kStrideK;          // (Bc, kD + 4) smem: V_j
  const int warp = threadIdx.x / 32, g = threadIdx.x % 32 / 4, t = threadIdx.x % 4;
  const int Sq = p.seqlen_q, Sk = p.seqlen_k, D = p.head_dim;
  const int i_tile = p.causal ? gridDim.x - 1 - blockIdx.x : blockIdx.x;
  const int i0 = i_tile * Br;
  const int row0 = i0 + 16 * warp + g;  // this thread's rows: row0 and row0 + 8
  const std::int64_t kv_bh = p.kv_index(bh);
  const float* K_g = k + kv_bh * Sk * D;
  const float* V_g = v + kv_bh * Sk * D;
  const float* Q_w = Q_s + (16 * warp + g) * kStride + 2 * t;  // a0, a2's elements; a1, a3 8 rows on
  const int Tc_end = key_tile_end(i_tile, Br, Bc, Sq, Sk, p.causal);

  if (Tc_end > 0) load_tile_async<kD, Bc, T::kStrideK, T::kThreads>(K_s, K_g, Sk, D, vec);
  cp_async_commit();
  stage_q<kD>(Q_s, q + (bh * Sq + i0) * D, Sq - i0, D);

  // Column tile 4b + q: (row0, 32b + 4(2t + e) + q) in [e], (row0 + 8, ...) in [2 + e] (P_ij V_j below)
  float O_i[T::kColTiles][4] = {};
  float m_i[2] = {-kInf, -kInf}, l_i[2] = {0.0f, 0.0f};  // rows row0 and row0 + 8

  for (int j_tile = 0; j_tile < Tc_end; ++j_tile) {
    const int j0 = j_tile * Bc;
    cp_async_wait<0>();  // this thread's copies of K_j have landed
    __syncthreads();     // ... and everyone's (and Q_s is written); every warp is done with V_j-1
    load_tile_async<kD, Bc, kStride, T::kThreads>(V_s, V_g + j0 * D, Sk - j0, D, vec);  // lands during S_ij
    cp_async_commit();

    float S_ij[T::kKeyTiles][4] = {};  // n-tile n: keys j0 + 8n + 2t + e, rows as O_i
#pragma unroll 2
    for (int d = 0; d < kD; d += 8) {
      // k = t and t + 4 read as columns d + 2t and d + 2t + 1 in A and B alike: one float2 each
      const float2 lo = *reinterpret_cast<const float2*>(Q_w + d);                // row0: a0, a2
      const float2 hi = *reinterpret_cast<const float2*>(Q_w + 8 * kStride + d);  // row0 + 8: a1, a3
      const Tf32Pair a[4] = {split_tf32(lo.x), split_tf32(hi.x), split_tf32(lo.y), split_tf32(hi.y)};
#pragma unroll
      for (int n = 0; n < T::kKeyTiles; ++n) {
        const float2 b = *reinterpret_cast<const float2*>(K_s + (8 * n + g) * T::kStrideK + d + 2 * t);
        float x[4] = {};  // from zero, added in fp32: see the P_ij V_j product below
        mma_1688_3xtf32(x, a, split_tf32(b.x), split_tf32(b.y));
#pragma unroll
        for (int e = 0; e < 4; ++e) S_ij[n][e] += x[e];
      }
    }
    if (needs_mask(i_tile, j_tile, Br, Bc, Sq, Sk, p.causal)) {
#pragma unroll
      for (int n = 0; n < T::kKeyTiles; ++n) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int i = row0 + 8 * (e / 2), j = j0 + 8 * n + 2 * t + e % 2;
          if (j >= Sk || (p.causal && !fa::causal_visible(i, j, Sq, Sk))) S_ij[n][e] = -kInf;
        }
      }
    }
    // Online softmax, as softmax_step but on the mma layout: a row's 64 keys sit in its 4 lanes
    // (t = 0..3), so two xor-shuffles (lanes t ^ 1, then t ^ 2) give its max.
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float m = -kInf;
#pragma unroll
      for (int n = 0; n < T::kKeyTiles; ++n) m = fmaxf(m, fmaxf(S_ij[n][2 * r], S_ij[n][2 * r + 1]));
      for (int lanes = 1; lanes < 4; lanes *= 2) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, lanes));
      const float m_new = fmaxf(m_i[r], m);
      const float m_scaled = __fmul_rn(m_new == -kInf ? 0.0f : m_new, scale_log2);
      const float alpha = fast_exp2(__fmul_rn(m_i[r], scale_log2) - m_scaled);
      m_i[r] = m_new;
      l_i[r] *= alpha;
#pragma unroll
      for (int c = 0; c < T::kColTiles; ++c) O_i[c][2 * r] *= alpha, O_i[c][2 * r + 1] *= alpha;
#pragma unroll
      for (int n = 0; n < T::kKeyTiles; ++n) {
#pragma unroll
        for (int e = 2 * r; e < 2 * r + 2; ++e) {
          S_ij[n][e] = fast_exp2(fmaf(S_ij[n][e], scale_log2, -m_scaled));  // P_ij
          l_i[r] += S_ij[n][e];
        }
      }
    }

    cp_async_wait<0>();  // this thread's copies of V_j have landed
    __syncthreads();     // ... and everyone's; every warp is done with K_s
    if (j_tile + 1 < Tc_end)  // K_{j+1} lands during P_ij V_j
      load_tile_async<kD, Bc, T::kStrideK, T::kThreads>(K_s, K_g + (j0 + Bc) * D, Sk - j0 - Bc, D, vec);
    cp_async_commit();

    // O_i += P_ij V_j, one 8-key k-step per n-tile of P_ij, its k order (t, t + 4) read as keys
    // (2t, 2t + 1): a0, a1, a2, a3 = P at (row0, 2t), (row0 + 8, 2t), (row0, 2t + 1), (row0 + 8, 2t + 1).
    // The tile's sum of each column tile is taken from zero and added to O_i in fp32: the sums an
    // mma writes are not rounded to nearest (Fasi et al. 2021 found them truncated on V100, T4
    // and A100), so O_i fed straight into every mma of the key loop would take that error once
    // per mma, against its whole size (README: fp32 on the tensor cores, measured on an H100).
    Tf32Pair a[T::kKeyTiles][4];
#pragma unroll
    for (int n = 0; n < T::kKeyTiles; ++n) {
      a[n][0] = split_tf32(S_ij[n][0]), a[n][1] = split_tf32(S_ij[n][2]);
      a[n][2] = split_tf32(S_ij[n][1]), a[n][3] = split_tf32(S_ij[n][3]);
    }
    // Four column tiles at a time from one float4 a row: lane g reads columns 4g .. 4g + 3 of a
    // 32-column block, and element q is the b of tile q, so tile 4b + q holds columns 32b + 4n + q
    // (n the mma's column index; O_i's layout above, and the epilogue's stores, read it this way).
#pragma unroll
    for (int b = 0; b < kD / 32; ++b) {
      float x[4][4] = {};
#pragma unroll
      for (int n = 0; n < T::kKeyTiles; ++n) {
        const float* V_n = V_s + (8 * n + 2 * t) * kStride + 32 * b + 4 * g;  // keys 2t and 2t + 1
        const float4 v0 = *reinterpret_cast<const float4*>(V_n), v1 = *reinterpret_cast<const float4*>(V_n + kStride);
        mma_1688_3xtf32(x[0], a[n], split_tf32(v0.x), split_tf32(v1.x));
        mma_1688_3xtf32(x[1], a[n], split_tf32(v0.y), split_tf32(v1.y));
        mma_1688_3xtf32(x[2], a[n], split_tf32(v0.z), split_tf32(v1.z));
        mma_1688_3xtf32(x[3], a[n], split_tf32(v0.w), split_tf32(v1.w));
      }
#pragma unroll
      for (int q = 0; q < 4; ++q) {
#pragma unroll
        for (int e = 0; e < 4; ++e) O_i[4 * b + q][e] += x[q][e];
      }
    }
  }

  // Epilogue, as write_rows: the row sums over the 4 lanes, O_i / l_i, LSE in double.
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    float l = l_i[r];
    l += __shfl_xor_sync(0xffffffffu, l, 1);
    l += __shfl_xor_sync(0xffffffffu, l, 2);
    const int i = row0 + 8 * r;
    if (i >= Sq) continue;
    const float inv_l = l > 0.0f ? 1.0f / l : 0.0f;  // a row that sees no key: O = 0
    float* O_g = o + (bh * Sq + i) * D;
#pragma unroll
    for (int b = 0; b < kD / 32; ++b) {
#pragma unroll
      for (int e = 0; e < 2; ++e) {  // columns 32b + 4(2t + e) + q of tiles 4b + q, q = 0..3
        const int col = 32 * b + 8 * t + 4 * e;
        const float4 x = make_float4(O_i[4 * b][2 * r + e] * inv_l, O_i[4 * b + 1][2 * r + e] * inv_l,
                                     O_i[4 * b + 2][2 * r + e] * inv_l, O_i[4 * b + 3][2 * r + e] * inv_l);
        if (vec && col < D) {
          *reinterpret_cast<float4*>(O_g + col) = x;  // D % 4 == 0: col + 3 < D too
        } else if (!vec) {
          if (col < D) O_g[col] = x.x;
          if (col + 1 < D) O_g[col + 1] = x.y;
          if (col + 2 < D) O_g[col + 2] = x.z;
          if (col + 3 < D) O_g[col + 3] = x.w;
        }
      }
    }
    const double m_scaled = __fmul_rn(m_i[r], scale_log2), l_d = l;
    if (t == 0) lse[bh * Sq + i] = l > 0.0f ? static_cast<float>((m_scaled + log2(l_d)) * kLn2D) : kInf;
  }
}

const fa::Support& tf32x3_support() {
  static const fa::Support s{.chapter = "05_flash_v2.tf32x3", .dtypes = {fa::Dtype::f32}, .max_head_dim = 128};
  return s;
}

}  // namespace

void tf32x3_forward(const fa::Problem& p, const void* q, const void* k, const void* v, void* o, float* lse,
                    cudaStream_t stream) {
  const bool vec = prepare_forward(tf32x3_support(), p, q, k, v, o, lse);
  with_head_dim<32, 64, 96, 128>(p.head_dim, [&](auto d) {  // any head dim: the next size up
    constexpr int kD = decltype(d)::value;
    launch<kD, true, Tf32Traits<kD>>(tf32x3_kernel<kD>, p, static_cast<const float*>(q),
                                     static_cast<const float*>(k), static_cast<const float*>(v),
                                     static_cast<float*>(o), lse, vec, stream);
  });
}

}  // namespace flash_v2
