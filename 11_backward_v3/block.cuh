// Chapter 11's block, piece by piece (its parameters and configuration: config.cuh): the walk over
// query tiles, the producer thread, the dQ writer warp and the deterministic mode's turns, and the
// small pieces of the consumers' step (A fragments from accumulators, the LSE/D_i vectors, the dQ
// handoff);
// key_grads.cuh has the consumers' dK and dV (the long walks' sums and the store).
// backward_v3.cuh puts them together into the kernel.
#pragma once

#include <cstdint>

#include "08_backward/walks.cuh"     // Step, DenseWalk, ListedWalk: 08's walks over query tiles
#include "09_flash_v3/pipeline.cuh"  // load_tile: a TMA tile of 64-column boxes
#include "11_backward_v3/config.cuh" // Params, Config, Bshd, Barriers
#include "common/device/grid.cuh"    // grid_row
#include "common/device/mma.cuh"     // pack2, barrier_sync, barrier_arrive
#include "common/device/tiles.h"     // query_tile_begin, key_tile_end
#include "common/device/tma.cuh"
#include "common/device/wgmma.cuh"   // setmaxnreg

namespace backward_v3 {

using namespace fa::cuda;

using backward::tc::Step;  // a step's query head (b * H + h), query tile i_tile and key halves

// Block (j, kv_bh)'s walk. Dense (08's DenseWalk): every query head of the KV head, and for each
// the query tiles i0 .. i1 - 1 that see key tile j (causal or a window's right bound: from
// query_tile_begin; a window's left bound: up to query_tile_end, else Tr), in that order;
// next() moves on with a compare, no division (the consumers' per-step instructions are on the
// tensor cores' critical path). Block-sparse (ListedWalk): the steps the host listed for the key
// tile, chapter 07's mask transposed (08_backward/sparse_walk.h).
template <class C>
__device__ __forceinline__ typename C::Walk walk_of(const Params& prm, int j, std::int64_t kv_bh) {
  const std::int64_t bh0 = kv_bh * prm.group_size;
  if constexpr (C::Walk::kHalves) {
    const std::int64_t row = kv_bh * ceil_div(prm.seqlen_k, C::Bc) + j;
    const int begin = prm.walk_offsets[row];
    return {bh0, prm.walk_steps + begin, nullptr, prm.walk_offsets[row + 1] - begin};
  } else {
    const int i0 = query_tile_begin(j, C::Br, C::Bc, prm.seqlen_q, prm.seqlen_k, prm.causal, prm.window_right);
    const int i1 = query_tile_end(j, C::Br, C::Bc, prm.seqlen_q, prm.seqlen_k, prm.window_left);  // Tr without a window
    return {bh0, i1, i0, i1 > i0 ? prm.group_size * (i1 - i0) : 0, j};
  }
}

// Step n + 1 of a walk after `at` (step n); at itself past the last step, which a list does not hold.
template <class W>
__device__ __forceinline__ Step step_after(const W& walk, const Step& at, int n) {
  return n + 1 < walk.n_steps ? walk.next(at, n + 1) : at;
}

// The producer: one thread. K_j and V_j once, then per (query head, query tile) step Q_i and dO_i
// into stage step % kStages, once the consumers have freed its previous use.
// q_row0, k_row0: the first rows of the block's sequence in the tensors (a packed batch; else 0).
template <class C>
__device__ __forceinline__ void produce(const CUtensorMap* q_map, const CUtensorMap* k_map, const CUtensorMap* v_map,
                                        const CUtensorMap* do_map, Barriers<C::kStages>& bars, std::uint32_t base,
                                        const Params& prm, int j, std::int64_t kv_bh, int q_row0, int k_row0) {
  int heads = 0, kv_heads = 0;  // [B, S, H, D]: the maps' head counts (load_tile)
  if constexpr (C::kBshd) {
    heads = bshd_params(prm).heads;
    kv_heads = heads / prm.group_size;
  }
  mbarrier_arrive_expect_tx(smem_u32(&bars.full_kv), 2 * C::kKVBytes);
  flash_v3::load_tile<C::Bc, C::kD, C::kBshd>(base + C::kK, k_map, k_row0 + j * C::Bc, kv_bh, kv_heads,
                                              smem_u32(&bars.full_kv));
  flash_v3::load_tile<C::Bc, C::kD, C::kBshd>(base + C::kV, v_map, k_row0 + j * C::Bc, kv_bh, kv_heads,
                                              smem_u32(&bars.full_kv));
  const typename C::Walk walk = walk_of<C>(prm, j, kv_bh);
  Step at = walk.first();
  for (int step = 0; step < walk.n_steps; at = step_after(walk, at, step), ++step) {
    const int stage = step % C::kStages, use = step / C::kStages, i = at.i_tile;
    const std::int64_t bh = at.bh;
    const std::uint32_t full = smem_u32(&bars.full[stage]);
    if (use > 0) mbarrier_wait(smem_u32(&bars.empty[stage]), (use - 1) % 2);
    mbarrier_arrive_expect_tx(full, C::kStageTx);
    flash_v3::load_tile<C::Br, C::kD, C::kBshd>(base + C::kQ + stage * C::kRowBytes, q_map, q_row0 + i * C::Br, bh,
                                                heads, full);
    flash_v3::load_tile<C::Br, C::kD, C::kBshd>(base + C::kDO + stage * C::kRowBytes, do_map, q_row0 + i * C::Br, bh,
                                                heads, full);
  }
}

// The m16n8k16 A fragment of k-step kk (16 columns) from an accumulator of n columns (wgmma.cuh's
// layout): registers 8 kk .. 8 kk + 7, paired and rounded to T.
template <class T, int kRegs>
__device__ __forceinline__ void to_a_fragment(std::uint32_t (&a)[4], const float (&d)[kRegs], int kk) {
#pragma unroll
  for (int r = 0; r < 4; ++r) a[r] = pack2<T>(d[8 * kk + 2 * r], d[8 * kk + 2 * r + 1]);
}

// The deterministic mode's order (08's wait_turn / pass_turn, one thread instead of a block): the
// key tiles that visit query tile i end at jmax (all of them, or causal's or a window's first ones:
// key_tile_end(i) - 1), and they add their chunks from jmax down: key tile j when the chunk's
// counter reads its rank jmax - j, setting it to rank + 1 once the add is complete. Downwards,
// because under causal masking a block walks from its first visible query tile, so key tile
// j + 1 reaches query tile i Bc / Br steps before key tile j does: the order of arrival. The grid runs j downwards too (j = Tc - 1 - blockIdx.x), so a block waits only for
// blocks launched before it, which are running or done: the wait cannot deadlock. The adds are
// the copy engine's (the async proxy), the counter a generic-proxy atomic: fence.proxy.async
// orders the two.
__device__ __forceinline__ void wait_turn(const int* turn, int rank) {
  while (*reinterpret_cast<const volatile int*>(turn) != rank) {
  }
  __threadfence();  // acquire: the previous tile's add is ordered before ours
  asm volatile("fence.proxy.async.global;\n" ::: "memory");
}
__device__ __forceinline__ void pass_turn(int* turn, int rank) {
  bulk_wait<0>();  // the add is complete in global memory
  asm volatile("fence.proxy.async.global;\n" ::: "memory");
  __threadfence();  // release: visible device-wide before the turn passes
  atomicExch(turn, rank + 1);
}

// Named barriers between consumer group w and the dQ writer (128 + 32 threads each): its partial
// is in its buffer (full), the writer has read it (empty).
constexpr int kDqFullBar = 4, kDqEmptyBar = 6;

// The dQ writer: warp 1 of the producer warpgroup. Per step and group, once the group's partial
// dQ is in its buffer, lane 0 has the copy engine add it into the fp32 accumulator (in the
// deterministic mode: in its turn), waits until the buffer is read and frees it. The consumers
// only store and signal, so neither the bulk copy's issue nor a turn's wait is on their path.
// Handoffs a step: one a group (chunk w, or at kChunks = 1 the one chunk twice), or with
// C::kHandoffs > 2 (the wide kernel, wide.cuh) chunk c from group c % 2, in the order of c.
template <class C, bool kTurns>
__device__ __forceinline__ void write_dq(const Params& prm, std::uint32_t base, int j, std::int64_t kv_bh) {
  const int lane = threadIdx.x % 32;
  const typename C::Walk walk = walk_of<C>(prm, j, kv_bh);
  if (walk.n_steps == 0) return;
#pragma unroll 1
  for (int w = 0; w < 2; ++w) barrier_arrive(kDqEmptyBar + w, 128 + 32);  // both buffers start empty
  Step at = walk.first();
  for (int step = 0; step < walk.n_steps; at = step_after(walk, at, step), ++step) {
#pragma unroll 1
    for (int c = 0; c < C::kHandoffs; ++c) {
      const int w = c % 2;
      barrier_sync(kDqFullBar + w, 128 + 32);
      if (lane == 0) {
        const std::int64_t chunk = (at.bh * prm.Tr + at.i_tile) * C::kChunks + (C::kChunks == 1 ? 0 : c);
        const int turn =
            key_tile_end(at.i_tile, C::Br, C::Bc, prm.seqlen_q, prm.seqlen_k, prm.causal, prm.window_right) - 1 - j;
        const int rank = C::kChunks == 1 ? 2 * turn + w : turn;  // one chunk: both groups add, in turn
        if constexpr (kTurns) wait_turn(prm.dq_turn + chunk, rank);
        bulk_reduce_add_f32(prm.dq_accum + chunk * 4096, base + C::kDq + w * C::kDqBytes, C::kDqBytes);
        bulk_commit();
        if constexpr (kTurns) pass_turn(prm.dq_turn + chunk, rank);  // waits until the add is complete
        else bulk_wait_read<0>();
      }
      __syncwarp();
      // Free the buffer, unless this was the group's last chunk of the walk.
      if (step + 1 < walk.n_steps || c + 2 < C::kHandoffs) barrier_arrive(kDqEmptyBar + w, 128 + 32);
    }
  }
  if (lane == 0) bulk_wait<0>();  // the last adds are done before the block's shared memory goes
}

// LSE log2(e) and D_i of a step (Br floats each), as warp 0 of a consumer group carries them from
// global memory to its group's buffer: four floats a lane, quad q = lane + 32 u of the buffer's
// Br floats of LSE, then Br of D_i.
template <int Br>
struct RowVectors {
  static constexpr int kQuads = 2 * Br / 4 / 32;
  float4 v[kQuads];
  __device__ __forceinline__ void load(const Params& prm, const Step& at, int lane) {
    const std::int64_t row0 = (at.bh * prm.Tr + at.i_tile) * Br;
#pragma unroll
    for (int u = 0; u < kQuads; ++u) {
      const int q = lane + 32 * u;
      v[u] = *reinterpret_cast<const float4*>(q < Br / 4 ? prm.lse2 + row0 + 4 * q : prm.D_row + row0 + 4 * q - Br);
    }
  }
  __device__ __forceinline__ void store(float* buffer, int lane) const {
#pragma unroll
    for (int u = 0; u < kQuads; ++u) *reinterpret_cast<float4*>(buffer + 4 * (lane + 32 * u)) = v[u];
  }
};

// A consumer group's start (both kernels): its block's walk, the first step's LSE and D_i in the
// group's buffer (vec_p; warp 0 brings them, then the group's named barrier), and K_j, V_j landed.
template <class C>
__device__ __forceinline__ typename C::Walk begin_walk(const Params& prm, Barriers<C::kStages>& bars, float* vec_p,
                                                       int group_bar, int j, std::int64_t kv_bh, int warp, int lane) {
  const typename C::Walk walk = walk_of<C>(prm, j, kv_bh);
  if (warp == 0 && walk.n_steps > 0) {
    RowVectors<C::Br> v;
    v.load(prm, walk.first(), lane);
    v.store(vec_p, lane);
  }
  barrier_sync(group_bar, 128);
  mbarrier_wait(smem_u32(&bars.full_kv), 0);
  __syncwarp();  // the lanes leave the wait's loop apart: wgmma and bar.sync want the warp whole
  return walk;
}

// Group w hands a partial dQ chunk (32 fp32 registers a thread) to the dQ writer: once the writer
// has read the group's previous one (this barrier also orders warp 0's LSE/D_i stores before the
// next step's reads), into the group's buffer in accumulator order, then "full".
template <class C>
__device__ __forceinline__ void hand_dq_chunk(unsigned char* base_p, int w, int tid, const float (&dq)[32]) {
  float* dq_p = reinterpret_cast<float*>(base_p + C::kDq + w * C::kDqBytes);
  barrier_sync(kDqEmptyBar + w, 128 + 32);
#pragma unroll
  for (int c = 0; c < 8; ++c)
    *reinterpret_cast<float4*>(dq_p + 512 * c + 4 * tid) = make_float4(dq[4 * c], dq[4 * c + 1], dq[4 * c + 2], dq[4 * c + 3]);
  fence_proxy_async();
  barrier_arrive(kDqFullBar + w, 128 + 32);
}

// A packed batch's sequence b as one problem of batch 1 (Varlen<C>): its lengths and query tiles,
// and the pointers moved to its part of the scratch (its region of the padded LSE and D_i, the dQ
// accumulator and the turns, of H slices of its query tiles; of the dK/dV sums, of Hkv slices of
// its key tiles: VarlenSeqs) and of dK and dV (its first key row). The kernels' code then runs on
// it as on any [1, S, H, D] problem.
template <class C>
__device__ __forceinline__ BshdParams sequence_params(const VarlenParams& vp, int b) {
  using T = typename C::T;
  const VarlenSeqs& vs = vp.seqs;
  BshdParams sp = vp;
  const int k0 = vs.cu_seqlens_k[b];
  sp.seqlen_q = vs.cu_seqlens_q[b + 1] - vs.cu_seqlens_q[b];
  sp.seqlen_k = vs.cu_seqlens_k[b + 1] - k0;
  sp.Tr = vs.query_tiles[b + 1] - vs.query_tiles[b];
  const std::int64_t tiles0 = std::int64_t{vp.heads} * vs.query_tiles[b];  // the query tiles before b's region
  sp.lse2 += tiles0 * C::Br;
  sp.D_row += tiles0 * C::Br;
  sp.dq_accum += tiles0 * C::Br * C::kD;  // a tile's kChunks chunks of 4096 floats
  if (sp.dq_turn != nullptr) sp.dq_turn += tiles0 * C::kChunks;
  if (sp.kv_partial != nullptr)
    sp.kv_partial += std::int64_t{vp.heads / vp.group_size} * vs.key_tiles[b] * 2 * 128 * C::kD;  // key_grad_sums
  sp.dk = static_cast<T*>(vp.dk) + std::int64_t{k0} * vp.k_strides.row;
  sp.dv = static_cast<T*>(vp.dv) + std::int64_t{k0} * vp.v_strides.row;
  return sp;
}

// A block's roles, for each kernel of the chapter (backward_v3_kernel, backward_v3_wide_kernel):
// its key tile j (the deterministic mode runs them last to first: wait_turn), the barriers,
// warpgroup 0's producer thread and dQ writer warp, and consume(prm, bars, base, base_p, j, kv_bh, w)
// for consumer group w. A packed batch (Varlen<C>): the grid's x runs over every sequence's key
// tiles, and the block finds its sequence there and runs on sequence_params.
template <class C, bool kTurns, class Consume>
__device__ __forceinline__ void run_roles(const CUtensorMap* q_map, const CUtensorMap* k_map, const CUtensorMap* v_map,
                                          const CUtensorMap* do_map, const Params& prm, int j, std::int64_t kv_bh,
                                          int q_row0, int k_row0, Consume&& consume) {
  extern __shared__ unsigned char smem_raw[];
  __shared__ __align__(8) Barriers<C::kStages> bars;
  const std::uint32_t base = (smem_u32(smem_raw) + 1023u) & ~1023u;
  if (threadIdx.x == 0) {
    mbarrier_init(smem_u32(&bars.full_kv), 1);
    for (int s = 0; s < C::kStages; ++s) {
      mbarrier_init(smem_u32(&bars.full[s]), 1);
      mbarrier_init(smem_u32(&bars.empty[s]), C::kConsumerWarps);
    }
    mbarrier_init_fence();
  }
  __syncthreads();
  const int warpgroup = threadIdx.x / 128;
  if (warpgroup == 0) {
    setmaxnreg_dec<C::kProducerRegs>();
    if (threadIdx.x == 0) produce<C>(q_map, k_map, v_map, do_map, bars, base, prm, j, kv_bh, q_row0, k_row0);
    else if (threadIdx.x / 32 == 1) write_dq<C, kTurns>(prm, base, j, kv_bh);
    return;
  }
  setmaxnreg_inc<C::kConsumerRegs>();
  unsigned char* base_p = smem_raw + (base - smem_u32(smem_raw));
  consume(prm, bars, base, base_p, j, kv_bh, warpgroup - 1);
}

template <class C, bool kTurns, class Consume>
__device__ __forceinline__ void run_block(const CUtensorMap* q_map, const CUtensorMap* k_map, const CUtensorMap* v_map,
                                          const CUtensorMap* do_map, const KernelParams<C>& prm, Consume&& consume) {
  const std::int64_t kv_bh = grid_row();
  if (kv_bh >= prm.batch_kv_heads) return;  // a spare row of the grid
  if constexpr (C::kVarlen) {
    // Last to first in the deterministic mode, as below: within a sequence, key tile j + 1's block
    // is launched before key tile j's.
    const int x = kTurns ? static_cast<int>(gridDim.x - 1 - blockIdx.x) : static_cast<int>(blockIdx.x);
    const int b = sequence_of(prm.seqs.key_tiles, prm.seqs.batch, x);
    const BshdParams sp = sequence_params<C>(prm, b);
    run_roles<C, kTurns>(q_map, k_map, v_map, do_map, sp, x - prm.seqs.key_tiles[b], kv_bh, prm.seqs.cu_seqlens_q[b],
                         prm.seqs.cu_seqlens_k[b], consume);
  } else if (C::kLongestFirst && !kTurns && !C::kBshd && prm.causal) {
    // The step v6_longest_first: block n of the grid (in launch order) takes the key tile and row
    // of the longest-first order (common/device/tiles.h), sections of prm.lpt_section rows.
    const TileRow tr = longest_first(blockIdx.x + std::int64_t{gridDim.x} * kv_bh, static_cast<int>(gridDim.x),
                                     prm.batch_kv_heads, prm.lpt_section);
    run_roles<C, kTurns>(q_map, k_map, v_map, do_map, prm, tr.tile, tr.row, 0, 0, consume);
  } else {
    int j = kTurns ? ceil_div(prm.seqlen_k, C::Bc) - 1 - static_cast<int>(blockIdx.x) : static_cast<int>(blockIdx.x);
    std::int64_t row = kv_bh;
    // [B, S, H, D]: the longest-first order picks the tile and row, and one copy of the roles runs
    // both orders. With a copy per order, as [B, H, S, D] has above, ptxas spills 180 bytes in the
    // consumers' loop here; one copy measures 1.06x at the Llama shape on an H200 (README).
    // The tile and row come from LongestFirstPow2 (common/device/tiles.h), longest_first without a
    // division, so that they stay in uniform registers.
    if constexpr (C::kLongestFirst && !kTurns && C::kBshd) {
      if (prm.causal) {
        const TileRow tr = prm.lpt.at(blockIdx.x, gridDim.x, static_cast<unsigned>(kv_bh));
        j = tr.tile;
        row = tr.row;
      }
    }
    run_roles<C, kTurns>(q_map, k_map, v_map, do_map, prm, j, row, 0, 0, consume);
  }
}

}  // namespace backward_v3
