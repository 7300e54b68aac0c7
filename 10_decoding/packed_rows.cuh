// Chapter 10's tile functions of packed rows (decoding.cuh's kernels are written in them): the
// kernels' arguments (SplitParams), a packed row's query head and row (q_head, q_row), Q's rows
// gathered by head (gather_q), the mask and the score options on packed rows (mask_packed,
// apply_options), the epilogue of a whole key range or a piece (write_packed), and where a key
// tile's K and V rows lie (KvRows; the paged step brings another).
#pragma once

#include <cstdint>
#include <limits>

#include "common/fa2_tiles/block.cuh"  // Params, Config, copy_tile, ScoreTile, WarpRows
#include "10_decoding/split_plan.h"        // packed_row, packed_q_row, packed_rows

namespace decoding {

using namespace fa::cuda;
using fa2::Params;

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
  // The score options (common/host/reference.h), all off by default: softcap > 0, and per query head
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

// Q's packed rows r0 .. r0 + kRows - 1 into the (kRows, kCols) smem tile, one 16-byte cp.async per
// chunk as in 06's copy_tile, but each row from its own head; rows past G Sq are zero-filled.
template <class C, int kRows = C::Br>
__device__ __forceinline__ void gather_q(std::uint32_t tile, const SplitParams& prm, std::int64_t kv_bh, int r0) {
  using T = typename C::T;
  constexpr int kRowChunks = C::kCols / kChunkElems, kRowsPerIt = C::kThreads / kRowChunks;
  const int r_t = copy_row(threadIdx.x, kRowChunks), c = copy_chunk(threadIdx.x, kRowChunks) * kChunkElems;
  if (c >= C::kD) return;
  const int rows = packed_rows(prm.base.group_size, prm.base.seqlen_q);
  static_assert(kRows % kRowsPerIt == 0);
#pragma unroll
  for (int it = 0; it < kRows / kRowsPerIt; ++it) {
    const int r = r0 + r_t + it * kRowsPerIt;
    const bool inside = r < rows;
    const T* src = static_cast<const T*>(prm.base.q) + (inside ? q_row(prm, kv_bh, r) * C::kD + c : 0);
    cp_async_16(tile + 2 * tile_offset(r_t + it * kRowsPerIt, c, C::kCols, C::kSwizzle), src, inside);
  }
}

// -inf where packed row (this lane's rows: row, row + 8) must not see key j: past Sk, causally
// hidden, or past the piece's end.
template <class C>
__device__ __forceinline__ void mask_packed(fa2::ScoreTile<C>& S, int row, int j0, int j_end, int t,
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
__device__ __forceinline__ void apply_options(fa2::ScoreTile<C>& S, int row, int j0, int t, const SplitParams& prm,
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
__device__ __forceinline__ void write_packed(const fa2::WarpRows<C>& w, const SplitParams& prm,
                                             std::int64_t kv_bh, int row, int t, bool whole, Part part) {
  using T = typename C::T;
  constexpr float kInf = std::numeric_limits<float>::infinity();
  const int rows = packed_rows(prm.base.group_size, prm.base.seqlen_q);
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const float l = fa2::row_sum(w, 0, h);
    const int r = row + 8 * h;
    if (r >= rows) continue;
    const std::int64_t qr = q_row(prm, kv_bh, r);
    float inv_l = l > 0.0f ? 1.0f / l : 0.0f;  // a row that saw no key: O = 0
    float lse = fa2::row_lse(w, 0, h, l);
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
    copy_tile<C, C::Bc>(K_dst, K + j0 * C::kD, rows);
    copy_tile<C, C::Bc>(V_dst, V + j0 * C::kD, rows);
  }
};

}  // namespace decoding
