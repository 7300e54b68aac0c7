// CPU tests of chapter 07's own flags (mask_flags.h): they leave the shared flags in argv, and a
// parameter the pattern does not use is refused, never ignored. ctest -L cpu
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "07_block_sparse/mask_flags.h"

namespace bs = block_sparse;

namespace {

// take_mask_flags over {"07_block_sparse", args...}; `rest` gets the arguments it left.
bs::MaskOptions take(std::vector<std::string> args, std::vector<std::string>* rest = nullptr) {
  args.insert(args.begin(), "07_block_sparse");
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  int argc = static_cast<int>(args.size());
  const bs::MaskOptions m = bs::take_mask_flags(argc, argv.data());
  if (rest) rest->assign(argv.begin() + 1, argv.begin() + argc);
  return m;
}

// The std::invalid_argument message for `args`, or a test failure if they are taken.
std::string refusal(const std::vector<std::string>& args) {
  try {
    take(args);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  ADD_FAILURE() << "accepted: " << testing::PrintToString(args);
  return "";
}

TEST(MaskFlags, TakesItsFlagsAndLeavesTheShared) {
  std::vector<std::string> rest;
  const bs::MaskOptions m = take({"--seqlen", "256", "--pattern", "streaming", "--window", "3", "--causal", "--sink",
                                  "2", "--block-k", "64"},
                                 &rest);
  EXPECT_EQ(m.pattern.pattern, bs::Pattern::streaming);
  EXPECT_EQ(m.pattern.window, 3);
  EXPECT_EQ(m.pattern.sink, 2);
  EXPECT_EQ(m.block_k, 64);
  EXPECT_EQ(rest, (std::vector<std::string>{"--seqlen", "256", "--causal"}));
}

TEST(MaskFlags, DefaultsAreRandomHalfDensity) {
  const bs::MaskOptions m = take({});
  EXPECT_EQ(m.pattern.pattern, bs::Pattern::random);
  EXPECT_EQ(m.pattern.density, 0.5);
  EXPECT_EQ(m.block_k, 128);
  const bs::MaskOptions r = take({"--density", "0.25", "--mask-seed", "7"});
  EXPECT_EQ(r.pattern.density, 0.25);
  EXPECT_EQ(r.pattern.seed, 7u);
}

// The newcomer's case: --pattern local takes no density, so --density is refused, whichever
// comes first, naming the flag and the pattern.
TEST(MaskFlags, DensityWithLocalIsRefused) {
  for (const std::vector<std::string>& args : {std::vector<std::string>{"--pattern", "local", "--density", "0.3"},
                                               std::vector<std::string>{"--density", "0.3", "--pattern", "local"}}) {
    const std::string error = refusal(args);
    EXPECT_NE(error.find("--density"), std::string::npos) << error;
    EXPECT_NE(error.find("local"), std::string::npos) << error;
  }
}

TEST(MaskFlags, EveryUnusedParameterIsRefused) {
  struct Case {
    const char* pattern;
    const char* flag;
  };
  for (const Case& c : {Case{"local", "--mask-seed"}, Case{"local", "--sink"}, Case{"dense", "--density"},
                        Case{"dense", "--window"}, Case{"causal", "--sink"}, Case{"random", "--window"},
                        Case{"streaming", "--density"}}) {
    const std::string error = refusal({"--pattern", c.pattern, c.flag, "1"});
    EXPECT_NE(error.find(c.flag), std::string::npos) << c.pattern << ": " << error;
  }
  refusal({"--window", "2"});  // the default pattern, random, has no window
}

TEST(MaskFlags, BadValuesAreRefused) {
  EXPECT_NE(refusal({"--density", "half"}).find("--density"), std::string::npos);
  EXPECT_NE(refusal({"--density", ""}).find("--density"), std::string::npos);
  EXPECT_NE(refusal({"--mask-seed", "-1"}).find("--mask-seed"), std::string::npos);
  EXPECT_NE(refusal({"--pattern", "diagonal"}).find("diagonal"), std::string::npos);
  EXPECT_NE(refusal({"--sink"}).find("--sink"), std::string::npos);
}

}  // namespace
