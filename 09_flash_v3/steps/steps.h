// The README's step-by-step versions of chapter 09, bf16 and f16, D = 64 and 128:
//   v1_one_warpgroup      06's algorithm on wgmma + TMA, one warpgroup a block (one_warpgroup.cuh)
//   v2_warp_specialized   flash_v3.cuh's kernel, one block a tile, without ping-pong (WsConfig switches)
//   v3_pingpong           flash_v3.cuh's kernel, one block a tile
//   v4_persistent         flash_v3.cuh's kernel, persistent, without the intra-warpgroup overlap
//   v5_overlap            the chapter's kernel at D = 128
//   v7_three_consumers    v4 with three consumer warpgroups (Br = 192): the chapter's kernel at
//                         D = 64 (v1_one_warpgroup under a causal mask below 4k queries)
// Each is a Chapter, so the shared benchmark and test code run it like any chapter.
//   v6_fp8                v4's turns on E4M3 inputs: an entry point of its own
//                         (fp8.h), with its own tests (test_fp8.cpp) and benchmark rows
#pragma once

#include <vector>

#include "common/harness/chapter.h"

namespace flash_v3::steps {

using fa::Step;

const std::vector<Step>& all();

}  // namespace flash_v3::steps
