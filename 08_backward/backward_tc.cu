// Chapter 08, part 2 -- the same backward (FlashAttention-2, Algorithm 2) on the tensor cores:
// fp16 / bf16 in, fp32 accumulate.
//
// New since backward.cu (the fp32 version) and 06_tensor_core (whose pieces it reuses):
//   * All five products are mma.sync.m16n8k16 (06's mma.cuh), each with its own split of the
//     output among the 8 warps (FlashAttention-2's layout, TcConfig). S_ij and dP_ij live in
//     registers just long enough to become P_ij and dS_ij, which go to shared memory in T: dV_j,
//     dK_j and dQ_i each need them in another warp's split.
//   * Which operand needs which transpose (README: Tensor-core backward). Tiles sit row-major in
//     shared memory as they are in global memory: K_j, V_j (keys, d), Q_i, dO_i (rows, d), and
//     P_ij, dS_ij (rows, keys).
//       S = Q_i K_j^T, dP = dO_i V_j^T:  A = Q_i / dO_i, B = K_j / V_j    ldmatrix (as 06's Q, K)
//       dQ_i += dS K_j:                  A = dS_ij, B = K_j (k = keys)    ldmatrix, ldmatrix.trans
//       dV += P^T dO_i, dK += dS^T Q_i:  A = P^T / dS^T from P_ij / dS_ij ldmatrix.trans
//                                        B = dO_i / Q_i (k = query rows)  ldmatrix.trans (06's V)
//   * dQ_i sums over the key tiles, which are different blocks: the block adds its dQ_i part with
//     fp32 atomics into a workspace dQ_accum [B, H, Sq, D]; a last kernel converts dQ_accum *
//     scale to T.
//   * Deterministic mode: key tiles take turns per query tile (a counter per (b, h, i) in the
//     workspace): tile j adds its part after tile j-1, so every dQ element sees the same order of
//     additions on every run.
//   * Q_i, dO_i, LSE_i, D_i are double buffered with cp.async: step n+1's tiles fly while step n
//     is computed. K_j, V_j are loaded once per block. All tiles XOR-swizzled (06's swizzle.h).
// Configuration (FlashAttention-2's sm80 backward): Bc = 128 keys, 8 warps, one block per SM
// (161-162 KiB of shared memory; dK_j and dV_j take 64 + 64 registers per thread at D = 128);
// Br = 64 query rows at D = 128, 128 at D = 64.
// Expected effect: per step a warp issues 5 * Br * Bc * D / (8 * 2048) mmas against 144 LDSM.x4
// (D = 128; keeping P and dS in registers instead of shared memory needs 184), so the tensor cores wait
// less on shared memory; hiding the exp2 and the two barriers per step with 8 warps per SM decides
// how close it gets to FlashAttention-2's backward (README: Tensor-core backward).
// Run:  ./build/08_backward/08_backward --seqlen 4096 --head-dim 128 --dtype bf16 [--deterministic]

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "06_tensor_core/tensor_core.cuh"  // copy_tile, mma_16816, ldmatrix_x4(_trans), pack2
#include "08_backward/backward.h"
#include "08_backward/dot_do_o.cuh"
#include "common/cuda_check.h"
#include "common/device/cp_async.cuh"
#include "common/device/grid.cuh"
#include "common/device/launch.h"
#include "common/device/math.cuh"
#include "common/device/tiles.h"
#include "common/device_memory.h"
#include "common/warp_reduce.cuh"

