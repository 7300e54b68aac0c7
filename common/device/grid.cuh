// Grid shapes that hold any problem size. Taught in chapter 02 (its three-kernel grids) and used
// by every tiled kernel from 02 on.
//
// CUDA caps a grid at 2^31 - 1 blocks along x but only 65,535 along y and z. Our kernels index
// their blocks by (tile, row): tiles of one sequence along x, and "rows" -- (batch, head) pairs,
// or (query tile, batch, head) triples -- along y. Real workloads easily have more than 65,535
// rows (batch 512 x 128 heads of short sequences), so the rows are spread over y and z:
//
//     row = blockIdx.z * gridDim.y + blockIdx.y        rows <= 65,535^2 (about 4.3e9)
//
// The grid may hold up to z - 1 rows more than asked for; a kernel returns at once for those.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <stdexcept>
#include <string>

namespace fa::cuda {

constexpr std::int64_t kMaxGridX = 2147483647;  // 2^31 - 1
constexpr std::int64_t kMaxGridYZ = 65535;

// `tiles` blocks along x for each of `rows` rows (both >= 1: Problem::validate). Throws
// std::invalid_argument (naming `who`) only for sizes no GPU memory could hold.
inline dim3 tiles_by_rows(std::int64_t tiles, std::int64_t rows, const std::string& who) {
  const std::int64_t z = (rows + kMaxGridYZ - 1) / kMaxGridYZ;
  if (tiles > kMaxGridX || z > kMaxGridYZ)
    throw std::invalid_argument(who + ": a grid of " + std::to_string(tiles) + " x " + std::to_string(rows) +
                                " blocks is beyond CUDA's limits");
  const std::int64_t y = (rows + z - 1) / z;  // rows spread evenly: at most z - 1 spare
  return dim3(static_cast<unsigned>(tiles), static_cast<unsigned>(y), static_cast<unsigned>(z));
}

// A one-dimensional grid of `blocks` blocks (grid-size check included).
inline unsigned blocks_1d(std::int64_t blocks, const std::string& who) {
  if (blocks > kMaxGridX)
    throw std::invalid_argument(who + ": " + std::to_string(blocks) + " blocks is beyond CUDA's grid limit");
  return static_cast<unsigned>(blocks);
}

// This block's row of a tiles_by_rows grid (it may be >= rows: the block then has no work).
__device__ __forceinline__ std::int64_t grid_row() {
  return std::int64_t{blockIdx.z} * gridDim.y + blockIdx.y;
}

// Programmatic dependent launch (launch_dependent in launch.h; sm_90 and newer, nothing on older
// GPUs). The earlier kernel calls launch_dependents() once its blocks need no more SM room for
// themselves, so the later kernel's blocks may be scheduled; the later kernel calls
// wait_on_prerequisites(), which returns once the earlier grid has completed and its memory
// writes are visible. Where the first call sits changes only when the later blocks start, never
// what they read.
__device__ __forceinline__ void launch_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}
__device__ __forceinline__ void wait_on_prerequisites() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

}  // namespace fa::cuda
