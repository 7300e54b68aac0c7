// Chapter 09, step v1 -- FlashAttention-2's algorithm with Hopper's instructions: wgmma and TMA,
// one warpgroup a block. The chapter launches it at D = 64, where it is the fastest step (dispatch.cuh);
// at D = 128 flash_v3.cuh adds warp specialization, ping-pong and a persistent walk.
//
// New since 06 (06_tensor_core/tensor_core.cuh):
//   * S_ij = Q_i K_j^T is one warpgroup's wgmma.mma_async (common/device/wgmma.cuh): 4 warps,
//     64 rows of Q_i, reading Q_i and K_j straight from shared memory through descriptors. No
//     ldmatrix: the tensor cores fetch their operands themselves, asynchronously.
//   * O_i += P_ij V_j is a wgmma with A = P_ij from registers (the RS form) and B = V_j from
//     shared memory, read MN-major (imm-trans-b = 1): V_j stays keys x columns, as TMA lands it.
//   * The accumulators of a wgmma are laid out, warp by warp, like 06's mma.sync C fragments:
//     06's mask_scores and write_rows run on them unchanged, and so does 06's online softmax in
//     the form every step of the chapter uses, the kept max (09_flash_v3/kept_max.cuh: each
//     key tile tried against the running max first; README: The kept max).
//   * Q_i, K_j, V_j arrive by TMA (common/device/tma.cuh): one thread issues a box copy per
//     64-column atom, the copy engine writes it in the 128-byte swizzle wgmma reads, and an
//     mbarrier counts the bytes in; rows past the sequence land as zeros. K/V double buffered.
// Measured (README: "How we got here"): 1.25-1.9x FlashAttention-2, 0.69-0.83x cuDNN at D = 128.
// What is left exposed is the softmax between the two GEMMs and the copy waits.
// Run:  ./build/09_flash_v3/09_flash_v3_steps_bench --step v1_one_warpgroup
#pragma once

#include <cstdint>
#include <tuple>
#include <type_traits>

#include "09_flash_v3/launch.cuh"  // make_maps; load_tile and 06's tile functions through flash_v3.cuh

