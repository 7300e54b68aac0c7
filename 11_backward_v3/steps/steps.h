// The README's step-by-step versions of chapter 11, bf16 and f16, D = 64 and 128: configurations
// of the chapter's kernel (backward_v3.cuh's Config), so each differs from the next in one choice:
//   v1_serial       the five products on wgmma, 64 query rows a step; S^T and dP^T in one commit
//                   group, every product waiting for the one before it
//   v2_overlap      S^T and dP^T in two commit groups: P^T is computed while dP^T runs, and dV's
//                   wgmma (at Br = 64) runs while dS^T is computed
//   v3_tall_d64     128 query rows a step at D = 64 (at D = 128, v2's); the grid row by row
//   v4_deterministic the chapter's kernel with dQ's adds in a fixed key-tile order (its deterministic mode)
//   v6_longest_first v3 with a causal grid in the longest-first order (common/device/tiles.h:
//                   longest_first), rows in sections that share L2
//   v7_dq_first     a step's dQ product issued before dK's, so that dQ goes to the dQ writer while
//                   dK is on the tensor cores: the chapter's kernel (v6's order at D = 96 and 128,
//                   v3's at D = 64)
// Each is a BackwardChapter, so the shared tests (FA_BACKWARD_STEP_TESTS) and benchmark rows run
// it like the chapter.
//   v5_block_sparse  v2's configuration walking only the (query tile, key tile) pairs chapter 07's
//                    block mask keeps: 08's transposed walk (backward_block_sparse below)
#pragma once

#include <cuda_runtime.h>

#include <vector>

#include "08_backward/backward.h"  // DeviceSparseWalk
#include "08_backward/harness/backward.h"

namespace backward_v3::steps {

const std::vector<fa::BackwardStep>& all();

// v5_block_sparse: dQ, dK, dV under chapter 07's block mask, with the O and LSE of 07's forward
// under the same mask; `walk` is the mask transposed for problem p (08_backward/sparse_walk.h:
// 64-row query tiles, 128-key tiles, a 64-key half switched off where block_k = 64 keeps one).
// f16/bf16, head dims 64 and 128, sm_90; no deterministic mode (dQ's adds come in the order the
// blocks run). Rows that see no key get zero gradients, keys no row sees dK = dV = 0.
void backward_block_sparse(const fa::Problem& p, const backward::DeviceSparseWalk& walk, const void* q,
                           const void* k, const void* v, const void* o, const float* lse, const void* dout, void* dq,
                           void* dk, void* dv, cudaStream_t stream);

}  // namespace backward_v3::steps
