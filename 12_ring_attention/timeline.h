// A ring's timeline (Ring::record_timeline): each rank's streams timed step by step with pairs of
// CUDA events, for 12_ring_attention_bench --timeline and scripts/plot_ring_timeline.py.
#pragma once

#include <cuda_runtime_api.h>

#include <string>
#include <vector>

namespace ring_attention {

// One span: what one stream of one rank ran, timed by CUDA events on that stream, in ms from the
// rank's origin (recorded on every idle rank at once).
struct Span {
  int rank;
  bool comm;         // the communication stream, else the compute stream
  std::string what;  // "forward", "backward", "pass K,V", "pass dK,dV", "start", "finish"
  int step;          // the ring step (-1: before the first or after the last)
  float start_ms, end_ms;
};

class Timeline {
 public:
  Timeline() = default;
  ~Timeline();
  Timeline(const Timeline&) = delete;
  Timeline& operator=(const Timeline&) = delete;

  // Starts a recording: rank r's origin on its stream `origin[r]` (device devices[r]). The caller
  // has drained every stream, so the origins are recorded at nearly one moment.
  void start(const std::vector<int>& devices, const std::vector<cudaStream_t>& origin);
  void stop();  // forgets the spans (and records no more)
  // A span of rank r on `stream` (the caller has made rank r's device current): its begin event
  // now, its end event at close(r, span). open returns -1, and close does nothing, while stopped.
  int open(int r, cudaStream_t stream, bool comm, const char* what, int step);
  void close(int r, int span);
  bool recording() const { return !ranks_.empty(); }
  // Every span, once the caller has drained the streams.
  std::vector<Span> spans() const;

 private:
  struct Mark {
    Span span;
    cudaStream_t stream;
    cudaEvent_t begin = nullptr, end = nullptr;
  };
  struct Rank {
    int device;
    cudaEvent_t origin = nullptr;
    std::vector<Mark> marks;
  };
  std::vector<Rank> ranks_;
};

}  // namespace ring_attention
