// Chapter 08, part 2 -- the same backward (FlashAttention-2, Algorithm 2) on the tensor cores:
// fp16 / bf16 in, fp32 accumulate.
//
// New since backward.cu (the fp32 version) and 06_tensor_core (whose pieces it reuses):
//   * All five products are mma.sync.m16n8k16 (06's mma.cuh), each with its own split of the
//     output among the 8 warps (FlashAttention-2's layout, TcConfig). S_ij and dP_ij live in
//     registers just long enough to become P_ij and dS_ij, which go to shared memory in T: dV_j,
//     dK_j and dQ_i each need them in another warp's split.
//   * Which operand needs which transpose (tensor_cores.md). Tiles sit row-major in
//     shared memory as they are in global memory: K_j, V_j (keys, d), Q_i, dO_i (rows, d), and
//     P_ij, dS_ij (rows, keys).
//       S = Q_i K_j^T, dP = dO_i V_j^T:  A = Q_i / dO_i, B = K_j / V_j    ldmatrix (as 06's Q, K)
//       dQ_i += dS K_j:                  A = dS_ij, B = K_j (k = keys)    ldmatrix, ldmatrix.trans
//       dV += P^T dO_i, dK += dS^T Q_i:  A = P^T / dS^T from P_ij / dS_ij ldmatrix.trans
//                                        B = dO_i / Q_i (k = query rows)  ldmatrix.trans (06's V)
//   * dQ_i sums over the key tiles, which are different blocks: the block adds its dQ_i part with
//     fp32 atomics into a workspace dQ_accum [B, H, Sq, D] (each head's rows padded to whole query
//     tiles); a last kernel converts dQ_accum * scale to T.
//   * Deterministic mode (its own kernel): key tiles take turns per query tile (a counter per
//     (b, h, i) in the workspace): tile j adds its part after tile j-1, so every dQ element sees
//     the same order of additions on every run.
//   * Block-sparse (its own kernel): a block walks only the query tiles chapter 07's mask keeps
//     for its key tile, listed by the host (sparse_walk.h).
//   * Q_i, dO_i, LSE_i, D_i are double buffered with cp.async: step n+1's tiles fly while step n
//     is computed. K_j, V_j are loaded once per block. All tiles XOR-swizzled (06's swizzle.h).
// Configuration (FlashAttention-2's sm80 backward): Bc = 128 keys, 8 warps, one block per SM
// (161-162 KiB of shared memory; dK_j and dV_j take 64 + 64 registers per thread at D = 128);
// Br = 64 query rows at D = 128, 128 at D = 64; above D = 128, Br = Bc = 64.
// Layout: this file holds the kernels; backward_tc.cu their launch and workspace (backward.cu:
// the block-sparse walk's upload and the API); tc_tiles.cuh the tiles, arguments and walks;
// tc_tile_math.cuh the named steps of one (query tile, key tile) pair the kernels are written in.
// Expected effect: per step a warp issues 5 * Br * Bc * D / (8 * 2048) mmas against 144 LDSM.x4
// (D = 128; keeping P and dS in registers instead of shared memory needs 184), so the tensor cores wait
// less on shared memory; hiding the exp2 and the two barriers per step with 8 warps per SM decides
// how close it gets to FlashAttention-2's backward (tensor_cores.md: Results).
// Run:  ./build/08_backward/08_backward --seqlen 4096 --head-dim 128 --dtype bf16 [--deterministic]
#pragma once

#include <cstdint>

#include "08_backward/tc_tile_math.cuh"  // the steps of one tile pair (and tc_tiles.cuh: tiles, walks)
#include "common/device/grid.cuh"

