// Tests of common/host/cli.h, the command line every chapter's executable shares: defaults, every
// flag, --help and its per-chapter dtypes and head dims, a clear error naming the flag for every
// kind of bad input, and the one form of an error line.
//
//   ./build/common/common_cpu_tests --gtest_filter='Cli*'
#include "common/host/cli.h"

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
                           "--json", "--layout", "bshd"},
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
  EXPECT_EQ(o.problem.layout, Layout::bshd);
  EXPECT_THROW(parse({"--layout", "sbhd"}, Problem{}), std::invalid_argument);
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

// --help is the parser's one non-error exit; the runner prints usage() for it.
TEST(Cli, HelpIsRequested) {
  for (const char* flag : {"--help", "-h"}) {
    EXPECT_THROW(parse({"--batch", "2", flag}), HelpRequested) << flag;
    EXPECT_THROW(parse({flag, "--bogus"}), HelpRequested) << flag << " comes first";
  }
}

// Support tables as chapters declare them (01's f32 kernel, 06's tensor-core one, 08's two).
const Support kF32Only{.chapter = "01_naive", .dtypes = {Dtype::f32}, .head_dims = {}, .max_head_dim = 256};
const Support kHalfOnly{.chapter = "06_tensor_core", .dtypes = {Dtype::bf16, Dtype::f16},
                        .head_dims = {32, 64, 96, 128, 256}};
const Support kBackwardF32{.chapter = "08_backward", .dtypes = {Dtype::f32}, .head_dims = {}, .max_head_dim = 128};
const Support kBackwardHalf{.chapter = "08_backward", .dtypes = {Dtype::f16, Dtype::bf16}, .head_dims = {64, 128}};

std::string help_text(const std::vector<Support>& supports, Dtype dtype, const std::string& chapter_flags = "") {
  return usage({.chapter = supports[0].chapter,
                .runs = "runs one attention forward pass.",
                .supports = supports,
                .defaults = default_problem(dtype),
                .chapter_flags = chapter_flags,
                .program = "./" + supports[0].chapter});
}

// The line of `text` that starts with `flag` (after the indent), or "" if none does.
std::string line_of(const std::string& text, const std::string& flag) {
  std::size_t at = text.find("  " + flag + " ");
  if (at == std::string::npos) return "";
  return text.substr(at, text.find('\n', at) - at);
}

TEST(Cli, HelpListsEveryFlag) {
  const std::string text = help_text({kHalfOnly}, Dtype::bf16);
  for (const char* listed : {"--batch", "--heads", "--kv-heads", "--seqlen ", "--seqlen-q", "--seqlen-k",
                             "--head-dim", "--causal", "--scale", "--dtype", "--iters", "--seed", "--no-check",
                             "--json", "--help"})
    EXPECT_NE(text.find(listed), std::string::npos) << listed << " missing from:\n" << text;
  EXPECT_NE(text.find("usage: ./06_tensor_core [options]"), std::string::npos) << text;
  EXPECT_NE(text.find("06_tensor_core runs one attention forward pass."), std::string::npos) << text;
  EXPECT_NE(text.find("Exit status: 0 pass, 1 mismatch or CUDA error, 2 bad arguments"), std::string::npos) << text;
}

TEST(Cli, HelpOfAnF32ChapterListsF32AndItsHeadDims) {
  const std::string text = help_text({kF32Only}, Dtype::f32);
  const std::string dtype = line_of(text, "--dtype T"), head_dim = line_of(text, "--head-dim N");
  EXPECT_NE(dtype.find("f32 only (default f32)"), std::string::npos) << dtype;
  EXPECT_EQ(dtype.find("f16"), std::string::npos) << dtype;  // bf16 contains f16
  EXPECT_NE(head_dim.find("any of 1..256 (default 64)"), std::string::npos) << head_dim;
}

TEST(Cli, HelpOfAHalfPrecisionChapterListsBf16AndF16AndItsHeadDims) {
  const std::string text = help_text({kHalfOnly}, Dtype::bf16);
  const std::string dtype = line_of(text, "--dtype T"), head_dim = line_of(text, "--head-dim N");
  EXPECT_NE(dtype.find("bf16 or f16 (default bf16)"), std::string::npos) << dtype;
  EXPECT_EQ(dtype.find("f32"), std::string::npos) << dtype;
  EXPECT_NE(head_dim.find("32, 64, 96, 128 or 256 (default 64)"), std::string::npos) << head_dim;
}

// 08: the head dims depend on the dtype, one table per kernel.
TEST(Cli, HelpOfAChapterWithPerDtypeTablesListsEach) {
  const std::string text = help_text({kBackwardF32, kBackwardHalf}, Dtype::f32);
  const std::string dtype = line_of(text, "--dtype T"), head_dim = line_of(text, "--head-dim N");
  EXPECT_NE(dtype.find("f32, f16 or bf16 (default f32)"), std::string::npos) << dtype;
  EXPECT_NE(head_dim.find("f32: any of 1..128; f16 and bf16: 64 or 128 (default 64)"), std::string::npos)
      << head_dim;
}

