// The backward chapter API. A backward chapter exposes, in its own namespace,
//
//   void backward(const fa::Problem& p, const void* q, const void* k, const void* v, const void* o,
//                 const float* lse, const void* dout, void* dq, void* dk, void* dv,
//                 cudaStream_t stream);
//
// on device pointers laid out as problem.h describes: q, o, dout, dq [B, H, Sq, D] and
// k, v, dk, dv [B, Hkv, Sk, D] in p.dtype; lse [B, H, Sq] float, as the forward wrote it (natural
// log, +inf for a row that sees no key). dk and dv are summed over the H / Hkv query heads that
// share a KV head. Under Layout::bshd every tensor but lse is [B, S, H, D] (k, v, dk, dv
// [B, Sk, Hkv, D]). A varlen problem (where the chapter's Support takes one) packs its sequences
// into q, o, dout, dq [1, total_q, H, D], k, v, dk, dv [1, total_k, Hkv, D] and lse [1, H, total_q],
// sequence b's rows from p.cu_seqlens_q[b] (queries) and p.cu_seqlens_k[b] (keys); a sequence
// without queries gets dk = dv = 0 on its keys, one without keys dq = 0 on its queries. Invalid or
// unsupported input throws std::invalid_argument saying what is wrong, before any device work. The
// executable, the tests and the benchmark all go through it.
#pragma once

#include <cuda_runtime_api.h>

#include <string>
#include <vector>

#include "common/harness/chapter.h"

namespace fa {

using BackwardFn = void (*)(const Problem& p, const void* q, const void* k, const void* v, const void* o,
                            const float* lse, const void* dout, void* dq, void* dk, void* dv,
                            cudaStream_t stream);

// check_forward_args (chapter.h) on the forward's tensors, then the backward's own: throws
// std::invalid_argument for an invalid problem, an unsupported dtype, head_dim or feature (a
// varlen problem where s.varlen is false, as the forward's), or a null pointer. Messages start
// with the chapter's name.
void check_backward_args(const Support& s, const Problem& p, const void* q, const void* k,
                         const void* v, const void* o, const void* lse, const void* dout,
                         const void* dq, const void* dk, const void* dv);

// Everything the runner, the tests and the benchmark need to know of a backward chapter.
struct BackwardChapter {
  Support support;                  // what the backward supports
  ForwardFn forward;                // the forward that produces O and LSE for it
  BackwardFn backward;
  std::vector<int> test_head_dims;  // the head dims the shared tests sweep
  Problem defaults;                 // the executable's default problem
  // The same backward with a dQ that is bitwise identical from run to run (the runner's
  // --deterministic), or null where the chapter has no such mode.
  BackwardFn deterministic = nullptr;
  // Where it returns true for a problem, the shared tests take O and LSE from `forward` on the
  // GPU instead of from the CPU (backward_harness.h, upload_forward_outputs): for a backward that
  // recomputes its scores in an arithmetic other than the CPU's fp32 chain (08's f32 at head dims
  // up to 128, 3xTF32), whose P = exp(S - LSE) is right only with the LSE of its own scores (08
  // README, Pitfalls), as a user runs it.
  bool (*tests_own_forward)(const Problem& p) = nullptr;
};

// A step of a backward chapter's README table (11_backward_v3/steps/): a configuration of the
// chapter's kernel, run by the same tests (FA_BACKWARD_STEP_TESTS) and benchmarks as the chapter.
struct BackwardStep {
  std::string name;  // "v1_serial"
  std::string what;  // one line for the README table
  BackwardChapter chapter;
};

}  // namespace fa
