// The XOR swizzle of shared-memory tiles, taught in chapter 06 (used by 06, 07, 08 and 10).
//
// Where each element of a shared-memory tile lives, and which addresses the kernel's copies and
// ldmatrix reads touch -- in plain C++, so that test_swizzle.cpp can prove on the CPU that the
// layout is a permutation and that every access pattern the kernel uses is bank-conflict free.
//
// A tile is (rows, cols) elements of 2 bytes (fp16 / bf16), row-major, cols a power of two >= 16.
// Its rows are cut into 16-byte chunks of 8 elements: the unit of both cp.async (16 bytes per
// thread) and ldmatrix (one 16-byte row of an 8x8 matrix per lane). Shared memory has 32 banks of
// 4 bytes, so a 128-byte line covers every bank once and holds 8 chunks: a chunk's bank group is
// its position in its 128-byte line. An access of 8 chunks (one phase) is conflict free exactly
// when the 8 chunks sit in 8 different bank groups.
//
// ldmatrix reads 8 consecutive rows at the same column. Row-major, with rows of 128 bytes or a
// multiple, those 8 chunks share a bank group: an 8-way conflict. The swizzle XORs the chunk index
// with a per-row key, so the same logical column lands in 8 different bank groups:
//
//   cols >= 64 (rows of >= 128 bytes):  physical chunk = chunk ^ (row % 8)
//   cols == 32 (rows of 64 bytes, two rows per line): chunk ^ ((row / 2) % 4), and in general
//   the key is the row's line number (row / rows_per_line) modulo the chunks per row.
//
//   cols = 64, chunk (c) of row (r) -> position in its 128-byte line
//          c: 0 1 2 3 4 5 6 7
//   r = 0     0 1 2 3 4 5 6 7
//   r = 1     1 0 3 2 5 4 7 6
//   r = 2     2 3 0 1 6 7 4 5
//   r = 3     3 2 1 0 7 6 5 4      a column (fixed c) visits every bank group once per 8 rows;
//   ...                            a row (fixed r) still covers its 128-byte line exactly once
//   r = 7     7 6 5 4 3 2 1 0
#pragma once

#include "common/host/problem.h"  // FA_HOST_DEVICE: __host__ __device__ under nvcc, nothing otherwise