namespace backward::tc {

// One block's work: key tile j_tile of KV head kv_bh, over the query tiles `walk` visits.
// block: 8 warps. Each product has its own warp tiles (TcConfig): in mma fragment terms
// (mma.cuh), lane (g, t) holds of a warp tile rows 16 mt + g (+8) x columns 8 nt + 2t (+1).
// S_ij and dP_ij stay in registers only as long as P_ij and dS_ij take to compute; both go to
// shared memory in T, where the next three products read them. kTurns: dQ in turn order. kBshd:
// Q, dO, K, V, dK, dV are [B, S, H, D] (TcParams' strides; SliceRows).
template <class C, bool kTurns, bool kBshd = false, class Walk>
__device__ __forceinline__ void key_tile_backward(const TcParams& prm, const Walk& walk, std::int64_t kv_bh, int j_tile) {
  using T = typename C::T;
  constexpr int kD = C::kD, Br = C::Br, Bc = C::Bc;
  extern __shared__ __align__(128) unsigned char smem[];
  const SmemTiles<C> sm(smem);
  const WarpTiles<C> w(threadIdx.x / 32, threadIdx.x % 32);
  const int Sq = prm.seqlen_q, Sk = prm.seqlen_k, j0 = j_tile * Bc;
  const int Tr = ceil_div(Sq, Br), D = head_dim_of<C>(prm);  // D <= kD: columns D .. kD - 1 are zero-filled

  const SliceRows<kBshd> keys(prm.kv_strides, prm.kv_heads, kv_bh, Sk, j0, D);  // K_j, V_j (dK_j, dV_j: `out`)
  copy_tile<C, Bc>(sm.K_s, static_cast<const T*>(prm.k) + keys.at, Sk - j0, D, keys.pitch);
  copy_tile<C, Bc>(sm.V_s, static_cast<const T*>(prm.v) + keys.at, Sk - j0, D, keys.pitch);
  Step st = walk.first();
  if (walk.n_steps > 0) stage_rows<C, kBshd>(sm, prm, st, 0);
  cp_async_commit();

  KeyTile<C> dK_j = {}, dV_j = {};  // fp32 accumulators, for the whole walk
  constexpr bool kBulk = C::kBulkDq && !kTurns && kHasBulkCopy;  // sm_80 builds keep the REDs
  // kStage (kDqInStage, the 192 and 256 tiles): dQ_i's boxes in the step's own stage. The stage is refilled (the
  // step after next) only once the copy engine has read them, so the next step's copies are issued
  // after the step's second barrier, not at its top; and dK_j's product moves before dQ_i's, with a
  // third barrier between them and the boxes' stores (every warp is done with Q_i and dO_i).
  constexpr bool kStage = C::kDqInStage && !kTurns && kHasBulkCopy;
  float* dQ_prev = nullptr;  // kBulk: the rows of dQ_accum the shared dQ tile holds a part of
  // ... at D = 64 in shared memory instead, written by thread 0 after the step's last barrier and
  // read after the next step's first: two registers fewer across the step, where the 64 x 32 S
  // and dP warp tiles leave none (with the pointer in registers the kernel would spill 44 bytes).
  constexpr bool kPrevInSmem = C::kD == 64;
  __shared__ float* dQ_prev_s;
  const auto set_prev = [&](float* rows) {
    if constexpr (kPrevInSmem) {
      if (threadIdx.x == 0) dQ_prev_s = rows;
    } else {
      dQ_prev = rows;
    }
  };
  const auto prev = [&] {
    if constexpr (kPrevInSmem) return dQ_prev_s;
    else return dQ_prev;
  };
  int prev_i0 = 0;           // kStage: the previous step's query tile and head
  std::int64_t prev_bh = 0;
  for (int n = 0; n < walk.n_steps; ++n) {
    const int buf = n % 2;
    const Step next = n + 1 < walk.n_steps ? walk.next(st, n + 1) : st;
    const int i0 = st.i_tile * Br;
    cp_async_wait<0>();  // this thread's copies of step n (and K_j, V_j) have landed
    __syncthreads();     // ... and everyone's; every warp is done with step n-1's stage, P_s, dS_s
    if constexpr (kBulk) {
      if (n > 0) add_dq_rows(prev(), sm);  // step n-1's dQ_i part: every warp stored it before the barrier
    }
    if constexpr (kStage) {
      if (n > 0) add_dq_boxes<C>(&prm.dq_map, sm.Q_s + (1 - buf) * C::kStageStride, prev_i0, prev_bh);
    } else {
      if (n + 1 < walk.n_steps) stage_rows<C, kBshd>(sm, prm, next, 1 - buf);  // step n+1 flies while step n is computed
      cp_async_commit();
    }
    const std::uint32_t Q_i = sm.Q_s + buf * C::kStageStride, dO_i = sm.dO_s + buf * C::kStageStride;

    // S_ij and dP_ij, one product at a time; then P_ij and dS_ij to shared memory.
    ScoreTile<C> S = {}, dP = {};
    tile_product(S, Q_i, sm.K_s, w);
    tile_product(dP, dO_i, sm.V_s, w);
    // Two copies of the element loop, chosen once per step: most tiles need no element mask.
    // Sparse: a 64-key half the mask turns off counts as masked (a warp's keys lie in one half).
    const bool half_on = !Walk::kHalves || (st.halves >> (w.s_key0 / 64) & 1) != 0;
    const RowStats<C> rs(sm.lse_s + buf * Br, sm.D_s + buf * Br, w);
    if (!half_on || needs_mask(st.i_tile, j_tile, Br, Bc, Sq, Sk, prm.causal))
      probs_and_grads<C, true>(S, dP, sm, rs, w, prm, i0, j0, half_on);
    else
      probs_and_grads<C, false>(S, dP, sm, rs, w, prm, i0, j0, half_on);
    if constexpr (kBulk) {
      if (threadIdx.x < Br) bulk_wait_read<0>();  // step n-1's reduction has read the dQ tile
    }
    if constexpr (kStage) {
      if (threadIdx.x == 0) bulk_wait_read<0>();  // step n-1's boxes have left the other stage
    }
    __syncthreads();  // all of P_ij and dS_ij are in smem: the products below mix every warp's part
    if constexpr (kStage) {
      if (n + 1 < walk.n_steps) stage_rows<C, kBshd>(sm, prm, next, 1 - buf);  // into the stage the boxes left
      cp_async_commit();
    }

    // dV_j += P_ij^T dO_i first (as FlashAttention-2 orders them): the dQ REDs below then issue
    // among dK_j's mmas, away from dV_j's ldmatrix (tensor_cores.md: How we got here).
    key_grads(dV_j, sm.P_s, dO_i, w);
    if constexpr (kStage) key_grads(dK_j, sm.dS_s, Q_i, w);  // dK_j first: the stage is free once every warp is past it

    // dQ_i += dS_ij K_j, into the fp32 accumulator that every key tile adds to.
    DqTile<C> dQ = {};
    dq_product(dQ, sm, w);
    if constexpr (kStage) {
      __syncthreads();  // every warp is done with this stage's Q_i and dO_i
      store_dq_boxes<C>(sm.Q_p + buf * C::kStageStride, dQ, w);  // added after the next step's first barrier
      prev_i0 = i0;
      prev_bh = st.bh;
    } else if constexpr (kBulk) {
      store_dq(sm, dQ, w);  // added by the bulk reduction after the next barrier
      set_prev(prm.dq_accum + (st.bh * prm.dq_rows + i0) * kD);
    } else {
      int* turn = kTurns ? prm.dq_turn + st.bh * Tr + st.i_tile : nullptr;
      if constexpr (kTurns) wait_turn(turn, walk.rank_of(n));
      add_dq(prm.dq_accum + (st.bh * prm.dq_rows + i0) * kD, dQ, w);
      if constexpr (kTurns) pass_turn(turn, walk.rank_of(n));
    }

    if constexpr (!kStage) key_grads(dK_j, sm.dS_s, Q_i, w);  // dK_j += dS_ij^T Q_i
    st = next;
  }
  cp_async_wait<0>();  // a block with no query tile to visit still has K_j, V_j in flight
  if constexpr (kBulk) {
    if (walk.n_steps > 0) {
      __syncthreads();  // the last step's dQ_i part is stored by every warp
      add_dq_rows(prev(), sm);
      if (threadIdx.x < Br) bulk_wait<0>();  // done before the block (and its shared memory) goes
    }
  }
  if constexpr (kStage) {
    if (walk.n_steps > 0) {
      __syncthreads();  // the last step's boxes are stored by every warp
      add_dq_boxes<C>(&prm.dq_map, sm.Q_s + (walk.n_steps - 1) % 2 * C::kStageStride, prev_i0, prev_bh);
      if (threadIdx.x == 0) bulk_wait<0>();  // done before the block (and its shared memory) goes
    }
  }

  // Epilogue: dK_j * scale and dV_j, once, after every query head of the group.
  // `keys` again, computed here rather than held in registers across the walk (the kernels are at
  // 254-255 registers; with `keys` itself 40 of the 112 kernels compile differently).
  const SliceRows<kBshd> out(prm.kv_strides, prm.kv_heads, kv_bh, Sk, j0, D);
  write_key_grads<C>(static_cast<T*>(prm.dk) + out.at, static_cast<T*>(prm.dv) + out.at, dK_j, dV_j, w, Sk - j0, D,
                     out.pitch, prm.scale);
}

// The dense walk of the block's key tile (tc_tile_math.cuh: DenseWalk).
template <class C>
__device__ __forceinline__ DenseWalk dense_walk(const TcParams& prm, std::int64_t kv_bh, int j_tile) {
  const int Tr = ceil_div(prm.seqlen_q, C::Br);
  const int i_begin = query_tile_begin(j_tile, C::Br, C::Bc, prm.seqlen_q, prm.seqlen_k, prm.causal);
  return {kv_bh * prm.group_size, Tr, i_begin, prm.group_size * (Tr - i_begin), j_tile};
}

// grid: Tc along x by B*Hkv rows over y and z (common/device/grid.cuh); one block per SM.
// The dense backward: dQ by atomics, in whatever order the blocks reach them.
template <class C, bool kBshd = false>
__global__ void __launch_bounds__(C::kThreads, 1) backward_tc_kernel(const __grid_constant__ TcParams prm) {
  const std::int64_t kv_bh = grid_row();       // b * Hkv + kv head
  if (kv_bh >= prm.batch_kv_heads) return;     // a spare block of the grid
  key_tile_backward<C, false, kBshd>(prm, dense_walk<C>(prm, kv_bh, blockIdx.x), kv_bh, blockIdx.x);
}

// The deterministic backward: the dense walk, dQ in turn order (tile j adds after tile j - 1).
template <class C, bool kBshd = false>
__global__ void __launch_bounds__(C::kThreads, 1) backward_tc_deterministic_kernel(const __grid_constant__ TcParams prm) {
  const std::int64_t kv_bh = grid_row();
  if (kv_bh >= prm.batch_kv_heads) return;
  key_tile_backward<C, true, kBshd>(prm, dense_walk<C>(prm, kv_bh, blockIdx.x), kv_bh, blockIdx.x);
}

// The block-sparse backward: the steps the host listed for this key tile (sparse_walk.h);
// kTurns: deterministic, a step's rank is the number of listed key tiles before it.
template <class C, bool kTurns>
__global__ void __launch_bounds__(C::kThreads, 1) backward_tc_sparse_kernel(const __grid_constant__ TcParams prm) {
  const std::int64_t kv_bh = grid_row();
  if (kv_bh >= prm.batch_kv_heads) return;
  const std::int64_t row = kv_bh * gridDim.x + blockIdx.x;  // this block's list
  const int begin = prm.walk_offsets[row];
  const ListedWalk walk{kv_bh * prm.group_size, prm.walk_steps + begin, prm.walk_ranks + begin,
                        prm.walk_offsets[row + 1] - begin};
  key_tile_backward<C, kTurns>(prm, walk, kv_bh, blockIdx.x);
}

// dQ = scale * dQ_accum, rounded to T once, 4 elements per thread (D is a multiple of 8). dQ_accum
// has dq_rows rows per head (the padding past Sq is skipped) of kD columns (past D: skipped), dQ
// has Sq rows of D; kBshd: dQ is [B, Sq, H, D] (strides s, H = heads).
template <class T, bool kBshd = false>
__global__ void tc_convert_dq_kernel(const float4* __restrict__ dq_accum,  // [B, H, dq_rows, kD / 4] global
                                     uint2* __restrict__ dq,               // [B, H, Sq, D / 4] global, 4 T each
                                     std::int64_t quads, int quads_per_row, int acc_quads_per_row, int Sq,
                                     int dq_rows, float scale, fa::Strides s, int heads) {
  const std::int64_t n = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x;
  if (n >= quads) return;
  const std::int64_t row = n / quads_per_row;  // b * H * Sq + h * Sq + i
  const float4 a = dq_accum[(row / Sq * dq_rows + row % Sq) * acc_quads_per_row + n % quads_per_row];
  const std::int64_t at = kBshd ? fa::row_offset(s, heads, row / Sq, row % Sq) / 4 + n % quads_per_row : n;
  dq[at] = make_uint2(pack2<T>(scale * a.x, scale * a.y), pack2<T>(scale * a.z, scale * a.w));
}

}  // namespace backward::tc