namespace backward {
namespace {

using namespace tensor_core;  // 06: copy_tile, Config
using namespace fa::cuda;     // cp.async, ldmatrix_x4(_trans), mma_16816, pack2, the swizzle, kLog2e (common/device/)

// The members copy_tile (06) reads, the backward's tiles, and how the 8 warps split each product
// (FlashAttention-2's sm80 backward: Flash_bwd_kernel_traits<D, Br, Bc, 8, SdP, dKV, dQ>).
//   S, dP (Br x Bc):   kSdpWarpsM warps along query rows x the rest along keys
//   dV, dK (Bc x D):   4 warps along keys x 2 along d
//   dQ (Br x D):       kDqWarpsM warps along query rows x the rest along d
// D = 128: Br = 64, S tiles 32 x 32, dV/dK 32 x 64, dQ 32 x 32. D = 64: Br = 128, S tiles 32 x 64,
// dV/dK 32 x 32, dQ 32 x 32 (the block-sparse walk lists 64-row tiles: it runs Br = 64).
template <class T_, int kD_, int Br_ = 64, int kSdpWarpsM_ = 2, int kDqWarpsM_ = 2>
struct TcConfig {
  using T = T_;
  static constexpr int kD = kD_;
  static constexpr int kCols = smem_cols(kD);  // smem row length: kD for 64 and 128
  static constexpr bool kSwizzle = true;
  static constexpr int kWarps = 8;
  static constexpr int kThreads = 32 * kWarps;
  static constexpr int Bc = 128;                      // keys per block
  static constexpr int Br = Br_;                      // query rows per step
  // Warp tiles: rows x keys of S and dP, keys x columns of dV and dK, rows x columns of dQ.
  static constexpr int kSdpWarpsM = kSdpWarpsM_, kSRows = Br / kSdpWarpsM, kSKeys = Bc * kSdpWarpsM / kWarps;
  static constexpr int kKvWarpsN = 4, kVKeys = Bc / kKvWarpsN, kVCols = kD * kKvWarpsN / kWarps;
  static constexpr int kDqWarpsM = kDqWarpsM_, kQRows = Br / kDqWarpsM, kQCols = kD * kDqWarpsM / kWarps;
  static constexpr int kKVBytes = Bc * kCols * 2;     // K_j or V_j
  static constexpr int kRowBytes = Br * kCols * 2;    // one stage of Q_i or dO_i
  static constexpr int kPBytes = Br * Bc * 2;         // P_ij or dS_ij in T
  static constexpr int kSmemBytes = 2 * kKVBytes + 4 * kRowBytes + 2 * kPBytes + 4 * Br * 4;
  static_assert(kD % 16 == 0 && kSRows % 16 == 0 && kSKeys % 16 == 0 && kSKeys <= 64 && kVCols % 16 == 0 &&
                kQRows % 16 == 0 && kQCols % 16 == 0 && 2 * Br <= kThreads);
};

struct TcParams {
  const void* q;          // [B, H, Sq, D] global, T
  const void* k;          // [B, Hkv, Sk, D] global
  const void* v;          // [B, Hkv, Sk, D] global
  const void* dout;       // [B, H, Sq, D] global
  const float* lse;       // [B, H, Sq] global, natural log
  const float* D_row;     // [B, H, Sq] global: rowsum(dO o O)
  float* dq_accum;        // [B, H, Sq, D] global, fp32: zeroed, += by atomics
  int* dq_turn;           // [B, H, Tr] global: deterministic mode's turn counters, or null
  const int* walk_offsets;         // sparse: [B * Hkv * Tc + 1] each block's steps (sparse_walk.h)
  const std::uint32_t* walk_steps; // sparse: [n] pack_step(head in group, query tile, halves)
  const int* walk_ranks;           // sparse: [n] each step's turn in deterministic mode
  void* dk;               // [B, Hkv, Sk, D] global, T
  void* dv;               // [B, Hkv, Sk, D] global, T
  std::int64_t batch_kv_heads;  // B * Hkv: the grid's rows (common/device/grid.cuh)
  int seqlen_q, seqlen_k, group_size;
  bool causal;
  float scale, scale_log2;
};

// dst[0] += a, dst[1] += b in global memory, atomically per element; dst is 8-byte aligned.
__device__ __forceinline__ void add_pair(float* dst, float a, float b) {
#if __CUDA_ARCH__ >= 900
  asm volatile("red.global.add.v2.f32 [%0], {%1, %2};\n" ::"l"(__cvta_generic_to_global(dst)), "f"(a), "f"(b)
               : "memory");
#else
  atomicAdd(dst, a);
  atomicAdd(dst + 1, b);
#endif
}

// dQ = scale * dQ_accum, rounded to T once, 4 elements per thread (D is a multiple of 4).
template <class T>
__global__ void tc_convert_dq_kernel(const float4* __restrict__ dq_accum,  // [B, H, Sq, D / 4] global
                                     uint2* __restrict__ dq,               // [B, H, Sq, D / 4] global, 4 T each
                                     std::int64_t quads, float scale) {
  const std::int64_t n = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x;
  if (n >= quads) return;
  const float4 a = dq_accum[n];
  dq[n] = make_uint2(pack2<T>(scale * a.x, scale * a.y), pack2<T>(scale * a.z, scale * a.w));
}

// grid: Tc along x by B*Hkv rows over y and z (common/device/grid.cuh); block: 8 warps. Each product has its own warp tiles (TcConfig): in mma
// fragment terms (mma.cuh), lane (g, t) holds of a warp tile rows 16 mt + g (+8) x columns
// 8 nt + 2t (+1). S_ij and dP_ij stay in registers only as long as P_ij and dS_ij take to
// compute; both go to shared memory in T, where the next three products read them.
//
// kSparse: the block walks the steps the host listed for its key tile (sparse_walk.h, chapter
// 07's mask transposed) instead of every query tile of every head of the group.
template <class C, bool kSparse>
__global__ void __launch_bounds__(C::kThreads, 1) backward_tc_kernel(const TcParams prm) {
  using T = typename C::T;
  constexpr int kD = C::kD, kCols = C::kCols, Br = C::Br, Bc = C::Bc;
  const std::int64_t kv_bh = fa::cuda::grid_row();  // b * Hkv + kv head
  if (kv_bh >= prm.batch_kv_heads) return;          // a spare block of the grid
  extern __shared__ __align__(128) unsigned char smem[];
  const std::uint32_t K_s = smem_u32(smem);              // (Bc, kCols) smem: K_j
  const std::uint32_t V_s = K_s + C::kKVBytes;           // (Bc, kCols) smem: V_j
  const std::uint32_t Q_s = V_s + C::kKVBytes;           // (2, Br, kCols) smem: Q_i, double buffered
  const std::uint32_t dO_s = Q_s + 2 * C::kRowBytes;     // (2, Br, kCols) smem: dO_i
  const std::uint32_t P_s = dO_s + 2 * C::kRowBytes;     // (Br, Bc) smem: P_ij in T
  const std::uint32_t dS_s = P_s + C::kPBytes;           // (Br, Bc) smem: dS_ij in T
  unsigned char* P_p = smem + (P_s - K_s);               // the same two, as generic pointers
  unsigned char* dS_p = smem + (dS_s - K_s);
  float* lse_s = reinterpret_cast<float*>(dS_p + C::kPBytes);  // (2, Br) smem: LSE_i (0 past Sq)
  float* D_s = lse_s + 2 * Br;                                 // (2, Br) smem: D_i (0 past Sq)
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int g = lane / 4, t = lane % 4;  // fragment coordinates (mma.cuh)
  const int Sq = prm.seqlen_q, Sk = prm.seqlen_k;
  const int j_tile = blockIdx.x, j0 = j_tile * Bc;
  const std::int64_t bh0 = kv_bh * prm.group_size;         // b * H + its first query head
  const T* Q_g = static_cast<const T*>(prm.q);             // [B, H, Sq, D] global
  const T* dO_g = static_cast<const T*>(prm.dout);         // [B, H, Sq, D] global
  // GQA/MQA: the dense walk visits query tiles i_begin .. Tr - 1 of query head bh0, then of
  // bh0 + 1, ... (group * n_tiles steps); causal: query tiles before i_begin see nothing of K_j.
  const int Tr = ceil_div(Sq, Br), i_begin = query_tile_begin(j_tile, Br, Bc, Sq, Sk, prm.causal);
  const int n_tiles = Tr - i_begin;
  // Sparse: this block's list of steps. Dense: group_size * n_tiles steps, computed.
  const std::int64_t walk_row = kv_bh * gridDim.x + j_tile;
  const int walk_begin = kSparse ? prm.walk_offsets[walk_row] : 0;
  const int n_steps = kSparse ? prm.walk_offsets[walk_row + 1] - walk_begin : prm.group_size * n_tiles;
  // A step: which query head and query tile, and which 64-key halves of K_j the mask keeps.
  // Sparse steps are read from the list; dense ones counted (tile after tile, then the next head).
  struct Step {
    std::int64_t bh;
    int i_tile, halves;
  };
  auto listed = [&](int n) -> Step {
    const std::uint32_t s = prm.walk_steps[walk_begin + n];
    return {bh0 + step_head(s), step_tile(s), step_halves(s)};
  };
  auto step_after = [&](const Step& s, int n) -> Step {  // step n, which follows step s
    if constexpr (kSparse) return listed(n);
    else return s.i_tile + 1 < Tr ? Step{s.bh, s.i_tile + 1, 3} : Step{s.bh + 1, i_begin, 3};
  };

  // Q_i, dO_i, LSE_i, D_i of step st into stage `buf`, as one cp.async group with what came before.
  auto stage = [&](const Step& st, int buf) {
    const std::int64_t bh = st.bh;
    const int i0 = st.i_tile * Br;
    copy_tile<C, Br>(Q_s + buf * C::kRowBytes, Q_g + (bh * Sq + i0) * kD, Sq - i0);
    copy_tile<C, Br>(dO_s + buf * C::kRowBytes, dO_g + (bh * Sq + i0) * kD, Sq - i0);
    if (threadIdx.x < 2 * Br) {  // threads 0..Br-1: LSE_i, Br..2Br-1: D_i; zero past Sq
      const int r = threadIdx.x % Br, i = i0 + r;
      const float* src = (threadIdx.x < Br ? prm.lse : prm.D_row) + bh * Sq;
      cp_async_4((threadIdx.x < Br ? lse_s : D_s) + buf * Br + r, i < Sq ? src + i : src, i < Sq);
    }
  };
  copy_tile<C, Bc>(K_s, static_cast<const T*>(prm.k) + (kv_bh * Sk + j0) * kD, Sk - j0);
  copy_tile<C, Bc>(V_s, static_cast<const T*>(prm.v) + (kv_bh * Sk + j0) * kD, Sk - j0);
  Step st = kSparse && n_steps > 0 ? listed(0) : Step{bh0, i_begin, 3};
  if (n_steps > 0) stage(st, 0);
  cp_async_commit();

  // This warp's tiles: S_ij, dP_ij (s_row0.., s_key0..), dV_j, dK_j (v_key0.., v_col0..),
  // dQ_i (q_row0.., q_col0..).
  const int s_row0 = warp % C::kSdpWarpsM * C::kSRows, s_key0 = warp / C::kSdpWarpsM * C::kSKeys;
  const int v_key0 = warp % C::kKvWarpsN * C::kVKeys, v_col0 = warp / C::kKvWarpsN * C::kVCols;
  const int q_row0 = warp % C::kDqWarpsM * C::kQRows, q_col0 = warp / C::kDqWarpsM * C::kQCols;
  // ldmatrix row addresses (swizzle.h): one offset per lane and operand, with the warp's corner
  // of the tile folded in (ldsm_warp_offset), so that the loops below add only constants.
  const int rows_k = ldsm_lane_offset(lane, LdsmOrder::kRowsFirst, kCols, true);
  const int cols_k = ldsm_lane_offset(lane, LdsmOrder::kColsFirst, kCols, true);
  const int lane_s_a = ldsm_warp_offset(rows_k, s_row0, 0, kCols);  // Q_i, dO_i as A of S, dP
  const int lane_s_b = ldsm_warp_offset(cols_k, s_key0, 0, kCols);  // K_j, V_j as B of S, dP
  const int lane_q_a = ldsm_warp_offset(ldsm_lane_offset(lane, LdsmOrder::kRowsFirst, Bc, true), q_row0, 0, Bc);  // dS_ij
  const int lane_q_b = ldsm_warp_offset(rows_k, 0, q_col0, kCols);  // K_j as B of dQ (.trans)
  const int lane_v_a = ldsm_warp_offset(ldsm_lane_offset(lane, LdsmOrder::kColsFirst, Bc, true), 0, v_key0, Bc);  // P^T, dS^T
  const int lane_v_b = ldsm_warp_offset(rows_k, 0, v_col0, kCols);  // dO_i, Q_i as B of dV, dK (.trans)
  const int lane_store = 2 * tile_offset(s_row0 + g, s_key0 + 2 * t, Bc, true);  // P_ij, dS_ij pairs (pair_address)
  constexpr int kSM = C::kSRows / 16, kSN = C::kSKeys / 8;  // mma tiles of the warp's S, dP
  constexpr int kVM = C::kVKeys / 16, kVN = C::kVCols / 8;  // ... of dV_j, dK_j
  constexpr int kQM = C::kQRows / 16, kQN = C::kQCols / 8;  // ... of dQ_i

  float dK_j[kVM][kVN][4] = {};  // fp32 accumulators, for the whole walk
  float dV_j[kVM][kVN][4] = {};

  for (int n = 0; n < n_steps; ++n) {
    const int buf = n % 2;
    const Step next = n + 1 < n_steps ? step_after(st, n + 1) : st;
    const std::int64_t bh = st.bh;
    const int i_tile = st.i_tile, i0 = i_tile * Br;
    cp_async_wait<0>();  // this thread's copies of step n (and K_j, V_j) have landed
    __syncthreads();     // ... and everyone's; every warp is done with step n-1's stage, P_s, dS_s
    if (n + 1 < n_steps) stage(next, 1 - buf);  // step n+1 flies while step n is computed
    cp_async_commit();
    const std::uint32_t Q_i = Q_s + buf * C::kRowBytes, dO_i = dO_s + buf * C::kRowBytes;
    const float* lse_i = lse_s + buf * Br;
    const float* D_i = D_s + buf * Br;

    // S_ij = Q_i K_j^T and dP_ij = dO_i V_j^T, as 06's S: per 16-wide step of d, kSM LDSM of
    // Q_i (dO_i) and kSN/2 of K_j (V_j) feed kSM * kSN mmas. Two loops, one product live at a time.
    float S[kSM][kSN][4] = {}, dP[kSM][kSN][4] = {};
    auto scores = [&](float (&acc)[kSM][kSN][4], std::uint32_t A_s, std::uint32_t B_s) {
#pragma unroll
      for (int ks = 0; ks < kD / 16; ++ks) {
        std::uint32_t a[kSM][4];
#pragma unroll
        for (int mt = 0; mt < kSM; ++mt) ldmatrix_x4(a[mt], A_s + ldsm_address(lane_s_a, 16 * mt, 16 * ks, kCols));
#pragma unroll
        for (int nb = 0; nb < kSN / 2; ++nb) {
          std::uint32_t b[4];  // keys 16nb..+7: {b[0], b[1]}; keys 16nb+8..+15: {b[2], b[3]}
          ldmatrix_x4(b, B_s + ldsm_address(lane_s_b, 16 * nb, 16 * ks, kCols));
#pragma unroll
          for (int mt = 0; mt < kSM; ++mt) {
            mma_16816<T>(acc[mt][2 * nb], a[mt], b[0], b[1]);
            mma_16816<T>(acc[mt][2 * nb + 1], a[mt], b[2], b[3]);
          }
        }
      }
    };
    scores(S, Q_i, K_s);
    scores(dP, dO_i, V_s);

    // P_ij = exp2(S scale log2(e) - LSE_i log2(e)), already normalized, and
    // dS_ij = P_ij o (dP_ij - D_i), both in fp32, then to P_s and dS_s in T (4-byte stores: a
    // lane's two adjacent keys; the 8 rows g of a warp land in 8 bank groups thanks to the swizzle).
    // Masked keys get P = 0; rows with LSE = +inf get exp2(-inf) = 0, never NaN. Rows past Sq
    // have LSE = 0 (zero-filled) and P = 1, but also dO = 0 and D = 0: they add exactly 0.
    // Sparse: a 64-key half the mask turns off counts as masked (a warp's keys lie in one half).
    const bool half_on = !kSparse || (st.halves >> (s_key0 / 64) & 1) != 0;
    const bool mask = !half_on || needs_mask(i_tile, j_tile, Br, Bc, Sq, Sk, prm.causal);
    // BEGIN SOLUTION: per row: LSE_i log2(e) and D_i; per (mt, nt, e): P = fast_exp2 (0 if masked), dS = P (dP - D_i); pack2 pairs of both into P_s, dS_s (row r, key c: 2 * tile_offset(r, c, Bc, true))
    float lse2[kSM][2], D_r[kSM][2];  // the warp's rows 16 mt + g + 8 h, read once per step
#pragma unroll
    for (int mt = 0; mt < kSM; ++mt) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        lse2[mt][h] = lse_i[s_row0 + 16 * mt + g + 8 * h] * kLog2e;
        D_r[mt][h] = D_i[s_row0 + 16 * mt + g + 8 * h];
      }
    }
    // Two copies of the loop, chosen once per step: most tiles need no element mask.
    auto grads = [&](auto masked) {
#pragma unroll
      for (int mt = 0; mt < kSM; ++mt) {
#pragma unroll
        for (int nt = 0; nt < kSN; ++nt) {
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            bool seen = true;
            if constexpr (decltype(masked)::value) {
              const int r = i0 + s_row0 + 16 * mt + g + 8 * (e / 2), key = j0 + s_key0 + 8 * nt + 2 * t + e % 2;
              seen = half_on && key < Sk && (!prm.causal || fa::causal_visible(r, key, Sq, Sk));
            }
            S[mt][nt][e] = seen ? fast_exp2(fmaf(S[mt][nt][e], prm.scale_log2, -lse2[mt][e / 2])) : 0.0f;
            dP[mt][nt][e] = S[mt][nt][e] * (dP[mt][nt][e] - D_r[mt][e / 2]);
          }
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            const int at = pair_address(lane_store, 16 * mt + 8 * h, 8 * nt, Bc);
            *reinterpret_cast<std::uint32_t*>(P_p + at) = pack2<T>(S[mt][nt][2 * h], S[mt][nt][2 * h + 1]);
            *reinterpret_cast<std::uint32_t*>(dS_p + at) = pack2<T>(dP[mt][nt][2 * h], dP[mt][nt][2 * h + 1]);
          }
        }
      }
    };
    if (mask) grads(std::true_type{});
    else grads(std::false_type{});
    // END SOLUTION
    __syncthreads();  // all of P_ij and dS_ij are in smem: the products below mix every warp's part

    // dQ_i += dS_ij K_j over the tile's Bc keys. A = dS_ij (rows x keys) as 06's Q; B = K_j
    // (keys x d) with .trans, as 06's V_j.
    float dQ[kQM][kQN][4] = {};
