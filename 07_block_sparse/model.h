// A CPU model of chapter 07's kernel: 05's FlashAttention-2 model with the key loop walking the
// block mask's CSR list (sparse_tiles.h), as block_sparse.cuh does. Read the two side by side.
#pragma once

#include <vector>

#include "07_block_sparse/block_mask.h"

namespace block_sparse::model {

// q: [B, H, Sq, D]   k, v: [B, Hkv, Sk, D]   o: [B, H, Sq, D]   lse: [B, H, Sq] (natural log), fp32.
// o and lse are resized. Query tiles are the mask's query blocks; key tiles have Bc keys, and
// Bc must divide the mask's key block (the kernel: Bc = 64). The mask must fit p.
void forward(const fa::Problem& p, const BlockMask& mask, const std::vector<float>& q, const std::vector<float>& k,
             const std::vector<float>& v, std::vector<float>& o, std::vector<float>& lse, int Bc = 64);

}  // namespace block_sparse::model
