// Chapter 07: block-sparse attention -- chapter 06's tensor-core kernel, computing only the
// (query block, key block) pairs a block mask marks active.
#pragma once

#include <cstdint>

#include "07_block_sparse/block_mask.h"
#include "common/harness/chapter.h"
#include "common/cuda/device_memory.h"

namespace block_sparse {

// A BlockMask's CSR arrays on the device (int32), validated and uploaded once, reusable by any
// number of launches of the problem shape it fits.
class DeviceBlockMask {
 public:
  explicit DeviceBlockMask(const BlockMask& mask);  // validates (std::invalid_argument), uploads

  const MaskShape& shape() const { return shape_; }
  std::int64_t nnz() const { return nnz_; }
  const int* row_offsets() const { return row_offsets_.as<int>(); }  // [B * H * Tq + 1] device
  const int* col_indices() const { return col_indices_.as<int>(); }  // [nnz] device (null if 0)

 private:
  MaskShape shape_;
  std::int64_t nnz_;
  fa::cuda::DeviceBuffer row_offsets_, col_indices_;
};

// q: [B, H, Sq, D]   k, v: [B, Hkv, Sk, D]   o: [B, H, Sq, D]   (p.dtype: f16 or bf16, device)
// lse: [B, H, Sq] (float, device, natural log). Head dims 64 and 128; pointers 16-byte aligned;
// compute capability 8.0 or newer. `mask` must fit p (check_fits); p.causal applies on top of it.
// Rows whose blocks are all inactive get O = 0 and LSE = +inf. No scratch memory.
void forward(const fa::Problem& p, const DeviceBlockMask& mask, const void* q, const void* k, const void* v,
             void* o, float* lse, cudaStream_t stream);

// The chapter as the shared runner, tests and benchmark see it: forward with a dense mask
// (128 x 128 blocks, all active), built on first use for each shape and kept.
const fa::Chapter& chapter();

}  // namespace block_sparse
