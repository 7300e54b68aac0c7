// Chapter 12's ranks: their streams, events and buffers (Ring's constructor), the accessors, and
// the timeline's start, stop and spans. The walks themselves are ring.cu's.
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "12_ring_attention/rank.h"
#include "12_ring_attention/ring.h"
#include "common/cuda/cuda_check.h"

namespace ring_attention {

Ring::Ring(const fa::Problem& p, std::shared_ptr<Transport> transport) : p_(p), transport_(std::move(transport)) {
  const int R = transport_->ranks();
  if (const std::string why = ring_problem_error(p, R); !why.empty()) throw std::invalid_argument(why);
  const std::size_t elem = fa::dtype_size(p.dtype);
  const fa::Problem c = pair_problem(p, R, Pair::full);  // one chunk: [B, H, C, D]
  const std::size_t q_chunk = c.q_elems(), k_chunk = c.kv_elems(), rows = c.lse_elems();
  for (int r = 0; r < R; ++r) {
    auto rank = std::make_unique<Rank>();
    rank->device = transport_->device(r);
    FA_CUDA_CHECK(cudaSetDevice(rank->device));
    FA_CUDA_CHECK(cudaStreamCreateWithFlags(&rank->compute, cudaStreamNonBlocking));
    FA_CUDA_CHECK(cudaStreamCreateWithFlags(&rank->comm, cudaStreamNonBlocking));
    for (cudaEvent_t* e : {&rank->computed, &rank->arrived, &rank->grads_arrived})
      FA_CUDA_CHECK(cudaEventCreateWithFlags(e, cudaEventDisableTiming));
    using fa::cuda::DeviceBuffer;
    rank->q = DeviceBuffer(2 * q_chunk * elem), rank->o = DeviceBuffer(2 * q_chunk * elem);
    rank->dout = DeviceBuffer(2 * q_chunk * elem), rank->dq = DeviceBuffer(2 * q_chunk * elem);
    rank->lse = DeviceBuffer(2 * rows * sizeof(float));
    rank->kv = DeviceBuffer(4 * k_chunk * elem), rank->dkv = DeviceBuffer(4 * k_chunk * elem);
    for (int i = 0; i < 2; ++i) {
      rank->kv_visit[i] = DeviceBuffer(4 * k_chunk * elem);
      rank->dkv_visit[i] = DeviceBuffer(4 * k_chunk * sizeof(float));
    }
    rank->o_acc = DeviceBuffer(2 * q_chunk * sizeof(float)), rank->lse_acc = DeviceBuffer(2 * rows * sizeof(float));
    rank->dq_acc = DeviceBuffer(2 * q_chunk * sizeof(float));
    rank->o_part = DeviceBuffer(q_chunk * elem), rank->lse_part = DeviceBuffer(rows * sizeof(float));
    rank->dq_part = DeviceBuffer(q_chunk * sizeof(float));
    rank->dk_part = DeviceBuffer(k_chunk * sizeof(float)), rank->dv_part = DeviceBuffer(k_chunk * sizeof(float));
    rank->workspace.stream = rank->compute;
    ranks_.push_back(std::move(rank));
  }
}

Ring::~Ring() {
  try {
    synchronize();
  } catch (...) {  // a destructor must not throw; the buffers go either way
  }
}

void Ring::synchronize() const {
  for (const auto& rank : ranks_) {
    FA_CUDA_CHECK(cudaSetDevice(rank->device));
    FA_CUDA_CHECK(cudaStreamSynchronize(rank->compute));
    FA_CUDA_CHECK(cudaStreamSynchronize(rank->comm));
  }
}

void* Ring::block(int r, int step) const {
  const int b = kv_buffer(step);  // its own block, then the visiting ones alternately
  return b == 0 ? ranks_[r]->kv.get() : ranks_[r]->kv_visit[b - 1].get();
}

void* Ring::q(int r) const { return ranks_[r]->q.get(); }
void* Ring::kv(int r) const { return ranks_[r]->kv.get(); }
void* Ring::o(int r) const { return ranks_[r]->o.get(); }
float* Ring::lse(int r) const { return ranks_[r]->lse.as<float>(); }
void* Ring::dout(int r) const { return ranks_[r]->dout.get(); }
void* Ring::dq(int r) const { return ranks_[r]->dq.get(); }
void* Ring::dkv(int r) const { return ranks_[r]->dkv.get(); }
cudaStream_t Ring::stream(int r) const { return ranks_[r]->compute; }

void Ring::record_timeline(bool on) {
  synchronize();  // every stream idle: the origins are recorded at (nearly) one moment
  if (!on) {
    timeline_.stop();
    return;
  }
  std::vector<int> devices;
  std::vector<cudaStream_t> streams;
  for (const auto& rank : ranks_) devices.push_back(rank->device), streams.push_back(rank->compute);
  timeline_.start(devices, streams);
}

std::vector<Span> Ring::timeline() const {
  synchronize();
  return timeline_.spans();
}

int Ring::open_span(int r, bool comm, const char* what, int step) {
  return timeline_.open(r, comm ? ranks_[r]->comm : ranks_[r]->compute, comm, what, step);
}

}  // namespace ring_attention
