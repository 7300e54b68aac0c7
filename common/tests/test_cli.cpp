// Tests of common/cli.h, the command line every chapter's executable shares: defaults, every
// flag, --help, and a clear error naming the flag for every kind of bad input.
//
//   ./build/common/common_cpu_tests --gtest_filter='Cli*'
#include "common/cli.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace fa {
namespace {

// A chapter's default problem, deliberately different from Problem{} in every field.
Problem chapter_defaults() {
  Problem p;
  p.batch = 2;
  p.heads = p.kv_heads = 8;
  p.seqlen_q = p.seqlen_k = 512;
  p.head_dim = 128;
  p.causal = true;
  p.dtype = Dtype::bf16;
  return p;
}

Options parse(std::vector<std::string> args, const Problem& defaults = chapter_defaults()) {
  args.insert(args.begin(), "chapter");
  std::vector<const char*> argv;
  for (const std::string& a : args) argv.push_back(a.c_str());
  return parse_cli(static_cast<int>(argv.size()), argv.data(), defaults);
}

// The std::invalid_argument message for `args`, or a test failure if they parse.
std::string parse_error(const std::vector<std::string>& args) {
  try {
    parse(args);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  ADD_FAILURE() << "accepted: " << testing::PrintToString(args);
  return "";
}

void expect_error_naming(const std::vector<std::string>& args, const std::string& name) {
  const std::string error = parse_error(args);
  EXPECT_NE(error.find(name), std::string::npos)
      << testing::PrintToString(args) << ": message '" << error << "' does not name " << name;
}

TEST(Cli, DefaultsComeFromTheChapterProblem) {
  const Options o = parse({});
  const Problem d = chapter_defaults();
  EXPECT_EQ(o.problem.batch, d.batch);
  EXPECT_EQ(o.problem.heads, d.heads);
  EXPECT_EQ(o.problem.kv_heads, d.kv_heads);
  EXPECT_EQ(o.problem.seqlen_q, d.seqlen_q);
  EXPECT_EQ(o.problem.seqlen_k, d.seqlen_k);
  EXPECT_EQ(o.problem.head_dim, d.head_dim);
  EXPECT_EQ(o.problem.causal, d.causal);
  EXPECT_EQ(o.problem.dtype, d.dtype);
  EXPECT_FALSE(o.problem.softmax_scale.has_value());
  EXPECT_EQ(o.iters, 20);
  EXPECT_EQ(o.seed, 2024u);
  EXPECT_TRUE(o.check);
  EXPECT_FALSE(o.json);
}

TEST(Cli, EveryFlagParses) {
  const Options o = parse({"--batch", "3", "--heads", "6", "--kv-heads", "2", "--seqlen-q", "17",
                           "--seqlen-k", "1013", "--head-dim", "96", "--causal", "--scale",
                           "0.25", "--dtype", "f16", "--iters", "7", "--seed", "99", "--no-check",
                           "--json"},
                          Problem{});
  EXPECT_EQ(o.problem.batch, 3);
  EXPECT_EQ(o.problem.heads, 6);
  EXPECT_EQ(o.problem.kv_heads, 2);
  EXPECT_EQ(o.problem.seqlen_q, 17);
  EXPECT_EQ(o.problem.seqlen_k, 1013);
  EXPECT_EQ(o.problem.head_dim, 96);
  EXPECT_TRUE(o.problem.causal);
  ASSERT_TRUE(o.problem.softmax_scale.has_value());
  EXPECT_EQ(*o.problem.softmax_scale, 0.25f);
  EXPECT_EQ(o.problem.dtype, Dtype::f16);
  EXPECT_EQ(o.iters, 7);
  EXPECT_EQ(o.seed, 99u);
  EXPECT_FALSE(o.check);
  EXPECT_TRUE(o.json);
}

TEST(Cli, SeqlenSetsBothLengthsAndLaterFlagsWin) {
  const Options both = parse({"--seqlen", "127"});
  EXPECT_EQ(both.problem.seqlen_q, 127);
  EXPECT_EQ(both.problem.seqlen_k, 127);
  const Options split = parse({"--seqlen", "127", "--seqlen-k", "33"});
  EXPECT_EQ(split.problem.seqlen_q, 127);
  EXPECT_EQ(split.problem.seqlen_k, 33);
}

TEST(Cli, KvHeadsDefaultsToHeads) {
  EXPECT_EQ(parse({"--heads", "12"}).problem.kv_heads, 12);
  EXPECT_EQ(parse({"--kv-heads", "4", "--heads", "12"}).problem.kv_heads, 4);  // order free
}

TEST(Cli, HelpListsEveryFlag) {
  for (const char* flag : {"--help", "-h"}) {
    try {
      parse({"--batch", "2", flag});
      ADD_FAILURE() << flag << " did not throw HelpRequested";
    } catch (const HelpRequested& help) {
      const std::string text = help.what();
      for (const char* listed : {"--batch", "--heads", "--kv-heads", "--seqlen ", "--seqlen-q",
                                 "--seqlen-k", "--head-dim", "--causal", "--scale", "--dtype",
                                 "--iters", "--seed", "--no-check", "--json", "--help"})
        EXPECT_NE(text.find(listed), std::string::npos) << listed << " missing from:\n" << text;
      EXPECT_NE(text.find("default bf16"), std::string::npos) << "the chapter's dtype:\n" << text;
    }
  }
}

TEST(Cli, UnknownFlagIsNamed) { expect_error_naming({"--bogus"}, "--bogus"); }

TEST(Cli, MissingValueIsNamed) {
  expect_error_naming({"--batch"}, "--batch");
  expect_error_naming({"--causal", "--dtype"}, "--dtype");
}

TEST(Cli, NonNumbersAreRefused) {
  expect_error_naming({"--seqlen", "12x"}, "--seqlen");
  expect_error_naming({"--seqlen", "12x"}, "12x");
  expect_error_naming({"--head-dim", ""}, "--head-dim");
  expect_error_naming({"--batch", "99999999999"}, "--batch");
  expect_error_naming({"--scale", "abc"}, "--scale");
}

// Values that parse but describe an impossible problem are refused by Problem::validate(),
// whose message names the field (head_dim, kv_heads, ...) the flag sets.
TEST(Cli, ImpossibleProblemsAreRefused) {
  expect_error_naming({"--head-dim", "0"}, "head_dim");
  expect_error_naming({"--heads", "4", "--kv-heads", "3"}, "kv_heads");
  expect_error_naming({"--seqlen", "-5"}, "seqlen");
  expect_error_naming({"--seqlen-k", "-1"}, "seqlen_k");
  expect_error_naming({"--scale", "-1"}, "softmax_scale");
  expect_error_naming({"--dtype", "int8"}, "int8");
  expect_error_naming({"--dtype", "int8"}, "dtype");
  expect_error_naming({"--iters", "0"}, "--iters");
}

}  // namespace
}  // namespace fa
