// A tile of rows from global to shared memory with cp.async into the XOR-swizzled layout
// (swizzle.h): copy_tile, taught in chapter 06 and called by 06, 07, 08 and 10. Its tile type C
// names the element type T, the tile width kD (head dims), the shared row length kCols, kSwizzle
// and the block's kThreads (06's Config, 08's TcConfig).
#pragma once

#include <cstdint>
#include <type_traits>

#include "common/device/cp_async.cuh"
#include "common/device/swizzle.h"

namespace fa::cuda {

// The distance between rows that copy_tile (and 08's write_key_grads) use: D itself where the
// pitch is an int ([B, H, S, D]: the constant D of an exact tile stays one; the int is not read),
// else the pitch ([B, S, H, D]: H D, a std::int64_t).
template <class Pitch>
__device__ __forceinline__ auto pitch_or_d(Pitch pitch, int D) {
  if constexpr (std::is_same_v<Pitch, int>) return D;
  else return pitch;
}

// Stages rows [0, rows) of a row-major (rows, D) global matrix into a (kRows, kCols) smem tile
// with 16-byte cp.async; rows past `rows` are zero-filled (src-size 0: nothing is read), so a
// partial tile needs no other care. A head dim below the tile's kD (D = 72 in a kD = 96 tile; D a
// multiple of 8, so a 16-byte chunk is all in or all out) zero-fills columns D .. kD - 1, which the
// mmas read and which then add 0; columns past kD (kD = 96 in a 128-wide row) are never read and
// not copied. kThreads: how many threads (0 .. kThreads - 1) share the copy. Rows lie D elements
// apart, or `pitch` apart where one is given ([B, S, H, D] tensors: H D).
template <class C, int kRows, int kThreads = C::kThreads, class Pitch = int>
__device__ __forceinline__ void copy_tile(std::uint32_t tile, const typename C::T* src, int rows, int D = C::kD,
                                          Pitch pitch = 0) {
  const auto row = pitch_or_d(pitch, D);
  constexpr int kRowChunks = C::kCols / kChunkElems;
  constexpr int kRowsPerIt = kThreads / kRowChunks;  // rows one pass of the threads covers
  static_assert(kRows % kRowsPerIt == 0);
  const int r_t = copy_row(threadIdx.x, kRowChunks), c = copy_chunk(threadIdx.x, kRowChunks) * kChunkElems;
  if (c >= C::kD) return;
  const typename C::T* src_t = src + r_t * row + c;  // this thread's first chunk
  // The swizzle key repeats every 8 rows (swizzle.h): when a pass covers a multiple of 8 rows,
  // the thread's smem offset moves by whole rows, and every copy takes immediate offsets.
  auto dst = [&](int it) {
    const int offset = kRowsPerIt % 8 == 0
                           ? tile_offset(r_t, c, C::kCols, C::kSwizzle) + it * kRowsPerIt * C::kCols
                           : tile_offset(r_t + it * kRowsPerIt, c, C::kCols, C::kSwizzle);
    return tile + 2 * offset;
  };
  if (rows >= kRows && c < D) {  // a whole tile: no predicates
#pragma unroll
    for (int it = 0; it < kRows / kRowsPerIt; ++it) cp_async_16(dst(it), src_t + it * kRowsPerIt * row, true);
  } else {
#pragma unroll
    for (int it = 0; it < kRows / kRowsPerIt; ++it) {
      const bool inside = r_t + it * kRowsPerIt < rows && c < D;
      cp_async_16(dst(it), inside ? src_t + it * kRowsPerIt * row : src, inside);
    }
  }
}

}  // namespace fa::cuda