// --layout: bhsd only, bshd where a table takes it, and for which dtypes where not all do (08).
TEST(Cli, HelpNamesTheLayoutsAndTheirDtypes) {
  EXPECT_NE(line_of(help_text({kHalfOnly}, Dtype::bf16), "--layout L").find("bhsd only"), std::string::npos);
  Support half = kHalfOnly;
  half.bshd_dtypes = half.dtypes;
  const std::string all = line_of(help_text({half}, Dtype::bf16), "--layout L");
  EXPECT_NE(all.find("or bshd: as [B, S, H, D]"), std::string::npos) << all;
  EXPECT_EQ(all.find("("), all.find("(default)")) << all;  // no dtype list when every dtype takes it
  Support backward_half = kBackwardHalf;
  backward_half.bshd_dtypes = {Dtype::f16, Dtype::bf16};
  const std::string some = line_of(help_text({kBackwardF32, backward_half}, Dtype::f32), "--layout L");
  EXPECT_NE(some.find("or bshd: as [B, S, H, D] (f16 or bf16)"), std::string::npos) << some;
  EXPECT_TRUE(takes_bshd(backward_half, Dtype::bf16));
  EXPECT_FALSE(takes_bshd(kBackwardF32, Dtype::f32));
}

TEST(Cli, HelpKeepsTheChaptersOwnFlags) {
  const std::string text = help_text({kHalfOnly}, Dtype::bf16, "  --pattern P       dense or random\n");
  EXPECT_NE(text.find("06_tensor_core's own options:\n  --pattern P       dense or random\n"), std::string::npos)
      << text;
  EXPECT_EQ(help_text({kHalfOnly}, Dtype::bf16).find("own options"), std::string::npos);
}

TEST(Cli, ErrorLineNamesTheChapterOnce) {
  // check_forward_args' messages start with the chapter's name already.
  EXPECT_EQ(error_line("05_flash_v2", "05_flash_v2: head_dim 200 is not supported (supported: 1..128)"),
            "error: 05_flash_v2: head_dim 200 is not supported (supported: 1..128)");
  // The parser's and Problem::validate's do not.
  EXPECT_EQ(error_line("05_flash_v2", "unknown option '--bogus' (see --help)"),
            "error: 05_flash_v2: unknown option '--bogus' (see --help)");
  EXPECT_EQ(error_line("08_backward", "08_backward needs a GPU of compute capability 8.0 or newer"),
            "error: 08_backward: needs a GPU of compute capability 8.0 or newer");
  // Only a leading prefix of this chapter's own name goes.
  EXPECT_EQ(error_line("07_block_sparse", "block mask: density must lie in [0, 1]"),
            "error: 07_block_sparse: block mask: density must lie in [0, 1]");
  EXPECT_EQ(error_line("08_backward", "06_tensor_core: head_dim 7 is not supported"),
            "error: 08_backward: 06_tensor_core: head_dim 7 is not supported");
  EXPECT_EQ(error_line("08_backward", "08_backward's D_i needs 4 bytes"),
            "error: 08_backward: 08_backward's D_i needs 4 bytes");
}

TEST(Cli, HelpListsTheWindowWhereTheChapterTakesOne) {
  EXPECT_EQ(help_text({kHalfOnly}, Dtype::bf16).find("--window"), std::string::npos);
  Support windowed = kHalfOnly;
  windowed.window = true;
  EXPECT_NE(help_text({windowed}, Dtype::bf16).find("--window L,R"), std::string::npos);
}

TEST(Cli, WindowTakesLeftCommaRight) {
  const Options o = parse({"--window", "256,0"});
  EXPECT_EQ(o.problem.window_left, 256);
  EXPECT_EQ(o.problem.window_right, 0);
  const Options open = parse({"--window", "-1,16"});
  EXPECT_EQ(open.problem.window_left, -1);
  EXPECT_EQ(open.problem.window_right, 16);
  expect_error_naming({"--window", "256"}, "L,R");
  expect_error_naming({"--window", "a,0"}, "--window");
  expect_error_naming({"--window", "-3,0"}, "window_left");
}

TEST(Cli, HelpListsTheSoftcapWhereTheChapterTakesOne) {
  EXPECT_EQ(help_text({kHalfOnly}, Dtype::bf16).find("--softcap"), std::string::npos);
  Support capped = kHalfOnly;
  capped.softcap = true;
  const std::string text = help_text({kF32Only, capped}, Dtype::bf16);
  EXPECT_NE(line_of(text, "--softcap X").find("tanh"), std::string::npos) << text;
}

TEST(Cli, SoftcapTakesANumber) {
  EXPECT_EQ(parse({}).problem.softcap, 0.0f);
  EXPECT_EQ(parse({"--softcap", "30"}).problem.softcap, 30.0f);
  EXPECT_EQ(parse({"--softcap", "2.5"}).problem.softcap, 2.5f);
  EXPECT_EQ(parse({"--softcap", "0"}).problem.softcap, 0.0f);  // off
  expect_error_naming({"--softcap", "thirty"}, "--softcap");
  expect_error_naming({"--softcap"}, "--softcap");
  expect_error_naming({"--softcap", "-1"}, "softcap must be finite and >= 0");
  expect_error_naming({"--softcap", "inf"}, "softcap must be finite and >= 0");
}

