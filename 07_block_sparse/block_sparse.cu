// Chapter 07's forward: the checks, then one launch of the head dim's configuration with the
// mask's CSR arrays. The kernel is block_sparse.cuh; dispatch.cuh picks its configuration.
#include "07_block_sparse/block_sparse.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>

#include "07_block_sparse/dispatch.cuh"

namespace block_sparse {
namespace {

constexpr const char* kChapter = "07_block_sparse";

std::vector<std::uint8_t> bytes_of(const std::vector<int>& values) {
  std::vector<std::uint8_t> bytes(values.size() * sizeof(int));
  if (!values.empty()) std::memcpy(bytes.data(), values.data(), bytes.size());
  return bytes;
}

void dense_forward(const fa::Problem& p, const void* q, const void* k, const void* v, void* o, float* lse,
                   cudaStream_t stream) {
  fa::check_forward_args(chapter().support, p, q, k, v, o, lse);
  // One all-active mask per shape, kept for the life of the process (never freed: a static
  // DeviceBuffer would be destroyed after the CUDA runtime).
  static std::mutex mutex;
  static auto& cache = *new std::map<std::tuple<int, int, int, int>, std::unique_ptr<DeviceBlockMask>>;
  std::unique_lock<std::mutex> lock(mutex);
  auto& mask = cache[{p.batch, p.heads, p.seqlen_q, p.seqlen_k}];
  if (!mask) mask = std::make_unique<DeviceBlockMask>(make_mask(p, 128, {HeadPattern{}}));
  lock.unlock();
  forward(p, *mask, q, k, v, o, lse, stream);
}

}  // namespace

DeviceBlockMask::DeviceBlockMask(const BlockMask& mask) : shape_(mask.shape), nnz_(mask.nnz()) {
  mask.validate();
  row_offsets_ = fa::cuda::DeviceBuffer(mask.row_offsets.size() * sizeof(int));
  row_offsets_.upload(bytes_of(mask.row_offsets));
  col_indices_ = fa::cuda::DeviceBuffer(mask.col_indices.size() * sizeof(int));
  if (nnz_ > 0) col_indices_.upload(bytes_of(mask.col_indices));
}

const fa::Chapter& chapter() {
  static const fa::Chapter c{
      .support = {.chapter = kChapter,
                  .dtypes = {fa::Dtype::bf16, fa::Dtype::f16},
                  .head_dims = {},
                  .max_head_dim = 256,
                  .head_dim_multiple = 8,
                  .bshd_dtypes = {fa::Dtype::bf16, fa::Dtype::f16}},  // [B, S, H, D] too, as 06
      .forward = dense_forward,
      .test_head_dims = {8, 40, 64, 72, 80, 96, 112, 128, 160, 192, 256},
      .defaults = fa::default_problem(fa::Dtype::bf16)};
  return c;
}

void forward(const fa::Problem& p, const DeviceBlockMask& mask, const void* q, const void* k, const void* v,
             void* o, float* lse, cudaStream_t stream) {
  fa::check_forward_args(chapter().support, p, q, k, v, o, lse);
  check_fits(mask.shape(), p, kChapter);
  const Params prm = make_params(p, q, k, v, o, lse, mask.row_offsets(), mask.col_indices(), kChapter);
  const int block_k = mask.shape().block_k;  // 64 or 128: check_fits refused the rest
  if (p.dtype == fa::Dtype::bf16) dispatch_bf16(p, block_k, prm, stream);
  else dispatch_f16(p, block_k, prm, stream);
}

}  // namespace block_sparse
