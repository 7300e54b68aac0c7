// Chapter 10 -- attention for decoding: GQA packing and split-KV over 06's tile functions.
//
// New since 06 (06_tensor_core/tensor_core.cuh):
//   * A block's rows are packed (split_plan.h): (query head in the group) x (query position) of
//     one KV head, gathered from Q by cp.async, so the G query heads sharing K and V read them once.
//   * When a KV head's packed rows fit one warp's 16 (one query token, G <= 16), the 4 warps split
//     each key tile instead of the rows and merge at the end (WarpShare, merge_key_warps): a fourth
//     of the products and exponentials of 64 rows that are mostly padding. On an H200 that is what
//     brings a decode step to the memory's speed (README: How we got here).
//   * A block computes one piece of the key range (split-KV): the grid is (splits) x (KV heads x
//     packed-row tiles). With one piece it writes O and LSE like 06; with several it writes its rows'
//     partial O (fp32, divided by its own sum) and LSE into a workspace, and combine_kernel merges
//     the pieces by LSE (combine_row in split_plan.cpp is its CPU model).
//   * The element mask works on packed rows: position i = r mod Sq sees key j <= i + Sk - Sq.
//   * K and V stream through a ring of three stages, two tiles in flight while one is computed
//     (06 double-buffers): with one CTA an SM, a decode step is a race to keep HBM busy.
//   * The combine is a programmatic dependent launch (common/device/launch.h): its blocks start
//     while the split kernel's last blocks finish.
//   * 06's tile_scores, softmax_step and accumulate_pv run unchanged.
// Run:  ./build/10_decoding/10_decoding --batch 1 --heads 32 --kv-heads 8 --seqlen-q 1 --seqlen-k 16384 --head-dim 128
#pragma once

#include <cstdint>
#include <limits>

#include "common/fa2_tiles/block.cuh"  // Config, copy/score/softmax/pv steps
#include "10_decoding/packed_rows.cuh"     // SplitParams, the packed rows' tile functions, KvRows
#include "10_decoding/split_plan.h"

