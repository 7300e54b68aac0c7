// 07's kernels for f16 (dispatch.cuh says why they have a file per dtype).
#include "07_block_sparse/dispatch.cuh"

namespace block_sparse {

void dispatch_f16(const fa::Problem& p, int block_k, const Params& prm, cudaStream_t stream) {
  dispatch<__half>(p, block_k, prm, stream);
}

}  // namespace block_sparse
