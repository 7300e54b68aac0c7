// Chapter 11's parameters and configuration: the kernel's Params (and BshdParams for [B, S, H, D]
// tensors), Config (tile sizes, stages, shared-memory offsets, the steps' switches), Bshd<Config>
// and the block's mbarriers. block.cuh, key_grads.cuh and backward_v3.cuh build on them.
#pragma once

#include <cstdint>
#include <type_traits>

#include "08_backward/walks.cuh"  // DenseWalk: Config's default walk
#include "common/device/math.cuh"  // SoftcapConsts
#include "common/host/problem.h"  // fa::Strides

namespace backward_v3 {

struct Params {
  const float* lse2;   // [B * H][Tr * Br]: LSE log2(e), +inf past Sq (P = 0 there)
  const float* D_row;  // [B * H][Tr * Br]: D_i = rowsum(dO_i o O_i), 0 past Sq
  float* dq_accum;     // [B * H][Tr][kChunks][4096]: the partial dQ tiles, 64 x 64 chunks in
                       // accumulator order (Config::kChunks)
  int* dq_turn;        // [B * H][Tr][kChunks], zeroed: the deterministic kernel's turn per chunk
  float* kv_partial;   // walks past Config::kFlushSteps steps: [B * Hkv][Tc][2][kD / 4][128] float4, dK and dV sums
                       // (flush_key_grads); nullptr when no walk is that long
  const int* walk_offsets;          // the block-sparse step (ListedWalk): [B * Hkv * Tc + 1]
  const std::uint32_t* walk_steps;  // and its steps (08_backward/sparse_walk.h)
  void* dk;            // [B, Hkv, Sk, D] ([B, Sk, Hkv, D] under Layout::bshd: BshdParams' k_strides)
  void* dv;            // as dK
  std::int64_t batch_kv_heads;
  int seqlen_q, seqlen_k, group_size, Tr;
  int head_dim;  // the tensors' D: Config::kD, or 96 on the kD = 128 kernel (its columns 96-127 are TMA's zeros)
  bool causal;
  float scale, scale_log2;
  int window_left = -1, window_right = -1;  // a sliding window (Problem's; -1: unbounded)
  int lpt_section = 1;  // Config::kLongestFirst under a causal mask: rows a section of the grid's order
};

// The parameters of the [B, S, H, D] kernels (Bshd<C>, below): Params and what their addresses need
// beyond it. A kernel of configuration C takes KernelParams<C>; its device functions take Params&
// and, where C::kBshd, read the rest through bshd_params.
struct BshdParams : Params {
  int heads;                         // H: query slice bh is batch bh / H, head bh % H (the maps' coordinates)
  fa::Strides k_strides, v_strides;  // dK's and dV's element strides: K's and V's (Problem's Strides)
  fa::cuda::LongestFirstPow2 lpt;  // the causal grid's longest-first order without a division (run_block)
};
// A packed batch of sequences (varlen: Problem::cu_seqlens_q, cu_seqlens_k) as the Varlen<C>
// kernels read it, B + 1 ints each (device pointers): the sequences' first rows, and how many
// query tiles (of Br rows) and key tiles (of Bc keys) the sequences before b have. Sequence b's
// scratch (the padded LSE and D_i, the dQ accumulator, the dK/dV sums) is its own region of H (or
// Hkv) slices of its own tiles, after the regions of the sequences before it.
struct VarlenSeqs {
  const int* cu_seqlens_q;
  const int* cu_seqlens_k;
  const int* query_tiles;
  const int* key_tiles;
  int batch;
};
struct VarlenParams : BshdParams {
  VarlenSeqs seqs;
};
// The Softcap<C> kernels' parameters: Params (or its layout's) and the softcap's constants
// (common/device/math.cuh: SoftcapConsts), which stay out of Params itself for the other kernels'
// sake.
template <class P>
struct SoftcapParams : P {
  fa::cuda::SoftcapConsts cap;
};
template <class C>
using LayoutParams = std::conditional_t<C::kVarlen, VarlenParams, std::conditional_t<C::kBshd, BshdParams, Params>>;
template <class C>
using KernelParams = std::conditional_t<C::kSoftcap, SoftcapParams<LayoutParams<C>>, LayoutParams<C>>;
// The softcap's constants of a Softcap<C> kernel's parameters, which prm is.
template <class C>
__device__ __forceinline__ const fa::cuda::SoftcapConsts& softcap_of(const Params& prm) {
  return static_cast<const SoftcapParams<LayoutParams<C>>&>(prm).cap;
}
__device__ __forceinline__ const BshdParams& bshd_params(const Params& prm) {
  return static_cast<const BshdParams&>(prm);
}

// kBr, kOverlap: the chapter's choices by default; steps/ turns them back to show what each is worth.
// Walk: every query tile that sees the key tile (08's DenseWalk), or the block-sparse step's
// listed ones (ListedWalk).
template <class T_, int kD_, int kBr_ = (kD_ == 64 ? 128 : 64), bool kOverlap_ = true,
          class Walk_ = backward::tc::DenseWalk, bool kLongestFirst_ = false, bool kDqFirst_ = false>
struct Config {
  using T = T_;
  using Walk = Walk_;
  static constexpr bool kWide = false;  // wide.cuh's WideConfig: head dims 192 and 256
  static constexpr int kD = kD_;
  // Bc keys a block (two warpgroups of 64); Br query rows a step: 128 at D = 64, so that a step's
  // products are as large as at D = 128 and its fixed costs (waits, barriers, the dQ add) count half.
  static constexpr int Bc = 128, Br = kBr_;
  static_assert(Br == 64 || (Br == 128 && kD == 64), "a step of 128 rows fits the registers at D = 64 only");
  // kOverlap: S^T and dP^T in two commit groups, so that P^T is computed while dP^T is still on the
  // tensor cores; at Br = 64 dV's wgmma is also issued before dS^T is computed (kEarlyDV). At
  // Br = 128, P^T's fragments would not fit in the registers beside P^T, dP^T, dV and dK, so dV
  // waits until dS^T is done.
  static constexpr bool kOverlap = kOverlap_, kEarlyDV = kOverlap_ && Br == 64;
  // kDqFirst: a step's dQ product is issued before dK's, and the step waits for dQ alone, so that
  // the hand-off of dQ to the writer runs while dK is on the tensor cores (FlashAttention-3's
  // order). Otherwise dK is issued before the groups meet and the hand-off waits for both.
  static constexpr bool kDqFirst = kDqFirst_;
  static constexpr int kStages = 2;
  static constexpr int kThreads = 3 * 128;
  static constexpr int kConsumerWarps = 8;
  // A step's dQ tile (Br, kD) is kChunks 64 x 64 chunks. Two: one per warpgroup, over all Bc keys
  // (D = 128 splits the columns, Br = 128 the rows). One (D = 64 at Br = 64, a step of steps/):
  // each warpgroup adds its own 64 keys' part into it.
  static constexpr int kChunks = Br / 64 * (kD / 64);
  static constexpr int kHandoffs = 2;  // dQ chunks a step the writer takes from the groups (write_dq)
  static constexpr bool kChunkRows = Br == 128;
  static constexpr std::uint32_t kKVBytes = Bc * kD * 2;   // K_j or V_j: (Bc, kD) in 64-column atoms
  static constexpr std::uint32_t kRowBytes = Br * kD * 2;  // Q_i or dO_i: (Br, kD)
  static constexpr std::uint32_t kDsBytes = Bc * Br * 2;   // dS^T: (Bc keys, Br queries), Br / 64 atoms
  static constexpr std::uint32_t kDqBytes = 64 * 64 * 4;   // one warpgroup's partial dQ, fp32
  static constexpr std::uint32_t kVecBytes = 2 * Br * 4;   // LSE and D_i of a query tile
  static constexpr std::uint32_t kK = 0, kV = kKVBytes;
  static constexpr std::uint32_t kQ = 2 * kKVBytes;                  // + stage * kRowBytes
  static constexpr std::uint32_t kDO = kQ + kStages * kRowBytes;     // + stage * kRowBytes
  static constexpr std::uint32_t kDs = kDO + kStages * kRowBytes;    // + (step % 2) * kDsBytes
  static constexpr std::uint32_t kDq = kDs + 2 * kDsBytes;           // + w * kDqBytes
  static constexpr std::uint32_t kVec = kDq + 2 * kDqBytes;          // + (2 w + step % 2) * kVecBytes
  static constexpr int kSmemBytes = kVec + 4 * kVecBytes + 1024;     // + room to align to 1024
  static constexpr std::uint32_t kStageTx = 2 * kRowBytes;           // bytes a stage's barrier counts
  static constexpr int kProducerRegs = 24, kConsumerRegs = 240;
  // Every kFlushSteps steps a consumer adds its dK and dV accumulators into fp32 sums in global
  // memory and restarts them from 0 (flush_key_grads): kept in the accumulators over a walk of
  // 65,537 steps, dK and dV exceed the same-precision bound (README: Pitfalls). 256 steps are 16K
  // or 32K query rows.
  static constexpr int kFlushSteps = 256;
  static constexpr bool kBshd = false;  // [B, H, S, D] tensors; Bshd<Config>: [B, S, H, D]
  static constexpr bool kVarlen = false;  // Varlen<Config>: a packed batch of sequences
  static constexpr bool kSoftcap = false;  // Softcap<Config>: the logit softcap
  static constexpr bool kF32Grads = false;  // F32Grads<Config>: dQ, dK and dV written in fp32
  // Under a causal mask, the grid's blocks in the longest-first order (run_block; the step
  // v6_longest_first) instead of one (batch, KV head) row's key tiles after another.
  static constexpr bool kLongestFirst = kLongestFirst_;
};

// A configuration C on [B, S, H, D] tensors (Problem::layout == bshd): 4-D tensor maps and strided
// dK, dV, dQ, O and dO, in kernels of their own, so that the [B, H, S, D] ones keep their code.
template <class C>
struct Bshd : C {
  static constexpr bool kBshd = true;
};

// C with the logit softcap (Problem::softcap): the consumers cap S^T before P^T (cap_scores) and
// multiply dS^T by the cap's slope (cap_slope), in kernels of their own, so that the others keep
// their code.
template <class C>
struct Softcap : C {
  static constexpr bool kSoftcap = true;
};

// C on a packed batch of sequences ([1, total, H, D] tensors): a block finds its sequence from its
// key tile, and walks, masks and writes with that sequence's lengths and rows (run_block).
template <class C>
struct Varlen : Bshd<C> {
  static constexpr bool kVarlen = true;
  static_assert(!C::Walk::kHalves, "the block-sparse walk lists the tiles of one [B, ...] problem");
};

// C writing dQ, dK and dV as fp32 rather than T, for a caller that sums the parts of several
// backwards and rounds once at the end (chapter 12's ring: rounding each part to bf16 would add
// one rounding a part to the sum). Kernels of their own, on [B, H, S, D] tensors.
template <class C>
struct F32Grads : C {
  static constexpr bool kF32Grads = true;
  static_assert(!C::kBshd && !C::kVarlen, "fp32 gradients on [B, H, S, D] tensors only");
};
// The element type of configuration C's dQ, dK and dV.
template <class C>
using GradT = std::conditional_t<C::kF32Grads, float, typename C::T>;

template <int kStages>
struct Barriers {
  std::uint64_t full_kv, full[kStages], empty[kStages];
};

}  // namespace backward_v3