namespace decoding {

using namespace fa::cuda;
using fa2::Params;

// The block's copies: 4 warps, Bc = 64 keys a tile, 06's Config. Its own stage count is not used:
// K/V go through the three-stage ring below (kStages). Its Br (64) is the packed rows of a block
// whose warps split the rows (kKeyWarps = 1, below).
template <class T, int kD>
using DecodeConfig = fa2::Config<T, kD, /*Bc=*/64, /*kMTiles=*/1>;

// How the block's 4 warps share a tile of packed rows and a key tile. kKeyWarps = 1: each warp 16
// rows and all 64 keys (Br = 64), as 06's warps. kKeyWarps = 4: every warp the same 16 rows and its
// own 16 keys of the tile (Br = 16), merged when the piece ends (merge_key_warps). With one query
// token and 4 query heads a KV head, 4 of 64 rows are real: splitting the rows computes 16 times
// the useful products, splitting the keys 4 times. W: one warp's tile functions (06's, with
// Bc / kKeyWarps keys).
template <class C, int kKeyWarps>
struct WarpShare {
  static_assert(kKeyWarps == 1 || kKeyWarps == C::kWarps);
  static constexpr int Br = C::Br / kKeyWarps;
  using W = fa2::Config<typename C::T, C::kD, C::Bc / kKeyWarps, 1>;
};

// K/V in a ring of three stages, two tiles in flight ahead of the one computed: decoding is bound
// by memory, and a piece of a few tiles must not wait one round trip per tile. Q's tile, then the
// ring: 112 KB at D = 128, 56 KB at D = 64, 224 KB at D = 256 with 64 packed rows (of the H100's
// 227: one block an SM); 12 KB less at D = 128 with 16.
constexpr int kStages = 3;
template <class C, int kKeyWarps = 1>
constexpr int smem_bytes() { return (WarpShare<C, kKeyWarps>::Br + 2 * kStages * C::Bc) * C::kCols * 2; }

// kKeyWarps = 4: the 4 warps hold the same 16 rows over different keys. Warps 1-3 leave their m,
// l and O in shared memory (`buf`: the K/V ring, free once every warp has left the loop) and warp
// 0 merges them, chapter 03's rescale: m = max_w m_w, O = sum_w 2^(m_w - m) O_w, l likewise (m is
// in exp2 units). The fragments have one layout in every warp, so lane L of warp 0 merges lane L's
// values: no shuffle. A warp that saw no key has m = -inf and weighs 0.
template <class W, int kKeyWarps>
__device__ __forceinline__ void merge_key_warps(fa2::WarpRows<W>& w, unsigned char* buf, int warp, int lane) {
  constexpr float kInf = std::numeric_limits<float>::infinity();
  constexpr int kSlots = W::kD / 8 + 1;  // float4s a lane: O's D / 8 fragments, then m[2], l[2]
  float4* slots = reinterpret_cast<float4*>(buf);  // [warp - 1][kSlots][32 lanes]
  __syncthreads();  // every warp is done with the ring
  if (warp > 0) {
    float4* mine = slots + (warp - 1) * kSlots * 32 + lane;
#pragma unroll
    for (int nt = 0; nt < W::kD / 8; ++nt)
      mine[32 * nt] = make_float4(w.O[0][nt][0], w.O[0][nt][1], w.O[0][nt][2], w.O[0][nt][3]);
    mine[32 * (kSlots - 1)] = make_float4(w.m[0][0], w.m[0][1], w.l[0][0], w.l[0][1]);
  }
  __syncthreads();
  if (warp > 0) return;
#pragma unroll 1
  for (int k = 1; k < kKeyWarps; ++k) {
    const float4* theirs = slots + (k - 1) * kSlots * 32 + lane;
    const float4 ml = theirs[32 * (kSlots - 1)];
    float a_mine[2], a_theirs[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const float m_k = h ? ml.y : ml.x, l_k = h ? ml.w : ml.z;
      const float m_new = fmaxf(w.m[0][h], m_k);
      const float base = m_new == -kInf ? 0.0f : m_new;  // neither saw a key: both weigh 2^-inf = 0
      a_mine[h] = fast_exp2(w.m[0][h] - base);
      a_theirs[h] = fast_exp2(m_k - base);
      w.l[0][h] = w.l[0][h] * a_mine[h] + l_k * a_theirs[h];
      w.m[0][h] = m_new;
    }
#pragma unroll
    for (int nt = 0; nt < W::kD / 8; ++nt) {
      const float4 o = theirs[32 * nt];
      w.O[0][nt][0] = w.O[0][nt][0] * a_mine[0] + o.x * a_theirs[0];
      w.O[0][nt][1] = w.O[0][nt][1] * a_mine[0] + o.y * a_theirs[0];
      w.O[0][nt][2] = w.O[0][nt][2] * a_mine[1] + o.z * a_theirs[1];
      w.O[0][nt][3] = w.O[0][nt][3] * a_mine[1] + o.w * a_theirs[1];
    }
  }
}

// One piece of one tile's key range, as a block computes it: keys [j_begin, j_cap) of packed-row
// tile `tile` (KV head tile / row_tiles, rows r0 .. r0 + Br - 1), cut at the last key any of the
// tile's rows sees, through the K/V ring; then write_packed(whole, part). Block: 4 warps; warp w
// owns packed rows r0 + 16 w .. r0 + 16 w + 15 (kKeyWarps = 1) or rows r0 .. r0 + 15 and keys
// 16 w .. 16 w + 15 of each tile (kKeyWarps = 4, WarpShare). signal: let the programmatic dependent
// (the combine or the fix-up) launch before the epilogue. The caller makes sure the block's
// previous piece, if any, is done with shared memory (steps/stream_k.cuh walks several). Kv: where
// K and V lie (KvRows above).
template <class C, bool kExtras, template <class> class Kv = KvRows, int kKeyWarps = 1, class Part>
__device__ __forceinline__ void attend_piece(const SplitParams& prm, std::int64_t tile, int j_begin, int j_cap,
                                             bool whole, bool signal, Part part) {
  using W = typename WarpShare<C, kKeyWarps>::W;
  constexpr int Br = WarpShare<C, kKeyWarps>::Br, Bc = C::Bc, kCols = C::kCols, kTileBytes = Bc * kCols * 2;
  extern __shared__ __align__(128) unsigned char smem[];
  const std::uint32_t Q_s = smem_u32(smem);                 // (Br, kCols) smem: the packed rows of Q
  const std::uint32_t K_s = Q_s + Br * kCols * 2;           // (kStages, Bc, kCols) smem: K_j
  const std::uint32_t V_s = K_s + kStages * kTileBytes;     // (kStages, Bc, kCols) smem: V_j
  const Params& p = prm.base;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int row_warp = warp / kKeyWarps, key_warp = warp % kKeyWarps;
  const std::int64_t kv_bh = tile / prm.row_tiles;
  const int r0 = static_cast<int>(tile % prm.row_tiles) * Br;
  const int row = r0 + 16 * row_warp + g;  // this lane's first packed row (the second: row + 8)
  const int rows = packed_rows(p.group_size, p.seqlen_q);
  const PositionRange pos = positions(r0, rows - r0 < Br ? rows - r0 : Br, p.seqlen_q);
  // This piece's keys: [j_begin, j_end), cut at the last key any of the block's rows sees.
  // This sequence's keys: all of Sk, or its length in the cache.
  const int seqlen_k = kExtras && prm.seqlens_k ? prm.seqlens_k[kv_bh / prm.kv_heads] : p.seqlen_k;
  const std::int64_t kv_rows = kExtras ? prm.kv_rows : p.seqlen_k;  // rows between (b, KV head)s
  const int last = keys_end(pos, p.seqlen_q, seqlen_k, p.causal);
  const int j_end = j_cap < last ? j_cap : last;
  const int n_tiles = j_end > j_begin ? ceil_div(j_end - j_begin, Bc) : 0;
  const Kv<C> kv(prm, kv_bh, kv_rows);
  // Key tile n of the piece into ring stage n % kStages, as one cp.async group (empty past the end,
  // so that the group count per tile stays one).
  auto load_tile = [&](int n) {
    if (n < n_tiles) {
      const int j0 = j_begin + n * Bc;
      const std::uint32_t stage = (n % kStages) * kTileBytes;
      kv.copy(K_s + stage, V_s + stage, j0, seqlen_k - j0);
    }
    cp_async_commit();
  };

  gather_q<C, Br>(Q_s, prm, kv_bh, r0);
  load_tile(0);  // Q and tile 0: one group
  load_tile(1);

  const int lane_a = ldsm_lane_offset(lane, LdsmOrder::kRowsFirst, kCols, C::kSwizzle);  // Q, V
  const int lane_b = ldsm_lane_offset(lane, LdsmOrder::kColsFirst, kCols, C::kSwizzle);  // K
  const std::uint32_t Q_w = Q_s + 2 * 16 * row_warp * kCols;  // this warp's rows
  // This warp's keys of a tile: whole lines further, which keep the swizzle (swizzle.h:
  // ldsm_warp_offset).
  const std::uint32_t keys_w = 2 * W::Bc * key_warp * kCols;
  // tile_scores takes Q_i's fragments as an argument; with kQInRegs = false (DecodeConfig) it
  // re-reads Q from shared memory instead and never reads them (a one-entry placeholder).
  fa2::QFrags<W> q_frag;
  fa2::WarpRows<W> w;
  for (int n = 0; n < n_tiles; ++n) {
    const int j0 = j_begin + n * Bc, j_w = j0 + W::Bc * key_warp;
    const std::uint32_t stage = (n % kStages) * kTileBytes;
    cp_async_wait<1>();  // this thread's copies of tile n (and Q) have landed; tile n + 1 may fly
    __syncthreads();     // ... and everyone's; and every warp is done with tile n - 1's stage
    load_tile(n + 2);    // into tile n - 1's stage, free since the barrier
    fa2::ScoreTile<W> S;
    fa2::tile_scores<W>(S, q_frag, Q_w, K_s + stage + keys_w, lane_a, lane_b);
    if (kExtras && prm.changes_scores()) apply_options<W>(S, row, j_w, t, prm, kv_bh, seqlen_k);
    if (j0 + Bc > j_end || tile_needs_mask(pos, j0, Bc, p.seqlen_q, seqlen_k, p.causal))
      mask_packed<W>(S, row, j_w, j_end, t, p, seqlen_k);
    fa2::PTile<W> P;
    fa2::softmax_step<W>(S, P, w, p.scale_log2);
    fa2::accumulate_pv<W>(w, P, V_s + stage + keys_w, lane_a);
  }
  if (signal) launch_dependents();  // the combine (launched programmatically) may start its blocks now
  if constexpr (kKeyWarps > 1) {
    static_assert((kKeyWarps - 1) * (W::kD / 8 + 1) * 32 * 16 <= 2 * kStages * kTileBytes, "the merge fits the ring");
    merge_key_warps<W, kKeyWarps>(w, smem + Br * kCols * 2, warp, lane);  // into the ring, K_s onward
    if (warp > 0) return;
  }
  write_packed<W, kExtras>(w, prm, kv_bh, row, t, whole, part);
}

// grid: (splits) x (B Hkv row_tiles rows over y and z); block x of a tile row computes piece x.
// kExtras: the score options or a KV cache may be on (forward_with_options, forward_with_cache);
// plain forward() runs the kernel without their code (measured 1-3% faster at batch 1 than one
// kernel for both, which carries the options' registers and branches).
template <class C, bool kExtras, template <class> class Kv = KvRows, int kKeyWarps = 1>
__global__ void __launch_bounds__(C::kThreads, 2) split_kv_kernel(const SplitParams prm) {
  const std::int64_t tile = grid_row();
  if (tile >= prm.tiles) return;  // a spare block of the grid
  const int j_begin = blockIdx.x * prm.keys_per_split;
  // Piece x of row qr goes to row qr * splits + x of the workspace.
  attend_piece<C, kExtras, Kv, kKeyWarps>(prm, tile, j_begin, j_begin + prm.keys_per_split, prm.splits == 1, true,
                           [&](int, std::int64_t qr) { return qr * prm.splits + blockIdx.x; });
}

// One warp per output row (b H + h) Sq + i: the pieces' LSE merged as in combine_row
// (split_plan.cpp), O = sum_s w_s O_s / sum_s w_s in T, LSE. Lane c holds columns c, c + 32, ...
// kSinks: attention sinks may be on (forward_with_options); plain forward() runs without their code.
template <class T, int kD, bool kSinks>
__global__ void __launch_bounds__(256) combine_kernel(const SplitParams prm, std::int64_t out_rows) {
  constexpr float kInf = std::numeric_limits<float>::infinity();
  const std::int64_t row = std::int64_t{blockIdx.x} * 8 + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  wait_on_prerequisites();  // every piece written (the split kernel has completed)
  if (row >= out_rows) return;
  // BEGIN SOLUTION: split_plan.cpp's combine_row for one row, a warp per row: weigh each piece's O_s by its share of the row's softmax mass, taken from its LSE_s; a piece that saw no key weighs nothing (README: The split plan)
  // STUB: float m = -kInf, total = 0.0f, o[kD / 32] = {};  // the stub merges nothing: O = 0, LSE = +inf
  // The pieces' LSE go across the lanes, 32 at a time (lane l holds piece s0 + l), and a
  // butterfly gives their max; the O rows of eight pieces are loaded before they are summed, so
  // the warp does not wait on L2 piece by piece (README: How we got here).
  const float* lse = prm.lse_part + row * prm.splits;
  float m = -kInf;
  for (int s = lane; s < prm.splits; s += 32)
    if (lse[s] != kInf) m = fmaxf(m, lse[s]);  // +inf: the piece saw no key, it weighs nothing
  for (int d = 16; d > 0; d /= 2) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, d));
  float o[kD / 32] = {};
  float total = 0.0f;  // this lane's pieces' weights, summed over the lanes below
  if (m != -kInf) {
    for (int s0 = 0; s0 < prm.splits; s0 += 32) {
      const float l = s0 + lane < prm.splits ? lse[s0 + lane] : kInf;
      const float w_lane = l == kInf ? 0.0f : __expf(l - m);  // <= 1
      total += w_lane;
      const int n = prm.splits - s0 < 32 ? prm.splits - s0 : 32;
      const float* O_p = prm.o_part + (row * prm.splits + s0) * kD + lane;
      // Eight pieces at a time: their loads first, all in flight together, then the sums.
      for (int k0 = 0; k0 < n; k0 += 8) {
        float x[8][kD / 32];
#pragma unroll
        for (int k = 0; k < 8; ++k)
#pragma unroll
          for (int c = 0; c < kD / 32; ++c) x[k][c] = k0 + k < n ? O_p[(k0 + k) * kD + 32 * c] : 0.0f;
#pragma unroll
        for (int k = 0; k < 8; ++k) {
          const float w = __shfl_sync(0xffffffffu, w_lane, (k0 + k) % 32);  // piece s0 + k0 + k's weight
#pragma unroll
          for (int c = 0; c < kD / 32; ++c) o[c] += w > 0.0f ? w * x[k][c] : 0.0f;
        }
      }
    }
  }
  for (int d = 16; d > 0; d /= 2) total += __shfl_xor_sync(0xffffffffu, total, d);
  // END SOLUTION
  if (kSinks && prm.sink_logits) {
    // The row's sink (query head (row / Sq) mod H) joins the denominator once, as one more piece
    // with weight e^(sink - m) and no value: chapter 03's rescale to the new maximum.
    const float sink = prm.sink_logits[row / prm.base.seqlen_q % (prm.kv_heads * prm.base.group_size)];
    const float m_new = fmaxf(m, sink), f = total > 0.0f ? __expf(m - m_new) : 0.0f;
#pragma unroll
    for (int c = 0; c < kD / 32; ++c) o[c] *= f;
    total = total * f + __expf(sink - m_new);
    m = m_new;
  }
  const float inv = total > 0.0f ? 1.0f / total : 0.0f;
  T* O_g = static_cast<T*>(prm.base.o) + row * kD;
