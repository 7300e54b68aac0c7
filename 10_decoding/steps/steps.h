// Chapter 10's alternative versions, each a Chapter so that the shared tests and benchmarks run it:
//   stream_k   persistent CTAs over an even share of (tile, key tile) units, the combine as the
//              fix-up (steps/stream_k.cuh; the schedule: stream_k.h), against the chapter's plain
//              split (decoding.cuh). Plain forward only (no score options, no cache).
#pragma once

#include <vector>

#include "common/harness/chapter.h"

namespace decoding::steps {

using fa::Step;

const std::vector<Step>& all();

}  // namespace decoding::steps
