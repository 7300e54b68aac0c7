// Chapter 10 -- attention for decoding: GQA packing and split-KV over 06's tile functions.
//
// New since 06 (06_tensor_core/tensor_core.cuh):
//   * A block's 64 rows are packed (split_plan.h): (query head in the group) x (query position) of
//     one KV head, gathered from Q by cp.async, so the G query heads sharing K and V read them once.
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

#include "06_tensor_core/tensor_core.cuh"  // Params, Config, copy/score/softmax/pv steps
#include "10_decoding/split_plan.h"

namespace decoding {

using namespace fa::cuda;
using tensor_core::Params;

// 4 warps of 16 packed rows (Br = 64), Bc = 64 keys, K/V double buffered: 06's Config with one
// 16-row mma tile per warp.
template <class T, int kD>
using DecodeConfig = tensor_core::Config<T, kD, /*Bc=*/64, /*kMTiles=*/1>;

// K/V in a ring of three stages, two tiles in flight ahead of the one computed: decoding is bound
// by memory, and a piece of a few tiles must not wait one round trip per tile. Q's tile, then the
// ring: 112 KB at D = 128, 56 KB at D = 64, 224 KB at D = 256 (of the H100's 227: one block an SM).
constexpr int kStages = 3;
template <class C>
constexpr int smem_bytes() { return (C::Br + 2 * kStages * C::Bc) * C::kCols * 2; }

struct SplitParams {
  Params base;              // q, k, v, o, lse, sizes, scale (06's)
  int kv_heads;             // Hkv
  int row_tiles;            // packed-row tiles per KV head: ceil(G Sq / Br)
  std::int64_t tiles;       // B Hkv row_tiles: the grid's rows
  int splits;               // pieces of the key range (gridDim.x)
  int keys_per_split;       // Bc x blocks_per_split
  float* o_part;            // [B H Sq, splits, D] fp32 (splits > 1), else null
  float* lse_part;          // [B H Sq, splits]
  // A KV cache (forward_with_cache): a (batch, KV head)'s K and V rows lie kv_rows apart (the
  // cache's capacity; seqlen_k without a cache), and sequence b has seqlens_k[b] keys (null:
  // every sequence has base.seqlen_k, the longest).
  int kv_rows;
  const int* seqlens_k;     // [B] device, or null
  // A paged cache (steps/paged_cache.cuh; null and unused in the chapter's kernels): page n of
  // sequence b is page block_table[b pages_per_seq + n] of k and v ([pages, Hkv, 2^page_log2, D]).
  const int* block_table;
  int pages_per_seq, page_log2;
  // The score options (common/reference.h), all off by default: softcap > 0, and per query head
  // ALiBi slopes and sink logits ([H] device, or null).
  float softcap;
  const float* alibi_slopes;
  const float* sink_logits;
  __device__ bool changes_scores() const { return softcap > 0.0f || alibi_slopes != nullptr; }
};

// Query head h of packed row r of KV head kv_bh (its slope and sink are h's).
__device__ __forceinline__ int q_head(const SplitParams& prm, std::int64_t kv_bh, int r) {
  return static_cast<int>(kv_bh % prm.kv_heads) * prm.base.group_size + packed_row(r, prm.base.seqlen_q).head_in_group;
}

// Packed row r of KV head kv_bh as a row of Q, O and LSE (split_plan.h, CPU-tested).
__device__ __forceinline__ std::int64_t q_row(const SplitParams& prm, std::int64_t kv_bh, int r) {
  return packed_q_row(kv_bh, r, prm.kv_heads, prm.base.group_size, prm.base.seqlen_q);
}

// Q's packed rows r0 .. r0 + Br - 1 into the (Br, kCols) smem tile, one 16-byte cp.async per
// chunk as in 06's copy_tile, but each row from its own head; rows past G Sq are zero-filled.
template <class C>
__device__ __forceinline__ void gather_q(std::uint32_t tile, const SplitParams& prm, std::int64_t kv_bh, int r0) {
  using T = typename C::T;
  constexpr int kRowChunks = C::kCols / kChunkElems, kRowsPerIt = C::kThreads / kRowChunks;
  const int r_t = copy_row(threadIdx.x, kRowChunks), c = copy_chunk(threadIdx.x, kRowChunks) * kChunkElems;
  if (c >= C::kD) return;
  const int rows = packed_rows(prm.base.group_size, prm.base.seqlen_q);
#pragma unroll
  for (int it = 0; it < C::Br / kRowsPerIt; ++it) {
    const int r = r0 + r_t + it * kRowsPerIt;
    const bool inside = r < rows;
    const T* src = static_cast<const T*>(prm.base.q) + (inside ? q_row(prm, kv_bh, r) * C::kD + c : 0);
    cp_async_16(tile + 2 * tile_offset(r_t + it * kRowsPerIt, c, C::kCols, C::kSwizzle), src, inside);
  }
}

// -inf where packed row (this lane's rows: row, row + 8) must not see key j: past Sk, causally
// hidden, or past the piece's end.
template <class C>
__device__ __forceinline__ void mask_packed(tensor_core::ScoreTile<C>& S, int row, int j0, int j_end, int t,
                                            const Params& prm, int seqlen_k) {
#pragma unroll
  for (int nt = 0; nt < C::Bc / 8; ++nt)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int i = packed_row(row + 8 * (e / 2), prm.seqlen_q).position, j = j0 + 8 * nt + 2 * t + e % 2;
      if (j >= j_end || (prm.causal && !fa::causal_visible(i, j, prm.seqlen_q, seqlen_k)))
        S[0][nt][e] = -std::numeric_limits<float>::infinity();
    }
}