#pragma unroll
  for (int c = 0; c < kD / 32; ++c) O_g[lane + 32 * c] = static_cast<T>(o[c] * inv);
  if (lane == 0) prm.base.lse[row] = total > 0.0f ? m + logf(total) : kInf;
}

// The KV cache's append: row i of (batch b, KV head) of k_new / v_new ([B, Hkv, Sq, D]) goes to
// row cached[b] + i of the cache ([B, Hkv, kv_rows, D]). One thread per 16 bytes.
template <class T, int kD>
__global__ void __launch_bounds__(256) append_kernel(const T* k_new, const T* v_new, T* k_cache, T* v_cache,
                                                     const int* cached, int kv_heads, int seqlen_q, int kv_rows,
                                                     std::int64_t chunks) {
  constexpr int kChunks = kD * static_cast<int>(sizeof(T)) / 16;  // 16-byte chunks per row
  const std::int64_t n = std::int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (n >= chunks) return;
  const std::int64_t row = n / kChunks;  // (b Hkv + kv_h) Sq + i
  const int c = static_cast<int>(n % kChunks), i = static_cast<int>(row % seqlen_q);
  const std::int64_t kv_bh = row / seqlen_q;
  const std::int64_t dst = (kv_bh * kv_rows + cached[kv_bh / kv_heads] + i) * kD;
  reinterpret_cast<uint4*>(k_cache + dst)[c] = reinterpret_cast<const uint4*>(k_new + row * kD)[c];
  reinterpret_cast<uint4*>(v_cache + dst)[c] = reinterpret_cast<const uint4*>(v_new + row * kD)[c];
}

}  // namespace decoding