#pragma unroll
    for (int kk = 0; kk < Bc / 16; ++kk) {
      std::uint32_t a[kQM][4];
#pragma unroll
      for (int mt = 0; mt < kQM; ++mt) ldmatrix_x4(a[mt], dS_s + ldsm_address(lane_q_a, 16 * mt, 16 * kk, Bc));
#pragma unroll
      for (int nb = 0; nb < kQN / 2; ++nb) {
        std::uint32_t b[4];  // dims 16nb..+7: {b[0], b[1]}; dims 16nb+8..+15: {b[2], b[3]}
        ldmatrix_x4_trans(b, K_s + ldsm_address(lane_q_b, 16 * kk, 16 * nb, kCols));
#pragma unroll
        for (int mt = 0; mt < kQM; ++mt) {
          mma_16816<T>(dQ[mt][2 * nb], a[mt], b[0], b[1]);
          mma_16816<T>(dQ[mt][2 * nb + 1], a[mt], b[2], b[3]);
        }
      }
    }

    // Deterministic mode: wait for this key tile's turn on (bh, i_tile). Dense: the key tiles
    // that see a query tile are 0 .. J, tile j's rank is j. Sparse: the rank is the number of
    // listed key tiles before j (sparse_walk.h). Each leaves the counter at rank + 1. The tiles
    // before j were launched before it (blocks start in blockIdx order), so they are running or
    // done: the wait cannot deadlock.
    int* turn = prm.dq_turn ? prm.dq_turn + bh * Tr + i_tile : nullptr;
    const int rank = kSparse && turn ? prm.walk_ranks[walk_begin + n] : j_tile;
    if (turn) {
      if (threadIdx.x == 0) {
        while (*reinterpret_cast<volatile int*>(turn) != rank) {
        }
        __threadfence();  // acquire: the previous tile's adds are ordered before ours
      }
      __syncthreads();  // nobody adds before it is this tile's turn
    }
    // Other blocks add into the same rows: atomicAdd with an unused result compiles to a
    // fire-and-forget RED, resolved in L2. The two columns 2t, 2t+1 a lane holds are adjacent:
    // sm_90 adds them with one 8-byte RED.E.ADD.F32x2, so a warp's instruction fills whole
    // 32-byte sectors (8 rows x 4 lanes x 8 bytes); sm_80 has only the 4-byte RED. The adds
    // drain while the tensor cores run dV_j and dK_j below.
    float* dQ_g = prm.dq_accum + (bh * Sq + i0) * kD;  // (Br, D) global, fp32: dQ_accum of Q_i
