// Which of the chapter's kernels runs a problem, and its launch.
// D = 96, 128, 192 and 256: the warp-specialized, ping-pong kernel of flash_v3.cuh (ChapterConfig
// says which tiles at which head dim; D = 96 keeps the D = 128 tiles in shared memory, its columns
// 96-127 zeros, and multiplies 96 columns only). At D = 96 and 128 it runs with the
// intra-warpgroup overlap (step v5) with or without a mask: under a causal mask v5 measures
// 1.00-1.11x v4 at D = 128 and 1.00-1.08x at D = 96 on an H200 (1k-16k; README, "Which kernel for
// which head dim"). At D = 192 and 256 it runs with FlashAttention-3's wider key tiles and without
// the overlap, the softcap at D = 192 with 64-wide ones (config.cuh). D = 64: the same kernel with
// three consumer warpgroups (step v7, ThreeConsumerConfig: 192 x 128 tiles), without a mask and
// under a causal one from 4k queries; step v1's one warpgroup a block (steps/one_warpgroup.cuh)
// under a shorter causal mask, a sliding window, a packed batch of sequences (varlen) and the
// logit softcap. v1's blocks are small (41 KiB of shared memory, 114 registers a thread), so four
// share an SM and the warp schedulers interleave their GEMMs and softmaxes without any hand-made
// schedule; its 64-row tiles waste little of a causal diagonal. A softcap runs kernels of its own
// (Softcap<C>, v1's kSoftcap), so that the others keep their code.
// Its instantiations are compiled in two files, forward_bf16.cu and forward_f16.cu, one per dtype,
// so that a parallel build compiles the two halves of the chapter's kernels at once (they are the
// longest compile of the repository).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "09_flash_v3/launch.cuh"  // launch, and through it the kernel (flash_v3.cuh)
#include "09_flash_v3/steps/one_warpgroup.cuh"

namespace flash_v3 {

// kBshd: [B, S, H, D] tensors, read and written through 4-D tensor maps (launch.cuh: make_maps)
// by kernels of their own, so that the [B, H, S, D] kernels keep their 3-D maps' code. kVarlen:
// a packed batch of sequences, [1, total, H, D], by kernels of its own as well; a softcap too
// (not with a packed batch: flash_v3.cu refuses it). forward_softcap: the kernels with the softcap.
template <class T, bool kBshd>
void forward_softcap(const fa::Problem& p, const void* q, const void* k, const void* v, const Params& prm,
                     cudaStream_t stream) {
  switch (p.head_dim) {
    case 64: steps::launch_one_warpgroup<steps::V1Config<T, 64>, kBshd, false, false, true>(p, q, k, v, prm, stream); break;
    case 192: launch<Softcap<NarrowConfig<T, 192>>, kBshd>(p, q, k, v, prm, stream); break;
    case 256: launch<Softcap<ChapterConfig<T, 256>>, kBshd>(p, q, k, v, prm, stream); break;
    default: launch<Softcap<ChapterConfig<T, 128>>, kBshd>(p, q, k, v, prm, stream);  // 96: zero-filled to 128
  }
}

// D = 64 under a causal mask: from this many queries the three consumers (v7) are the faster; below
// it v1, whose 64-row tiles waste less of the diagonal (H200, bf16 and f16: v7 measured 0.83-0.94x
// of v1 at 1k-2k tokens, 1.05-1.12x at 4k-8k; README, "Which kernel for which head dim").
constexpr int kThreeConsumersCausalFrom = 4096;

// forward_layout: the kernel for the head dim and the mask, in one layout.
template <class T, bool kBshd, bool kVarlen>
void forward_layout(const fa::Problem& p, const void* q, const void* k, const void* v, const Params& prm,
                    cudaStream_t stream) {
  if (!kVarlen && p.has_softcap()) return forward_softcap<T, kBshd>(p, q, k, v, prm, stream);
  switch (p.head_dim) {
    case 64:  // three consumers (v7) where they are the faster, else v1 (README: Which kernel for which head dim)
      if (!kVarlen && p.has_window())
        steps::launch_one_warpgroup<steps::V1Config<T, 64>, kBshd, false, true>(p, q, k, v, prm, stream);
      else if (!kVarlen && (!p.causal || p.seqlen_q >= kThreeConsumersCausalFrom))
        launch<ThreeConsumerConfig<T, 64>, kBshd>(p, q, k, v, prm, stream);
      else steps::launch_one_warpgroup<steps::V1Config<T, 64>, kBshd, kVarlen>(p, q, k, v, prm, stream);
      break;
    case 192: launch<ChapterConfig<T, 192>, kBshd, kVarlen>(p, q, k, v, prm, stream); break;
    case 256: launch<ChapterConfig<T, 256>, kBshd, kVarlen>(p, q, k, v, prm, stream); break;
    case 96: launch<ChapterConfig<T, 96>, kBshd, kVarlen>(p, q, k, v, prm, stream); break;
    default:  // 128
      launch<ChapterConfig<T, 128>, kBshd, kVarlen>(p, q, k, v, prm, stream);
  }
}

// One launch of the kernel for p's head dim, layout, mask and softcap, on T = p's dtype (flash_v3.cu
// has checked p and made prm).
template <class T>
void forward_for(const fa::Problem& p, const void* q, const void* k, const void* v, const Params& prm,
                 cudaStream_t stream) {
  if (p.is_varlen()) forward_layout<T, true, true>(p, q, k, v, prm, stream);  // validate(): varlen is bshd
  else if (p.layout == fa::Layout::bshd) forward_layout<T, true, false>(p, q, k, v, prm, stream);
  else forward_layout<T, false, false>(p, q, k, v, prm, stream);
}

// forward_bf16.cu and forward_f16.cu: forward_for for each dtype.
void forward_bf16(const fa::Problem& p, const void* q, const void* k, const void* v, const Params& prm,
                  cudaStream_t stream);
void forward_f16(const fa::Problem& p, const void* q, const void* k, const void* v, const Params& prm,
                 cudaStream_t stream);

}  // namespace flash_v3
