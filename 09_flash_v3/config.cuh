// Chapter 09's configurations: WsConfig (tile sizes, ring depth, shared-memory layout, the steps'
// switches), Softcap<C> and the kernels' extra parameters (SoftcapOf, Fp8Of), and ChapterConfig,
// the configuration the chapter launches at each head dim. The kernel is flash_v3.cuh's.
#pragma once

#include <cstdint>
#include <type_traits>

#include "common/device/math.cuh"       // SoftcapConsts, NoSoftcap
#include "common/device/tiles.h"       // ceil_div
#include "common/device/wgmma_layout.h"  // kAtomCols
#include "common/fa2_tiles/block.cuh"  // Params, Config

namespace flash_v3 {

using fa2::Params;

// kGroups + 1 warpgroups: the producer (0) and kGroups consumers (1 ..) of 64 rows of Q_i each
// (two; three in step v7, ThreeConsumerConfig below).
template <class T_, int kD_, int kStages_, bool kPingPong_ = true, bool kPersistent_ = true, int kBc = 128,
          bool kOverlap_ = false, int kGroups_ = 2>
struct WsConfig {
  using T = T_;
  static constexpr int kD = kD_;
  static constexpr int kGroups = kGroups_;  // consumer warpgroups, which take their turns in a ring
  static constexpr int Br = 64 * kGroups, Bc = kBc;  // Q_i: kGroups consumers x 64 rows; K_j, V_j: Bc keys
  static constexpr int kStages = kStages_;  // K/V ring depth
  static constexpr bool kPingPong = kPingPong_;
  static constexpr bool kPersistent = kPersistent_;  // one block per SM walks the tiles (else one block a unit)
  // S_s and P_{s-1} V_{s-1} as two wgmma groups, the softmax of S_s placed before the wait for the
  // group's own P V (FlashAttention-3's intra-warpgroup overlap; consume says how, steps.md what
  // ptxas keeps of it).
  static constexpr bool kOverlap = kOverlap_;
  // The softmax tries each tile against the running max first (kept_max.cuh). The
  // warp votes on the whole tile with the overlap, once a row without it: the faster of the two on
  // an H200 for each (steps.md).
  static constexpr bool kRowVote = !kOverlap_;
  static constexpr int kThreads = (kGroups + 1) * 128;
  static constexpr int kConsumerWarps = 4 * kGroups;  // the "empty" barriers' arrival count: one per consumer warp
  // A consumer warp's fragments (16 rows x Bc keys, 16 rows x kD columns): 06's Config with one
  // 16-row tile, whose layout the wgmma accumulators share warp by warp.
  using Tile = fa2::Config<T, kD, Bc, /*kMTiles=*/1>;
  // Q_i in two slots when persistent: the next tile's Q_i lands while this tile's is still read.
  static constexpr int kQSlots = kPersistent ? 2 : 1;
  // A tile's row in shared memory: whole 64-column atoms (D = 96: two, the second half used; the
  // copy engine fills columns 96-127 with zeros, which no wgmma reads).
  static constexpr int kAtoms = fa::cuda::ceil_div(kD, fa::cuda::kAtomCols);
  static constexpr int kSmemCols = kAtoms * fa::cuda::kAtomCols;
  static constexpr std::uint32_t kQBytes = Br * kSmemCols * 2;     // Q_i: (Br, kD), 64-column atoms
  static constexpr std::uint32_t kTileBytes = Bc * kSmemCols * 2;  // K_j or V_j: (Bc, kD)
  static constexpr std::uint32_t kQ = 0;                                          // + slot * kQBytes
  static constexpr std::uint32_t kK = kQSlots * kQBytes;                          // + stage * kTileBytes
  static constexpr std::uint32_t kV = kQSlots * kQBytes + kStages * kTileBytes;  // + stage * kTileBytes
  static constexpr int kSmemBytes = kQSlots * kQBytes + 2 * kStages * kTileBytes + 1024;  // + room to align to 1024
  // The registers per thread after setmaxnreg: 128 x 24 + 256 x 240 = 64,512 of the SM's 65,536
  // (three consumers: 128 x 24 + 384 x 160, the same).
  static constexpr int kProducerRegs = 24, kConsumerRegs = kGroups == 2 ? 240 : 160;
  static_assert(kGroups == 2 || kGroups == 3);
  static constexpr bool kSoftcap = false;  // Softcap<WsConfig>: the scores go through the logit softcap
  static constexpr bool kFp8 = false;      // steps/fp8.cu's Fp8<WsConfig>: Q, K, V in E4M3 (the step v6_fp8)
  static constexpr std::uint32_t kQTxBytes = kQBytes;  // the bytes a Q_i copy lands
};

// A configuration C with the logit softcap (Problem::softcap): the consumers cap each tile's
// scores before the mask (fa2::cap_scores), in kernels of their own, so that the others keep
// their code. Its constants come as a kernel parameter of their own (SoftcapOf<C>).
template <class C>
struct Softcap : C {
  static constexpr bool kSoftcap = true;
};
template <class C>
using SoftcapOf = std::conditional_t<C::kSoftcap, fa::cuda::SoftcapConsts, fa::cuda::NoSoftcap>;

// The FP8 kernels (steps/fp8.cu: Fp8<C>, C::kFp8) take V's scale as a parameter of their own (Q's and
// K's are folded into Params::scale_log2); the others an empty one.
struct Fp8Args {
  float v_scale;
};
struct NoFp8 {};
template <class C>
using Fp8Of = std::conditional_t<C::kFp8, Fp8Args, NoFp8>;

// The chapter launches this kernel at D = 128 with two K/V stages (two Q_i slots and the ring: 193 KiB
// of shared memory), and at D = 96 with the same tiles in shared memory but 96 columns of arithmetic:
// S takes 6 k-steps of Q_i K_s^T instead of 8, and O_i += P V is one wgmma of N = 96 per 16 keys
// (48 accumulators a thread), so the zero columns 96-127 cost no tensor-core time.
// At D = 64 it launches ThreeConsumerConfig (below) or step v1 instead (dispatch.cuh says when);
// the steps run this one there with four stages. D = 192 and 256: O_i takes D / 2 registers a
// thread, so S_ij and P_ij must shrink beside it, and the K/V stages grow with D. The chapter takes FlashAttention-3's key tiles there,
// Bc = 112 at D = 192 and Bc = 80 at D = 256 (wgmma N = 112 and 80), with one block a tile (one Q_i
// slot: 216 and 225 KiB with two stages) and without the intra-warpgroup overlap, whose second P
// does not fit beside them (ptxas -v, CUDA 13.0: 68 and 164 bytes of spill stores a thread with it,
// none without). Against the Bc = 64 tiles with the overlap they measured 1.04-1.13x at D = 192 and
// 0.99-1.10x at D = 256 (H200, bf16; steps.md).
template <class T, int kD, bool kOverlap = true>
using ChapterConfig = WsConfig<T, kD, /*kStages=*/kD == 64 ? 4 : 2, /*kPingPong=*/true, /*kPersistent=*/kD <= 128,
                               /*kBc=*/kD <= 128 ? 128 : kD == 192 ? 112 : 80, /*kOverlap=*/kOverlap && kD <= 128>;

// Three consumer warpgroups (step v7, FlashAttention-3's tile at D = 64): Q_i of 192 rows, 64 a
// consumer, which take their turns on the tensor cores in a ring, and 128-key tiles, without the
// intra-warpgroup overlap. The block has 512 threads, so setmaxnreg leaves a consumer thread 160
// registers: at D = 64, S_ij (64), P_ij (32) and O_i (32) fit there without a spill (ptxas -v,
// CUDA 13.0); the overlap's second P does too, but measured 0.76-0.88x of this (H200; steps.md).
// A tile of 192 rows reads each K_j and V_j for 192 queries instead of v1's 64, and three
// consumers a block give the warp schedulers a third softmax to interleave. At D = 128 (the step
// only) the tiles shrink to 64 keys, so that O_i's 64 registers fit beside them.
template <class T, int kD>
using ThreeConsumerConfig = WsConfig<T, kD, /*kStages=*/kD == 64 ? 4 : 2, /*kPingPong=*/true, /*kPersistent=*/true,
                                     /*kBc=*/kD == 64 ? 128 : 64, /*kOverlap=*/false, /*kGroups=*/3>;

// The logit softcap's kernel at D = 192 (dispatch.cuh: forward_softcap): key tiles of 64 with the
// overlap, persistent (two Q_i slots, 193 KiB). The softcap's tanh and its constants take registers
// that the 112-wide tile does not leave: ptxas -v (CUDA 13.0) spills 340 bytes a thread there,
// 140 with these tiles. At D = 256 the softcap takes the chapter's tiles, which spill less (204
// bytes against 256 with 64-wide tiles).
template <class T, int kD>
using NarrowConfig = WsConfig<T, kD, /*kStages=*/2, /*kPingPong=*/true, /*kPersistent=*/true, /*kBc=*/64,
                              /*kOverlap=*/true>;

}  // namespace flash_v3
