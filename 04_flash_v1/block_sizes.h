// Chapter 04's block sizes: the rule of FlashAttention-1 (Algorithm 1, line 1), then a clamp to
// what our thread block handles. Plain C++ (no CUDA), so the kernel and the CPU tests share it.
//
//   Bc = ceil(M / 4d),  Br = min(Bc, d)        M = on-chip memory in floats, d = head dim
//
// Why 4d: K_j and V_j (Bc x d each) and Q_i and O_i (Br x d each, Br <= Bc) are the four tiles
// that must sit on chip at once, so 4 * Bc * d <= M. Br <= d keeps the (Br x Bc) score tile
// S_ij no bigger than a (Bc x d) tile. The rule is an O(M) estimate, not a packing: it ignores
// S_ij and padding, so we check what our layout really needs (smem_floats) and shrink to fit.
#pragma once

#include <algorithm>
#include <cstddef>

namespace flash_v1 {

constexpr int kMinTile = 16;  // the thread block is 16 x 16 threads: a tile edge is 16, 32 or 64
constexpr int kMaxTile = 64;  // each thread owns at most 4 x 4 elements of S_ij

// The head dim the kernel is compiled for: the next of 32, 64, 96, 128, 192, 256 (the tail is zero).
constexpr int padded_head_dim(int d) {
  return d <= 32 ? 32 : d <= 64 ? 64 : d <= 96 ? 96 : d <= 128 ? 128 : d <= 192 ? 192 : 256;
}

// Shared memory of one block, in floats, for the kernel's layout (flash_v1.cu):
// Q_i (Br, d+1), K_j (Bc, d+1), V_j (Bc, d), P_ij (Br, Bc+16). O_i, l_i, m_i live in global memory
// between steps (Algorithm 1) and in registers only within one (i, j) step.
constexpr std::size_t smem_floats(int Br, int Bc, int d) {
  return std::size_t(Br) * (d + 1) + std::size_t(Bc) * (d + 1) + std::size_t(Bc) * d +
         std::size_t(Br) * (Bc + 16);
}

struct BlockSizes {
  int paper_Br, paper_Bc;  // the paper's rule, unclamped
  int Br, Bc;              // what the kernel runs: powers of two in [16, 64] that fit
};

constexpr int pow2_at_most(int x) {
  int p = kMinTile;
  while (p * 2 <= std::min(x, kMaxTile)) p *= 2;
  return p;
}

// smem_bytes: shared memory a block may use (cudaDevAttrMaxSharedMemoryPerBlockOptin);
// d: the padded head dim.
constexpr BlockSizes block_sizes(std::size_t smem_bytes, int d) {
  const std::size_t M = smem_bytes / sizeof(float);
  const int paper_Bc = static_cast<int>((M + 4 * d - 1) / (4 * d));  // ceil(M / 4d)
  const int paper_Br = std::min(paper_Bc, d);
  BlockSizes b{paper_Br, paper_Bc, pow2_at_most(paper_Br), pow2_at_most(paper_Bc)};
  // Halve Br first on a tie, so Br <= Bc stays true as in the paper's rule.
  while (smem_floats(b.Br, b.Bc, d) * sizeof(float) > smem_bytes && b.Bc > kMinTile) {
    if (b.Br >= b.Bc && b.Br > kMinTile) b.Br /= 2;
    else b.Bc /= 2;
  }
  return b;
}

}  // namespace flash_v1