#pragma unroll
    for (int mt = 0; mt < kQM; ++mt) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int r = q_row0 + 16 * mt + g + 8 * h;
        if (i0 + r >= Sq) continue;
#pragma unroll
        for (int nt = 0; nt < kQN; ++nt)
          add_pair(dQ_g + r * kD + q_col0 + 8 * nt + 2 * t, dQ[mt][nt][2 * h], dQ[mt][nt][2 * h + 1]);
      }
    }
    if (turn) {
      __threadfence();  // release: this thread's adds are visible device-wide before the turn passes
      __syncthreads();  // ... for every thread of the block
      if (threadIdx.x == 0) atomicExch(turn, rank + 1);
    }

    // dV_j += P_ij^T dO_i and dK_j += dS_ij^T Q_i, contracting over the Br rows. A = P_ij^T
    // (keys x rows) read from P_ij (rows x keys) with .trans in "cols first" order; B = dO_i (Q_i)
    // with .trans, as 06's V_j.
    auto key_grads = [&](float (&acc)[kVM][kVN][4], std::uint32_t A_s, std::uint32_t B_s) {
#pragma unroll
      for (int kk = 0; kk < Br / 16; ++kk) {
        std::uint32_t a[kVM][4];
#pragma unroll
        for (int mt = 0; mt < kVM; ++mt)
          ldmatrix_x4_trans(a[mt], A_s + ldsm_address(lane_v_a, 16 * kk, 16 * mt, Bc));
#pragma unroll
        for (int nb = 0; nb < kVN / 2; ++nb) {
          std::uint32_t b[4];
          ldmatrix_x4_trans(b, B_s + ldsm_address(lane_v_b, 16 * kk, 16 * nb, kCols));
#pragma unroll
          for (int mt = 0; mt < kVM; ++mt) {
            mma_16816<T>(acc[mt][2 * nb], a[mt], b[0], b[1]);
            mma_16816<T>(acc[mt][2 * nb + 1], a[mt], b[2], b[3]);
          }
        }
      }
    };
    key_grads(dV_j, P_s, dO_i);
    key_grads(dK_j, dS_s, Q_i);
    st = next;
  }

  cp_async_wait<0>();  // a block with no query tile to visit still has K_j, V_j in flight

  // Epilogue: dK_j * scale and dV_j, written once in T, after every query head of the group.
  T* dK_g = static_cast<T*>(prm.dk) + (kv_bh * Sk + j0) * kD;  // (Bc, D) global: dK_j
  T* dV_g = static_cast<T*>(prm.dv) + (kv_bh * Sk + j0) * kD;  // (Bc, D) global: dV_j
