// Chapter 08 -- FlashAttention-2's backward pass (Dao 2023, Algorithm 2), fp32 on the CUDA cores.
//
// New since 05, the forward (diff -u 05_flash_v2/flash_v2.cu 08_backward/backward.cu):
//   * The loops turn around once more: one block per (key tile K_j V_j, batch * KV head) -- the
//     grid -- and the inner loop walks the query tiles Q_i of every query head that reads this
//     KV head (GQA/MQA). dK_j and dV_j stay in registers from the first query tile to the last
//     and are written once: no atomics on them, the same bits on every run.
//   * Of the forward only LSE is kept: P_ij = exp(scale S_ij - LSE_i) is recomputed per tile,
//     already normalized -- no running max, no rescaling.
//   * Five products per tile instead of two. S_ij^T = K_j Q_i^T and dP_ij^T = V_j dO_i^T are the
//     forward's S_ij with keys in the rows; dV_j += P_ij^T dO_i and dK_j += dS_ij^T Q_i are its
//     O_i += P_ij V_j; dQ_i += dS_ij K_j is new.
//   * dQ_i collects a term from every key tile, that is from every block of a (b, KV head): each
//     block adds its part with fp32 atomicAdd into dQ, which a preprocessing kernel zeroes while
//     it computes D_i = rowsum(dO_i o O_i).
//   * Causal: the i loop starts at the first query tile that sees K_j (tiles.h: query_tile_begin).
//   * Q_i and dO_i of the next step are copied with 05's cp.async loader as soon as the warps are
//     done with this step's (dO_i after dS_ij, Q_i after dK_j): they land during the last products.
// Expected effect: FFMA-bound like 05 (about 85% of the issued instructions are FFMAs), but with
// 8 warps per SM instead of 12 -- dK_j and dV_j hold D registers per thread -- and three
// block-wide barriers per tile, so somewhat below the forward's TFLOP/s (README: Results).
// Layout: this file holds the kernel and the chapter's host side; fp32_tile_math.cuh holds the
// tile sizes and the named steps of one tile pair (keys_dot_rows, probs, grads, add_keys_outer,
// add_dq, write_key_grads); backward_tc.cu the tensor-core version.
// Run:  ./build/08_backward/08_backward --seqlen 4096 --head-dim 128

#include <cstdint>
#include <stdexcept>

#include "05_flash_v2/flash_v2.h"  // the f32 forwards: 3xTF32 up to D = 128, FFMA above
#include "06_tensor_core/tensor_core.h"  // the f16/bf16 forward
#include "08_backward/backward.h"
#include "08_backward/dot_do_o.cuh"
#include "05_flash_v2/tile_math.cuh"         // load_tile_async: cp.async copies of Q_i and dO_i
#include "08_backward/fp32_tile_math.cuh"  // Traits and the steps of one tile pair
#include "common/cuda/cuda_check.h"
#include "common/device/grid.cuh"
#include "common/device/launch.h"
#include "common/device/tiles.h"
#include "common/cuda/device_memory.h"

