// Chapter 11: FlashAttention-3's backward on Hopper -- 08's algorithm with its five products on
// wgmma, its tiles loaded by TMA, and a producer warpgroup feeding two consumer warpgroups (sm_90a).
#pragma once

#include "08_backward/harness/backward.h"
#include "common/harness/chapter.h"

namespace backward_v3 {

// q, o, dout, dq: [B, H, Sq, D]   k, v, dk, dv: [B, Hkv, Sk, D]   (p.dtype: f16 or bf16, device)
// lse: [B, H, Sq] (float, device) as the forward wrote it: natural log, +inf for a row that sees no
// key. dk and dv are summed over the H / Hkv query heads sharing a KV head. Head dims 64, 96 (the
// D = 128 kernel on columns TMA fills with zeros) and 128;
// pointers 16-byte aligned; a GPU of compute capability 9.0. Scratch (fa::cuda::workspace): the
// padded LSE and D_i (2 B H Tr Br floats, Tr = ceil(Sq / Br); Br = 64 at D = 128, 128 at D = 64)
// and the fp32 dQ accumulator (B H Tr Br D floats; D = 128 at D = 96); where a block walks more
// than 256 steps, fp32 dK and dV sums (2 x 128 D floats a key tile). dK and dV are the same bits
// every run; dQ's fp32 sums arrive in the order the blocks run (the copy engine's atomic adds), so
// its last bits may differ from run to run.
void backward(const fa::Problem& p, const void* q, const void* k, const void* v, const void* o, const float* lse,
              const void* dout, void* dq, void* dk, void* dv, cudaStream_t stream);

// The same with dQ identical bit for bit from run to run: key tile j adds its part of a dQ tile
// after key tile j - 1 (a counter per 64 x 64 chunk, 2 B H Tr more ints of scratch), which costs
// time where the key tiles of one query tile would otherwise add at once (the README's table).
void backward_deterministic(const fa::Problem& p, const void* q, const void* k, const void* v, const void* o,
                            const float* lse, const void* dout, void* dq, void* dk, void* dv, cudaStream_t stream);

// The same with dQ, dK and dV stored as fp32, unrounded (dq, dk, dv: float, the tensors' shapes):
// for a caller that sums the parts of several backwards and rounds once at the end (chapter 12's
// ring attention). [B, H, S, D] tensors, head dims 64, 96 and 128; no softcap, no packed batch.
void backward_f32(const fa::Problem& p, const void* q, const void* k, const void* v, const void* o, const float* lse,
                  const void* dout, float* dq, float* dk, float* dv, cudaStream_t stream);

// The chapter: its forward (O and LSE) is chapter 09's.
const fa::BackwardChapter& chapter();

}  // namespace backward_v3
