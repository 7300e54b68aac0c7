// 07's kernels for bf16 (dispatch.cuh says why they have a file per dtype).
#include "07_block_sparse/dispatch.cuh"

namespace block_sparse {

void dispatch_bf16(const fa::Problem& p, int block_k, const Params& prm, cudaStream_t stream) {
  dispatch<__nv_bfloat16>(p, block_k, prm, stream);
}

}  // namespace block_sparse
