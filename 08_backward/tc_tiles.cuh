// Chapter 08's tensor-core tiles: the backward's tile sizes and warp split (TcConfig), its
// arguments (TcParams), the block's shared memory (SmemTiles), a warp's corners and ldmatrix
// offsets (WarpTiles); the two walks over query tiles that backward_tc.cu's kernels take are in
// walks.cuh. The steps of one tile pair are in tc_tile_math.cuh.
#pragma once

#include <cstdint>
#include <type_traits>

#include "common/fa2_tiles/tile_math.cuh"  // 06's tile math, and through it common/device/ (copy_tile)
#include "08_backward/walks.cuh"         // Step, DenseWalk, ListedWalk
#include "common/device/tma.cuh"       // CUtensorMap (TcParams::dq_map)

namespace backward::tc {

using namespace fa::cuda;  // cp.async, ldmatrix_x4(_trans), mma_16816, pack2, the swizzle, kLog2e (common/device/)

// The members copy_tile (common/device/tile_copy.cuh) reads, the backward's tiles, and how the 8
// warps split each product (FlashAttention-2's sm80 backward: Flash_bwd_kernel_traits<D, Br, Bc, 8, SdP, dKV, dQ>).
//   S, dP (Br x Bc):   kSdpWarpsM warps along query rows x the rest along keys
//   dV, dK (Bc x D):   kKvWarpsN warps along keys (4; 2 at Bc = 64) x the rest along d
//   dQ (Br x D):       kDqWarpsM warps along query rows x the rest along d
// D = 128: Br = 64, S tiles 32 x 32, dV/dK 32 x 64, dQ 32 x 32. D = 64: Br = 128, S tiles 64 x 32,
// dV/dK 32 x 32, dQ 32 x 32 (the block-sparse walk lists 64-row tiles: it runs Br = 64). S tiles
// of 32 x 64 at D = 64 need as many ldmatrix but spill 32 bytes beside add_dq's branch-free adds.
// D = 192, 256: Bc = 64, Br = 64, S tiles 32 x 16, dV/dK 32 x 48 (192) or 32 x 64 (256), dQ 32 x
// 48 or 32 x 64.
template <class T_, int kD_, int Br_ = 64, int kSdpWarpsM_ = 2, int kDqWarpsM_ = 2, bool kPadded_ = false,
          int Bc_ = 128>
struct TcConfig {
  using T = T_;
  static constexpr int kD = kD_;
  // kPadded: the head dim is below kD (a multiple of 8, TcParams::head_dim), its rows that long in
  // global memory. Without it the head dim is kD, a constant: the exact dims (64 .. 256) keep
  // compile-time strides and no column checks (measured 2-3% faster at D = 128).
  static constexpr bool kPadded = kPadded_;
  static constexpr int kCols = smem_cols(kD);  // smem row length: kD for 64 and 128
  static constexpr bool kSwizzle = true;
  static constexpr int kWarps = 8;
  static constexpr int kThreads = 32 * kWarps;
  static constexpr int Bc = Bc_;                      // keys per block: 128; 64 above kD = 128
  static constexpr int Br = Br_;                      // query rows per step
  // Warp tiles: rows x keys of S and dP, keys x columns of dV and dK, rows x columns of dQ.
  static constexpr int kSdpWarpsM = kSdpWarpsM_, kSRows = Br / kSdpWarpsM, kSKeys = Bc * kSdpWarpsM / kWarps;
  // dV_j, dK_j: 4 warps along keys at Bc = 128, 2 at Bc = 64 (FlashAttention-2's AtomLayoutNdKV = 2
  // at hdim 256): 32 x 64 warp tiles read a third less of P^T/dS^T and dO/Q from shared memory than
  // 16 x 128 ones (measured 1.05x at D = 256, 1.01-1.02x at D = 192).
  static constexpr int kKvWarpsN = Bc == 64 ? 2 : 4, kVKeys = Bc / kKvWarpsN, kVCols = kD * kKvWarpsN / kWarps;
  static constexpr int kDqWarpsM = kDqWarpsM_, kQRows = Br / kDqWarpsM, kQCols = kD * kDqWarpsM / kWarps;
  // A warp's column corner folds into its ldmatrix lane offsets (swizzle.h: ldsm_warp_offset) when
  // its width is a power of two; at kD = 96 (48 columns a warp) the corner is added per ldmatrix.
  static constexpr bool kFoldVCols = (kVCols & (kVCols - 1)) == 0, kFoldQCols = (kQCols & (kQCols - 1)) == 0;
  static constexpr int kSM = kSRows / 16, kSN = kSKeys / 8;  // mma tiles of a warp's S, dP
  static constexpr int kVM = kVKeys / 16, kVN = kVCols / 8;  // ... of dV_j, dK_j
  static constexpr int kQM = kQRows / 16, kQN = kQCols / 8;  // ... of dQ_i
  static constexpr int kKVBytes = Bc * kCols * 2;     // K_j or V_j
  static constexpr int kRowBytes = Br * kCols * 2;    // one stage of Q_i or dO_i
  static constexpr int kPBytes = Br * Bc * 2;         // P_ij or dS_ij in T
  // kBulkDq (D = 64, 96 and 128, not padded): dQ_i's part goes to a shared fp32 tile and from there
  // to dQ_accum by the copy engine's bulk reduction, one 4 kD-byte row per thread of the first Br,
  // instead of each thread's 12-16 REDs, which keep the memory-instruction queues full
  // (tensor_cores.md, "Profiling against FlashAttention-2"). Measured 1.06-1.10x at D = 128,
  // 1.06-1.07x at D = 96 and 1.01-1.06x at D = 64, where the rows' pointer lives in shared memory
  // so that nothing spills (key_tile_backward). Rows kDqStride floats apart (8 of padding: the
  // float2 stores of a warp take the ideal 2 wavefronts), 16-byte aligned as the bulk copy needs.
  // sm_90 and newer only: the tile is requested from the host only there (tc_smem_bytes), and
  // sm_80 code keeps the REDs (kHasBulkCopy). At D = 64 only the dense tile (Br = 128) takes it:
  // the block-sparse kernel's Br = 64 measures 0.88x with it.
  static constexpr bool kBulkDq = !kPadded && ((kD == 64 && Br == 128) || kD == 96 || kD == 128);
  static constexpr int kDqStride = kD + 8, kDqBytes = kBulkDq ? Br * kDqStride * 4 : 0;
  // kDqInStage (the 192 and 256 tiles, padded or not; sm_90): no room is left for a dQ tile of
  // 64 x 256 floats next to the 209 KiB of tiles, so it goes into the step's own stage of Q_i and
  // dO_i (2 x 32 KiB, rows of 256 columns, read by then; the stages are laid out Q_0, dO_0, Q_1,
  // dO_1 so that each is one 64 KiB block), as kD / 32 boxes of 64 rows x 32 floats in the 128-byte
  // swizzle, which the copy engine adds to dQ_accum through a tensor map (tma_reduce_add_3d).
  // Measured 1.18-1.23x at D = 256, 1.23-1.27x at D = 192 and 1.22-1.26x at D = 160
  // (tensor_cores.md, "How we got here"). kAlign: slack to put the tiles on the swizzle's 1024-byte
  // atoms.
  static constexpr bool kDqInStage = kD == 192 || kD == 256;
  static constexpr int kStageStride = kDqInStage ? 2 * kRowBytes : kRowBytes;  // Q_i of stage b: Q_s + b kStageStride
  static constexpr int kDOOffset = kDqInStage ? kRowBytes : 2 * kRowBytes;     // dO_s - Q_s
  static constexpr int kAlign = kDqInStage ? 1024 : 0;
  static constexpr int kSmemBytes = 2 * kKVBytes + 4 * kRowBytes + 2 * kPBytes + 4 * Br * 4 + kAlign;  // without the dQ tile
  static_assert(kD % 16 == 0 && kSRows % 16 == 0 && kSKeys % 16 == 0 && kSKeys <= 64 && kVCols % 16 == 0 &&
                kQRows % 16 == 0 && kQCols % 16 == 0 && 2 * Br <= kThreads);
};

template <class C>
using ScoreTile = float[C::kSM][C::kSN][4];  // a warp's S_ij or dP_ij, fp32 (mma fragments)
template <class C>
using KeyTile = float[C::kVM][C::kVN][4];  // a warp's dV_j or dK_j, fp32, for the whole walk
template <class C>
using DqTile = float[C::kQM][C::kQN][4];  // a warp's part of dQ_i from one key tile, fp32

struct TcParams {
  const void* q;          // [B, H, Sq, D] global, T
  const void* k;          // [B, Hkv, Sk, D] global
  const void* v;          // [B, Hkv, Sk, D] global
  const void* dout;       // [B, H, Sq, D] global
  const float* lse;       // [B, H, Sq] global, natural log
  const float* D_row;     // [B, H, Sq] global: rowsum(dO o O)
  float* dq_accum;        // [B, H, dq_rows, kD] global, fp32: zeroed, += by atomics
  int* dq_turn;           // [B, H, Tr] global: the deterministic kernels' turn counters
  const int* walk_offsets;          // sparse: [B * Hkv * Tc + 1] each block's steps (sparse_walk.h)
  const std::uint32_t* walk_steps;  // sparse: [n] pack_step(head in group, query tile, halves)
  const int* walk_ranks;            // sparse: [n] each step's turn in deterministic mode
  void* dk;               // [B, Hkv, Sk, D] global, T
  void* dv;               // [B, Hkv, Sk, D] global, T
  std::int64_t batch_kv_heads;  // B * Hkv: the grid's rows (common/device/grid.cuh)
  int seqlen_q, seqlen_k, group_size;
  int dq_rows;  // rows per head of dq_accum: Sq rounded up to whole query tiles (add_dq checks no row)
  int head_dim;  // D: the rows' length in q, k, v, dout, dk, dv (<= kD; dq_accum rows are kD long)
  bool causal;
  float scale, scale_log2;
  CUtensorMap dq_map;  // kDqInStage on sm_90: dq_accum as [B * H][dq_rows][kD] fp32, boxes of Br x 32
  // [B, S, H, D] tensors (Layout::bshd; the kernels instantiated with kBshd read them, SliceRows):
  // the element strides of q, dout (and o, dq) and of k, v (dk, dv). LSE, D_i, dq_accum and the
  // turn counters are [B, H, S] workspaces in either layout.
  fa::Strides q_strides, kv_strides;
  int heads, kv_heads;
};

// Rows i, i + 1, ... of slice bh (b * heads + h) of a tensor with S rows: where row i starts, and
// the row pitch copy_tile and write_key_grads take (pitch_or_d): [B, H, S, D], rows D apart (an
// int pitch, which they do not read), or under kBshd [B, S, H, D] (strides s: H D apart).
template <bool kBshd>
struct SliceRows {
  std::int64_t at;
  std::conditional_t<kBshd, std::int64_t, int> pitch;
  __device__ __forceinline__ SliceRows(const fa::Strides& s, int heads, std::int64_t bh, int S, int i, int D) {
    if constexpr (kBshd) at = fa::row_offset(s, heads, bh, i), pitch = s.row;
    else at = (bh * S + i) * D, pitch = D;
  }
};

// The head dim the kernels of C address global memory with: TcParams::head_dim when C is padded,
// else the constant kD.
template <class C>
__device__ __forceinline__ int head_dim_of(const TcParams& prm) {
  return C::kPadded ? prm.head_dim : C::kD;
}

// The block's shared memory, carved as the kernels use it.
template <class C>
struct SmemTiles {
  std::uint32_t K_s, V_s;  // (Bc, kCols) smem: K_j, V_j, for the whole walk
  std::uint32_t Q_s, dO_s;  // (2, Br, kCols) smem: Q_i, dO_i, double buffered (stage b: + b kStageStride)
  unsigned char* Q_p;       // Q_s as a generic pointer (kDqInStage: the stores of the dQ boxes)
  std::uint32_t P_s, dS_s;  // (Br, Bc) smem: P_ij, dS_ij in T
  unsigned char *P_p, *dS_p;  // the same two, as generic pointers (for the stores)
  float *lse_s, *D_s;         // (2, Br) smem: LSE_i, D_i (0 past Sq)
  float* dQ_p;                // (Br, kDqStride) smem, fp32: dQ_i's part (kBulkDq on sm_90)
  std::uint32_t dQ_s;
  __device__ __forceinline__ explicit SmemTiles(unsigned char* smem) {
    const std::uint32_t raw = smem_u32(smem);
    K_s = C::kAlign ? (raw + C::kAlign - 1) / C::kAlign * C::kAlign : raw;
    V_s = K_s + C::kKVBytes;
    Q_s = V_s + C::kKVBytes;
    dO_s = Q_s + C::kDOOffset;
    P_s = Q_s + 4 * C::kRowBytes;
    dS_s = P_s + C::kPBytes;
    Q_p = smem + (Q_s - raw);
    P_p = smem + (P_s - raw);
    dS_p = smem + (dS_s - raw);
    lse_s = reinterpret_cast<float*>(dS_p + C::kPBytes);
    D_s = lse_s + 2 * C::Br;
    dQ_p = D_s + 2 * C::Br;  // 16 Br bytes past lse_s: 16-byte aligned; last, kSmemBytes on
    dQ_s = smem_u32(dQ_p);
  }
};

// A warp's corners in each product's split, and its ldmatrix row addresses (swizzle.h): one
// offset per lane and operand, with the warp's corner folded in (ldsm_warp_offset), so that the
// loops add only constants. g, t: the lane's mma fragment coordinates (mma.cuh).
template <class C>
struct WarpTiles {
  int g, t;
  int s_row0, s_key0;  // S_ij, dP_ij: rows, keys
  int v_key0, v_col0;  // dV_j, dK_j: keys, columns
  int q_row0, q_col0;  // dQ_i: rows, columns
  int lane_s_a, lane_s_b, lane_q_a, lane_q_b, lane_v_a, lane_v_b, lane_store;
  __device__ __forceinline__ WarpTiles(int warp, int lane) : g(lane / 4), t(lane % 4) {
    constexpr int kCols = C::kCols, Bc = C::Bc;
    s_row0 = warp % C::kSdpWarpsM * C::kSRows, s_key0 = warp / C::kSdpWarpsM * C::kSKeys;
    v_key0 = warp % C::kKvWarpsN * C::kVKeys, v_col0 = warp / C::kKvWarpsN * C::kVCols;
    q_row0 = warp % C::kDqWarpsM * C::kQRows, q_col0 = warp / C::kDqWarpsM * C::kQCols;
    const int rows_k = ldsm_lane_offset(lane, LdsmOrder::kRowsFirst, kCols, true);
    const int cols_k = ldsm_lane_offset(lane, LdsmOrder::kColsFirst, kCols, true);
    lane_s_a = ldsm_warp_offset(rows_k, s_row0, 0, kCols);  // Q_i, dO_i as A of S, dP
    lane_s_b = ldsm_warp_offset(cols_k, s_key0, 0, kCols);  // K_j, V_j as B of S, dP
    lane_q_a = ldsm_warp_offset(ldsm_lane_offset(lane, LdsmOrder::kRowsFirst, Bc, true), q_row0, 0, Bc);  // dS_ij
    lane_q_b = C::kFoldQCols ? ldsm_warp_offset(rows_k, 0, q_col0, kCols) : rows_k;  // K_j as B of dQ (.trans)
    lane_v_a = ldsm_warp_offset(ldsm_lane_offset(lane, LdsmOrder::kColsFirst, Bc, true), 0, v_key0, Bc);  // P^T, dS^T
    lane_v_b = C::kFoldVCols ? ldsm_warp_offset(rows_k, 0, v_col0, kCols) : rows_k;  // dO_i, Q_i as B of dV, dK (.trans)
    lane_store = 2 * tile_offset(s_row0 + g, s_key0 + 2 * t, Bc, true);  // P_ij, dS_ij pairs (pair_address)
  }
  // Byte offsets of the ldmatrix blocks (r0, c0) of the warp's columns: K_j for dQ_i (q_b), dO_i or
  // Q_i for dV_j, dK_j (v_b). Folded corners: constants added to the lane offset; else (kD = 96)
  // the corner joins c0 in the swizzle.
  __device__ __forceinline__ int q_b(int r0, int c0) const {
    return ldsm_address(lane_q_b, r0, C::kFoldQCols ? c0 : q_col0 + c0, C::kCols);
  }
  __device__ __forceinline__ int v_b(int r0, int c0) const {
    return ldsm_address(lane_v_b, r0, C::kFoldVCols ? c0 : v_col0 + c0, C::kCols);
  }
};

}  // namespace backward::tc
