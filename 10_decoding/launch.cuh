// Chapter 10's launch, the host side of decoding.cuh's kernels: the plan on this GPU, the split-KV
// launch and (with several pieces) the combine. decoding.cu's entry points and the steps
// (steps/steps.cu, steps/paged_cache.cu) call it.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>
#include <vector>

#include "10_decoding/decoding.cuh"
#include "10_decoding/decoding.h"  // Plan
#include "common/cuda/cuda_check.h"
#include "common/device/launch.h"
#include "common/cuda/device_memory.h"  // workspace

namespace decoding {


// The plan's slots: the SM count, one CTA an SM (split_plan.h says why).
inline int plan_slots() {
  static const int n = [] {
    int device = 0, sms = 0;
    FA_CUDA_CHECK(cudaGetDevice(&device));
    FA_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    return sms;
  }();
  return n;
}

// How the block's warps share its tiles (decoding.cuh: WarpShare): the keys of each tile when one
// warp's 16 rows hold every packed row of a KV head, else the rows.
inline int key_warps(const fa::Problem& p) { return packed_rows(p.group_size(), p.seqlen_q) <= 16 ? 4 : 1; }

template <class T, int kD>
Plan plan_for(const fa::Problem& p) {
  using C = DecodeConfig<T, kD>;
  Plan pl{};
  pl.row_tiles = ceil_div(packed_rows(p.group_size(), p.seqlen_q), C::Br / key_warps(p));
  pl.tiles = std::int64_t{p.batch} * p.kv_heads * pl.row_tiles;
  const SplitPlan sp = plan_splits(pl.tiles, ceil_div(p.seqlen_k, C::Bc), plan_slots());
  pl.splits = sp.splits;
  pl.keys_per_split = sp.blocks_per_split * C::Bc;
  return pl;
}

// What forward_with_options, forward_with_cache and the paged step add to SplitParams (device
// pointers, or null).
struct Extras {
  int kv_rows = 0;  // 0: p.seqlen_k
  const int* seqlens_k = nullptr;
  float softcap = 0.0f;
  const float* alibi_slopes = nullptr;
  const float* sink_logits = nullptr;
  const int* block_table = nullptr;  // a paged cache
  int pages_per_seq = 0, page_log2 = 0;
};

// One instantiation of the split kernel, launched; the first launch lets it have its shared memory
// (above 48 KB a kernel must opt in).
template <class C, bool kExtras, template <class> class Kv, int kKeyWarps>
void launch_split(dim3 grid, const SplitParams& prm, cudaStream_t stream) {
  constexpr int kSmem = smem_bytes<C, kKeyWarps>();
  allow_shared_memory_once(split_kv_kernel<C, kExtras, Kv, kKeyWarps>, kSmem);
  split_kv_kernel<C, kExtras, Kv, kKeyWarps><<<grid, C::kThreads, kSmem, stream>>>(prm);
  FA_CHECK_LAUNCH();
}

template <class C, bool kExtras, template <class> class Kv>
void launch_split(dim3 grid, const SplitParams& prm, int key_warps, cudaStream_t stream) {
  if (key_warps == C::kWarps) launch_split<C, kExtras, Kv, C::kWarps>(grid, prm, stream);
  else launch_split<C, kExtras, Kv, 1>(grid, prm, stream);
}

template <class T, int kD, template <class> class Kv = KvRows>
void run(const fa::Problem& p, const Params& base, cudaStream_t stream, const Extras& x = {}) {
  using C = DecodeConfig<T, kD>;
  const Plan pl = plan_for<T, kD>(p);
  SplitParams prm{.base = base,
                  .kv_heads = p.kv_heads,
                  .row_tiles = pl.row_tiles,
                  .tiles = pl.tiles,
                  .splits = pl.splits,
                  .keys_per_split = pl.keys_per_split,
                  .o_part = nullptr,
                  .lse_part = nullptr,
                  .kv_rows = x.kv_rows > 0 ? x.kv_rows : p.seqlen_k,
                  .seqlens_k = x.seqlens_k,
                  .block_table = x.block_table,
                  .pages_per_seq = x.pages_per_seq,
                  .page_log2 = x.page_log2,
                  .softcap = x.softcap,
                  .alibi_slopes = x.alibi_slopes,
                  .sink_logits = x.sink_logits};
  const std::int64_t out_rows = std::int64_t{p.batch} * p.heads * p.seqlen_q;
  if (pl.splits > 1) {  // the pieces' partial O, then their LSE, for the combine
    const std::int64_t parts = out_rows * pl.splits;
    prm.o_part = static_cast<float*>(fa::cuda::workspace((parts * kD + parts) * sizeof(float),
                                                         "10_decoding: the pieces' partial O and LSE (fp32)"));
    prm.lse_part = prm.o_part + parts * kD;
  }
  const dim3 grid = fa::cuda::tiles_by_rows(pl.splits, pl.tiles, "10_decoding");
  if constexpr (std::is_same_v<Kv<C>, KvRows<C>>) {
    const bool extras = x.kv_rows > 0 || x.seqlens_k || x.softcap > 0.0f || x.alibi_slopes || x.sink_logits;
    if (extras) launch_split<C, true, Kv>(grid, prm, key_warps(p), stream);
    else launch_split<C, false, Kv>(grid, prm, key_warps(p), stream);
  } else {  // another K/V layout is always a cache: the lengths are per sequence
    launch_split<C, true, Kv>(grid, prm, key_warps(p), stream);
  }
  if (pl.splits > 1) {  // its blocks start while the split kernel's last blocks finish
    launch_dependent(x.sink_logits ? combine_kernel<T, kD, true> : combine_kernel<T, kD, false>,
                     fa::cuda::blocks_1d((out_rows + 7) / 8, "10_decoding (combine)"), 256, 0, stream, prm, out_rows);
  }
}

// A host array copied into the stream's memory pool, freed in stream order by the destructor
// (after the kernels that read it, whatever they throw).
template <class V>
class DeviceCopy {
 public:
  DeviceCopy(const std::vector<V>& host, cudaStream_t stream) : stream_(stream) {
    if (host.empty()) return;
    FA_CUDA_CHECK(cudaMallocAsync(reinterpret_cast<void**>(&ptr_), host.size() * sizeof(V), stream));
    // From pageable memory: returns once the bytes are staged, so `host` may go away.
    FA_CUDA_CHECK(cudaMemcpyAsync(ptr_, host.data(), host.size() * sizeof(V), cudaMemcpyHostToDevice, stream));
  }
  ~DeviceCopy() {
    if (ptr_) cudaFreeAsync(ptr_, stream_);
  }
  DeviceCopy(const DeviceCopy&) = delete;
  DeviceCopy& operator=(const DeviceCopy&) = delete;
  const V* get() const { return ptr_; }

 private:
  V* ptr_ = nullptr;
  cudaStream_t stream_;
};

}  // namespace decoding
