// CPU tests of common/device/wgmma_layout.h: the wgmma descriptor's bit fields, the 128-byte
// swizzle (a permutation of each 1024-byte block that keeps 16-byte chunks whole, and the same
// layout as 06's hand-written XOR swizzle for 128-byte rows), and the K-major tile layout.
//
//   ./build/common/common_cpu_tests --gtest_filter='WgmmaLayout*'
#include "common/device/wgmma_layout.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <set>

#include "common/device/swizzle.h"

namespace fa::cuda {
namespace {

// The fields of a descriptor, read back by the PTX ISA's bit positions.
std::uint64_t bits(std::uint64_t desc, int lo, int width) { return desc >> lo & ((std::uint64_t{1} << width) - 1); }

TEST(WgmmaLayout, DescriptorFieldsSitWhereThePtxIsaPutsThem) {
  const std::uint64_t d = wgmma_desc(0x12340, 16, 1024, SmemSwizzle::b128, 5);
  EXPECT_EQ(bits(d, 0, 14), 0x1234u);  // start address >> 4
  EXPECT_EQ(bits(d, 14, 2), 0u);
  EXPECT_EQ(bits(d, 16, 14), 1u);      // leading byte offset 16 >> 4
  EXPECT_EQ(bits(d, 30, 2), 0u);
  EXPECT_EQ(bits(d, 32, 14), 64u);     // stride byte offset 1024 >> 4
  EXPECT_EQ(bits(d, 46, 3), 0u);
  EXPECT_EQ(bits(d, 49, 3), 5u);       // base offset
  EXPECT_EQ(bits(d, 52, 10), 0u);
  EXPECT_EQ(bits(d, 62, 2), 1u);       // 128-byte swizzle
  EXPECT_EQ(bits(wgmma_desc(0, 0, 0, SmemSwizzle::b64), 62, 2), 2u);
  EXPECT_EQ(bits(wgmma_desc(0, 0, 0, SmemSwizzle::b32), 62, 2), 3u);
  EXPECT_EQ(wgmma_desc(0, 0, 0, SmemSwizzle::none), 0u);
}

TEST(WgmmaLayout, FieldsKeepBits4To17OfTheirBytes) {
  EXPECT_EQ(desc_field(0x3FFF0), 0x3FFFu);  // the largest 16-byte-aligned address below 256 KiB
  EXPECT_EQ(desc_field(0x40010), 1u);       // bit 18 and up are dropped
  EXPECT_EQ(desc_field(0x1F), 1u);          // the low 4 bits are dropped
  // A field never spills into its neighbour, whatever the byte value.
  const std::uint64_t d = wgmma_desc(0xFFFFFFFFu, 0xFFFFFFFFu, 0xFFFFFFFFu, SmemSwizzle::none, 0xFFFFFFFFu);
  EXPECT_EQ(bits(d, 14, 2) | bits(d, 30, 2) | bits(d, 46, 3) | bits(d, 52, 10), 0u);
}

TEST(WgmmaLayout, Swizzle128IsAPermutationOfEach1024ByteBlockThatKeepsChunksWhole) {
  std::set<std::uint32_t> seen;
  for (std::uint32_t a = 0; a < 4 * kSwizzleAtomBytes; ++a) {
    const std::uint32_t s = swizzle_128b(a);
    EXPECT_EQ(s / kSwizzleAtomBytes, a / kSwizzleAtomBytes) << a;  // stays in its block
    EXPECT_EQ(s / 128, a / 128) << a;                              // ... and in its 128-byte line
    EXPECT_EQ(s % 16, a % 16) << a;                                // a 16-byte chunk moves whole
    EXPECT_EQ(swizzle_128b(s), a) << a;                            // the XOR undoes itself
    seen.insert(s);
  }
  EXPECT_EQ(seen.size(), 4 * kSwizzleAtomBytes);
}

TEST(WgmmaLayout, Swizzle128IsChapter06sSwizzleFor128ByteRows) {
  // 06's tiles of 64 bf16 columns: element (r, c) at tile_offset(r, c, 64, true) elements.
  for (int r = 0; r < 128; ++r)
    for (int c = 0; c < 64; ++c)
      EXPECT_EQ(2u * static_cast<std::uint32_t>(tile_offset(r, c, 64, true)),
                swizzle_128b(static_cast<std::uint32_t>(2 * (r * 64 + c))))
          << r << ", " << c;
}

TEST(WgmmaLayout, KMajorTileIsAPermutationOfItsBytes) {
  for (int cols : {64, 128, 256}) {
    const int rows = 64;
    std::set<std::uint32_t> seen;
    for (int r = 0; r < rows; ++r)
      for (int c = 0; c < cols; ++c) {
        const std::uint32_t off = kmajor_sw128_offset(r, c, rows);
        EXPECT_EQ(off % 2, 0u);
        EXPECT_LT(off, static_cast<std::uint32_t>(rows * cols * 2));
        seen.insert(off);
      }
    EXPECT_EQ(seen.size(), static_cast<std::size_t>(rows * cols)) << cols;
  }
}

TEST(WgmmaLayout, KMajorDescriptorStepsThroughAtomsAndKSteps) {
  const std::uint32_t tile = 0x4000;  // 1024-byte aligned
  const int rows = 64;
  for (int k0 = 0; k0 < 256; k0 += 16) {
    const std::uint64_t d = kmajor_sw128_desc(tile, rows, k0);
    // The start address is the unswizzled byte of (row 0, column k0): atom k0 / 64, 32 bytes a k-step.
    EXPECT_EQ(bits(d, 0, 14) << 4, tile + static_cast<std::uint32_t>(k0 / 64 * rows * 128 + k0 % 64 * 2)) << k0;
    EXPECT_EQ(bits(d, 32, 14) << 4, kSwizzleAtomBytes);  // 8 rows of 128 bytes to the next row group
    EXPECT_EQ(bits(d, 62, 2), 1u);
    // Row 0 is never permuted (its XOR key is 0), so that byte is where column k0 of row 0 lives.
    EXPECT_EQ(tile + kmajor_sw128_offset(0, k0, rows), bits(d, 0, 14) << 4) << k0;
  }
}

TEST(WgmmaLayout, MNMajorDescriptorStepsDownKAndAcrossAtoms) {
  const std::uint32_t tile = 0x8000;
  const int k_rows = 128;  // Bc keys
  for (int n0 : {0, 64, 128, 192})
    for (int k0 = 0; k0 < k_rows; k0 += 16) {
      const std::uint64_t d = mnmajor_sw128_desc(tile, k_rows, k0, n0);
      const std::uint32_t start = static_cast<std::uint32_t>(bits(d, 0, 14) << 4);
      EXPECT_EQ(start, tile + kmajor_sw128_offset(k0, n0, k_rows)) << k0 << ", " << n0;  // (key k0, column n0)
      EXPECT_EQ(start % kSwizzleAtomBytes, 0u);            // a k-step of 16 rows keeps base offset 0
      EXPECT_EQ(bits(d, 16, 14) << 4, 128u * k_rows);      // next 64-wide atom along N
      EXPECT_EQ(bits(d, 32, 14) << 4, kSwizzleAtomBytes);  // next 8 keys
      EXPECT_EQ(bits(d, 62, 2), 1u);
    }
}

// FP8 (one byte an element): a k-step of 32 columns is 32 bytes, and an atom is 128 columns, so
// a k-step lands on the same byte as the bf16 k-step over the same bytes.
TEST(WgmmaLayout, Fp8KMajorDescriptorStepsByteForByteAsBf16) {
  const std::uint32_t tile = 0x4000;
  for (int rows : {64, 128})
    for (int k0 = 0; k0 < 256; k0 += 32) {
      const std::uint64_t d = kmajor_sw128_desc_fp8(tile, rows, k0);
      EXPECT_EQ(bits(d, 0, 14) << 4, tile + static_cast<std::uint32_t>(k0 / 128 * rows * 128 + k0 % 128)) << k0;
      EXPECT_EQ(d, kmajor_sw128_desc(tile, rows, k0 / 2)) << "the bf16 column of the same byte, " << k0;
    }
}

// fp8_pv_key: within each 32-key block every key once; column 4t + i of each half holds the keys a
// thread t owns in S's accumulator (8j + 2t, 8j + 2t + 1 for the 8-key groups j of that half).
TEST(WgmmaLayout, Fp8PvKeyIsAPermutationMatchingTheAccumulatorsKeys) {
  std::set<int> keys;
  for (int c = 0; c < 32; ++c) keys.insert(fp8_pv_key(c));
  EXPECT_EQ(keys.size(), 32u);
  EXPECT_EQ(*keys.begin(), 0);
  EXPECT_EQ(*keys.rbegin(), 31);
  for (int half = 0; half < 2; ++half)
    for (int t = 0; t < 4; ++t) {
      std::set<int> owned, packed;
      for (int j = 2 * half; j < 2 * half + 2; ++j) owned.insert({8 * j + 2 * t, 8 * j + 2 * t + 1});
      for (int i = 0; i < 4; ++i) packed.insert(fp8_pv_key(16 * half + 4 * t + i));
      EXPECT_EQ(owned, packed) << "half " << half << ", t " << t;
    }
  // The byte order inside a register: the lower 16-key group's pair first, each pair in key order.
  EXPECT_EQ(fp8_pv_key(4), 2);
  EXPECT_EQ(fp8_pv_key(5), 3);
  EXPECT_EQ(fp8_pv_key(6), 10);
  EXPECT_EQ(fp8_pv_key(7), 11);
}

// Advancing a descriptor by a byte offset gives the descriptor built at that address, for every
// k-step and stage offset a kernel uses, up to the top of shared memory (227 KiB on sm_90).
TEST(WgmmaLayout, AdvancedDescriptorEqualsTheRebuiltOne) {
  for (std::uint32_t tile : {0x0u, 0x4000u, 0x20000u})
    for (int rows : {64, 128})
      for (int k0 = 0; k0 < 256; k0 += 16) {
        const std::uint32_t k_bytes = static_cast<std::uint32_t>(k0 / 64 * rows * 128 + k0 % 64 * 2);
        EXPECT_EQ(desc_advance(kmajor_sw128_desc(tile, rows, 0), k_bytes), kmajor_sw128_desc(tile, rows, k0))
            << tile << ", " << rows << ", " << k0;
        if (k0 < rows)
          EXPECT_EQ(desc_advance(mnmajor_sw128_desc(tile, rows, 0, 64), static_cast<std::uint32_t>(k0) * 128u),
                    mnmajor_sw128_desc(tile, rows, k0, 64));
      }
  // The *_step offsets the kernels advance by give the descriptors built at each k-step.
  for (std::uint32_t tile : {0x0u, 0x4000u, 0x20000u})
    for (int rows : {64, 80, 112, 128, 192})
      for (int k0 = 0; k0 < 256; k0 += 16) {
        EXPECT_EQ(desc_advance(kmajor_sw128_desc(tile, rows, 0), kmajor_sw128_step(rows, k0)),
                  kmajor_sw128_desc(tile, rows, k0)) << tile << ", " << rows << ", " << k0;
        for (int n0 : {0, 64, 128, 192})
          EXPECT_EQ(desc_advance(mnmajor_sw128_desc(tile, rows, 0, 0), mnmajor_sw128_step(rows, k0, n0)),
                    mnmajor_sw128_desc(tile, rows, k0, n0)) << tile << ", " << rows << ", " << k0 << ", " << n0;
        if (k0 % 32 == 0)
          EXPECT_EQ(desc_advance(kmajor_sw128_desc_fp8(tile, rows, 0), kmajor_sw128_step_fp8(rows, k0)),
                    kmajor_sw128_desc_fp8(tile, rows, k0)) << tile << ", " << rows << ", " << k0;
      }
  // The last 16-byte step below 227 KiB still lands in the start-address field alone.
  const std::uint64_t d = kmajor_sw128_desc(0, 64, 0);
  EXPECT_EQ(desc_advance(d, 227 * 1024 - 16), kmajor_sw128_desc(227 * 1024 - 16, 64, 0));
}

}  // namespace
}  // namespace fa::cuda