namespace backward {
namespace {

using namespace fp32;

// grid: Tc along x by B*Hkv rows over y and z (common/device/grid.cuh); block: 4 warps. Warp w
// owns keys 16w .. 16w+15 of K_j; in it, lane (ty, tx) (05's layout) owns keys 16w + ty + 4a
// (a < 4) and, of S_ij^T and dP_ij^T, query rows tx + 8b (b < Br/8); of dK_j and dV_j, columns
// 32c + 4tx .. 32c + 4tx + 3 (c < kD/32). For dQ_i the block splits the query rows instead:
// lane (ty, tx) of warp w owns rows (Br/4) w + ty + 4a (a < Br/16) and the same columns.
// 2 blocks (8 warps) per SM: dK_j and dV_j take kD registers per thread, and shared memory
// (kSmemBytes <= 108.4 KiB) fits twice in the H100's 228 KiB.
template <int kD>
__global__ void __launch_bounds__(Traits<kD>::kThreads, Traits<kD>::kMinBlocks)
    backward_kernel(const float* __restrict__ q,      // [B, H, Sq, D] global
                    const float* __restrict__ k,      // [B, Hkv, Sk, D] global
                    const float* __restrict__ v,      // [B, Hkv, Sk, D] global
                    const float* __restrict__ lse,    // [B, H, Sq] global, natural log
                    const float* __restrict__ dout,   // [B, H, Sq, D] global
                    const float* __restrict__ D_row,  // [B, H, Sq] global: rowsum(dO o O)
                    float* __restrict__ dq,           // [B, H, Sq, D] global: zeroed, += by atomics
                    float* __restrict__ dk,           // [B, Hkv, Sk, D] global
                    float* __restrict__ dv,           // [B, Hkv, Sk, D] global
                    fa::Problem p, float scale, bool vec) {  // vec: 16-byte copies of Q_i, dO_i
  using T = Traits<kD>;
  constexpr int Br = T::Br, Bc = T::Bc, kStride = T::kStride, kPStride = T::kPStride;
  const std::int64_t kv_bh = grid_row();                     // b * Hkv + kv head
  if (kv_bh >= std::int64_t{p.batch} * p.kv_heads) return;  // a spare block of the grid
  extern __shared__ float4 smem[];                 // float4: 16-byte aligned for LDS.128
  float* K_s = reinterpret_cast<float*>(smem);     // (Bc, kD + 4) smem: K_j
  float* V_s = K_s + Bc * kStride;                 // (Bc, kD + 4) smem: V_j
  float* Q_s = V_s + Bc * kStride;                 // (Br, kD + 4) smem: Q_i
  float* dO_s = Q_s + Br * kStride;                // (Br, kD + 4) smem: dO_i
  float* P_s = dO_s + Br * kStride;                // (Br, Bc + 8) smem: P_ij, then dS_ij (p_column)
  float* lse_s = P_s + Br * kPStride;              // (Br) smem: LSE_i * log2(e) rounded, +inf past Sq
  float* lse_lo_s = lse_s + Br;                    // (Br) smem: what that rounding dropped
  float* D_s = lse_lo_s + Br;                      // (Br) smem: D_i
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int ty = lane / 16 * 2 + lane % 2, tx = lane / 2 % 8;  // 05's lane layout: 2-pass float4 loads
  const int Sq = p.seqlen_q, Sk = p.seqlen_k, D = p.head_dim;
  const float scale_log2 = scale * kLog2e;
  // Causal: the first key tiles are seen by the most query rows, and they are launched first.
  const int j_tile = blockIdx.x, j0 = j_tile * Bc;
  // GQA/MQA: query heads bh0 .. bh0 + H/Hkv - 1 read this KV head; dK_j, dV_j sum over all of them.
  const std::int64_t bh0 = kv_bh / p.kv_heads * p.heads + kv_bh % p.kv_heads * p.group_size();
  const int key_t = 16 * warp + ty;          // this thread's first key of the tile; key a is + 4a
  const float* K_t = K_s + key_t * kStride;  // its first K_j row; row a is + 4a rows
  const float* V_t = V_s + key_t * kStride;  // its first V_j row
  float* P_t = P_s + 16 * warp + 4 * ty;     // its 4 keys in P_s (= p_column(key_t)); row r is + r rows
  // Its part of dQ_i (Traits: the dQ_i layout): rows qrow + 4a, columns from qcol.
  const int qrow = 4 * T::kQRows * (warp / T::kQSplit) + ty, qcol = 32 * T::kQChunks * (warp % T::kQSplit);

  float dK_j[4][4 * T::kChunks] = {};  // (4, kD/8) registers: keys key_t + 4a, columns 32c + 4tx + e
  float dV_j[4][4 * T::kChunks] = {};
  // The steps: every (query head of the group, query tile from i_begin) pair, head by head.
  const int Tr = ceil_div(Sq, Br), i_begin = query_tile_begin(j_tile, Br, Bc, Sq, Sk, p.causal);
  const int n_tiles = Tr - i_begin, n_steps = p.group_size() * n_tiles;
  const auto step_row = [&](int n) { return (bh0 + n / n_tiles) * Sq + (i_begin + n % n_tiles) * Br; };  // bh Sq + i0
  const auto rows_left = [&](int n) { return Sq - (i_begin + n % n_tiles) * Br; };

  // Prologue: step 0's Q_i and dO_i start copying (05's load_tile_async) while K_j and V_j are
  // staged by hand.
  RowStats stats;  // thread r < Br: row r's LSE_i and D_i of the step about to start
  if (n_steps > 0) {
    stats = load_row_stats<Br>(lse + step_row(0), D_row + step_row(0), rows_left(0));
    flash_v2::load_tile_async<kD, Br, kStride, T::kThreads>(Q_s, q + step_row(0) * D, rows_left(0), D, vec);
    flash_v2::load_tile_async<kD, Br, kStride, T::kThreads>(dO_s, dout + step_row(0) * D, rows_left(0), D, vec);
  }
  cp_async_commit();
  stage_tile<kD, Bc, T::kThreads>(K_s, k + (kv_bh * Sk + j0) * D, Sk - j0, D);
  stage_tile<kD, Bc, T::kThreads>(V_s, v + (kv_bh * Sk + j0) * D, Sk - j0, D);

  for (int n = 0; n < n_steps; ++n) {
    const std::int64_t bh = bh0 + n / n_tiles;
    const int i_tile = i_begin + n % n_tiles, i0 = i_tile * Br;
    stage_row_stats<Br>(lse_s, lse_lo_s, D_s, stats);  // every warp is done with them since the last barrier
    cp_async_wait<0>();  // this thread's copies of Q_i and dO_i have landed
    __syncthreads();     // ... and everyone's, and LSE_i, D_i (and K_j, V_j); every warp is done with P_s

    // S_ij^T = K_j Q_i^T, then P_ij^T from it and LSE_i, to P_s.
    float S[4][T::kRows] = {};  // (4, Br/8) registers: keys key_t + 4a, query rows tx + 8b
    keys_dot_rows<kD, T::kRows>(S, K_t, Q_s, tx);
    const bool mask = needs_mask(i_tile, j_tile, Br, Bc, Sq, Sk, p.causal);
    probs<kD>(S, P_t, lse_s, lse_lo_s, tx, i0, j0 + key_t, mask, p, scale_log2);
    __syncwarp();  // the warp's P_ij is in P_s: the dV_j product reads what other lanes wrote

    // dV_j += P_ij^T dO_i
    add_keys_outer<kD, Br, kPStride>(dV_j, P_t, dO_s, tx);

    // dP_ij^T = V_j dO_i^T: the same product as S_ij^T. Then dS_ij over P_ij in P_s.
    float dP[4][T::kRows] = {};  // (4, Br/8) registers: keys key_t + 4a, query rows tx + 8b
    keys_dot_rows<kD, T::kRows>(dP, V_t, dO_s, tx);
    __syncwarp();  // every lane of the warp has read P_s for dV_j before P_ij becomes dS_ij
    grads<kD>(P_t, dP, D_s, tx);
    __syncthreads();  // all of dS_ij is in P_s (dQ_i below reads every warp's keys); dO_s is free

    // The next step's dO_i, LSE_i and D_i land during the two products left, and its Q_i during dQ_i.
    const bool next = n + 1 < n_steps;
    if (next) stats = load_row_stats<Br>(lse + step_row(n + 1), D_row + step_row(n + 1), rows_left(n + 1));
    if (next) flash_v2::load_tile_async<kD, Br, kStride, T::kThreads>(dO_s, dout + step_row(n + 1) * D, rows_left(n + 1), D, vec);
    cp_async_commit();
    // dK_j += dS_ij^T Q_i (the scale is applied once, in the epilogue).
    add_keys_outer<kD, Br, kPStride>(dK_j, P_t, Q_s, tx);
    __syncthreads();  // every warp is done with Q_s
    if (next) flash_v2::load_tile_async<kD, Br, kStride, T::kThreads>(Q_s, q + step_row(n + 1) * D, rows_left(n + 1), D, vec);
    cp_async_commit();
    // dQ_i += scale dS_ij K_j, added into dq by atomics.
    add_dq<kD>(dq + (bh * Sq + i0) * D, P_s, K_s, qrow, qcol, tx, Sq - i0, D, scale);
  }

  // Epilogue: dK_j (times the scale) and dV_j, written once, after every query head of the group.
  write_key_grads<kD>(dk + (kv_bh * Sk + j0) * D, dv + (kv_bh * Sk + j0) * D, dK_j, dV_j, key_t, tx, Sk - j0, D, scale);
}

// The f32 backward after the argument checks: D_i = rowsum(dO o O) and dQ zeroed, then the
// 3xTF32 kernel (backward_tf32x3.cu) or the FFMA one above.
void fp32_backward(const fa::Problem& p, const void* q, const void* k, const void* v, const void* o, const float* lse,
                   const void* dout, void* dq, void* dk, void* dv, bool tensor_cores, cudaStream_t stream) {
  auto* D_row = static_cast<float*>(
      fa::cuda::workspace(p.lse_elems() * sizeof(float), "08_backward's D_i = rowsum(dO o O)"));  // [B, H, Sq]
  const auto* qf = static_cast<const float*>(q);
  const auto* kf = static_cast<const float*>(k);
  const auto* vf = static_cast<const float*>(v);
  const auto* dof = static_cast<const float*>(dout);
  auto* dqf = static_cast<float*>(dq);
  auto* dkf = static_cast<float*>(dk);
  auto* dvf = static_cast<float*>(dv);
  dot_do_o(static_cast<const float*>(o), dof, D_row, dqf, p.lse_elems(), p.head_dim, p.head_dim, p.seqlen_q,
           p.seqlen_q, stream);
  if (tensor_cores) return tf32x3_launch(p, qf, kf, vf, lse, dof, D_row, dqf, dkf, dvf, stream);
  with_head_dim<32, 64, 96, 128, 192, 256>(p.head_dim, [&](auto d) {  // any head dim: the next size up
    constexpr int kD = decltype(d)::value;
    launch_fp32<Traits<kD>>(backward_kernel<kD>, p, qf, kf, vf, lse, dof, D_row, dqf, dkf, dvf, stream);
  });
}

}  // namespace

void forward(const fa::Problem& p, const void* q, const void* k, const void* v, void* o, float* lse,
             cudaStream_t stream) {
  if (p.dtype == fa::Dtype::f32) flash_v2::forward(p, q, k, v, o, lse, stream);  // fp32_on_tensor_cores: its choice
  else tensor_core::forward(p, q, k, v, o, lse, stream);
}

const fa::BackwardChapter& chapter() {
  static const fa::BackwardChapter c{
      .support = {.chapter = "08_backward",
                  .dtypes = {fa::Dtype::f32, fa::Dtype::f16, fa::Dtype::bf16},
                  .head_dims = {},
                  .max_head_dim = 256,
                  .bshd_dtypes = {fa::Dtype::f16, fa::Dtype::bf16}},  // the tensor-core backward and 06
      .forward = forward,
      .backward = backward,
      .test_head_dims = {8, 40, 64, 72, 80, 96, 112, 128, 160, 192, 256},
      .defaults = fa::default_problem(fa::Dtype::f32),
      .deterministic = backward_deterministic,
      .tests_own_forward = fp32_on_tensor_cores};
  return c;
}

const fa::BackwardChapter& fp32_chapter() {
  // Its own backward checks against its own Support, so the shared refusal tests see f16/bf16
  // refused for the dtype, as this object declares.
  static const fa::BackwardFn ffma_only = [](const fa::Problem& p, const void* q, const void* k, const void* v,
                                             const void* o, const float* lse, const void* dout, void* dq, void* dk,
                                             void* dv, cudaStream_t stream) {
    fa::check_backward_args(fp32_chapter().support, p, q, k, v, o, lse, dout, dq, dk, dv);
    fp32_backward(p, q, k, v, o, lse, dout, dq, dk, dv, false, stream);
  };
  static const fa::BackwardChapter c{
      .support = {.chapter = "08_backward", .dtypes = {fa::Dtype::f32}, .head_dims = {}, .max_head_dim = 256},
      .forward = flash_v2::ffma_forward,
      .backward = ffma_only,
      .test_head_dims = {7, 32, 64, 96, 128, 160, 256},
      .defaults = fa::default_problem(fa::Dtype::f32),
      .deterministic = nullptr};
  return c;
}

const fa::BackwardChapter& tf32x3_chapter() {
  static const fa::BackwardFn tf32x3_only = [](const fa::Problem& p, const void* q, const void* k, const void* v,
                                               const void* o, const float* lse, const void* dout, void* dq,
                                               void* dk, void* dv, cudaStream_t stream) {
    fa::check_backward_args(tf32x3_chapter().support, p, q, k, v, o, lse, dout, dq, dk, dv);
    fp32_backward(p, q, k, v, o, lse, dout, dq, dk, dv, true, stream);
  };
  static const fa::BackwardChapter c{
      .support = {.chapter = "08_backward.tf32x3", .dtypes = {fa::Dtype::f32}, .max_head_dim = 128},
      .forward = flash_v2::tf32x3_forward,
      .backward = tf32x3_only,
      .test_head_dims = {37, 100},  // the rest through chapter(); 37: scalar copies, 100: columns past D
      .defaults = fa::default_problem(fa::Dtype::f32),
      .deterministic = nullptr,
      .tests_own_forward = fp32_on_tensor_cores};
  return c;
}

void backward(const fa::Problem& p, const void* q, const void* k, const void* v, const void* o,
              const float* lse, const void* dout, void* dq, void* dk, void* dv, cudaStream_t stream) {
  backward(p, q, k, v, o, lse, dout, dq, dk, dv, stream, BackwardOptions{});
}

void backward_deterministic(const fa::Problem& p, const void* q, const void* k, const void* v, const void* o,
                            const float* lse, const void* dout, void* dq, void* dk, void* dv,
                            cudaStream_t stream) {
  backward(p, q, k, v, o, lse, dout, dq, dk, dv, stream, BackwardOptions{true});
}

void backward(const fa::Problem& p, const void* q, const void* k, const void* v, const void* o,
              const float* lse, const void* dout, void* dq, void* dk, void* dv, cudaStream_t stream,
              const BackwardOptions& options) {
  fa::check_backward_args(chapter().support, p, q, k, v, o, lse, dout, dq, dk, dv);
  if (p.dtype != fa::Dtype::f32) return tensor_core_backward(p, q, k, v, o, lse, dout, dq, dk, dv, options, stream);
  if (options.deterministic)
    throw std::invalid_argument("08_backward: the deterministic mode is implemented for f16/bf16 only "
                                "(the fp32 kernels add into dQ with unordered atomics)");
  fp32_backward(p, q, k, v, o, lse, dout, dq, dk, dv, fp32_on_tensor_cores(p), stream);
}

// The block-sparse backward's host side: the walk uploaded once, then 08's tensor-core backward
// (backward_tc.cu) with it.
DeviceSparseWalk::DeviceSparseWalk(const fa::Problem& p, const block_sparse::BlockMask& mask)
    : shape_(transpose_mask(p, mask)), size_(shape_.size()) {
  auto upload = [](fa::cuda::DeviceBuffer& buffer, const auto& values) {
    const std::size_t bytes = values.size() * sizeof(values[0]);
    buffer = fa::cuda::DeviceBuffer(bytes);
    buffer.upload(values.data(), bytes);
  };
  upload(offsets_, shape_.row_offsets);
  upload(steps_, shape_.steps);
  upload(ranks_, shape_.ranks);
  shape_.row_offsets.clear();  // the device has them; the host keeps the problem it fits
  shape_.steps.clear();
  shape_.ranks.clear();
}

void backward(const fa::Problem& p, const DeviceSparseWalk& walk, const void* q, const void* k, const void* v,
              const void* o, const float* lse, const void* dout, void* dq, void* dk, void* dv, cudaStream_t stream,
              const BackwardOptions& options) {
  fa::check_backward_args(chapter().support, p, q, k, v, o, lse, dout, dq, dk, dv);
  if (p.dtype == fa::Dtype::f32)
    throw std::invalid_argument("08_backward: the block-sparse backward is the tensor-core one (f16/bf16), not f32");
  walk.check_fits(p, "08_backward");
  tensor_core_backward(p, q, k, v, o, lse, dout, dq, dk, dv, options, stream, &walk);
}

}  // namespace backward
