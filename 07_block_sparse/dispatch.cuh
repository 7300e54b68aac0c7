// Which of block_sparse.cuh's configurations runs a problem: 06's tile for the head dim, the key
// block's size, the layout. Its instantiations are compiled in two files, dispatch_bf16.cu and
// dispatch_f16.cu, one per dtype, so that a parallel build compiles the two halves of the
// chapter's kernels at once (they are the longest compiles of the chapter).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "07_block_sparse/block_sparse.cuh"

namespace block_sparse {

// The tiles per key block: 06's configuration for the head dim's tile width (tensor_core.cu's
// choice: 32, 64, 96, 128, 192, 256), with Bc = 32 or 64 dividing both block sizes. At D = 64
// 06 takes Bc = 128; a 64-key block then needs Bc = 64, so D = 64 keeps the 128 x 64 tiles with
// Q_i in registers (06's step v4).
// bshd: [B, S, H, D] tensors (06's BlockInputs reads them).
template <class T, int kD, bool kPadded>
void launch_for(int block_k, bool bshd, const Params& prm, cudaStream_t stream) {
  using C = ChapterConfig<T, kD, kPadded>;
  if constexpr (C::Bc == 128) {
    using C64 = Config<T, kD, 64, 2, 2, true, /*kQInRegs=*/true, /*kLazyRescale=*/false, kPadded>;
    if (block_k == 64) return launch<C64, 1>(prm, bshd, stream);
    return launch<C, 1>(prm, bshd, stream);
  } else {
    static_assert(64 % C::Bc == 0, "a key block is whole kernel tiles");
    if (block_k == 64) return launch<C, 64 / C::Bc>(prm, bshd, stream);
    return launch<C, 128 / C::Bc>(prm, bshd, stream);
  }
}

template <class T>
void dispatch(const fa::Problem& p, int block_k, const Params& prm, cudaStream_t stream) {
  with_tile(p.head_dim, [&](auto kd, auto padded) {  // 06's tile for the head dim
    launch_for<T, decltype(kd)::value, decltype(padded)::value>(block_k, p.layout == fa::Layout::bshd, prm, stream);
  });
}

// The entry points of the two files (block_k: 64 or 128, checked by the caller).
void dispatch_bf16(const fa::Problem& p, int block_k, const Params& prm, cudaStream_t stream);
void dispatch_f16(const fa::Problem& p, int block_k, const Params& prm, cudaStream_t stream);

}  // namespace block_sparse
