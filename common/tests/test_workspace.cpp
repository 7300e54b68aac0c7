// fa::cuda::WorkspaceSource (common/cuda/device_memory.h): while one lives, workspace() takes its
// memory from it, the innermost of nested ones, and the grow-only buffer is not touched. Host code
// only: these cases need no GPU (they never reach the grow-only buffer's cudaMalloc).
#include <gtest/gtest.h>

#include <cstddef>
#include <stdexcept>
#include <vector>

#include "common/cuda/device_memory.h"

namespace {

struct Arena {
  alignas(256) unsigned char bytes[4096];
  std::vector<std::size_t> asked;
  static void* take(std::size_t n, void* self) {
    auto* a = static_cast<Arena*>(self);
    a->asked.push_back(n);
    return n <= sizeof(a->bytes) ? a->bytes : nullptr;
  }
};

TEST(WorkspaceSource, WorkspaceTakesFromTheInnermostSource) {
  Arena outer, inner;
  const fa::cuda::WorkspaceSource from_outer(&Arena::take, &outer);
  EXPECT_EQ(fa::cuda::workspace(100, "test"), outer.bytes);
  {
    const fa::cuda::WorkspaceSource from_inner(&Arena::take, &inner);
    EXPECT_EQ(fa::cuda::workspace(200, "test"), inner.bytes);
    EXPECT_EQ(fa::cuda::workspace(300, "test"), inner.bytes);
  }
  EXPECT_EQ(fa::cuda::workspace(400, "test"), outer.bytes);  // the outer source is back
  EXPECT_EQ(outer.asked, (std::vector<std::size_t>{100, 400}));
  EXPECT_EQ(inner.asked, (std::vector<std::size_t>{200, 300}));
}

TEST(WorkspaceSource, NoMemoryFromTheSourceIsAnErrorNamingTheCaller) {
  Arena arena;
  const fa::cuda::WorkspaceSource from_arena(&Arena::take, &arena);
  try {
    fa::cuda::workspace(sizeof(arena.bytes) + 1, "11_backward_v3's dQ accumulator");
    FAIL() << "no error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("11_backward_v3's dQ accumulator"), std::string::npos) << e.what();
  }
}

}  // namespace
