// Probe (session 19): is S^T = K Q^T by 3xTF32 mma.sync (A = K) bit-identical to S = Q K^T (A = Q),
// and how far from float64 is a dot product whose mma sums start from zero and are added in fp32,
// against one fed straight through the mma's accumulator? Needs exp_08_tf32x3.patch applied
// (mma_1688_3xtf32_transposed). Q, K ~ 12 N(0, 1) (the tests' large logits), 2000 tiles of 16 x 16.
//   git apply docs/pending/exp_08_tf32x3.patch && nvcc -I. -arch=sm_90 -std=c++17 -o /tmp/probe \
//     docs/pending/probe_3xtf32.cu && /tmp/probe
// H100, CUDA 13.0 (docs/session19_h100.md call 3): D = 128 and 64: the transposed order 0 of 512000
// scores differ; the same products with A and B's roles swapped but the plain order: 232 (D = 128)
// and 181 (D = 64) differ. Largest error against float64, D = 128: from zero + fp32 add 0.00151,
// straight through the mma 0.00996, an fp32 FFMA chain 0.00146 (D = 64: 0.000993, 0.00392, 0.000892;
// the FFMA chain's maximum is over the last tile only, the others' over all 2000).
#include <cstdio>
#include <cstdlib>
#include <cmath>
#include "common/device/mma.cuh"
using namespace fa::cuda;
constexpr int D = 128;
// Q, K: (16, D) each. Out: S_f (16 q, 16 keys) forward-style; S_t1/S_t2 (16 keys, 16 q) transposed.
__global__ void probe(const float* Q, const float* K, float* S_f, float* S_t1, float* S_t2, float* S_f1) {
  int lane = threadIdx.x, g = lane / 4, t = lane % 4;
  float f[2][4] = {}, f1[2][4] = {}, t1[2][4] = {}, t2[2][4] = {};
  for (int d = 0; d < D; d += 8) {
    Tf32Pair aq[4] = {split_tf32(Q[g * D + d + t]), split_tf32(Q[(g + 8) * D + d + t]), split_tf32(Q[g * D + d + t + 4]), split_tf32(Q[(g + 8) * D + d + t + 4])};
    Tf32Pair ak[4] = {split_tf32(K[g * D + d + t]), split_tf32(K[(g + 8) * D + d + t]), split_tf32(K[g * D + d + t + 4]), split_tf32(K[(g + 8) * D + d + t + 4])};
    for (int n = 0; n < 2; ++n) {
      Tf32Pair bk0 = split_tf32(K[(8 * n + g) * D + d + t]), bk1 = split_tf32(K[(8 * n + g) * D + d + t + 4]);
      Tf32Pair bq0 = split_tf32(Q[(8 * n + g) * D + d + t]), bq1 = split_tf32(Q[(8 * n + g) * D + d + t + 4]);
      float x[4] = {}, y[4] = {}, z[4] = {};
      mma_1688_3xtf32(x, aq, bk0, bk1);
      mma_1688_3xtf32_transposed(y, ak, bq0, bq1);
      mma_1688_3xtf32(z, ak, bq0, bq1);
      for (int e = 0; e < 4; ++e) f[n][e] += x[e], t1[n][e] += y[e], t2[n][e] += z[e];
      mma_1688_3xtf32(f1[n], aq, bk0, bk1);  // accumulating straight in the mma
    }
  }
  for (int n = 0; n < 2; ++n)
    for (int e = 0; e < 4; ++e) {
      int r = g + 8 * (e / 2), c = 8 * n + 2 * t + e % 2;
      S_f[r * 16 + c] = f[n][e]; S_f1[r * 16 + c] = f1[n][e];
      S_t1[r * 16 + c] = t1[n][e]; S_t2[r * 16 + c] = t2[n][e];
    }
}
int main() {
  float *Q, *K, *Sf, *St1, *St2, *Sf1;
  cudaMallocManaged(&Q, 16 * D * 4); cudaMallocManaged(&K, 16 * D * 4);
  cudaMallocManaged(&Sf, 1024); cudaMallocManaged(&St1, 1024); cudaMallocManaged(&St2, 1024); cudaMallocManaged(&Sf1, 1024);
  srand(1);
  long bad1 = 0, bad2 = 0, total = 0; double err_f = 0, err_f1 = 0, bias_f = 0, bias_f1 = 0, err_t1 = 0;
  for (int trial = 0; trial < 2000; ++trial) {
    for (int i = 0; i < 16 * D; ++i) {
      auto gauss = [] { double u = (rand() + 1.0) / (RAND_MAX + 2.0), v = (rand() + 1.0) / (RAND_MAX + 2.0); return sqrt(-2 * log(u)) * cos(6.283185307 * v); };
      Q[i] = 12 * gauss(); K[i] = 12 * gauss();
    }
    probe<<<1, 32>>>(Q, K, Sf, St1, St2, Sf1);
    cudaDeviceSynchronize();
    for (int q = 0; q < 16; ++q)
      for (int k = 0; k < 16; ++k) {
        double ref = 0; for (int d = 0; d < D; ++d) ref += double(Q[q * D + d]) * K[k * D + d];
        float f = Sf[q * 16 + k];
        bad1 += f != St1[k * 16 + q]; bad2 += f != St2[k * 16 + q]; ++total;
        err_f = fmax(err_f, fabs(f - ref)); err_f1 = fmax(err_f1, fabs(Sf1[q * 16 + k] - ref));
        err_t1 = fmax(err_t1, fabs(St1[k * 16 + q] - ref));
        bias_f += f - ref; bias_f1 += Sf1[q * 16 + k] - ref;
      }
  }
  // plain fp32 FFMA for comparison
  double err_ffma = 0, bias_ffma = 0;
  for (int q = 0; q < 16; ++q) for (int k = 0; k < 16; ++k) {
    float s = 0; double ref = 0;
    for (int d = 0; d < D; ++d) s = fmaf(Q[q * D + d], K[k * D + d], s), ref += double(Q[q * D + d]) * K[k * D + d];
    err_ffma = fmax(err_ffma, fabs(s - ref)); bias_ffma += s - ref;
  }
  printf("D=%d: transposed-order mismatches %ld / %ld, plain-order (roles swapped) mismatches %ld / %ld\n", D, bad1, total, bad2, total);
  printf("max |err| vs fp64: fresh+FADD %.3g (transposed %.3g), straight-in-mma %.3g; mean bias fresh %.3g straight %.3g; last trial FFMA max %.3g mean bias %.3g\n",
         err_f, err_t1, err_f1, bias_f / total, bias_f1 / total, err_ffma, bias_ffma / 256);
}
