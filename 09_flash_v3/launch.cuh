// Chapter 09's host side: the tensor maps and the launch of flash_v3_kernel (flash_v3.cuh) on
// the grid its tile walk asks for. dispatch.cuh and the steps (steps/) launch through it.
#pragma once

#include <cstdint>
#include <cstring>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "09_flash_v3/flash_v3.cuh"
#include "common/cuda/device_memory.h"  // workspace

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

// The FP8 step's operands (Fp8<C>, [B, H, S, D] only): Q and K as E4M3 bytes in boxes of q_rows or
// kv_rows rows x 128 columns, and V^T ([B * Hkv][D][fp8_vt_cols(Sk)], steps/fp8.cu) in boxes of D
// rows x kv_rows keys.
inline std::int64_t fp8_vt_cols(int seqlen_k) { return (std::int64_t{seqlen_k} + 31) / 32 * 32; }
inline Maps make_fp8_maps(const fa::Problem& p, const void* q, const void* k, const void* vt, std::uint32_t q_rows,
                          std::uint32_t kv_rows) {
  const std::uint64_t kv = std::uint64_t(p.batch) * p.kv_heads;
  return {make_tma_of(CU_TENSOR_MAP_DATA_TYPE_UINT8, 1, q, std::uint64_t(p.batch) * p.heads, p.seqlen_q, p.head_dim,
                      q_rows, 128),
          make_tma_of(CU_TENSOR_MAP_DATA_TYPE_UINT8, 1, k, kv, p.seqlen_k, p.head_dim, kv_rows, 128),
          make_tma_of(CU_TENSOR_MAP_DATA_TYPE_UINT8, 1, vt, kv, p.head_dim, fp8_vt_cols(p.seqlen_k), p.head_dim,
                      kv_rows)};
}

// A packed batch's offsets on the GPU, for VarlenTileWalk: VarlenTileWalk's unit offsets (int64),
// then cu_seqlens_q and cu_seqlens_k (ints), in one copy into the workspace; and the number of
// units (the walk's bound).
inline std::pair<VarlenArgs, std::int64_t> upload_varlen(const fa::Problem& p, int Br, bool persistent,
                                                         cudaStream_t stream) {
  const std::vector<std::int64_t> offsets = varlen_unit_offsets(p.cu_seqlens_q, p.heads, p.causal, Br, persistent);
  const std::size_t n = p.cu_seqlens_q.size(), offset_bytes = n * sizeof(std::int64_t), cu_bytes = n * sizeof(int);
  std::vector<unsigned char> host(offset_bytes + 2 * cu_bytes);
  std::memcpy(host.data(), offsets.data(), offset_bytes);
  std::memcpy(host.data() + offset_bytes, p.cu_seqlens_q.data(), cu_bytes);
  std::memcpy(host.data() + offset_bytes + cu_bytes, p.cu_seqlens_k.data(), cu_bytes);
  auto* ws = static_cast<unsigned char*>(fa::cuda::workspace(host.size(), "09_flash_v3's unit and sequence offsets"));
  FA_CUDA_CHECK(cudaMemcpyAsync(ws, host.data(), host.size(), cudaMemcpyHostToDevice, stream));
  const VarlenArgs vl{reinterpret_cast<const int*>(ws + offset_bytes),
                      reinterpret_cast<const int*>(ws + offset_bytes + cu_bytes),
                      reinterpret_cast<const std::int64_t*>(ws), static_cast<int>(n) - 1};
  return {vl, offsets.back()};
}

// kBshd: [B, S, H, D] tensors (the chapter's forward passes p.layout == bshd; the steps take [B, H, S, D] only).
// kVarlen: a packed batch of sequences (Problem::cu_seqlens_q, cu_seqlens_k; [1, total, H, D]
// tensors): the sequences' offsets and the walk's unit offsets go to the GPU first, into the
// workspace, and the kernel walks the sequences' tiles.
// Fp8<C>: q, k and v are E4M3 bytes (v: V^T, steps/fp8.cu), fp8 the kernel's scale of V.
template <class C, bool kBshd = false, bool kVarlen = false>
void launch(const fa::Problem& p, const void* q, const void* k, const void* v, const Params& prm, cudaStream_t stream,
            const Fp8Of<C>& fp8 = {}) {
  static_assert(!kVarlen || kBshd, "a packed batch is a [1, total, H, D] tensor");
  using Varlen = std::conditional_t<kVarlen, VarlenArgs, NoVarlen>;
  constexpr auto kernel = flash_v3_kernel<C, kBshd, Varlen>;
  allow_shared_memory_once(kernel, C::kSmemBytes);  // above 48 KB of shared memory a kernel must opt in
  static_assert(!C::kFp8 || (!kBshd && !kVarlen), "the FP8 step takes [B, H, S, D] tensors");
  const Maps maps = C::kFp8 ? make_fp8_maps(p, q, k, v, C::Br, C::Bc) : make_maps(p, q, k, v, C::Br, C::Bc);
  Varlen vl{};
  std::int64_t units = 0;
  if constexpr (kVarlen) {
    std::tie(vl, units) = upload_varlen(p, C::Br, C::kPersistent, stream);
  } else {
    units = TileWalk::units(prm.seqlen_q, prm.batch_heads, prm.causal, C::Br, C::kPersistent);
  }
  if (units == 0) return;
  static const int blocks_per_gpu = [] {  // how many blocks are resident at once (persistent)
    int device = 0, sms = 0, per_sm = 0;
    FA_CUDA_CHECK(cudaGetDevice(&device));
    FA_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    FA_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, C::kThreads, C::kSmemBytes));
    return sms * per_sm;
  }();
  const std::int64_t cap = C::kPersistent ? blocks_per_gpu : std::int64_t{kMaxGridX};
  const unsigned blocks = static_cast<unsigned>(units < cap ? units : cap);
  // O in boxes of one consumer's 64 rows x 64 columns (the TMA-store epilogue).
  const CUtensorMap o_map = o_map_of(prm.o, p, 64);
  SoftcapOf<C> softcap{};
  if constexpr (C::kSoftcap) softcap = SoftcapConsts::of(p.scale(), p.softcap);
  kernel<<<blocks, C::kThreads, C::kSmemBytes, stream>>>(maps.q, maps.k, maps.v, o_map, prm, vl, softcap, fp8);
  FA_CHECK_LAUNCH();
}

}  // namespace flash_v3
