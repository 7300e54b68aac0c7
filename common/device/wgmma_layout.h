// Hopper's shared-memory operand layout: the 128-byte swizzle that TMA writes and wgmma reads, and
// the 64-bit matrix descriptor that tells wgmma where a tile is (taught in chapter 09). Plain
// constexpr C++, so test_wgmma_layout.cpp checks it on the CPU.
//
// 06 swizzles its tiles by hand: chunk ^ (row % 8) for rows of 64 bf16 (swizzle.h). Hopper builds
// the same pattern into the hardware. With CU_TENSOR_MAP_SWIZZLE_128B a TMA copy stores byte
// address a at a ^ (((a >> 7) & 7) << 4): bits 4-6 (the 16-byte chunk within a 128-byte line) are
// XORed with bits 7-9 (the line within a 1024-byte block). wgmma, told "128-byte swizzle" in its
// descriptor, undoes the same XOR when it reads. For 128-byte rows that is exactly 06's layout.
//
// A K-major operand (Q or K for S = Q K^T: rows are M or N, the 16-element k-steps run along the
// row) is stored as atoms of 64 columns: an atom holds all rows of 64 bf16 (128 bytes each),
// swizzled in blocks of 8 rows (1024 bytes); a tile of D columns is D / 64 atoms one after the
// other. Its descriptor (PTX ISA, "Matrix Descriptor Format" of wgmma):
//   bits  0-13  start address >> 4          (the operand's first byte in shared memory)
//   bits 16-29  leading byte offset >> 4    (between core matrices along K; not used by the
//                                            swizzled K-major layouts, conventionally 1)
//   bits 32-45  stride byte offset >> 4     (between groups of 8 rows: 1024 for 128-byte swizzle)
//   bits 49-51  base offset                 (0 when the tile starts on a 1024-byte boundary)
//   bits 62-63  swizzle: 0 none, 1 128-byte, 2 64-byte, 3 32-byte
// Each field keeps bits 4-17 of its byte value ((x & 0x3FFFF) >> 4): addresses and offsets are
// multiples of 16 bytes and below 256 KiB.
#pragma once

#include <cstdint>

#include "common/host/problem.h"  // FA_HOST_DEVICE