TEST(Cli, HelpListsVarlenWhereTheChapterTakesIt) {
  EXPECT_EQ(help_text({kHalfOnly}, Dtype::bf16).find("--varlen"), std::string::npos);
  Support packed = kHalfOnly;
  packed.varlen = true;
  const std::string text = help_text({kF32Only, packed}, Dtype::bf16);
  EXPECT_NE(line_of(text, "--varlen L,L,...").find("query lengths"), std::string::npos) << text;
  EXPECT_NE(line_of(text, "--varlen-k L,...").find("key lengths"), std::string::npos) << text;
}

// --varlen: one [1, total, H, D] problem, the lengths' cumulative offsets, the keys' the queries'
// unless --varlen-k says otherwise; flags in any order.
TEST(Cli, VarlenPacksTheLengths) {
  const Options self = parse({"--varlen", "1,129,0,257", "--heads", "4", "--kv-heads", "2"});
  EXPECT_EQ(self.problem.batch, 1);
  EXPECT_EQ(self.problem.layout, Layout::bshd);
  EXPECT_EQ(self.problem.seqlen_q, 387);
  EXPECT_EQ(self.problem.seqlen_k, 387);
  EXPECT_EQ(self.problem.cu_seqlens_q, (std::vector<int>{0, 1, 130, 130, 387}));
  EXPECT_EQ(self.problem.cu_seqlens_k, (std::vector<int>{0, 1, 130, 130, 387}));
  EXPECT_EQ(self.problem.heads, 4);
  EXPECT_EQ(self.problem.head_dim, 128);  // the chapter's
  EXPECT_TRUE(self.problem.causal);
  const Options cross = parse({"--varlen-k", "64,0,5", "--layout", "bshd", "--varlen", "3,2,7"});
  EXPECT_EQ(cross.problem.cu_seqlens_q, (std::vector<int>{0, 3, 5, 12}));
  EXPECT_EQ(cross.problem.cu_seqlens_k, (std::vector<int>{0, 64, 64, 69}));
  EXPECT_EQ(cross.problem.seqlen_q, 12);
  EXPECT_EQ(cross.problem.seqlen_k, 69);
  EXPECT_EQ(parse({"--varlen", "5"}).problem.cu_seqlens_q, (std::vector<int>{0, 5}));
  EXPECT_FALSE(parse({}).problem.is_varlen());
}

TEST(Cli, VarlenErrorsAreClear) {
  expect_error_naming({"--varlen", "1,,2"}, "--varlen expects lengths >= 0");
  expect_error_naming({"--varlen", "1,2,"}, "'1,2,'");
  expect_error_naming({"--varlen", "4,-1"}, "--varlen expects lengths >= 0");
  expect_error_naming({"--varlen", "4x"}, "--varlen");
  expect_error_naming({"--varlen", ""}, "--varlen");
  expect_error_naming({"--varlen"}, "--varlen needs a value");
  expect_error_naming({"--varlen", "1,2", "--varlen-k", "3"}, "--varlen-k needs as many lengths as --varlen (2), got 1");
  expect_error_naming({"--varlen-k", "3"}, "--varlen-k needs --varlen");
  expect_error_naming({"--varlen", "8", "--batch", "2"}, "drop --batch");
  expect_error_naming({"--seqlen-k", "9", "--varlen", "8"}, "drop --seqlen-k");
  expect_error_naming({"--varlen", "8", "--layout", "bhsd"}, "layout bshd");
  expect_error_naming({"--varlen", "0,0"}, "seqlen_q");  // nothing to attend: Problem::validate
  expect_error_naming({"--varlen", "1073741824,1073741824,1073741824"}, "2^31");
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

// A chapter's own flag (08's --ffma): found anywhere after argv[0], taken out once, the other
// arguments kept in order; absent, argv is untouched.
TEST(Cli, TakeFlagRemovesOneOccurrence) {
  std::string words[] = {"prog", "--seqlen", "64", "--ffma", "--causal", "--ffma"};
  std::vector<char*> argv;
  for (std::string& w : words) argv.push_back(w.data());
  int argc = static_cast<int>(argv.size());
  EXPECT_TRUE(take_flag(argc, argv.data(), "--ffma"));
  ASSERT_EQ(argc, 5);
  EXPECT_STREQ(argv[3], "--causal");
  EXPECT_STREQ(argv[4], "--ffma");
  EXPECT_TRUE(take_flag(argc, argv.data(), "--ffma"));
  EXPECT_EQ(argc, 4);
  EXPECT_FALSE(take_flag(argc, argv.data(), "--ffma"));
  EXPECT_EQ(argc, 4);
  EXPECT_STREQ(argv[1], "--seqlen");
  EXPECT_STREQ(argv[2], "64");
  EXPECT_STREQ(argv[3], "--causal");
  EXPECT_FALSE(take_flag(argc, argv.data(), "prog"));  // argv[0] is the program, never a flag
}

}  // namespace
}  // namespace fa
