// The parts of chapter 09's kernel (flash_v3.cuh) around its consumers: the block's mbarriers,
// the producer that fills the K/V ring by TMA, the two wgmma issues of a turn (S = Q K^T, and
// O += P V), and the epilogue that leaves O_i through the copy engine. Each takes the kernel's
// configuration C (WsConfig) as a template parameter; flash_v3.cuh's consume and the kernel put
// them together.
#pragma once

#include <cstdint>
#include <type_traits>

#include "09_flash_v3/kept_max.cuh"   // WriteP
#include "09_flash_v3/tile_walk.h"  // TileWalk
#include "common/device/tiles.h"    // key_tile_begin, key_tile_end
#include "common/device/tma.cuh"
#include "common/device/wgmma.cuh"
#include "common/device/wgmma_layout.h"
#include "common/fa2_tiles/block.cuh"  // Params, WarpRows, ScoreTile, PTile, row_sum, row_lse

namespace flash_v3 {

using namespace fa::cuda;
using fa2::Params;

// The block's mbarriers: Q_i landed and read; per stage, K_j and V_j landed ("full", the
// producer's arrival plus the bytes) and K_j and V_j read ("empty", one arrival per consumer warp).
template <int kStages>
struct Barriers {
  std::uint64_t full_q[2], empty_q[2], full_k[kStages], full_v[kStages], empty_k[kStages], empty_v[kStages];
};

// TMA of one (kRows, kD) tile, box by box (kRows x 64 columns each), counted on `bar`: rows `row`
// .. of slice `slice` (b * heads + h) of `map` (launch.cuh: make_maps). [B, H, S, D] tensors have a
// 3-D map (D, S, B * H), the slice its third coordinate; kBshd: [B, S, H, D] tensors a 4-D one
// (D, S, H, B) in their strides, coordinates h and b. Atom a lands kRows * 128 bytes after atom
// a - 1; a D that is not a multiple of 64 (96) takes a last atom whose columns past D the copy
// engine fills with zeros. One thread calls it.
template <int kRows, int kD, bool kBshd = false>
__device__ __forceinline__ void load_tile(std::uint32_t dst, const CUtensorMap* map, int row, std::int64_t slice,
                                          int heads, std::uint32_t bar) {
  constexpr int kAtoms = ceil_div(kD, kAtomCols);
  if constexpr (kBshd) {
    const int h = static_cast<int>(slice) % heads, b = static_cast<int>(slice) / heads;
#pragma unroll
    for (int a = 0; a < kAtoms; ++a) tma_load_4d(dst + a * kRows * 128, map, a * kAtomCols, row, h, b, bar);
  } else {
#pragma unroll
    for (int a = 0; a < kAtoms; ++a)
      tma_load_3d(dst + a * kRows * 128, map, a * kAtomCols, row, static_cast<int>(slice), bar);
  }
}

// The producer: one thread, over the block's tiles. Per tile n: Q_i into slot n % kQSlots once the
// consumers have read that slot's previous Q_i, then K_s and V_s into the ring. `it` counts K/V tiles over the block's
// whole life: tile `it` goes to stage it % kStages, and its use u = it / kStages of the stage
// waits for the (u-1)-th completion of the stage's empty barrier. kBshd: [B, S, H, D] tensors.
// Varlen: VarlenArgs for a packed batch (whose tiles' rows start at their sequence's first row; a
// box reaching past a sequence's end reads the next one's rows, which the consumers mask or never
// store), NoVarlen otherwise.
template <class C, bool kBshd = false, class Varlen = NoVarlen>
__device__ __forceinline__ void produce(const CUtensorMap* q_map, const CUtensorMap* k_map, const CUtensorMap* v_map,
                                        Barriers<C::kStages>& bars, std::uint32_t base, const Params& prm,
                                        const Varlen& vl = {}) {
  int it = 0, n = 0;  // K/V tiles and work tiles so far
  auto walk = block_walk(prm.seqlen_q, prm.batch_heads, prm.heads, prm.causal, C::Br, C::kPersistent, blockIdx.x,
                         gridDim.x, vl);
  for (; !walk.done(); walk.advance(), ++n) {
    const auto wt = walk.tile();
    const std::int64_t kv_bh = slice_of(wt) / prm.group_size;
    const int kv_heads = prm.heads / prm.group_size;
    const int Tc_begin = key_tile_begin(wt.i_tile, C::Br, C::Bc, queries_of(wt, prm.seqlen_q, vl),
                                        keys_of(wt, prm.seqlen_k, vl), prm.window_left);
    const int Tc_end = key_tile_end(wt.i_tile, C::Br, C::Bc, queries_of(wt, prm.seqlen_q, vl),
                                    keys_of(wt, prm.seqlen_k, vl), prm.causal, prm.window_right);
    const int slot = n % C::kQSlots, q_use = n / C::kQSlots;
    if (q_use > 0) mbarrier_wait(smem_u32(&bars.empty_q[slot]), (q_use - 1) % 2);
    mbarrier_arrive_expect_tx(smem_u32(&bars.full_q[slot]), C::kQTxBytes);
    if constexpr (C::kFp8)  // one box of 128 one-byte columns: the whole row
      tma_load_3d(base + C::kQ + slot * C::kQBytes, q_map, 0, wt.i_tile * C::Br, static_cast<int>(slice_of(wt)),
                  smem_u32(&bars.full_q[slot]));
    else
      load_tile<C::Br, C::kD, kBshd>(base + C::kQ + slot * C::kQBytes, q_map, first_query(wt, vl) + wt.i_tile * C::Br,
                                     slice_of(wt), prm.heads, smem_u32(&bars.full_q[slot]));
    for (int s = Tc_begin; s < Tc_end; ++s, ++it) {
      const int stage = it % C::kStages, use = it / C::kStages;
      if (use > 0) mbarrier_wait(smem_u32(&bars.empty_k[stage]), (use - 1) % 2);
      mbarrier_arrive_expect_tx(smem_u32(&bars.full_k[stage]), C::kTileBytes);
      if constexpr (C::kFp8)
        tma_load_3d(base + C::kK + stage * C::kTileBytes, k_map, 0, s * C::Bc, static_cast<int>(kv_bh),
                    smem_u32(&bars.full_k[stage]));
      else
        load_tile<C::Bc, C::kD, kBshd>(base + C::kK + stage * C::kTileBytes, k_map, first_key(wt, vl) + s * C::Bc,
                                       kv_bh, kv_heads, smem_u32(&bars.full_k[stage]));
      if (use > 0) mbarrier_wait(smem_u32(&bars.empty_v[stage]), (use - 1) % 2);
      mbarrier_arrive_expect_tx(smem_u32(&bars.full_v[stage]), C::kTileBytes);
      if constexpr (C::kFp8)  // V_s^T: the D rows of keys s Bc .. s Bc + Bc - 1, one 128-byte box
        tma_load_3d(base + C::kV + stage * C::kTileBytes, v_map, s * C::Bc, 0, static_cast<int>(kv_bh),
                    smem_u32(&bars.full_v[stage]));
      else
        load_tile<C::Bc, C::kD, kBshd>(base + C::kV + stage * C::kTileBytes, v_map, first_key(wt, vl) + s * C::Bc,
                                       kv_bh, kv_heads, smem_u32(&bars.full_v[stage]));
    }
  }
}

// S_s = Q_i K_s^T for the warpgroup's 64 rows: kD / 16 wgmmas of 64 x Bc x 16, Q_i and K_s both
// K-major in shared memory. Q_w: the warpgroup's rows (8 KiB into each atom of Q_i). FP8
// (Fp8<C>): kD / 32 wgmmas of 64 x 128 x 32 on E4M3.
template <class C>
__device__ __forceinline__ void issue_scores(fa2::ScoreTile<typename C::Tile>& S, std::uint32_t Q_w,
                                             std::uint32_t K_s) {
  float(&s)[C::Bc / 2] = *reinterpret_cast<float(*)[C::Bc / 2]>(&S[0][0][0]);  // the accumulator's registers
  // Each descriptor is built once and advanced by a constant per k-step (desc_advance).
  if constexpr (C::kFp8) {
    const std::uint64_t q = kmajor_sw128_desc_fp8(Q_w, C::Br, 0), k = kmajor_sw128_desc_fp8(K_s, C::Bc, 0);
#pragma unroll
    for (int ks = 0; ks < C::kD / 32; ++ks)
      wgmma_ss_m64n128k32_e4m3(s, desc_advance(q, kmajor_sw128_step_fp8(C::Br, 32 * ks)),
                               desc_advance(k, kmajor_sw128_step_fp8(C::Bc, 32 * ks)), ks > 0);
  } else {
    const std::uint64_t q = kmajor_sw128_desc(Q_w, C::Br, 0), k = kmajor_sw128_desc(K_s, C::Bc, 0);
#pragma unroll
    for (int ks = 0; ks < C::kD / 16; ++ks)
      wgmma_ss<typename C::T, C::Bc, 0>(s, desc_advance(q, kmajor_sw128_step(C::Br, 16 * ks)),
                                        desc_advance(k, kmajor_sw128_step(C::Bc, 16 * ks)), ks > 0);
  }
}

// P as the A operand of P V: 06's fragments of P in T (a .b32 register holds two keys), or with
// FP8 (Fp8<C>) one 8-bit A fragment of four registers per 32 keys.
template <class C>
using Fp8PTile = std::uint32_t[C::Bc / 32][4];
template <class C>
using PFrags = std::conditional_t<C::kFp8, Fp8PTile<C>, fa2::PTile<typename C::Tile>>;

// The softmax's keys 16 kk + 2t, +1 and 16 kk + 8 + 2t, +1 in row g + 8 h (p[0..3],
// kept_max.cuh: softmax_step_kept_max's store_p) into P as P V's A operand. bf16 / f16: 06's fragments
// (WriteP). FP8 (Fp8<C>): the four become E4M3 bytes 4t .. 4t + 3 of one register, 2 (kk % 2) + h of
// the 32-key block kk / 2, that half's columns 4t .. 4t + 3: the fragment's column c is key
// fp8_pv_key(c), the order V^T's keys are in.
template <class C>
struct StoreP {
  PFrags<C>& P;
  __device__ __forceinline__ void operator()(int mt, int kk, int h, const float (&p)[4]) const {
    if constexpr (C::kFp8)  // two E4M3 pairs, each in a register's low half, into one register
      P[kk / 2][2 * (kk % 2) + h] = pack2<__nv_fp8_e4m3>(p[0], p[1]) | pack2<__nv_fp8_e4m3>(p[2], p[3]) << 16;
    else
      WriteP<typename C::Tile>{P}(mt, kk, h, p);
  }
};

// O_i += P_s V_s: per 16 keys, wgmmas of 64 x kN x 16 (RS form: P from registers, V_s read
// MN-major, keys x columns as TMA landed it), kN = kD up to 128 (96 included), else column chunks
// of 128 (D = 256) or 64 (D = 192). A chunk's accumulators are a slice of O's: columns n0 .. are registers n0 / 2 ..
// FP8 (Fp8<C>): per 32 keys one wgmma of 64 x 128 x 32, V_s^T (D rows of keys) K-major.
template <class C>
__device__ __forceinline__ void issue_pv(fa2::WarpRows<typename C::Tile>& w, const PFrags<C>& P, std::uint32_t V_s) {
  float* o = &w.O[0][0][0];
  if constexpr (C::kFp8) {
    const std::uint64_t v = kmajor_sw128_desc_fp8(V_s, C::kD, 0);
#pragma unroll
    for (int kk = 0; kk < C::Bc / 32; ++kk)
      wgmma_rs_m64n128k32_e4m3(*reinterpret_cast<float(*)[64]>(o), P[kk],
                               desc_advance(v, kmajor_sw128_step_fp8(C::kD, 32 * kk)), true);
  } else {
    constexpr int kN = C::kD <= 128 ? C::kD : C::kD % 128 == 0 ? 128 : 64;
    const std::uint64_t v = mnmajor_sw128_desc(V_s, C::Bc, 0, 0);
#pragma unroll
    for (int kk = 0; kk < C::Bc / 16; ++kk)
#pragma unroll
      for (int n0 = 0; n0 < C::kD; n0 += kN)
        wgmma_rs<typename C::T, kN, 1>(*reinterpret_cast<float(*)[kN / 2]>(o + n0 / 2), P[0][kk],
                                       desc_advance(v, mnmajor_sw128_step(C::Bc, 16 * kk, n0)), true);
  }
}

// The epilogue through the copy engine (FlashAttention-3's): O_i / l_i in T into the group's 64
// rows of the tile's Q slot, which the tile's last S has read and which the producer refills only
// after the group releases it, in the 128-byte swizzle the O map writes from (a quad's 8 bytes a
// row land in one 16-byte chunk, the 8 rows of a lane group in 8 chunks: no bank conflict); LSE
// straight to global memory (06's row_sum and row_lse). O_p: the group's rows (64 group) of the slot, as a generic pointer.
// stats: the rows' m and l (w itself, or with the overlap consume's own).
template <class C, class Stats>
__device__ __forceinline__ void stage_o(const fa2::WarpRows<typename C::Tile>& w, const Stats& stats,
                                        const Params& prm, std::int64_t bh, unsigned char* O_p, int warp, int row,
                                        int g, int t) {
  using T = typename C::T;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const float l = fa2::row_sum(stats, 0, h);
    const float inv_l = l > 0.0f ? 1.0f / l : 0.0f;  // a row that sees no key: O = 0
    const int r = 16 * warp + g + 8 * h;             // the row among the group's 64
#pragma unroll
    for (int nt = 0; nt < C::kD / 8; ++nt)
      *reinterpret_cast<std::uint32_t*>(O_p + kmajor_sw128_offset(r, 8 * nt + 2 * t, C::Br)) =
          pack2<T>(w.O[0][nt][2 * h] * inv_l, w.O[0][nt][2 * h + 1] * inv_l);
    if (t == 0 && row + 8 * h < prm.seqlen_q)
      prm.lse[bh * prm.seqlen_q + row + 8 * h] = fa2::row_lse(stats, 0, h, l);
  }
}

// A packed batch's epilogue where a consumer group's 64 rows reach past their sequence's end
// (consume): the group's 128 threads copy the `rows` rows inside (none when rows <= 0) from O_p,
// the rows stage_o staged in the swizzled slot, to O's rows first_row .. of head h ([1, total, H,
// D]: O lies as Q does), 16 bytes a thread at a time. Only the tensor's D columns (96 of the D = 128
// tiles' at D = 96).
template <class C>
__device__ __forceinline__ void copy_rows_out(const Params& prm, const unsigned char* O_p, int first_row, int rows,
                                              std::int64_t h) {
  using T = typename C::T;
  const int chunks = prm.head_dim / 8;  // 16-byte chunks of a row
  T* o = static_cast<T*>(prm.o) + std::int64_t{first_row} * prm.q_strides.row + h * prm.q_strides.head;
  for (int idx = threadIdx.x % 128; idx < rows * chunks; idx += 128) {
    const int r = idx / chunks, c = idx % chunks;
    *reinterpret_cast<uint4*>(o + r * prm.q_strides.row + 8 * c) =
        *reinterpret_cast<const uint4*>(O_p + kmajor_sw128_offset(r, 8 * c, C::Br));
  }
}

}  // namespace flash_v3
