// Chapter 03's algorithm on the CPU: the kernel of online_softmax.cu written out as host loops,
// one loop per loop and one float operation per float operation, so the two read side by side
// and the algorithm is tested without a GPU (test_model.cpp).
#pragma once

#include <limits>
#include <vector>

#include "common/host/problem.h"

namespace online_softmax::model {

// The running state of one query row i after some of its keys: the max m_i of their scores and
// l_i = sum_j exp(S_ij - m_i) over them.
struct RowState {
  float m = -std::numeric_limits<float>::infinity();
  float l = 0.0f;
};

// What one key does to the row's unnormalized output: O_i = alpha * O_i + p * V_j.
struct Update {
  float alpha;  // exp(m_old - m_new) when the max grew (0 at the first key), else 1
  float p;      // P_ij = exp(S_ij - m_new), at most 1
};

// Folds the score s = S_ij of the next key into `row`: the body of the kernel's key loop.
Update step(RowState& row, float s);

// q: [B, H, Sq, D]   k, v: [B, Hkv, Sk, D]   o: [B, H, Sq, D]   lse: [B, H, Sq] (natural log)
// o and lse are resized. A row that sees no key gets O = 0 and LSE = +inf, as on the GPU.
void forward(const fa::Problem& p, const std::vector<float>& q, const std::vector<float>& k,
             const std::vector<float>& v, std::vector<float>& o, std::vector<float>& lse);

}  // namespace online_softmax::model
