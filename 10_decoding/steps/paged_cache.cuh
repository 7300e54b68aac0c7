// Chapter 10's paged KV cache (steps/paged_cache.h says what it is): the split kernel's K/V copy
// through a block table, and the append into pages.
//
// New since decoding.cuh, whose split_kv_kernel and combine run unchanged with Kv = Paged<k>::Kv
// (instead of KvRows):
//   * A key tile of Bc = 64 keys lies in one page when pages hold 64 tokens or more; with pages of
//     16 or 32 tokens it spans 4 or 2 pages. Paged<kPageRows>::Kv copies it as Bc / kPageRows runs
//     of kPageRows rows (kPageRows = min(page size, Bc)), each with 06's copy_tile from its own
//     page: the swizzle repeats every 8 rows, so a run of 16 rows lands exactly as part of a
//     64-row copy, with as many cp.async in all.
//   * Only the page number changes per run: one load of the block table, the rest is the
//     contiguous kernel's address arithmetic. That load is waited for before the run's copies
//     (README: pages of 16 cost 10-19%; exercise 7).
#pragma once

#include "10_decoding/decoding.cuh"

namespace decoding::steps {

template <int kPageRows>  // rows of one page in a key tile: 16, 32, or 64 for pages of 64 or more
struct Paged {
  template <class C>
  struct Kv {
    static_assert(C::Bc % kPageRows == 0 && kPageRows % 8 == 0);
    const typename C::T *K, *V;  // this KV head's rows in page 0 of the pool
    const int* table;            // this sequence's row of the block table
    std::int64_t page_elems;     // one page of every head: Hkv 2^page_log2 D
    int page_log2;
    __device__ __forceinline__ Kv(const SplitParams& prm, std::int64_t kv_bh, std::int64_t)
        : K(static_cast<const typename C::T*>(prm.base.k) + ((kv_bh % prm.kv_heads) << prm.page_log2) * C::kD),
          V(static_cast<const typename C::T*>(prm.base.v) + ((kv_bh % prm.kv_heads) << prm.page_log2) * C::kD),
          table(prm.block_table + kv_bh / prm.kv_heads * prm.pages_per_seq),
          page_elems((std::int64_t{prm.kv_heads} << prm.page_log2) * C::kD),
          page_log2(prm.page_log2) {}
    // Keys j0 .. j0 + Bc - 1 into the two smem tiles, run by run; rows past `rows` zero-filled, and
    // a run wholly past them reads no block-table entry.
    __device__ __forceinline__ void copy(std::uint32_t K_dst, std::uint32_t V_dst, int j0, int rows) const {
#pragma unroll
      for (int r = 0; r < C::Bc; r += kPageRows) {
        const int j = j0 + r;
        const std::int64_t at = r < rows ? table[j >> page_log2] * page_elems + (j & ((1 << page_log2) - 1)) * C::kD : 0;
        const std::uint32_t smem = 2 * r * C::kCols;  // run r's rows in the (Bc, kCols) tiles
        fa::cuda::copy_tile<C, kPageRows>(K_dst + smem, K + at, rows - r);
        fa::cuda::copy_tile<C, kPageRows>(V_dst + smem, V + at, rows - r);
      }
    }
  };
};

// The paged append: row i of (batch b, KV head h) of k_new / v_new ([B, Hkv, Sq, D]) is token
// t = cached[b] + i of sequence b: row t mod page_size of head h in page table[b][t / page_size].
// One thread per 16 bytes.
template <class T, int kD>
__global__ void __launch_bounds__(256) append_paged_kernel(const T* k_new, const T* v_new, T* k_pages, T* v_pages,
                                                           const int* cached, const int* block_table, int pages_per_seq,
                                                           int page_log2, int kv_heads, int seqlen_q, std::int64_t chunks) {
  constexpr int kChunks = kD * static_cast<int>(sizeof(T)) / 16;  // 16-byte chunks per row
  const std::int64_t n = std::int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (n >= chunks) return;
  const std::int64_t row = n / kChunks;  // (b Hkv + h) Sq + i
  const int c = static_cast<int>(n % kChunks), i = static_cast<int>(row % seqlen_q);
  const std::int64_t kv_bh = row / seqlen_q, b = kv_bh / kv_heads;
  const int token = cached[b] + i, page = block_table[b * pages_per_seq + (token >> page_log2)];
  const std::int64_t head_row0 = (std::int64_t{page} * kv_heads + kv_bh % kv_heads) << page_log2;  // (page, h)'s row 0
  const std::int64_t dst = (head_row0 + (token & ((1 << page_log2) - 1))) * kD;
  reinterpret_cast<uint4*>(k_pages + dst)[c] = reinterpret_cast<const uint4*>(k_new + row * kD)[c];
  reinterpret_cast<uint4*>(v_pages + dst)[c] = reinterpret_cast<const uint4*>(v_new + row * kD)[c];
}

}  // namespace decoding::steps
