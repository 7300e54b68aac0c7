// Chapter 12's ring, inside: what each rank holds (Ring::Rank), shared by ring.cu (the walks) and
// rank.cpp (the ranks' set-up, their streams' synchronization, the timeline's spans).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

#include "12_ring_attention/ring.h"
#include "common/cuda/cuda_check.h"
#include "common/cuda/device_memory.h"

namespace ring_attention {

// 11's backward takes its scratch from fa::cuda::workspace(): one buffer per process, which ranks
// running at once on several streams and devices must not share. Each rank installs its own
// (WorkspaceSource) around its calls; it grows only after the rank's stream has drained.
struct Workspace {
  fa::cuda::DeviceBuffer buffer;
  cudaStream_t stream;
  static void* take(std::size_t bytes, void* context) {
    auto* w = static_cast<Workspace*>(context);
    if (bytes > w->buffer.bytes()) {
      FA_CUDA_CHECK(cudaStreamSynchronize(w->stream));  // the old buffer may still be in use
      w->buffer = fa::cuda::DeviceBuffer(bytes);
    }
    return w->buffer.get();
  }
};

struct Ring::Rank {
  int device;
  cudaStream_t compute = nullptr, comm = nullptr;
  cudaEvent_t computed = nullptr, arrived = nullptr, grads_arrived = nullptr;
  // The rank's own blocks (T): q, o, dout, dq [2][B, H, C, D]; kv, dkv [K | V] [2][B, Hkv, C, D].
  fa::cuda::DeviceBuffer q, kv, o, lse, dout, dq, dkv;
  fa::cuda::DeviceBuffer kv_visit[2];      // the visiting blocks, alternately (T)
  fa::cuda::DeviceBuffer dkv_visit[2];     // their dK and dV sums, travelling with them (fp32)
  fa::cuda::DeviceBuffer o_acc, lse_acc;   // the merge: [2][B, H, C, D], [2][B, H, C] (fp32)
  fa::cuda::DeviceBuffer dq_acc;           // [2][B, H, C, D] fp32
  fa::cuda::DeviceBuffer o_part, lse_part;  // one pair's (O, LSE): [B, H, C, D] T, [B, H, C] float
  fa::cuda::DeviceBuffer dq_part, dk_part, dv_part;  // one pair's gradients (fp32, unrounded)
  Workspace workspace;

  ~Rank() {
    cudaSetDevice(device);
    for (cudaEvent_t e : {computed, arrived, grads_arrived})
      if (e) cudaEventDestroy(e);
    for (cudaStream_t s : {compute, comm})
      if (s) cudaStreamDestroy(s);
  }
};

}  // namespace ring_attention
