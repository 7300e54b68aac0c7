// Chapter 10's host side, in plain C++ (CPU-tested; the kernels that use it come next, issue
// "10_decoding"): how a decoding step's work is laid out over the GPU.
//
//   * GQA packing. In decoding, seqlen_q is 1-16, so a tile of 64 query rows of one head would be
//     mostly empty, and each of the G = H / Hkv query heads that share a KV head would read that
//     KV head's K and V again. Instead a tile's rows are (query head in the group) x (query
//     position): G * Sq rows, all reading the same K and V, once.
//   * Split-KV (Flash-Decoding). At batch 1 with 8 KV heads there are 8 such tiles for 132 SMs.
//     So each (batch, KV head)'s key range is cut into `splits` pieces, one CTA each; a CTA writes
//     its rows' partial O (fp32, normalized by its own sum) and partial LSE; then a combine step
//     merges the pieces by their LSE. That is chapter 03's rescaling (m_new = max(m, m'),
//     l_new = e^(m - m_new) l + e^(m' - m_new) l'), done once across CTAs instead of once per key
//     tile inside one.
#pragma once

#include <cstdint>
#include <vector>

#include "common/host/problem.h"  // FA_HOST_DEVICE

namespace decoding {

// Row r of a packed tile (r = g * seqlen_q + i): query head g of the group, query position i.
struct PackedRow {
  int head_in_group, position;
};
FA_HOST_DEVICE constexpr PackedRow packed_row(int r, int seqlen_q) { return {r / seqlen_q, r % seqlen_q}; }
FA_HOST_DEVICE constexpr int packed_rows(int group_size, int seqlen_q) { return group_size * seqlen_q; }
// Packed row r of KV head kv_bh = b Hkv + kv_h, as a row of Q, O and LSE ([B, H, Sq] rows):
// (b H + h) Sq + i with h = kv_h G + (head in group), i = position.
FA_HOST_DEVICE constexpr std::int64_t packed_q_row(std::int64_t kv_bh, int r, int kv_heads, int group_size,
                                                   int seqlen_q) {
  const PackedRow pr = packed_row(r, seqlen_q);
  const std::int64_t b = kv_bh / kv_heads, h = kv_bh % kv_heads * group_size + pr.head_in_group;
  return (b * kv_heads * group_size + h) * seqlen_q + pr.position;
}

// The query positions among packed rows r0 .. r0 + rows - 1 (rows >= 1): lo .. hi, or every
// position when the rows run from one head of the group into the next.
struct PositionRange {
  int lo, hi;
};
FA_HOST_DEVICE constexpr PositionRange positions(int r0, int rows, int seqlen_q) {
  return r0 / seqlen_q == (r0 + rows - 1) / seqlen_q ? PositionRange{r0 % seqlen_q, (r0 + rows - 1) % seqlen_q}
                                                     : PositionRange{0, seqlen_q - 1};
}
// Keys [0, end) hold every key some row of the range sees (bottom-right causal: position i sees
// j <= i + Sk - Sq); end <= 0 when none does.
FA_HOST_DEVICE constexpr int keys_end(PositionRange r, int seqlen_q, int seqlen_k, bool causal) {
  const int end = causal ? r.hi + seqlen_k - seqlen_q + 1 : seqlen_k;
  return end < seqlen_k ? end : seqlen_k;
}
// Does key tile [j0, j0 + Bc) need the element mask for these rows (a key past Sk, or a key some
// row must not see)?
FA_HOST_DEVICE constexpr bool tile_needs_mask(PositionRange r, int j0, int Bc, int seqlen_q, int seqlen_k, bool causal) {
  return j0 + Bc > seqlen_k || (causal && j0 + Bc - 1 > r.lo + seqlen_k - seqlen_q);
}

// How many CTAs share one tile's key range.
//   tiles:      CTAs without a split (batch x KV heads x packed-row tiles)
//   key_blocks: key tiles of the longest sequence (ceil(seqlen_k / Bc))
//   slots:      CTAs the GPU runs side by side (the kernel passes its SM count: one CTA an SM)
// The rule: with at least 80% of the slots busy without a split, split nothing (the combine would
// only add traffic). Otherwise fill one wave: s = the most pieces with tiles x s <= slots (and
// s <= key_blocks, s <= max_splits), then the fewest pieces of the same length, ceil(key_blocks / s)
// tiles each, so that no piece is empty. One wave, not several: each wave pays the pipeline's fill
// again and each piece adds a partial output to combine. On the H100 (README, "The split plan")
// two or three waves of shorter pieces, or two CTAs an SM, measured 8-20% slower than one wave of
// one CTA an SM, although they leave fewer SMs idle. FlashAttention-2's num_splits_heuristic
// instead takes the fewest pieces within 85% of the best wave efficiency over any number of waves.
struct SplitPlan {
  int splits = 1;           // CTAs per tile's key range
  int blocks_per_split = 0;  // key tiles per CTA (the last CTA may get fewer)
  double efficiency = 1;    // waves / ceil(waves) for the chosen splits: the busy share of the slots
};
SplitPlan plan_splits(std::int64_t tiles, int key_blocks, int slots, int max_splits = 128);

// The combine step's CPU model, for one output row of D columns. Split s saw the keys of its
// piece and wrote o_parts[s * D .. s * D + D) = its own softmax-weighted sum (normalized by its own
// sum l_s) and lse_parts[s] = m_s + log(l_s). A split that saw no key wrote O = 0 and LSE = +inf
// (the convention of common/host/problem.h); it weighs nothing. `sink` is the row's attention-sink logit
// (common/host/reference.h), -inf for none: it joins the denominator once, here, never in a split.
//   M = max(max_s LSE_s, sink);  w_s = e^(LSE_s - M);  L = sum_s w_s + e^(sink - M)
//   O = sum_s w_s O_s / L;       LSE = M + log(L)
// A row with no key in any split: O = 0, LSE = +inf, or LSE = sink with a sink.
void combine_row(const std::vector<double>& o_parts, const std::vector<double>& lse_parts, int head_dim,
                 double sink, std::vector<double>& o, double& lse);

}  // namespace decoding
