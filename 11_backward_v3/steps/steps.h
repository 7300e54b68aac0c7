// The README's step-by-step versions of chapter 11, bf16 and f16, D = 64 and 128: configurations
// of the chapter's kernel (backward_v3.cuh's Config), so each differs from the next in one choice:
//   v1_serial       the five products on wgmma, 64 query rows a step; S^T and dP^T in one commit
//                   group, every product waiting for the one before it
//   v2_overlap      S^T and dP^T in two commit groups: P^T is computed while dP^T runs, and dV's
//                   wgmma (at Br = 64) runs while dS^T is computed
//   v3_tall_d64     128 query rows a step at D = 64: the chapter's kernel (at D = 128, v2's)
//   v4_deterministic the chapter's kernel with dQ's adds in a fixed key-tile order (its deterministic mode)
// Each is a BackwardChapter, so the shared tests (FA_BACKWARD_STEP_TESTS) and benchmark rows run
// it like the chapter.
#pragma once

#include <vector>

#include "08_backward/harness/backward.h"

namespace backward_v3::steps {

const std::vector<fa::BackwardStep>& all();

}  // namespace backward_v3::steps