// The score options on this lane's raw scores S = Q K^T (rows row, row + 8; keys from j0), in
// reference.h's order on x = scale S: x = c tanh(x / c), then x += m_h (j - i') with i' = i + Sk - Sq;
// S = x / scale, so that 06's softmax_step (which multiplies by scale log2(e)) sees x. Before the
// mask; padding rows (r >= rows) are left alone (no head, and never written).
template <class C>
__device__ __forceinline__ void apply_options(tensor_core::ScoreTile<C>& S, int row, int j0, int t, const SplitParams& prm,
                                              std::int64_t kv_bh, int seqlen_k) {
  const Params& p = prm.base;
  const float scale = p.scale_log2 * kLn2, inv_scale = 1.0f / scale;
  const int rows = packed_rows(p.group_size, p.seqlen_q);
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int r = row + 8 * h;
    if (r >= rows) continue;
    const float slope = prm.alibi_slopes ? prm.alibi_slopes[q_head(prm, kv_bh, r)] : 0.0f;
    const int i_key = packed_row(r, p.seqlen_q).position + seqlen_k - p.seqlen_q;  // i': the query among the keys
#pragma unroll
    for (int nt = 0; nt < C::Bc / 8; ++nt)
#pragma unroll
      for (int e = 2 * h; e < 2 * h + 2; ++e) {
        float x = S[0][nt][e] * scale;
        if (prm.softcap > 0.0f) x = prm.softcap * tanhf(x / prm.softcap);
        x += slope * static_cast<float>(j0 + 8 * nt + 2 * t + e % 2 - i_key);
        S[0][nt][e] = x * inv_scale;
      }
  }
}

