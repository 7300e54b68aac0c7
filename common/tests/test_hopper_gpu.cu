// GPU tests of the Hopper vocabulary (common/device/wgmma.cuh, wgmma_layout.h) before any chapter
// builds on it: one warpgroup multiplies 64 x 64 bf16 tiles, stored in shared memory in the
// 128-byte-swizzled layouts, with wgmma; the result must match a float64 product. Four forms,
// the three that FlashAttention-3's forward uses and the one its backward adds:
//   KK: A K-major, B K-major, both from shared memory       (S = Q K^T)
//   RK: A from registers, B K-major                        (the same product, A as fragments)
//   KN: A K-major, B MN-major (imm-trans-b = 1)             (O = P V, V stored keys x columns)
//   NK: A MN-major (imm-trans-a = 1), B K-major            (A stored transposed: dS^T for dQ = dS K)
// and, at D = 96 (09's O += P V), RN96: A from registers, B MN-major 96 columns wide: one whole
// 64-column atom and half the next, whose other half must never be read.
// And TMA (common/device/tma.cuh): a 64 x 64 box, in bounds and hanging over the tensor's edge,
// lands in the layout kmajor_sw128_offset describes, zeros outside the tensor.
// Built for sm_90a only; skipped without a GPU of compute capability 9.0.
//   ./build/common/common_hopper_tests
#include <cuda_bf16.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "common/cuda/cuda_check.h"
#include "common/cuda/device_memory.h"
#include "common/device/mma.cuh"  // smem_u32, pack2
#include "common/device/tma.cuh"
#include "common/device/wgmma.cuh"
#include "common/device/wgmma_layout.h"

