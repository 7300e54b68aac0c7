// Chapter 08, part 2, the entry of the tensor-core backward: the checks, then the dtype's host
// side (backward_tc_host.cuh: tiles, workspace, launches; its kernels are backward_tc.cuh).

#include <initializer_list>
#include <stdexcept>
#include <string>

#include "08_backward/backward.h"
#include "08_backward/backward_tc_host.cuh"

namespace backward {

void tensor_core_backward(const fa::Problem& p, const void* q, const void* k, const void* v, const void* o,
                          const float* lse, const void* dout, void* dq, void* dk, void* dv,
                          const BackwardOptions& options, cudaStream_t stream, const DeviceSparseWalk* walk) {
  // Checks that need no GPU come first, so the refusal tests run anywhere.
  if (!fa::supports_head_dim(tensor_core_support(), p.head_dim))
    throw std::invalid_argument("08_backward: the tensor-core backward (f16/bf16) supports head_dim " +
                                fa::head_dims_words(tensor_core_support()) + ", not " + std::to_string(p.head_dim));
  if (walk && p.layout == fa::Layout::bshd)
    throw std::invalid_argument("08_backward: the block-sparse backward takes layout bhsd ([B, H, S, D]), not bshd");
  if (walk && p.head_dim > 128)
    throw std::invalid_argument("08_backward: the block-sparse backward supports head_dim up to 128, not " +
                                std::to_string(p.head_dim) + " (its walk lists 128-key tiles)");
  for (const void* ptr : std::initializer_list<const void*>{q, k, v, o, dout, dq, dk, dv})
    if (!fa::cuda::aligned16(ptr)) throw std::invalid_argument("08_backward: every tensor must be 16-byte aligned (f16/bf16)");
  fa::cuda::require_compute_capability(80, "08_backward", "its f16/bf16 path uses mma.sync, ldmatrix and cp.async");
  const bool det = options.deterministic;
  if (p.dtype == fa::Dtype::bf16) tc_host::run_bf16(p, q, k, v, o, lse, dout, dq, dk, dv, det, walk, stream);
  else tc_host::run_f16(p, q, k, v, o, lse, dout, dq, dk, dv, det, walk, stream);
}

}  // namespace backward
