// The two small kernels around chapter 11's main one (backward_v3.cuh), for launch.cuh: before it,
// the preparation (D_i = rowsum(dO_i o O_i), the padded LSE, the zeroed fp32 dQ accumulator);
// after it, the conversion of that accumulator into dQ.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <cstdint>

#include "11_backward_v3/config.cuh"  // VarlenSeqs
#include "common/device/constants.h"  // kLog2e
#include "common/device/mma.cuh"       // store2
#include "common/device/tiles.h"       // sequence_of
#include "common/device/warp_reduce.cuh"
#include "common/host/problem.h"       // Strides

namespace backward_v3 {

namespace detail {

constexpr int kPrepRows = 32;  // padded rows a block of prepare_kernel, eight threads each

// Eight threads a row of the padded [B * H][Tr * Br] vectors: D_i = rowsum(dO_i o O_i), read in
// 16-byte loads, and LSE_i log2(e) for rows below Sq; past Sq, D = 0 and LSE = +inf, so those
// rows' P is exactly 0. The same threads zero the row's kD floats of the fp32 dQ accumulator
// (Config::kD a row; zeros need no chunk order), which saves a memset and its pass over memory.
// kBshd: O and dO as [B, S, H, D], alike (os: their strides, Problem::o_strides); H: the query
// heads. O and dO are 16-byte aligned and D is a multiple of 8 (run_layout checks O; dO is read by
// TMA, which needs it). kVarlen: a packed batch (VarlenSeqs, config.cuh), each sequence's region of
// H slices of its padded rows; padded_len is then Br, and Sq the packed rows (LSE: [1, H, Sq]).
template <class T, int kD, bool kBshd, bool kVarlen = false>
__global__ void __launch_bounds__(8 * kPrepRows)
    prepare_kernel(const T* __restrict__ o, const T* __restrict__ dout, const float* __restrict__ lse,
                   float* __restrict__ lse2, float* __restrict__ D_row, float4* __restrict__ dq_accum,
                   std::int64_t padded_rows, int padded_len, int Sq, int D, fa::Strides os, int H, VarlenSeqs vs = {}) {
  const std::int64_t row = std::int64_t{blockIdx.x} * kPrepRows + threadIdx.x / 8;
  const int part = threadIdx.x % 8;
  // padded_rows is a multiple of Br >= 64, so every block is whole and the shuffles see 32 lanes.
  if (row >= padded_rows) return;
  std::int64_t bh;
  int r, len = Sq, first = 0;  // the row within its slice; its slice's queries, and their first row
  if constexpr (kVarlen) {
    const int tile = static_cast<int>(row / padded_len);
    const int b = fa::cuda::sequence_of(vs.query_tiles, vs.batch, tile / H);
    const int Tr_b = vs.query_tiles[b + 1] - vs.query_tiles[b];
    const std::int64_t local = row - std::int64_t{H} * vs.query_tiles[b] * padded_len;
    bh = local / (Tr_b * padded_len);  // the head
    r = static_cast<int>(local % (Tr_b * padded_len));
    first = vs.cu_seqlens_q[b];
    len = vs.cu_seqlens_q[b + 1] - first;
  } else {
    bh = row / padded_len;
    r = static_cast<int>(row % padded_len);
  }
  float acc = 0.0f;
  if (r < len) {
    const std::int64_t at =
        kBshd ? bh / H * os.batch + bh % H * os.head + (first + r) * os.row : (bh * Sq + r) * D;
    for (int c = 8 * part; c < D; c += 64) {
      const uint4 a = *reinterpret_cast<const uint4*>(dout + at + c), b = *reinterpret_cast<const uint4*>(o + at + c);
      const T* x = reinterpret_cast<const T*>(&a);
      const T* y = reinterpret_cast<const T*>(&b);
#pragma unroll
      for (int j = 0; j < 8; ++j) acc = fmaf(static_cast<float>(x[j]), static_cast<float>(y[j]), acc);
    }
  }
  acc = fa::cuda::warp_sum<8>(acc);
  if (part == 0) {
    D_row[row] = acc;
    lse2[row] = r < len ? lse[bh * Sq + first + r] * kLog2e : INFINITY;  // +inf stays +inf
  }
  float4* zeros = dq_accum + row * (kD / 4);
#pragma unroll
  for (int c = part; c < kD / 4; c += 8) zeros[c] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
}

// dQ = scale x the accumulator, whose 16 KiB chunks hold a (64 rows, 64 columns) tile in the order
// the consumers wrote it: float4 number 128 c + tid of a chunk is thread tid's registers
// 4 c .. 4 c + 3, rows 16 (tid / 32) + g and + 8, columns 8 c + 2 t and + 1 (g, t of tid % 32).
// A query tile of Br rows has Config::kChunks chunks: at Br = 64 columns 64 c .. 64 c + 63 (one at
// D = 64, two at D = 128, D / 64 in the wide kernel), at Br = 128 (D = 64) rows 0-63 and 64-127.
// D: the tensors' head dim (kD, or 96 at kD = 128: the padding columns are not written). kBshd:
// dQ as [B, Sq, H, D], as Q lies (qs: Problem::q_strides); H: the query heads. kVarlen: a packed
// batch (VarlenSeqs), each sequence's region of H slices of its query tiles (Sq, Tr unused).
// T: dQ's element type, the tensors' (or float: F32Grads).
template <class T, int kD, int Br, bool kBshd, bool kVarlen = false>
__global__ void __launch_bounds__(256)
    convert_dq_kernel(const float4* __restrict__ acc, T* __restrict__ dq, std::int64_t quads, int Sq, int Tr, int D,
                      float scale, fa::Strides qs, int H, VarlenSeqs vs = {}) {
  const std::int64_t f = std::int64_t{blockIdx.x} * 256 + threadIdx.x;
  if (f >= quads) return;
  const std::int64_t chunk = f / 1024;
  const int within = static_cast<int>(f % 1024), c = within / 128, tid = within % 128;
  constexpr int kChunks = Br / 64 * (kD / 64);
  const int half = static_cast<int>(chunk % kChunks);  // the chunk within its tile
  const int col = (Br == 128 ? 0 : 64 * half) + 8 * c + 2 * (tid % 4);
  const std::int64_t tile = chunk / kChunks;
  int i, first = 0;  // the tile in its slice; the first row of its sequence
  std::int64_t bh;
  if constexpr (kVarlen) {
    const int b = fa::cuda::sequence_of(vs.query_tiles, vs.batch, static_cast<int>(tile / H));
    const int Tr_b = vs.query_tiles[b + 1] - vs.query_tiles[b];
    const int local = static_cast<int>(tile - std::int64_t{H} * vs.query_tiles[b]);
    bh = local / Tr_b;  // the head
    i = local % Tr_b;
    first = vs.cu_seqlens_q[b];
    Sq = vs.cu_seqlens_q[b + 1] - first;
  } else {
    i = static_cast<int>(tile % Tr);
    bh = tile / Tr;
  }
  const int row = Br * i + (Br == 128 ? 64 * half : 0) + 16 * (tid / 32) + tid % 32 / 4;
  if (col >= D) return;
  const float4 v = acc[f];
  if constexpr (kBshd) {
    T* slice = dq + bh / H * qs.batch + bh % H * qs.head + std::int64_t{first} * qs.row + col;
    if (row < Sq) fa::cuda::store2(slice + row * qs.row, v.x * scale, v.y * scale);
    if (row + 8 < Sq) fa::cuda::store2(slice + (row + 8) * qs.row, v.z * scale, v.w * scale);
  } else {
    if (row < Sq) fa::cuda::store2(dq + (bh * Sq + row) * D + col, v.x * scale, v.y * scale);
    if (row + 8 < Sq) fa::cuda::store2(dq + (bh * Sq + row + 8) * D + col, v.z * scale, v.w * scale);
  }
}

}  // namespace detail
}  // namespace backward_v3