#pragma unroll
  for (int mt = 0; mt < kVM; ++mt) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int key = v_key0 + 16 * mt + g + 8 * h;
      if (j0 + key >= Sk) continue;
#pragma unroll
      for (int nt = 0; nt < kVN; ++nt) {  // a quad writes 16 contiguous bytes
        const int col = v_col0 + 8 * nt + 2 * t;
        *reinterpret_cast<std::uint32_t*>(dK_g + key * kD + col) =
            pack2<T>(prm.scale * dK_j[mt][nt][2 * h], prm.scale * dK_j[mt][nt][2 * h + 1]);
        *reinterpret_cast<std::uint32_t*>(dV_g + key * kD + col) = pack2<T>(dV_j[mt][nt][2 * h], dV_j[mt][nt][2 * h + 1]);
      }
    }
  }
}

constexpr std::size_t align256(std::size_t bytes) { return (bytes + 255) / 256 * 256; }

template <class C, bool kSparse>
void launch(const TcParams& prm, dim3 grid, cudaStream_t stream) {
  // Above 48 KB of shared memory a kernel must opt in, once per configuration.
  static const bool opted_in = [] {
    allow_shared_memory(backward_tc_kernel<C, kSparse>, C::kSmemBytes);
    return true;
  }();
  (void)opted_in;
  backward_tc_kernel<C, kSparse><<<grid, C::kThreads, C::kSmemBytes, stream>>>(prm);
  FA_CHECK_LAUNCH();
}

