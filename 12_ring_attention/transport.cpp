// The ring's two transports (transport.h): NCCL between GPUs, cudaMemcpyAsync between simulated
// ranks on one GPU.
#include "12_ring_attention/transport.h"

#include <nccl.h>

#include <stdexcept>
#include <string>

#include "common/cuda/cuda_check.h"

namespace ring_attention {
namespace {

void nccl_check(ncclResult_t status, const char* what) {
  if (status != ncclSuccess)
    throw std::runtime_error(std::string("12_ring_attention: ") + what + ": " + ncclGetErrorString(status));
}

class NcclTransport final : public Transport {
 public:
  explicit NcclTransport(int ranks) : comms_(ranks) {
    std::vector<int> devices(ranks);
    for (int r = 0; r < ranks; ++r) devices[r] = r;
    nccl_check(ncclCommInitAll(comms_.data(), ranks, devices.data()), "ncclCommInitAll");
  }
  ~NcclTransport() override {
    for (ncclComm_t c : comms_) ncclCommDestroy(c);
  }

  void pass_blocks(const std::vector<RankLink>& links, std::size_t bytes) override {
    const int ranks = static_cast<int>(comms_.size());
    if (ranks == 1) {  // the block comes back to its own rank
      FA_CUDA_CHECK(cudaSetDevice(0));
      FA_CUDA_CHECK(cudaMemcpyAsync(links[0].recv, links[0].send, bytes, cudaMemcpyDeviceToDevice, links[0].stream));
      return;
    }
    // ncclSend / ncclRecv complete on the stream only when the peer has its bytes: the guarantee
    // pass_blocks promises about `send` comes with them.
    nccl_check(ncclGroupStart(), "ncclGroupStart");
    for (int r = 0; r < ranks; ++r) {
      nccl_check(ncclSend(links[r].send, bytes, ncclChar, (r + 1) % ranks, comms_[r], links[r].stream), "ncclSend");
      nccl_check(ncclRecv(links[r].recv, bytes, ncclChar, (r + ranks - 1) % ranks, comms_[r], links[r].stream),
                 "ncclRecv");
    }
    nccl_check(ncclGroupEnd(), "ncclGroupEnd");
  }
  TransportKind kind() const override { return TransportKind::nccl; }
  int ranks() const override { return static_cast<int>(comms_.size()); }
  int device(int rank) const override { return rank; }

 private:
  std::vector<ncclComm_t> comms_;
};

class CopyTransport final : public Transport {
 public:
  CopyTransport(int ranks, int device) : device_(device), ready_(ranks), copied_(ranks) {
    FA_CUDA_CHECK(cudaSetDevice(device));
    for (int r = 0; r < ranks; ++r) {
      FA_CUDA_CHECK(cudaEventCreateWithFlags(&ready_[r], cudaEventDisableTiming));
      FA_CUDA_CHECK(cudaEventCreateWithFlags(&copied_[r], cudaEventDisableTiming));
    }
  }
  ~CopyTransport() override {
    for (cudaEvent_t e : ready_) cudaEventDestroy(e);
    for (cudaEvent_t e : copied_) cudaEventDestroy(e);
  }

  void pass_blocks(const std::vector<RankLink>& links, std::size_t bytes) override {
    const int ranks = static_cast<int>(links.size());
    FA_CUDA_CHECK(cudaSetDevice(device_));
    // Rank r copies from rank r - 1's send buffer on its own stream: it must wait for what the
    // caller ordered before rank r - 1's stream (the block written, recv's buffer free)...
    for (int r = 0; r < ranks; ++r) FA_CUDA_CHECK(cudaEventRecord(ready_[r], links[r].stream));
    for (int r = 0; r < ranks; ++r) {
      const int prev = (r + ranks - 1) % ranks;
      FA_CUDA_CHECK(cudaStreamWaitEvent(links[r].stream, ready_[prev], 0));
      FA_CUDA_CHECK(cudaMemcpyAsync(links[r].recv, links[prev].send, bytes, cudaMemcpyDeviceToDevice, links[r].stream));
      FA_CUDA_CHECK(cudaEventRecord(copied_[r], links[r].stream));
    }
    // ...and rank r - 1 may overwrite its send buffer only after rank r has copied it.
    for (int r = 0; r < ranks; ++r) FA_CUDA_CHECK(cudaStreamWaitEvent(links[r].stream, copied_[(r + 1) % ranks], 0));
  }
  TransportKind kind() const override { return TransportKind::copy; }
  int ranks() const override { return static_cast<int>(ready_.size()); }
  int device(int) const override { return device_; }

 private:
  int device_;
  std::vector<cudaEvent_t> ready_, copied_;
};

}  // namespace

std::unique_ptr<Transport> make_nccl_transport(int ranks) { return std::make_unique<NcclTransport>(ranks); }
std::unique_ptr<Transport> make_copy_transport(int ranks, int device) {
  return std::make_unique<CopyTransport>(ranks, device);
}
bool nccl_built() { return true; }

}  // namespace ring_attention