namespace fa::cuda {

constexpr int kChunkElems = 8;  // a 16-byte chunk holds 8 fp16 / bf16 elements

// The smem row length (elements) for head dim d: d itself when it is a power of two, else the
// next one (96 -> 128), so that rows are whole powers of two of chunks; padding is never read.
FA_HOST_DEVICE constexpr int smem_cols(int d) {
  int cols = 16;
  while (cols < d) cols *= 2;
  return cols;
}

// The XOR key of a row in a tile whose rows hold `row_chunks` chunks (a power of two).
FA_HOST_DEVICE constexpr int swizzle_key(int row, int row_chunks) {
  return row_chunks >= 8 ? row % 8 : row / (8 / row_chunks) % row_chunks;
}

// Element offset of (row, col) in a (rows, cols) tile: XOR-swizzled, or plain row-major.
FA_HOST_DEVICE constexpr int tile_offset(int row, int col, int cols, bool swizzled) {
  const int chunk = col / kChunkElems;
  const int placed = swizzled ? chunk ^ swizzle_key(row, cols / kChunkElems) : chunk;
  return row * cols + placed * kChunkElems + col % kChunkElems;
}

// cp.async: a tile's chunks are numbered row-major, n = row * row_chunks + chunk, and thread t of
// the block copies chunks t, t + threads, t + 2 * threads, ... (8 consecutive threads copy 128
// contiguous bytes of global memory). With row_chunks dividing the thread count, thread t keeps
// its chunk and moves down threads / row_chunks rows per pass.
FA_HOST_DEVICE constexpr int copy_row(int n, int row_chunks) { return n / row_chunks; }
FA_HOST_DEVICE constexpr int copy_chunk(int n, int row_chunks) { return n % row_chunks; }

// ldmatrix.x4 reads a 16x16 block as four 8x8 matrices; lanes 8i .. 8i+7 give the row addresses
// of matrix i, and matrix i lands in register i. Two orders, because an mma takes its B fragment
// {b0, b1} and its A fragment {a0..a3} in consecutive registers:
//   kRowsFirst  (Q's A fragment, V^T's B fragments): matrix 0 = rows 0-7 x cols 0-7,
//               1 = rows 8-15 x cols 0-7, 2 = rows 0-7 x cols 8-15, 3 = rows 8-15 x cols 8-15.
//   kColsFirst  (K's B fragments): 0 = rows 0-7 x cols 0-7, 1 = rows 0-7 x cols 8-15,
//               2 = rows 8-15 x cols 0-7, 3 = rows 8-15 x cols 8-15; rows are keys, so
//               registers {0, 1} are {b0, b1} of keys 0-7 and {2, 3} those of keys 8-15.
enum class LdsmOrder { kRowsFirst, kColsFirst };
FA_HOST_DEVICE constexpr int ldsm_row(int lane, LdsmOrder order) {
  return order == LdsmOrder::kRowsFirst ? lane % 16 : lane % 8 + lane / 16 * 8;
}
FA_HOST_DEVICE constexpr int ldsm_chunk(int lane, LdsmOrder order) {
  return order == LdsmOrder::kRowsFirst ? lane / 16 : lane / 8 % 2;
}

// The byte address of a lane's row for the 16x16 block at (r0, c0), both multiples of 16, as the
// kernel computes it: (block_offset(r0, c0) + lane_offset(lane)) ^ (32 * ((c0 / 16) % 4)).
// block_offset is the same for every lane (a constant once the loops are unrolled) and
// lane_offset is one number per lane, set up before the main loop. Why this equals
// 2 * tile_offset(...): r0 % 16 == 0 leaves the swizzle key of row r0 + ldsm_row(lane) unchanged;
// block_offset is a multiple of 128 bytes, so adding it never touches address bits 0-6; and
// moving 16 columns to the right (two chunks) flips chunk bit 1, i.e. address bits 5-6 -- with or
// without the swizzle, since XORs commute. (test_swizzle.cpp checks it for every block and lane.)
FA_HOST_DEVICE constexpr int ldsm_lane_offset(int lane, LdsmOrder order, int cols, bool swizzled) {
  return 2 * tile_offset(ldsm_row(lane, order), kChunkElems * ldsm_chunk(lane, order), cols, swizzled);
}
FA_HOST_DEVICE constexpr int ldsm_block_offset(int r0, int c0, int cols) { return 2 * (r0 * cols + c0 / 64 * 64); }
FA_HOST_DEVICE constexpr int ldsm_address(int lane_offset, int r0, int c0, int cols) {
  return (ldsm_block_offset(r0, c0, cols) + lane_offset) ^ (32 * (c0 / 16 % 4));
}

// A warp that reads only its own (rows, W columns) corner of a tile, at (row_w, col_w), folds the
// corner into its lane offset once, so its loops keep constant block offsets (chapter 08, where
// the 8 warps split every product differently): with lane_w = ldsm_warp_offset(lane_offset,
// row_w, col_w, cols), ldsm_address(lane_w, r0, c0, cols) addresses block (row_w + r0, col_w + c0)
// for r0 a multiple of 16 and 0 <= c0 < W, when row_w % 16 == 0, W is a power of two >= 16 and
// col_w a multiple of W. Why: row_w keeps every swizzle key and moves by whole lines; col_w's
// 16-column groups sit in XOR bits above those of c0 (no overlap, no carry), and its multiples of
// 64 columns are whole lines. (test_swizzle.cpp checks it for every corner, block and lane.)
FA_HOST_DEVICE constexpr int ldsm_warp_offset(int lane_offset, int row_w, int col_w, int cols) {
  return (lane_offset ^ (32 * (col_w / 16 % 4))) + 2 * (row_w * cols + col_w / 64 * 64);
}

// A tile stored as 64-column panels of `panel_rows` rows each (panel p holds columns 64p .. 64p +
// 63 and starts 128 * panel_rows bytes after panel p - 1): the layout Hopper's copy engine writes
// with the 128-byte swizzle, box by box (common/device/tma.cuh; wgmma_layout.h: kmajor_sw128_offset).
// A panel is a tile of 64-column rows in this file's swizzle, so with lane_offset from
// ldsm_lane_offset(lane, order, 64, true) the address of the 16x16 block at (r0, c0) is the panel's
// start plus its ldsm_address; c0 / 64 is a constant once the loops are unrolled. (test_swizzle.cpp
// checks it against kmajor_sw128_offset for every block and lane.)
FA_HOST_DEVICE constexpr int ldsm_panel_address(int lane_offset, int r0, int c0, int panel_rows) {
  return c0 / 64 * (128 * panel_rows) + ldsm_address(lane_offset, r0, c0 % 64, 64);
}

// The same fold for an accumulator store: lane (g, t) writes its pair at (row_w + g + r,
// col_w + 2t + c), r a multiple of 8, c a multiple of 8 below W (col_w a multiple of W, a power of
// two >= 8, cols >= 64). With base = 2 * tile_offset(row_w + g, col_w + 2t, cols, true), the byte
// address is pair_address(base, r, c, cols): r keeps the row's swizzle key, and c's chunks sit in
// bits of the chunk index that col_w leaves zero, so they XOR straight through the swizzle.
FA_HOST_DEVICE constexpr int pair_address(int base, int r, int c, int cols) { return (base ^ (2 * c)) + 2 * r * cols; }

}  // namespace fa::cuda