template <class T, int kD>
void run(const fa::Problem& p, const void* q, const void* k, const void* v, const void* o, const float* lse,
         const void* dout, void* dq, void* dk, void* dv, bool deterministic, const DeviceSparseWalk* walk,
         cudaStream_t stream) {
  // Dense: FlashAttention-2's tiles for kD (TcConfig). Sparse: the walk's 64-row query tiles.
  using Dense = TcConfig<T, kD, kD == 64 ? 128 : 64, kD == 64 ? 4 : 2, kD == 64 ? 4 : 2>;
  using Sparse = TcConfig<T, kD>;
  static_assert(Sparse::Br == kSparseBr && Sparse::Bc == kSparseBc, "the sparse walk is listed in the kernel's tiles");
  static_assert(Dense::Bc == Sparse::Bc && Dense::Br >= Sparse::Br);
  const int Tr = ceil_div(p.seqlen_q, Sparse::Br);  // the most query tiles either kernel walks
  // Workspace: D_i [B, H, Sq] and dQ_accum [B, H, Sq, D] in fp32; deterministic mode adds one
  // turn counter per query tile [B, H, Tr].
  const std::size_t d_bytes = align256(p.lse_elems() * sizeof(float));
  const std::size_t acc_bytes = align256(p.q_elems() * sizeof(float));
  const std::size_t turn_bytes = deterministic ? align256(std::size_t(p.batch) * p.heads * Tr * sizeof(int)) : 0;
  auto* ws = static_cast<unsigned char*>(
      fa::cuda::workspace(d_bytes + acc_bytes + turn_bytes, "08_backward's D_i, fp32 dQ accumulator and turns"));
  auto* D_row = reinterpret_cast<float*>(ws);
  auto* dq_accum = reinterpret_cast<float*>(ws + d_bytes);
  int* dq_turn = deterministic ? reinterpret_cast<int*>(ws + d_bytes + acc_bytes) : nullptr;
  if (dq_turn) FA_CUDA_CHECK(cudaMemsetAsync(dq_turn, 0, turn_bytes, stream));

  const std::int64_t rows = p.lse_elems();
  dot_do_o(static_cast<const T*>(o), static_cast<const T*>(dout), D_row, dq_accum, rows, kD, stream);

  const TcParams prm{q,
                     k,
                     v,
                     dout,
                     lse,
                     D_row,
                     dq_accum,
                     dq_turn,
                     walk ? walk->offsets() : nullptr,
                     walk ? walk->steps() : nullptr,
                     walk ? walk->ranks() : nullptr,
                     dk,
                     dv,
                     std::int64_t{p.batch} * p.kv_heads,
                     p.seqlen_q,
                     p.seqlen_k,
                     p.group_size(),
                     p.causal,
                     p.scale(),
                     p.scale() * kLog2e};
  const dim3 grid =
      fa::cuda::tiles_by_rows(ceil_div(p.seqlen_k, Dense::Bc), std::int64_t{p.batch} * p.kv_heads, "08_backward");
  if (walk) launch<Sparse, true>(prm, grid, stream);
  else launch<Dense, false>(prm, grid, stream);

  const std::int64_t quads = p.q_elems() / 4;
  tc_convert_dq_kernel<T><<<fa::cuda::blocks_1d((quads + 255) / 256, "08_backward"), 256, 0, stream>>>(
      reinterpret_cast<const float4*>(dq_accum), static_cast<uint2*>(dq), quads, p.scale());
  FA_CHECK_LAUNCH();
}

}  // namespace

