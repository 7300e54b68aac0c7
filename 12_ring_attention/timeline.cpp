#include "12_ring_attention/timeline.h"

#include "common/cuda/cuda_check.h"

namespace ring_attention {

Timeline::~Timeline() { stop(); }

void Timeline::stop() {
  for (Rank& rank : ranks_) {  // no throw: a destructor calls this
    cudaSetDevice(rank.device);
    for (const Mark& m : rank.marks)
      for (cudaEvent_t e : {m.begin, m.end})
        if (e) cudaEventDestroy(e);
    if (rank.origin) cudaEventDestroy(rank.origin);
  }
  ranks_.clear();
}

void Timeline::start(const std::vector<int>& devices, const std::vector<cudaStream_t>& origin) {
  stop();
  for (std::size_t r = 0; r < devices.size(); ++r) {
    FA_CUDA_CHECK(cudaSetDevice(devices[r]));
    Rank rank;
    rank.device = devices[r];
    FA_CUDA_CHECK(cudaEventCreate(&rank.origin));
    FA_CUDA_CHECK(cudaEventRecord(rank.origin, origin[r]));
    ranks_.push_back(std::move(rank));
  }
}

int Timeline::open(int r, cudaStream_t stream, bool comm, const char* what, int step) {
  if (!recording()) return -1;
  Mark m{.span = {.rank = r, .comm = comm, .what = what, .step = step, .start_ms = 0, .end_ms = 0},
         .stream = stream};
  FA_CUDA_CHECK(cudaEventCreate(&m.begin));
  FA_CUDA_CHECK(cudaEventCreate(&m.end));
  FA_CUDA_CHECK(cudaEventRecord(m.begin, stream));
  ranks_[r].marks.push_back(m);
  return static_cast<int>(ranks_[r].marks.size()) - 1;
}

void Timeline::close(int r, int span) {
  if (span < 0) return;
  const Mark& m = ranks_[r].marks[span];
  FA_CUDA_CHECK(cudaEventRecord(m.end, m.stream));
}

std::vector<Span> Timeline::spans() const {
  std::vector<Span> spans;
  for (const Rank& rank : ranks_) {
    FA_CUDA_CHECK(cudaSetDevice(rank.device));
    for (const Mark& m : rank.marks) {
      Span s = m.span;
      FA_CUDA_CHECK(cudaEventElapsedTime(&s.start_ms, rank.origin, m.begin));
      FA_CUDA_CHECK(cudaEventElapsedTime(&s.end_ms, rank.origin, m.end));
      spans.push_back(s);
    }
  }
  return spans;
}

}  // namespace ring_attention
