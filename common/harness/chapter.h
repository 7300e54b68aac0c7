// The chapter API. Every chapter exposes, in its own namespace,
//
//   void forward(const fa::Problem& p, const void* q, const void* k, const void* v,
//                void* o, float* lse, cudaStream_t stream);
//
// on device pointers laid out as problem.h describes (q, k, v, o in p.dtype; lse float).
// Invalid or unsupported input throws std::invalid_argument saying what is wrong, before any
// device work. The executable, the tests and the benchmark all go through this one function.
#pragma once

#include <cuda_runtime_api.h>

#include <string>
#include <vector>

#include "common/host/problem.h"
#include "common/host/support.h"  // struct Support

namespace fa {

using ForwardFn = void (*)(const Problem& p, const void* q, const void* k, const void* v, void* o,
                           float* lse, cudaStream_t stream);

// Why this machine cannot run a chapter with support `s` ("" when it can): no usable GPU, or one
// older than s.min_compute_capability. Its GPU tests skip and its benchmark times nothing, saying this.
std::string unavailable_reason(const Support& s);

// Throws std::invalid_argument for an invalid problem, a dtype, head_dim or feature (layout,
// window, softcap, input strides, varlen) the chapter does not support, or a null pointer. Messages start
// with the chapter's name.
void check_forward_args(const Support& s, const Problem& p, const void* q, const void* k,
                        const void* v, const void* o, const void* lse);

// Everything the runner, the tests and the benchmarks need to know of a chapter.
struct Chapter {
  Support support;
  ForwardFn forward;
  std::vector<int> test_head_dims;  // the head dims the shared tests sweep
  Problem defaults;                 // the executable's default problem
};

// A step-by-step version of a chapter's kernel (05's ablations, 06's v1..v4): the same kernel with
// switches, wrapped as a Chapter of its own so the shared tests and benchmarks run it unchanged.
struct Step {
  std::string name;  // "v2_swizzle"
  std::string what;  // one line for the README table
  Chapter chapter;
};

// Throws std::invalid_argument naming the known steps.
const Step& find_step(const std::vector<Step>& steps, const std::string& name);

}  // namespace fa
