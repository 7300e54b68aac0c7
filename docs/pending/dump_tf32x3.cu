// Runs 05's 3xTF32 forward (flash_v2_tf32x3.cu) on fixed seeded inputs and writes O and LSE's raw bits to
// OUTDIR/<problem>.bin, so two builds' outputs can be compared with cmp (check_exp_05.sh).
// Q is scaled by 12 so that scores are large (the 08 tests' large-logit inputs have that size):
// a change in how S_ij is summed shows in LSE's bits.
//   dump_tf32x3 OUTDIR
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "05_flash_v2/flash_v2.h"
#include "common/cuda_check.h"
#include "common/device_memory.h"

__global__ void scale(float* x, long n, float s) {
  for (long i = blockIdx.x * long{blockDim.x} + threadIdx.x; i < n; i += long{gridDim.x} * blockDim.x) x[i] *= s;
}

int main(int argc, char** argv) {
  if (argc != 2) return std::fprintf(stderr, "usage: %s OUTDIR\n", argv[0]), 2;
  struct Case { int d, sq, sk; bool causal; };
  for (const Case c : {Case{64, 700, 700, true}, Case{128, 1000, 1000, false}, Case{128, 777, 1013, true}, Case{100, 513, 300, false}}) {
    fa::Problem p;
    p.batch = 2, p.heads = 4, p.kv_heads = 2, p.seqlen_q = c.sq, p.seqlen_k = c.sk, p.head_dim = c.d;
    p.head_dim_v = c.d, p.causal = c.causal, p.dtype = fa::Dtype::f32;
    fa::cuda::DeviceBuffer q(p.q_elems() * 4), k(p.kv_elems() * 4), v(p.v_elems() * 4), o(p.o_elems() * 4),
        lse(p.lse_elems() * 4);
    fa::cuda::fill_random(q.get(), p.q_elems(), p.dtype, 11, nullptr);
    fa::cuda::fill_random(k.get(), p.kv_elems(), p.dtype, 12, nullptr);
    fa::cuda::fill_random(v.get(), p.v_elems(), p.dtype, 13, nullptr);
    scale<<<256, 256>>>(q.as<float>(), p.q_elems(), 12.0f);
    flash_v2::tf32x3_forward(p, q.get(), k.get(), v.get(), o.get(), lse.as<float>(), nullptr);
    FA_CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<float> ho(p.o_elems()), hl(p.lse_elems());
    FA_CUDA_CHECK(cudaMemcpy(ho.data(), o.get(), ho.size() * 4, cudaMemcpyDeviceToHost));
    FA_CUDA_CHECK(cudaMemcpy(hl.data(), lse.get(), hl.size() * 4, cudaMemcpyDeviceToHost));
    const std::string name = std::string(argv[1]) + "/D" + std::to_string(c.d) + "_" + std::to_string(c.sq) + "x" +
                             std::to_string(c.sk) + (c.causal ? "_causal" : "");
    std::ofstream(name + "_o.bin", std::ios::binary).write(reinterpret_cast<const char*>(ho.data()), ho.size() * 4);
    std::ofstream(name + "_lse.bin", std::ios::binary).write(reinterpret_cast<const char*>(hl.data()), hl.size() * 4);
    std::printf("%s: written\n", name.c_str());
  }
  return 0;
}
