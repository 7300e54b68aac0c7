// Chapter 09's host side: the tensor maps and the launch of flash_v3_kernel (flash_v3.cuh) on
// the grid its tile walk asks for. flash_v3.cu and the steps (steps/) launch through it.
#pragma once

#include <cstdint>

#include "09_flash_v3/flash_v3.cuh"

namespace flash_v3 {

// The tensor maps of q, k, v as [B * H][S][D] (3-D, so that a box never crosses a head): boxes of
// q_rows (Q) or kv_rows (K, V) rows x 64 columns.
struct Maps {
  CUtensorMap q, k, v;
};
inline Maps make_maps(const fa::Problem& p, const void* q, const void* k, const void* v, std::uint32_t q_rows,
                      std::uint32_t kv_rows) {
  const bool bf16 = p.dtype == fa::Dtype::bf16;
  const std::uint64_t bh = std::uint64_t(p.batch) * p.heads, kv_bh = std::uint64_t(p.batch) * p.kv_heads;
  return {make_tma(q, bf16, bh, p.seqlen_q, p.head_dim, q_rows, kAtomCols),
          make_tma(k, bf16, kv_bh, p.seqlen_k, p.head_dim, kv_rows, kAtomCols),
          make_tma(v, bf16, kv_bh, p.seqlen_k, p.head_dim, kv_rows, kAtomCols)};
}

template <class C>
void launch(const fa::Problem& p, const void* q, const void* k, const void* v, const Params& prm, cudaStream_t stream) {
  static const bool opted_in = [] {  // above 48 KB of shared memory a kernel must opt in, once
    allow_shared_memory(flash_v3_kernel<C>, C::kSmemBytes);
    return true;
  }();
  (void)opted_in;
  const Maps maps = make_maps(p, q, k, v, C::Br, C::Bc);
  const std::int64_t units = TileWalk::units(prm.seqlen_q, prm.batch_heads, prm.causal, C::Br, C::kPersistent);
  if (units == 0) return;
  static const int blocks_per_gpu = [] {  // how many blocks are resident at once (persistent)
    int device = 0, sms = 0, per_sm = 0;
    FA_CUDA_CHECK(cudaGetDevice(&device));
    FA_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    FA_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, flash_v3_kernel<C>, C::kThreads, C::kSmemBytes));
    return sms * per_sm;
  }();
  const std::int64_t cap = C::kPersistent ? blocks_per_gpu : std::int64_t{kMaxGridX};
  const unsigned blocks = static_cast<unsigned>(units < cap ? units : cap);
  // O as [B * H][Sq][D] in boxes of one consumer's 64 rows x 64 columns (the TMA-store epilogue).
  const CUtensorMap o_map = make_tma(prm.o, p.dtype == fa::Dtype::bf16, std::uint64_t(p.batch) * p.heads, p.seqlen_q,
                                     p.head_dim, 64, kAtomCols);
  flash_v3_kernel<C><<<blocks, C::kThreads, C::kSmemBytes, stream>>>(maps.q, maps.k, maps.v, o_map, prm);
  FA_CHECK_LAUNCH();
}

}  // namespace flash_v3
