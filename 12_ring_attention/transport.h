// How a block goes from rank r to rank r + 1 (mod R): the one interface the ring is written
// against, with two implementations.
//   nccl: a rank a GPU; ncclSend / ncclRecv of every rank in one ncclGroupStart .. ncclGroupEnd
//         (one process drives all ranks, so their calls must form one group, or the first
//         blocking call would wait for a peer that is never called).
//   copy: simulated ranks sharing a GPU (NCCL refuses two ranks on one device): rank r's stream
//         copies rank r - 1's block with cudaMemcpyAsync.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <memory>
#include <vector>

#include "12_ring_attention/plan.h"

namespace ring_attention {

// One rank's side of one pass: `send` (this rank's current block) goes to rank r + 1, rank r - 1's
// arrives in `recv`, both queued on `stream` (the rank's communication stream, on its device).
struct RankLink {
  const void* send;
  void* recv;
  cudaStream_t stream;
};

class Transport {
 public:
  virtual ~Transport() = default;
  // Queues one pass of `bytes` per rank. The caller has ordered links[r].stream after whatever
  // writes links[r].send and last reads links[r].recv; work queued on links[r].stream afterwards
  // sees recv filled, and no later work on links[r].stream runs before rank r + 1 has its copy
  // of send (so the ring may write into send's buffer next).
  virtual void pass_blocks(const std::vector<RankLink>& links, std::size_t bytes) = 0;
  virtual TransportKind kind() const = 0;
  virtual int ranks() const = 0;
  // The device rank r runs on.
  virtual int device(int rank) const = 0;
};

// The ranks on devices 0 .. ranks - 1, one communicator each (ncclCommInitAll).
std::unique_ptr<Transport> make_nccl_transport(int ranks);
// Every rank on device `device`.
std::unique_ptr<Transport> make_copy_transport(int ranks, int device);
bool nccl_built();

}  // namespace ring_attention
