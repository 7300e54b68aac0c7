// Chapter 09's step v6_fp8: FlashAttention-3's FP8 forward on the chapter's kernel. Q, K and V
// come in E4M3 (one byte an element, one scale per tensor); S = Q K^T and O = P V run on FP8
// wgmma (twice bf16's rate), P is rounded to E4M3 for P V, and O leaves in f16.
#pragma once

#include <cuda_runtime_api.h>

#include <string>

#include "common/harness/chapter.h"
#include "common/host/problem.h"

namespace flash_v3::steps {

// The tensors' scales: byte x of Q stands for q x e4m3(x) (common/host/fp8.h: quantize_e4m3 gives
// scale = max |Q| / 448), likewise K and V. Finite and > 0.
struct Fp8Scales {
  float q = 1.0f, k = 1.0f, v = 1.0f;
};

// What forward_fp8 takes: [B, H, Sq, D] queries, [B, Hkv, Sk, D] keys and values (Layout::bhsd),
// D = 128, causal or not, GQA; p.dtype is O's, f16. No window, softcap, packed batch or strides.
const fa::Support& fp8_support();

// q, k, v: E4M3 bytes on the device; o: [B, H, Sq, D] f16; lse: [B, H, Sq] float, natural log.
// Throws std::invalid_argument naming what it refuses (fp8_support, the scales, a GPU other than
// Hopper). V is transposed into the workspace first (the FP8 wgmma reads V^T), within the call.
void forward_fp8(const fa::Problem& p, const void* q, const void* k, const void* v, Fp8Scales scales, void* o,
                 float* lse, cudaStream_t stream);

}  // namespace flash_v3::steps
