// A CPU model of FlashAttention-2's forward (Dao 2023, Algorithm 1), with the block structure
// and loop order of flash_v2.cu: read the two side by side.
#pragma once

#include <vector>

#include "common/host/problem.h"

namespace flash_v2::model {

// q: [B, H, Sq, D]   k, v: [B, Hkv, Sk, D]   o: [B, H, Sq, D]   lse: [B, H, Sq] (natural log)
// o and lse are resized. Br query rows and Bc keys per tile, any values >= 1.
void forward(const fa::Problem& p, const std::vector<float>& q, const std::vector<float>& k,
             const std::vector<float>& v, std::vector<float>& o, std::vector<float>& lse, int Br,
             int Bc);

// One query row of one key tile, FlashAttention-2's update (chapter 07's model calls it too):
// s holds the row's Bc raw scores (-inf where a key is hidden) and leaves holding P_ij; m (the
// running max, raw score units), l (the running sum) and O (D unnormalized outputs) are updated.
// V_j: the tile's first row of V ([keys, D]), of which keys <= Bc rows exist.
void update_row(float* s, int Bc, const float* V_j, int keys, int D, float scale_log2, float& m, float& l,
                float* O);

}  // namespace flash_v2::model
