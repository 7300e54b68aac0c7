#include "08_backward/harness/backward.h"

#include <stdexcept>
#include <string>

namespace fa {

void check_backward_args(const Support& s, const Problem& p, const void* q, const void* k,
                         const void* v, const void* o, const void* lse, const void* dout,
                         const void* dq, const void* dk, const void* dv) {
  // The problem, dtype, head_dims, the features (a varlen problem only where s.varlen) and the inputs.
  check_forward_args(s, p, q, k, v, o, lse);
  if (p.dv() != p.head_dim)
    throw std::invalid_argument(s.chapter + ": the backward needs V's head dim to be Q and K's");
  if (!dout || !dq || !dk || !dv) throw std::invalid_argument(s.chapter + ": a tensor pointer is null");
}

}  // namespace fa