namespace fa::cuda {

enum class SmemSwizzle : std::uint64_t { none = 0, b128 = 1, b64 = 2, b32 = 3 };

constexpr std::uint32_t kSwizzleAtomBytes = 1024;  // 8 lines of 128 bytes: the 128-byte swizzle's block
constexpr int kAtomCols = 64;                      // bf16 / fp16 columns in one 128-byte line

// A descriptor field: bits 4-17 of a byte address or offset.
FA_HOST_DEVICE constexpr std::uint64_t desc_field(std::uint32_t bytes) { return (bytes & 0x3FFFFu) >> 4; }

// The 64-bit wgmma descriptor of an operand at shared address `start`.
FA_HOST_DEVICE constexpr std::uint64_t wgmma_desc(std::uint32_t start, std::uint32_t leading_bytes,
                                                  std::uint32_t stride_bytes, SmemSwizzle swizzle,
                                                  std::uint32_t base_offset = 0) {
  return desc_field(start) | desc_field(leading_bytes) << 16 | desc_field(stride_bytes) << 32 |
         std::uint64_t{base_offset & 7u} << 49 | static_cast<std::uint64_t>(swizzle) << 62;
}

// The descriptor of a K-major, 128-byte-swizzled bf16 / fp16 operand (Q_i or K_j), advanced to
// column k0 (a multiple of 16: one wgmma k-step) of a tile of `rows` rows. Within an atom a k-step
// is 32 bytes further along the line: the start address moves and the hardware's XOR, applied to
// the whole address, still finds each chunk. The next atom starts rows * 128 bytes later.
// kmajor_sw128_step: how far column k0 lies from the tile's start, the bytes a loop advances a
// descriptor built once at k0 = 0 by (desc_advance, below).
FA_HOST_DEVICE constexpr std::uint32_t kmajor_sw128_step(int rows, int k0) {
  return static_cast<std::uint32_t>(k0 / kAtomCols) * static_cast<std::uint32_t>(rows) * 128u +
         static_cast<std::uint32_t>(k0 % kAtomCols) * 2u;
}
FA_HOST_DEVICE constexpr std::uint64_t kmajor_sw128_desc(std::uint32_t tile_start, int rows, int k0) {
  return wgmma_desc(tile_start + kmajor_sw128_step(rows, k0), 16, kSwizzleAtomBytes, SmemSwizzle::b128);
}

// The same for one-byte elements (FP8, E4M3): a 128-byte line holds 128 of them, so an atom is
// 128 columns wide and a wgmma k-step of 32 elements is 32 bytes, as one of 16 bf16 is. k0: a
// multiple of 32. FP8 operands are K-major only (wgmma has no transpose for them).
FA_HOST_DEVICE constexpr std::uint32_t kmajor_sw128_step_fp8(int rows, int k0) {
  return static_cast<std::uint32_t>(k0 / 128) * static_cast<std::uint32_t>(rows) * 128u + static_cast<std::uint32_t>(k0 % 128);
}
FA_HOST_DEVICE constexpr std::uint64_t kmajor_sw128_desc_fp8(std::uint32_t tile_start, int rows, int k0) {
  return wgmma_desc(tile_start + kmajor_sw128_step_fp8(rows, k0), 16, kSwizzleAtomBytes, SmemSwizzle::b128);
}

// FP8's P V: which key of a 32-key block column c of P's wgmma A fragment holds. The fp32
// accumulator of S gives a thread (lane group g, t = lane % 4) keys 8j + 2t and 8j + 2t + 1 of each
// 8-key group j of a row; an 8-bit A fragment of k = 32 wants from it columns 4t .. 4t + 3 and
// 16 + 4t .. 16 + 4t + 3 (PTX ISA: the m16n8k32 A fragment, which each warp of a wgmma repeats).
// Rather than move bytes between lanes, a thread packs the four keys it holds of each 16 (2t,
// 2t + 1, 2t + 8, 2t + 9) as columns 4t .. 4t + 3, and V's rows are stored in the same order:
// column c of the fragment is key fp8_pv_key(c), and the V tile's k index c is that key's row.
FA_HOST_DEVICE constexpr int fp8_pv_key(int c) {
  const int half = c / 16, t = c % 16 / 4, i = c % 4;
  return 16 * half + 2 * t + (i & 1) + 8 * (i >> 1);
}

// The descriptor of an MN-major, 128-byte-swizzled operand (V_j in O += P V, wgmma's B with
// imm-trans-b = 1): stored like a K-major tile, rows = the k index (keys), 64-column atoms along N
// (D). A k-step of 16 rows is 2048 bytes down the atom; columns n0 .. n0 + 63 are atom n0 / 64.
// MN-major fields (PTX ISA): the leading byte offset steps between 64-wide atoms along N (here
// k_rows * 128 bytes), the stride byte offset between groups of 8 k rows (1024 bytes).
FA_HOST_DEVICE constexpr std::uint32_t mnmajor_sw128_step(int k_rows, int k0, int n0) {
  return static_cast<std::uint32_t>(n0 / kAtomCols) * static_cast<std::uint32_t>(k_rows) * 128u +
         static_cast<std::uint32_t>(k0) * 128u;
}
FA_HOST_DEVICE constexpr std::uint64_t mnmajor_sw128_desc(std::uint32_t tile_start, int k_rows, int k0, int n0) {
  return wgmma_desc(tile_start + mnmajor_sw128_step(k_rows, k0, n0), static_cast<std::uint32_t>(k_rows) * 128u,
                    kSwizzleAtomBytes, SmemSwizzle::b128);
}

// The descriptor of an operand `bytes` further on in shared memory. The start address is the low
// field and shared addresses stay below 256 KiB, so it is one 32-bit add to the low word, with no
// carry into the next field: a loop builds its descriptors once and advances them per k-step and
// per stage (a consumer of chapter 11 runs 32 wgmmas a step; chapter 09's turn 8 to 24) by the
// *_step offsets above, constants the compiler folds, instead of a mask, a shift and an OR each.
FA_HOST_DEVICE constexpr std::uint64_t desc_advance(std::uint64_t desc, std::uint32_t bytes) {
  return (desc & 0xFFFFFFFF00000000ull) | static_cast<std::uint32_t>(static_cast<std::uint32_t>(desc) + (bytes >> 4));
}

// Where the 128-byte swizzle puts byte `offset` of a tile that starts on a 1024-byte boundary.
FA_HOST_DEVICE constexpr std::uint32_t swizzle_128b(std::uint32_t offset) {
  return offset ^ (((offset >> 7) & 7u) << 4);
}

// Byte offset of element (row, col) of a K-major 128-byte-swizzled tile of `rows` rows of 2-byte
// elements: atom col / 64, then the swizzled position of (row, col % 64) inside it.
FA_HOST_DEVICE constexpr std::uint32_t kmajor_sw128_offset(int row, int col, int rows) {
  const std::uint32_t atom = static_cast<std::uint32_t>(col / kAtomCols) * static_cast<std::uint32_t>(rows) * 128u;
  return atom + swizzle_128b(static_cast<std::uint32_t>(row) * 128u + static_cast<std::uint32_t>(col % kAtomCols) * 2u);
}

}  // namespace fa::cuda