namespace fa::cuda {
namespace {

constexpr int kM = 64, kN = 64, kK = 64;  // C (kM x kN) = A (kM x kK) B (kK x kN)
enum class Form { KK, RK, KN, NK };

// The A fragments (mma.cuh's m16n8k16 layout) of rows r0 and r0 + 8 of a ([kM, kK] row-major), per
// 16-wide k-step, for lane t = lane % 4: a0 row r0, a1 row r0 + 8, a2 and a3 the same 8 columns on.
__device__ void a_fragments(const __nv_bfloat16* a, int r0, int t, std::uint32_t (&f)[kK / 16][4]) {
  for (int ks = 0; ks < kK / 16; ++ks)
    for (int h = 0; h < 4; ++h) {
      const int r = r0 + 8 * (h % 2), k = 16 * ks + 2 * t + 8 * (h / 2);
      f[ks][h] = pack2<__nv_bfloat16>(__bfloat162float(a[r * kK + k]), __bfloat162float(a[r * kK + k + 1]));
    }
}

// got against the float64 product want ([rows, cols]), counting the elements that differ by more
// than 1e-3 or are not finite, the first few reported. Each product of two bf16 is exact in fp32;
// what differs from float64 is the accumulation of 64 of them (|sum| <= 64, typically ~5), a few
// fp32 roundings of ~1e-6 each, and whatever the tensor core's internal adder truncates. 1e-3
// absolute allows all of that and is still far below a wrong layout: a misplaced or swapped
// element changes the sum by ~0.1-1.
int mismatches(const std::vector<float>& got, const std::vector<double>& want, int cols) {
  int bad = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const bool ok = std::isfinite(got[i]) && std::abs(got[i] - want[i]) <= 1e-3;
    if (!ok && ++bad <= 5) ADD_FAILURE() << "C[" << i / cols << "][" << i % cols << "] = " << got[i] << ", want " << want[i];
  }
  return bad;
}

// a: [kM, kK] row-major. b: KK/RK/NK: [kN, kK] row-major (B^T, like K_j); KN: [kK, kN] row-major
// (like V_j). c: [kM, kN] fp32. One block of 128 threads: one warpgroup.
template <Form kForm>
__global__ void __launch_bounds__(128) wgmma_tile_kernel(const __nv_bfloat16* a, const __nv_bfloat16* b, float* c) {
  __shared__ __align__(1024) unsigned char A_s[kM * kK * 2];  // (kM, kK) K-major, or (kK, kM) MN-major
  __shared__ __align__(1024) unsigned char B_s[kN * kK * 2];  // (kN, kK) K-major, or (kK, kN) MN-major
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, g = lane / 4, t = lane % 4;
  for (int i = tid; i < kM * kK; i += 128) {
    if constexpr (kForm == Form::NK)  // A^T: row k holds A's column k (M contiguous elements)
      *reinterpret_cast<__nv_bfloat16*>(A_s + kmajor_sw128_offset(i % kK, i / kK, kK)) = a[i];
    else
      *reinterpret_cast<__nv_bfloat16*>(A_s + kmajor_sw128_offset(i / kK, i % kK, kM)) = a[i];
  }
  constexpr int kBRows = kForm == Form::KN ? kK : kN, kBCols = kForm == Form::KN ? kN : kK;
  for (int i = tid; i < kBRows * kBCols; i += 128)
    *reinterpret_cast<__nv_bfloat16*>(B_s + kmajor_sw128_offset(i / kBCols, i % kBCols, kBRows)) = b[i];
  fence_proxy_async();  // the st.shared above become visible to wgmma's (async proxy) reads
  __syncthreads();      // ... everyone's

  // RK: the warp's A fragments of rows 16 warp + g (+8), per 16-wide k-step (mma.cuh's layout).
  std::uint32_t a_frag[kK / 16][4];
  const int r0 = 16 * warp + g;
  a_fragments(a, r0, t, a_frag);

  float d[32] = {};
  wgmma_fence();  // d and a_frag were written by ordinary instructions
#pragma unroll
  for (int ks = 0; ks < kK / 16; ++ks) {
    const std::uint32_t A_u = smem_u32(A_s), B_u = smem_u32(B_s);
    if constexpr (kForm == Form::KK)
      wgmma_ss_m64n64k16<__nv_bfloat16, 0>(d, kmajor_sw128_desc(A_u, kM, 16 * ks), kmajor_sw128_desc(B_u, kN, 16 * ks), ks > 0);
    else if constexpr (kForm == Form::RK)
      wgmma_rs_m64n64k16<__nv_bfloat16, 0>(d, a_frag[ks], kmajor_sw128_desc(B_u, kN, 16 * ks), ks > 0);
    else if constexpr (kForm == Form::KN)
      wgmma_ss_m64n64k16<__nv_bfloat16, 1>(d, kmajor_sw128_desc(A_u, kM, 16 * ks), mnmajor_sw128_desc(B_u, kK, 16 * ks, 0), ks > 0);
    else
      wgmma_ss_m64n64k16<__nv_bfloat16, 0, 1>(d, mnmajor_sw128_desc(A_u, kK, 16 * ks, 0), kmajor_sw128_desc(B_u, kN, 16 * ks), ks > 0);
  }
  wgmma_commit();
  wgmma_wait<0>();  // d is final
  for (int j = 0; j < kN / 8; ++j) {
    const int col = 8 * j + 2 * t;
    c[r0 * kN + col] = d[4 * j];
    c[r0 * kN + col + 1] = d[4 * j + 1];
    c[(r0 + 8) * kN + col] = d[4 * j + 2];
    c[(r0 + 8) * kN + col + 1] = d[4 * j + 3];
  }
}

template <Form kForm>
void check_form() {
  const std::string reason = unavailable_reason();
  if (!reason.empty()) GTEST_SKIP() << "GPU test skipped: " << reason;
  if (compute_capability() != 90) GTEST_SKIP() << "GPU test skipped: wgmma needs compute capability 9.0 (sm_90a)";
  std::mt19937 rng(1234 + static_cast<int>(kForm));
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
  std::vector<__nv_bfloat16> a(kM * kK), b(kN * kK);
  for (auto& x : a) x = __float2bfloat16(uni(rng));
  for (auto& x : b) x = __float2bfloat16(uni(rng));
  // The float64 product of the bf16 inputs (exact in bf16 -> fp32 -> double).
  std::vector<double> want(kM * kN, 0.0);
  for (int m = 0; m < kM; ++m)
    for (int n = 0; n < kN; ++n)
      for (int k = 0; k < kK; ++k) {
        const double bv = kForm == Form::KN ? __bfloat162float(b[k * kN + n]) : __bfloat162float(b[n * kK + k]);
        want[m * kN + n] += static_cast<double>(__bfloat162float(a[m * kK + k])) * bv;
      }
  DeviceBuffer a_d(a.size() * sizeof(a[0])), b_d(b.size() * sizeof(b[0])), c_d(kM * kN * sizeof(float));
  a_d.upload(a.data(), a_d.bytes());
  b_d.upload(b.data(), b_d.bytes());
  c_d.poison();  // NaN in every element: one the kernel never writes fails
  wgmma_tile_kernel<kForm><<<1, 128>>>(a_d.as<__nv_bfloat16>(), b_d.as<__nv_bfloat16>(), c_d.as<float>());
  FA_CUDA_CHECK(cudaGetLastError());
  FA_CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<float> got(kM * kN);
  FA_CUDA_CHECK(cudaMemcpy(got.data(), c_d.get(), c_d.bytes(), cudaMemcpyDeviceToHost));
  EXPECT_EQ(mismatches(got, want, kN), 0);
}

// One TMA box of 64 x 64 from `src` ([rows, cols] bf16) at (col0, row0), then every element of it
// compared with the global tensor (0 outside it) at the place the 128-byte swizzle gives it.
// Mismatches are counted in *bad.
__global__ void __launch_bounds__(128) tma_box_kernel(const __grid_constant__ CUtensorMap map, const __nv_bfloat16* src,
                                                      int rows, int cols, int row0, int col0, int* bad) {
  __shared__ __align__(1024) unsigned char tile[64 * 64 * 2];  // (64, 64) 128-byte swizzle
  __shared__ __align__(8) std::uint64_t bar;
  const std::uint32_t bar_u = smem_u32(&bar);
  if (threadIdx.x == 0) {
    mbarrier_init(bar_u, 1);
    mbarrier_init_fence();
  }
  __syncthreads();  // the barrier is initialized before anyone waits on it
  if (threadIdx.x == 0) {
    mbarrier_arrive_expect_tx(bar_u, sizeof(tile));  // the box is counted whole, zeros included
    tma_load_2d(smem_u32(tile), &map, col0, row0, bar_u);
  }
  mbarrier_wait(bar_u, 0);  // phase 0 completes when the box has landed
  for (int i = threadIdx.x; i < 64 * 64; i += blockDim.x) {
    const int r = i / 64, c = i % 64, gr = row0 + r, gc = col0 + c;
    const float want = gr < rows && gc < cols ? __bfloat162float(src[gr * cols + gc]) : 0.0f;
    const float got = __bfloat162float(*reinterpret_cast<const __nv_bfloat16*>(tile + kmajor_sw128_offset(r, c, 64)));
    if (got != want) atomicAdd(bad, 1);
  }
}

TEST(HopperTma, BoxLandsInThe128ByteSwizzleWithZerosOutside) {
  const std::string reason = unavailable_reason();
  if (!reason.empty()) GTEST_SKIP() << "GPU test skipped: " << reason;
  if (compute_capability() != 90) GTEST_SKIP() << "GPU test skipped: TMA needs compute capability 9.0 (sm_90a)";
  const int rows = 150, cols = 136;  // neither a multiple of 64: the last boxes hang over
  std::vector<__nv_bfloat16> host(rows * cols);
  for (int i = 0; i < rows * cols; ++i) host[i] = __float2bfloat16(static_cast<float>(i % 251 + 1));  // never 0
  DeviceBuffer src(host.size() * sizeof(host[0])), bad(sizeof(int));
  src.upload(host.data(), src.bytes());
  const CUtensorMap map = make_tma_2d(src.get(), true, rows, cols, 64, 64);
  for (auto [row0, col0] : {std::pair{0, 0}, std::pair{64, 64}, std::pair{128, 128}, std::pair{100, 72}}) {
    FA_CUDA_CHECK(cudaMemset(bad.get(), 0, sizeof(int)));
    tma_box_kernel<<<1, 128>>>(map, src.as<__nv_bfloat16>(), rows, cols, row0, col0, bad.as<int>());
    FA_CUDA_CHECK(cudaGetLastError());
    FA_CUDA_CHECK(cudaDeviceSynchronize());
    int mismatches = -1;
    FA_CUDA_CHECK(cudaMemcpy(&mismatches, bad.get(), sizeof(int), cudaMemcpyDeviceToHost));
    EXPECT_EQ(mismatches, 0) << "box at row " << row0 << ", column " << col0;
  }
}

// RN96: C (64 x 96) = A (64 x 64, from registers) B (64 x 96, MN-major: [kK, 96] row-major, like V_j
// at D = 96). B lands in two 64-column atoms as TMA would put it, and the second atom's columns
// 96-127 hold NaN: a wgmma of N = 96 that read them would make C NaN.
constexpr int kN96 = 96;
__global__ void __launch_bounds__(128) wgmma_rn96_kernel(const __nv_bfloat16* a, const __nv_bfloat16* b, float* c) {
  __shared__ __align__(1024) unsigned char B_s[2 * kK * 128];  // (kK, 128) MN-major: two atoms of kK rows
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, g = lane / 4, t = lane % 4;
  for (int i = tid; i < kK * 128; i += 128) {
    const int r = i / 128, col = i % 128;
    *reinterpret_cast<__nv_bfloat16*>(B_s + kmajor_sw128_offset(r, col, kK)) =
        col < kN96 ? b[r * kN96 + col] : __float2bfloat16(NAN);
  }
  fence_proxy_async();
  __syncthreads();
  std::uint32_t a_frag[kK / 16][4];
  const int r0 = 16 * warp + g;
  a_fragments(a, r0, t, a_frag);
  float d[kN96 / 2] = {};
  wgmma_fence();
#pragma unroll
  for (int ks = 0; ks < kK / 16; ++ks)
    wgmma_rs<__nv_bfloat16, kN96, 1>(d, a_frag[ks], mnmajor_sw128_desc(smem_u32(B_s), kK, 16 * ks, 0), ks > 0);
  wgmma_commit();
  wgmma_wait<0>();
  for (int j = 0; j < kN96 / 8; ++j)
    for (int e = 0; e < 4; ++e) c[(r0 + 8 * (e / 2)) * kN96 + 8 * j + 2 * t + e % 2] = d[4 * j + e];
}

TEST(HopperWgmma, RegistersTimesMNMajorN96) {
  const std::string reason = unavailable_reason();
  if (!reason.empty()) GTEST_SKIP() << "GPU test skipped: " << reason;
  if (compute_capability() != 90) GTEST_SKIP() << "GPU test skipped: wgmma needs compute capability 9.0 (sm_90a)";
  std::mt19937 rng(96);
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
  std::vector<__nv_bfloat16> a(kM * kK), b(kK * kN96);
  for (auto& x : a) x = __float2bfloat16(uni(rng));
  for (auto& x : b) x = __float2bfloat16(uni(rng));
  DeviceBuffer a_d(a.size() * sizeof(a[0])), b_d(b.size() * sizeof(b[0])), c_d(kM * kN96 * sizeof(float));
  a_d.upload(a.data(), a_d.bytes());
  b_d.upload(b.data(), b_d.bytes());
  c_d.poison();
  wgmma_rn96_kernel<<<1, 128>>>(a_d.as<__nv_bfloat16>(), b_d.as<__nv_bfloat16>(), c_d.as<float>());
  FA_CUDA_CHECK(cudaGetLastError());
  FA_CUDA_CHECK(cudaDeviceSynchronize());
  std::vector<float> got(kM * kN96);
  FA_CUDA_CHECK(cudaMemcpy(got.data(), c_d.get(), c_d.bytes(), cudaMemcpyDeviceToHost));
  std::vector<double> want(kM * kN96, 0.0);
  for (int m = 0; m < kM; ++m)
    for (int n = 0; n < kN96; ++n)
      for (int k = 0; k < kK; ++k)
        want[m * kN96 + n] += static_cast<double>(__bfloat162float(a[m * kK + k])) * __bfloat162float(b[k * kN96 + n]);
  EXPECT_EQ(mismatches(got, want, kN96), 0);
}

TEST(HopperWgmma, KMajorTimesKMajor) { check_form<Form::KK>(); }
TEST(HopperWgmma, RegistersTimesKMajor) { check_form<Form::RK>(); }
TEST(HopperWgmma, KMajorTimesMNMajor) { check_form<Form::KN>(); }
TEST(HopperWgmma, MNMajorTimesKMajor) { check_form<Form::NK>(); }

}  // namespace
}  // namespace fa::cuda
