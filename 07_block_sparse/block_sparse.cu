// Chapter 07's forward: the checks, then one launch of the head dim's configuration with the
// mask's CSR arrays. The kernel is block_sparse.cuh.
#include "07_block_sparse/block_sparse.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>

#include "07_block_sparse/block_sparse.cuh"

namespace block_sparse {
namespace {

constexpr const char* kChapter = "07_block_sparse";

std::vector<std::uint8_t> bytes_of(const std::vector<int>& values) {
  std::vector<std::uint8_t> bytes(values.size() * sizeof(int));
  if (!values.empty()) std::memcpy(bytes.data(), values.data(), bytes.size());
  return bytes;
}

template <class T>
void dispatch(const fa::Problem& p, const Params& prm, cudaStream_t stream) {
  const int bh = p.batch * p.heads;
  switch (p.head_dim) {
    case 64: return launch<ChapterConfig<T, 64>>(prm, bh, stream);
    case 128: return launch<ChapterConfig<T, 128>>(prm, bh, stream);
  }
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
  static const fa::Chapter c{{kChapter, {fa::Dtype::bf16, fa::Dtype::f16}, {64, 128}, 128},
                             dense_forward,
                             {64, 128},
                             fa::default_problem(fa::Dtype::bf16)};
  return c;
}

void forward(const fa::Problem& p, const DeviceBlockMask& mask, const void* q, const void* k, const void* v,
             void* o, float* lse, cudaStream_t stream) {
  fa::check_forward_args(chapter().support, p, q, k, v, o, lse);
  check_fits(mask.shape(), p, kChapter);
  static_assert(ChapterConfig<__half, 64>::Br == kBlockQ && ChapterConfig<__half, 128>::Br == kBlockQ,
                "a query block of the mask is one block of the grid");
  constexpr int Bc = ChapterConfig<__half, 128>::Bc;
  static_assert(ChapterConfig<__half, 64>::Bc == Bc && 64 % Bc == 0, "a key block is whole kernel tiles");
  const Params prm = make_params(p, q, k, v, o, lse, mask.row_offsets(), mask.col_indices(),
                                 mask.shape().block_k / Bc, kChapter);
  if (p.dtype == fa::Dtype::bf16) dispatch<__nv_bfloat16>(p, prm, stream);
  else dispatch<__half>(p, prm, stream);
}

}  // namespace block_sparse