// The epilogue for packed rows: for a whole key range (`whole`), O / l in T and LSE (06's
// write_rows, gathered); for a piece of one, the piece's O / l in fp32 and its LSE (+inf: no key)
// into row part(r, qr) of the workspace (o_part, lse_part). kExtras: the sinks may be on.
template <class C, bool kExtras, class Part>
__device__ __forceinline__ void write_packed(const tensor_core::WarpRows<C>& w, const SplitParams& prm,
                                             std::int64_t kv_bh, int row, int t, bool whole, Part part) {
  using T = typename C::T;
  constexpr float kInf = std::numeric_limits<float>::infinity();
  const float scale = prm.base.scale_log2 * kLn2;
  const int rows = packed_rows(prm.base.group_size, prm.base.seqlen_q);
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float l = w.l[0][h];
    l += __shfl_xor_sync(0xffffffffu, l, 1);
    l += __shfl_xor_sync(0xffffffffu, l, 2);
    const int r = row + 8 * h;
    if (r >= rows) continue;
    const std::int64_t qr = q_row(prm, kv_bh, r);
    float inv_l = l > 0.0f ? 1.0f / l : 0.0f;  // a row that saw no key: O = 0
    float lse = l > 0.0f ? w.m[0][h] * scale + logf(l) : kInf;
    if (kExtras && whole && prm.sink_logits) {  // one piece: the sink joins the denominator here
      const float sink = prm.sink_logits[q_head(prm, kv_bh, r)];
      if (lse == kInf) {
        lse = sink;  // O stays 0
      } else {
        const float m = fmaxf(lse, sink), total = m + logf(__expf(lse - m) + __expf(sink - m));
        inv_l *= __expf(lse - total);  // O / l scaled by the keys' share e^(lse - total)
        lse = total;
      }
    }
    if (whole) {
      T* O_g = static_cast<T*>(prm.base.o) + qr * C::kD;
#pragma unroll
      for (int nt = 0; nt < C::kD / 8; ++nt)
        *reinterpret_cast<std::uint32_t*>(O_g + 8 * nt + 2 * t) = pack2<T>(w.O[0][nt][2 * h] * inv_l, w.O[0][nt][2 * h + 1] * inv_l);
      if (t == 0) prm.base.lse[qr] = lse;
    } else {
      const std::int64_t at = part(r, qr);
      float* O_p = prm.o_part + at * C::kD;
#pragma unroll
      for (int nt = 0; nt < C::kD / 8; ++nt)
        *reinterpret_cast<float2*>(O_p + 8 * nt + 2 * t) = make_float2(w.O[0][nt][2 * h] * inv_l, w.O[0][nt][2 * h + 1] * inv_l);
      if (t == 0) prm.lse_part[at] = lse;
    }
  }
}

// Where the K and V rows of a (batch, KV head) lie, as attend_piece copies a key tile: the
// chapter's layout, rows kv_rows apart ([B, Hkv, kv_rows, D]: seqlen_k rows, or a cache's
// capacity). steps/paged_cache.cuh has the other: pages named by a block table.
template <class C>
struct KvRows {
  const typename C::T *K, *V;  // (kv_rows, D) global: this (batch, KV head)'s rows
  __device__ __forceinline__ KvRows(const SplitParams& prm, std::int64_t kv_bh, std::int64_t kv_rows)
      : K(static_cast<const typename C::T*>(prm.base.k) + kv_bh * kv_rows * C::kD),
        V(static_cast<const typename C::T*>(prm.base.v) + kv_bh * kv_rows * C::kD) {}
  // Keys j0 .. j0 + Bc - 1 into the two smem tiles; rows past `rows` (the sequence's end) zero-filled.
  __device__ __forceinline__ void copy(std::uint32_t K_dst, std::uint32_t V_dst, int j0, int rows) const {
    tensor_core::copy_tile<C, C::Bc>(K_dst, K + j0 * C::kD, rows);
    tensor_core::copy_tile<C, C::Bc>(V_dst, V + j0 * C::kD, rows);
  }
};