namespace flash_v3::steps {

// One warpgroup (4 warps, 16 rows each: Br = 64), Bc = 64 keys a tile: 06's Config with kMTiles = 1,
// so that 06's tile functions see the wgmma accumulators as their own fragments.
template <class T, int kD>
using V1Config = fa2::Config<T, kD, /*Bc=*/64, /*kMTiles=*/1>;

template <class C>
struct V1Smem {
  static constexpr std::uint32_t kTileBytes = 64 * C::kD * 2;  // Q_i, K_j or V_j: (64, kD), 64-column atoms
  static constexpr std::uint32_t kQ = 0, kK = kTileBytes, kV = 3 * kTileBytes;  // K, V: two stages each
  static constexpr int kBytes = 5 * kTileBytes + 1024;  // + room to align the base to 1024 bytes
};

// grid: Tr along x by B*H rows over y and z; block: one warpgroup. Warp w owns rows 16 w .. of Q_i.
// kBshd: [B, S, H, D] tensors (launch.cuh: make_maps). At D = 64 the kernel takes 114 registers
// a thread, four blocks an SM: held to five (96 registers), ptxas spills and the kernel measured
// 0.75-0.91x of the four (H200, bf16, [B, H, S, D]).
// Varlen: VarlenArgs for a packed batch of sequences (the grid's x runs over VarlenTileWalk's
// units, one query tile of one head each; the block loads, masks and writes by its sequence's rows
// and lengths), NoVarlen otherwise. kWindow: a sliding window, whose key tiles start at
// key_tile_begin and end at the window's right bound (a packed batch takes one either way).
// kSoftcap: the logit softcap (fa2::cap_scores on each tile's scores, before the mask; a window
// too, as kWindow).
template <class C, bool kBshd = false, class Varlen = NoVarlen, bool kWindow = false, bool kSoftcap = false>
__global__ void __launch_bounds__(128, 2)
    one_warpgroup_kernel(const __grid_constant__ CUtensorMap q_map, const __grid_constant__ CUtensorMap k_map,
                    const __grid_constant__ CUtensorMap v_map, const Params prm, const Varlen vl,
                    const std::conditional_t<kSoftcap, SoftcapConsts, NoSoftcap> cap) {
  using T = typename C::T;
  using S = V1Smem<C>;
  constexpr int Br = 64, Bc = 64, kD = C::kD;
  constexpr bool kVarlen = std::is_same_v<Varlen, VarlenArgs>, kBand = kVarlen || kWindow || kSoftcap;
  std::int64_t bh;  // the block's slice: b H + h, or in a packed batch the head h
  int i_tile;       // its query tile, in its sequence
  int q_row0 = 0, k_row0 = 0;  // its sequence's first rows in the tensors (a packed batch)
  Params seq_prm = prm;        // a packed batch: the sequence's lengths, and O and LSE moved to its rows
  if constexpr (kVarlen) {
    const VarlenTile vt = block_walk(0, 0, prm.heads, prm.causal, Br, false, blockIdx.x, gridDim.x, vl).tile();
    bh = vt.head;
    i_tile = vt.i_tile;
    q_row0 = vl.cu_seqlens_q[vt.seq];
    k_row0 = vl.cu_seqlens_k[vt.seq];
    seq_prm.seqlen_q = vl.cu_seqlens_q[vt.seq + 1] - q_row0;
    seq_prm.seqlen_k = vl.cu_seqlens_k[vt.seq + 1] - k_row0;
    seq_prm.o = static_cast<T*>(prm.o) + std::int64_t{q_row0} * prm.q_strides.row;
    // write_rows stores row r's LSE at bh len + r; the sequence's rows start at h total + q_row0.
    seq_prm.lse = prm.lse + bh * (prm.seqlen_q - seq_prm.seqlen_q) + q_row0;
  } else {
    bh = fa::cuda::grid_row();
    if (bh >= prm.batch_heads) return;  // a spare block of the grid
    i_tile = fa2::query_tile(prm);
  }
  const Params& tp = kVarlen ? seq_prm : prm;
  extern __shared__ unsigned char smem_raw[];
  __shared__ __align__(8) std::uint64_t bars[3];  // Q_i; K_j, V_j of stage 0; of stage 1
  const std::uint32_t base = (smem_u32(smem_raw) + 1023u) & ~1023u;  // the 128-byte swizzle's 1024-byte blocks
  const std::uint32_t Q_s = base + S::kQ;  // (64, kD) smem, 64-column atoms, 128-byte swizzle
  const std::uint32_t bar_q = smem_u32(&bars[0]);
  auto K_s = [&](int stage) { return base + S::kK + stage * S::kTileBytes; };  // (Bc, kD) smem
  auto V_s = [&](int stage) { return base + S::kV + stage * S::kTileBytes; };  // (Bc, kD) smem
  auto bar_kv = [&](int stage) { return smem_u32(&bars[1 + stage]); };
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int i0 = i_tile * Br;
  const std::int64_t kv_bh = bh / prm.group_size;
  const int kv_heads = prm.heads / prm.group_size;
  const int window_left = kBand ? tp.window_left : -1, window_right = kBand ? tp.window_right : -1;
  const int Tc_begin = kBand ? key_tile_begin(i_tile, Br, Bc, tp.seqlen_q, tp.seqlen_k, window_left) : 0;
  const int Tc_end = key_tile_end(i_tile, Br, Bc, tp.seqlen_q, tp.seqlen_k, tp.causal, window_right);

  if (threadIdx.x == 0) {
    for (int b = 0; b < 3; ++b) mbarrier_init(smem_u32(&bars[b]), 1);  // one arrival: thread 0's
    mbarrier_init_fence();
  }
  __syncthreads();  // the barriers are initialized before anyone waits on them
  auto load_kv = [&](int j, int stage) {
    mbarrier_arrive_expect_tx(bar_kv(stage), 2 * S::kTileBytes);
    load_tile<64, C::kD, kBshd>(K_s(stage), &k_map, k_row0 + j * Bc, kv_bh, kv_heads, bar_kv(stage));
    load_tile<64, C::kD, kBshd>(V_s(stage), &v_map, k_row0 + j * Bc, kv_bh, kv_heads, bar_kv(stage));
  };
  if (threadIdx.x == 0) {
    mbarrier_arrive_expect_tx(bar_q, S::kTileBytes);
    load_tile<64, C::kD, kBshd>(Q_s, &q_map, q_row0 + i0, bh, prm.heads, bar_q);
    if (Tc_end > Tc_begin) load_kv(Tc_begin, 0);
  }

  fa2::WarpRows<C> w;
  mbarrier_wait(bar_q, 0);  // Q_i has landed
  for (int j_tile = Tc_begin; j_tile < Tc_end; ++j_tile) {
    const int n = j_tile - Tc_begin, stage = n % 2;  // the block's n-th key tile
    mbarrier_wait(bar_kv(stage), n / 2 % 2);  // K_j, V_j have landed (the stage's (n/2)-th use)
    // K_{j+1}, V_{j+1} fly during tile j; their stage was freed by the __syncthreads ending tile j-1.
    if (threadIdx.x == 0 && j_tile + 1 < Tc_end) load_kv(j_tile + 1, 1 - stage);

    // S_ij = Q_i K_j^T: kD / 16 wgmmas of 64 x 64 x 16, Q_i and K_j both K-major in shared memory.
    fa2::ScoreTile<C> S_ij;  // (16, Bc) a warp: the wgmma accumulator, as 06's fragments
    float(&s)[32] = *reinterpret_cast<float(*)[32]>(&S_ij[0][0][0]);
    wgmma_fence();  // S_ij's registers were last touched by ordinary instructions
#pragma unroll
    for (int ks = 0; ks < kD / 16; ++ks)
      wgmma_ss_m64n64k16<T, 0>(s, kmajor_sw128_desc(Q_s, Br, 16 * ks), kmajor_sw128_desc(K_s(stage), Bc, 16 * ks), ks > 0);
    wgmma_commit();
    wgmma_wait<0>();  // S_ij is in the registers

    const int row = i0 + 16 * warp + g;
    if constexpr (kSoftcap) fa2::cap_scores<C>(S_ij, cap);
    if (needs_mask(i_tile, j_tile, Br, Bc, tp.seqlen_q, tp.seqlen_k, tp.causal, window_left, window_right))
      fa2::mask_scores<C>(S_ij, row, j_tile * Bc, t, tp);
    fa2::PTile<C> P_ij;  // (16, Bc) a warp, in T: the A fragments of the next wgmma
    // The chapter's softmax (flash_v3.cuh's too): each tile tried against the running max first.
    softmax_step_kept_max<C, /*kRowVote=*/false>(S_ij, WriteP<C>{P_ij}, w, prm.scale_log2,
                                                      /*try_kept=*/j_tile > Tc_begin);

    // O_i += P_ij V_j: per 16 keys, one wgmma per 64 columns of O_i (RS form, V_j MN-major).
    wgmma_fence();  // O_i was rescaled and P_ij written by ordinary instructions
#pragma unroll
    for (int kk = 0; kk < Bc / 16; ++kk)
#pragma unroll
      for (int a = 0; a < kD / kAtomCols; ++a)
        wgmma_rs_m64n64k16<T, 1>(*reinterpret_cast<float(*)[32]>(&w.O[0][8 * a][0]), P_ij[0][kk],
                                 mnmajor_sw128_desc(V_s(stage), Bc, 16 * kk, kAtomCols * a), true);
    wgmma_commit();
    wgmma_wait<0>();  // O_i is in the registers; K_j, V_j and P_ij are no longer read
    __syncthreads();  // every warp is done with this stage before tile j+2's copy overwrites it
  }
  fa2::write_rows<C, kBshd>(w, tp, bh, i0 + 16 * warp + g, t);
}

// kVarlen: a packed batch (its offsets go to the GPU first: upload_varlen); kWindow: a sliding
// window; kSoftcap: the logit softcap (one_warpgroup_kernel).
template <class C, bool kBshd = false, bool kVarlen = false, bool kWindow = false, bool kSoftcap = false>
void launch_one_warpgroup(const fa::Problem& p, const void* q, const void* k, const void* v, const Params& prm,
                          cudaStream_t stream) {
  static_assert(!kVarlen || kBshd, "a packed batch is a [1, total, H, D] tensor");
  using Varlen = std::conditional_t<kVarlen, VarlenArgs, NoVarlen>;
  constexpr auto kernel = one_warpgroup_kernel<C, kBshd, Varlen, kWindow, kSoftcap>;
  allow_shared_memory_once(kernel, V1Smem<C>::kBytes);  // above 48 KB of shared memory a kernel must opt in
  const Maps maps = make_maps(p, q, k, v, 64, 64);
  Varlen vl{};
  dim3 grid;
  if constexpr (kVarlen) {
    std::int64_t units = 0;
    std::tie(vl, units) = upload_varlen(p, 64, false, stream);
    if (units == 0) return;  // no sequence has a query
    grid = dim3(fa::cuda::blocks_1d(units, "09_flash_v3 (steps)"));
  } else {
    grid = fa::cuda::tiles_by_rows(ceil_div(prm.seqlen_q, 64), prm.batch_heads, "09_flash_v3 (steps)");
  }
  std::conditional_t<kSoftcap, SoftcapConsts, NoSoftcap> cap{};
  if constexpr (kSoftcap) cap = SoftcapConsts::of(p.scale(), p.softcap);
  kernel<<<grid, 128, V1Smem<C>::kBytes, stream>>>(maps.q, maps.k, maps.v, prm, vl, cap);
  FA_CHECK_LAUNCH();
}

}  // namespace flash_v3::steps