void tensor_core_backward(const fa::Problem& p, const void* q, const void* k, const void* v, const void* o,
                          const float* lse, const void* dout, void* dq, void* dk, void* dv,
                          const BackwardOptions& options, cudaStream_t stream, const DeviceSparseWalk* walk) {
  // Checks that need no GPU come first, so the refusal tests run anywhere.
  const std::vector<int>& dims = tensor_core_support().head_dims;  // 64 and 128: what run<> below instantiates
  if (std::find(dims.begin(), dims.end(), p.head_dim) == dims.end())
    throw std::invalid_argument("08_backward: the tensor-core backward (f16/bf16) supports head_dim 64 and 128, not " +
                                std::to_string(p.head_dim));
  for (const void* ptr : std::initializer_list<const void*>{q, k, v, o, dout, dq, dk, dv})
    if (!aligned16(ptr)) throw std::invalid_argument("08_backward: every tensor must be 16-byte aligned (f16/bf16)");
  fa::cuda::require_compute_capability(80, "08_backward", "its f16/bf16 path uses mma.sync, ldmatrix and cp.async");
  const bool det = options.deterministic;
  if (p.dtype == fa::Dtype::bf16) {
    if (p.head_dim == 64) run<__nv_bfloat16, 64>(p, q, k, v, o, lse, dout, dq, dk, dv, det, walk, stream);
    else run<__nv_bfloat16, 128>(p, q, k, v, o, lse, dout, dq, dk, dv, det, walk, stream);
  } else {
    if (p.head_dim == 64) run<__half, 64>(p, q, k, v, o, lse, dout, dq, dk, dv, det, walk, stream);
    else run<__half, 128>(p, q, k, v, o, lse, dout, dq, dk, dv, det, walk, stream);
  }
}

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