// One piece of one tile's key range, as a block computes it: keys [j_begin, j_cap) of packed-row
// tile `tile` (KV head tile / row_tiles, rows r0 .. r0 + Br - 1), cut at the last key any of the
// tile's rows sees, through the K/V ring; then write_packed(whole, part). Block: 4 warps, warp w
// owns packed rows r0 + 16 w .. r0 + 16 w + 15. signal: let the programmatic dependent (the
// combine or the fix-up) launch before the epilogue. The caller makes sure the block's previous
// piece, if any, is done with shared memory (steps/stream_k.cuh walks several). Kv: where K and V
// lie (KvRows above).
template <class C, bool kExtras, template <class> class Kv = KvRows, class Part>
__device__ __forceinline__ void attend_piece(const SplitParams& prm, std::int64_t tile, int j_begin, int j_cap,
                                             bool whole, bool signal, Part part) {
  constexpr int Br = C::Br, Bc = C::Bc, kCols = C::kCols, kTileBytes = Bc * kCols * 2;
  extern __shared__ __align__(128) unsigned char smem[];
  const std::uint32_t Q_s = smem_u32(smem);                 // (Br, kCols) smem: the packed rows of Q
  const std::uint32_t K_s = Q_s + Br * kCols * 2;           // (kStages, Bc, kCols) smem: K_j
  const std::uint32_t V_s = K_s + kStages * kTileBytes;     // (kStages, Bc, kCols) smem: V_j
  const Params& p = prm.base;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const std::int64_t kv_bh = tile / prm.row_tiles;
  const int r0 = static_cast<int>(tile % prm.row_tiles) * Br;
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

  gather_q<C>(Q_s, prm, kv_bh, r0);
  load_tile(0);  // Q and tile 0: one group
  load_tile(1);

  const int lane_a = ldsm_lane_offset(lane, LdsmOrder::kRowsFirst, kCols, C::kSwizzle);  // Q, V
  const int lane_b = ldsm_lane_offset(lane, LdsmOrder::kColsFirst, kCols, C::kSwizzle);  // K
  const std::uint32_t Q_w = Q_s + 2 * 16 * warp * kCols;  // this warp's rows
  tensor_core::QFrags<C> q_frag;  // unused: Q is re-read from shared memory (kQInRegs = false)
  tensor_core::WarpRows<C> w;
  for (int n = 0; n < n_tiles; ++n) {
    const int j0 = j_begin + n * Bc;
    const std::uint32_t stage = (n % kStages) * kTileBytes;
    cp_async_wait<1>();  // this thread's copies of tile n (and Q) have landed; tile n + 1 may fly
    __syncthreads();     // ... and everyone's; and every warp is done with tile n - 1's stage
    load_tile(n + 2);    // into tile n - 1's stage, free since the barrier
    tensor_core::ScoreTile<C> S;
    tensor_core::tile_scores<C>(S, q_frag, Q_w, K_s + stage, lane_a, lane_b);
    if (kExtras && prm.changes_scores()) apply_options<C>(S, r0 + 16 * warp + g, j0, t, prm, kv_bh, seqlen_k);
    if (j0 + Bc > j_end || tile_needs_mask(pos, j0, Bc, p.seqlen_q, seqlen_k, p.causal))
      mask_packed<C>(S, r0 + 16 * warp + g, j0, j_end, t, p, seqlen_k);
    tensor_core::PTile<C> P;
    tensor_core::softmax_step<C>(S, P, w, p.scale_log2);
    tensor_core::accumulate_pv<C>(w, P, V_s + stage, lane_a);
  }
  if (signal) launch_dependents();  // the combine (launched programmatically) may start its blocks now
  write_packed<C, kExtras>(w, prm, kv_bh, r0 + 16 * warp + g, t, whole, part);
}

// grid: (splits) x (B Hkv row_tiles rows over y and z); block x of a tile row computes piece x.
// kExtras: the score options or a KV cache may be on (forward_with_options, forward_with_cache);
// plain forward() runs the kernel without their code (measured 1-3% faster at batch 1 than one
// kernel for both, which carries the options' registers and branches).
template <class C, bool kExtras, template <class> class Kv = KvRows>
__global__ void __launch_bounds__(C::kThreads, 2) split_kv_kernel(const SplitParams prm) {
  const std::int64_t tile = grid_row();
  if (tile >= prm.tiles) return;  // a spare block of the grid
  const int j_begin = blockIdx.x * prm.keys_per_split;
  // Piece x of row qr goes to row qr * splits + x of the workspace.
  attend_piece<C, kExtras, Kv>(prm, tile, j_begin, j_begin + prm.keys_per_split, prm.splits == 1, true,
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
  // BEGIN SOLUTION: combine_row's merge over the row's pieces (LSE_s: prm.lse_part[row * splits + s], O_s: prm.o_part + (row * splits + s) * kD): m = the largest LSE_s (skip +inf: no key); if m is finite, for each piece with a finite LSE_s: w = __expf(LSE_s - m), total += w, o[c] += w * O_s[lane + 32 c]
  // STUB: float m = -kInf, total = 0.0f, o[kD / 32] = {};  // the stub merges nothing: O = 0, LSE = +inf
  const float* lse = prm.lse_part + row * prm.splits;
  float m = -kInf;
  for (int s = 0; s < prm.splits; ++s)
    if (lse[s] != kInf) m = fmaxf(m, lse[s]);  // +inf: the piece saw no key, it weighs nothing
  float o[kD / 32] = {};
  float total = 0.0f;
  if (m != -kInf) {
    for (int s = 0; s < prm.splits; ++s) {
      if (lse[s] == kInf) continue;
      const float w = __expf(lse[s] - m);  // <= 1
      total += w;
      const float* O_p = prm.o_part + (row * prm.splits + s) * kD;
#pragma unroll
      for (int c = 0; c < kD / 32; ++c) o[c] += w * O_p[lane + 32 * c];
    }
  }
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
