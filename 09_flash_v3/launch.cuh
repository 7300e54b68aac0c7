// Chapter 09's host side: the tensor maps and the launch of flash_v3_kernel (flash_v3.cuh) on
// the grid its tile walk asks for. flash_v3.cu and the steps (steps/) launch through it.
#pragma once

#include <cstdint>

#include "09_flash_v3/flash_v3.cuh"

namespace flash_v3 {

// The tensor maps of q, k, v: [B, H, S, D] tensors as 3-D maps [B * H][S][D], [B, S, H, D] ones
// (Problem::layout) as 4-D maps (D, S, H, B) in their strides (Problem's Strides, or Q's, K's and
// V's input strides where set: a fused QKV projection's slices); either way a box
// never crosses a head. Boxes of q_rows (Q) or kv_rows (K, V) rows x 64 columns. o_map_of: O's,
// in boxes of `rows` rows.
struct Maps {
  CUtensorMap q, k, v;
};
inline CUtensorMap map_of(const void* base, const fa::Problem& p, int heads, int rows, int cols, fa::Strides s,
                          std::uint32_t box_rows) {
  const bool bf16 = p.dtype == fa::Dtype::bf16;
  if (p.layout == fa::Layout::bshd)
    return make_tma_4d(base, bf16, p.batch, heads, rows, cols, s.batch, s.head, s.row, box_rows, kAtomCols);
  return make_tma(base, bf16, std::uint64_t(p.batch) * heads, rows, cols, box_rows, kAtomCols);
}
inline Maps make_maps(const fa::Problem& p, const void* q, const void* k, const void* v, std::uint32_t q_rows,
                      std::uint32_t kv_rows) {
  return {map_of(q, p, p.heads, p.seqlen_q, p.head_dim, p.q_read_strides(), q_rows),
          map_of(k, p, p.kv_heads, p.seqlen_k, p.head_dim, p.k_read_strides(), kv_rows),
          map_of(v, p, p.kv_heads, p.seqlen_k, p.dv(), p.v_read_strides(), kv_rows)};
}
inline CUtensorMap o_map_of(const void* o, const fa::Problem& p, std::uint32_t rows) {
  return map_of(o, p, p.heads, p.seqlen_q, p.dv(), p.o_strides(), rows);
}

// kBshd: [B, S, H, D] tensors (the chapter's forward passes p.layout == bshd; the steps take [B, H, S, D] only).
template <class C, bool kBshd = false>
void launch(const fa::Problem& p, const void* q, const void* k, const void* v, const Params& prm, cudaStream_t stream) {
  static const bool opted_in = [] {  // above 48 KB of shared memory a kernel must opt in, once
    allow_shared_memory(flash_v3_kernel<C, kBshd>, C::kSmemBytes);
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
    FA_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, flash_v3_kernel<C, kBshd>, C::kThreads, C::kSmemBytes));
    return sms * per_sm;
  }();
  const std::int64_t cap = C::kPersistent ? blocks_per_gpu : std::int64_t{kMaxGridX};
  const unsigned blocks = static_cast<unsigned>(units < cap ? units : cap);
  // O in boxes of one consumer's 64 rows x 64 columns (the TMA-store epilogue).
  const CUtensorMap o_map = o_map_of(prm.o, p, 64);
  flash_v3_kernel<C, kBshd><<<blocks, C::kThreads, C::kSmemBytes, stream>>>(maps.q, maps.k, maps.v, o_map, prm);
  FA_CHECK_LAUNCH();
}

}  // namespace flash_v3
