#include "common/host/cli.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <sstream>

namespace fa {
namespace {

long parse_int(const std::string& flag, const std::string& text) {
  errno = 0;
  char* end = nullptr;
  const long value = std::strtol(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || errno == ERANGE || value < -(1L << 30) || value > (1L << 30))
    throw std::invalid_argument(flag + " expects an integer, got '" + text + "'");
  return value;
}

float parse_float(const std::string& flag, const std::string& text) {
  char* end = nullptr;
  const float value = std::strtof(text.c_str(), &end);
  if (text.empty() || *end != '\0')
    throw std::invalid_argument(flag + " expects a number, got '" + text + "'");
  return value;
}

// --varlen's list of lengths, "L1,L2,...": each an integer >= 0.
std::vector<int> parse_lengths(const std::string& flag, const std::string& text) {
  std::vector<int> lengths;
  std::size_t at = 0;
  while (true) {
    const std::size_t comma = text.find(',', at);
    const std::string item = text.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
    char* end = nullptr;
    errno = 0;
    const long value = std::strtol(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || errno == ERANGE || value < 0 || value > (1L << 30))
      throw std::invalid_argument(flag + " expects lengths >= 0 separated by commas (e.g. 1,129,0,257), got '" +
                                  text + "'");
    lengths.push_back(static_cast<int>(value));
    if (comma == std::string::npos) return lengths;
    at = comma + 1;
  }
}

// Cumulative offsets of `lengths`: {0, L1, L1 + L2, ...}.
std::vector<int> offsets(const std::string& flag, const std::vector<int>& lengths) {
  std::vector<int> cu{0};
  long long total = 0;
  for (int length : lengths) {
    total += length;
    if (total > (1LL << 31) - 1) throw std::invalid_argument(flag + ": the lengths add up to more than 2^31 - 1");
    cu.push_back(static_cast<int>(total));
  }
  return cu;
}

// "a", "a or b", "a, b or c" ("and" in place of "or" where asked).
std::string listed(const std::vector<std::string>& items, const char* last = " or ") {
  std::string s;
  for (std::size_t i = 0; i < items.size(); ++i)
    s += (i == 0 ? "" : i + 1 == items.size() ? last : ", ") + items[i];
  return s;
}

std::vector<std::string> dtype_names(const Support& s) {
  std::vector<std::string> names;
  for (Dtype d : s.dtypes) names.push_back(dtype_name(d));
  return names;
}

std::string head_dims_of(const Support& s) {
  if (s.head_dims.empty()) return s.head_dim_multiple == 1 ? "any of " + head_dims_words(s) : head_dims_words(s);
  std::vector<std::string> dims;
  for (int d : s.head_dims) dims.push_back(std::to_string(d));
  return listed(dims);
}

// --layout's line: bshd where a table takes it.
std::string layout_text(const std::vector<Support>& supports) {
  std::vector<std::string> all, bshd;  // dtype names: every table's, and those some table takes as bshd
  for (const Support& s : supports)
    for (Dtype d : s.dtypes) {
      all.push_back(dtype_name(d));
      if (takes_bshd(s, d)) bshd.push_back(dtype_name(d));
    }
  if (!bshd.empty())
    return "bhsd: Q, K, V, O as [B, H, S, D] (default), or bshd: as [B, S, H, D]" +
           (bshd.size() == all.size() ? std::string() : " (" + listed(bshd) + ")");
  return "bhsd only: Q, K, V, O as [B, H, S, D]";
}

}  // namespace

std::string dtypes_text(const std::vector<Support>& supports) {
  std::vector<std::string> names;
  for (const Support& s : supports)
    for (const std::string& name : dtype_names(s)) names.push_back(name);
  return names.size() == 1 ? names[0] + " only" : listed(names);
}

std::string head_dims_text(const std::vector<Support>& supports) {
  if (supports.size() == 1) return head_dims_of(supports[0]);
  std::string s;
  for (const Support& table : supports)
    s += (s.empty() ? "" : "; ") + listed(dtype_names(table), " and ") + ": " + head_dims_of(table);
  return s;
}

std::string usage(const Help& h) {
  const Problem& d = h.defaults;
  const std::string& chapter = h.chapter;
  std::ostringstream s;
  s << "usage: " << h.program << " [options]\n"
    << chapter << " " << h.runs << "\n\n"
    << "  --batch N         batch size (default " << d.batch << ")\n"
    << "  --heads N         query heads (default " << d.heads << ")\n"
    << "  --kv-heads N      key/value heads, must divide --heads (default: = heads)\n"
    << "  --seqlen N        query and key length (default " << d.seqlen_q << ")\n"
    << "  --seqlen-q N      query length\n"
    << "  --seqlen-k N      key length\n"
    << "  --head-dim N      " << head_dims_text(h.supports) << " (default " << d.head_dim << ")\n"
    << "  --causal          causal mask (bottom-right aligned when seqlen-q != seqlen-k)\n";
  // The window's flag where the chapter takes one (the parser reads it anywhere; a chapter
  // without Support::window refuses the problem, naming it).
  if (std::any_of(h.supports.begin(), h.supports.end(), [](const Support& t) { return t.window; }))
    s << "  --window L,R      sliding window: query i sees keys i'-L .. i'+R, i' = i + Sk - Sq (-1: unbounded)\n";
  // The softcap's flag, the same way (Support::softcap).
  if (std::any_of(h.supports.begin(), h.supports.end(), [](const Support& t) { return t.softcap; }))
    s << "  --softcap X       logit softcap (Gemma 2): scores x = scale q.k become X tanh(x / X) (0: off)\n";
  // The packed varlen batch's flags, the same way (Support::varlen).
  if (std::any_of(h.supports.begin(), h.supports.end(), [](const Support& t) { return t.varlen; }))
    s << "  --varlen L,L,...  a packed batch of sequences of these query lengths (layout bshd, batch 1)\n"
      << "  --varlen-k L,...  their key lengths, as many (default: the query lengths)\n";
  s
    << "  --scale X         softmax scale (default 1/sqrt(head-dim))\n"
    << "  --dtype T         " << dtypes_text(h.supports) << " (default " << dtype_name(d.dtype) << ")\n"
    << "  --layout L        " << layout_text(h.supports) << "\n"
    << "  --iters N         timed repetitions (default 20)\n"
    << "  --seed N          input seed (default 2024)\n"
    << "  --no-check        skip the CPU reference (large problems)\n"
    << "  --json            also print the result as one JSON line\n"
    << "  --help            this text\n";
  if (!h.chapter_flags.empty()) s << "\n" << chapter << "'s own options:\n" << h.chapter_flags;
  s << "\nExit status: 0 pass, 1 mismatch or CUDA error, 2 bad arguments or unsupported problem.\n"
    << "Errors are printed as 'error: " << chapter << ": <message>' on stderr.\n";
  return s.str();
}

Options parse_cli(int argc, const char* const* argv, const Problem& defaults) {
  Options o;
  o.problem = defaults;
  bool kv_heads_set = false;
  std::vector<int> varlen_q, varlen_k;  // --varlen, --varlen-k: the lengths, applied after every flag
  std::string sizes_flag;               // the last flag that sets batch or a length (--varlen sets those)
  bool layout_set = false;
  for (int a = 1; a < argc; ++a) {
    const std::string flag = argv[a];
    auto value = [&]() -> std::string {
      if (a + 1 >= argc) throw std::invalid_argument(flag + " needs a value");
      return argv[++a];
    };
    auto int_value = [&]() { return static_cast<int>(parse_int(flag, value())); };
    if (flag == "--help" || flag == "-h") throw HelpRequested(flag);
    else if (flag == "--batch") { o.problem.batch = int_value(); sizes_flag = flag; }
    else if (flag == "--heads") o.problem.heads = int_value();
    else if (flag == "--kv-heads") { o.problem.kv_heads = int_value(); kv_heads_set = true; }
    else if (flag == "--seqlen") { o.problem.seqlen_q = o.problem.seqlen_k = int_value(); sizes_flag = flag; }
    else if (flag == "--seqlen-q") { o.problem.seqlen_q = int_value(); sizes_flag = flag; }
    else if (flag == "--seqlen-k") { o.problem.seqlen_k = int_value(); sizes_flag = flag; }
    else if (flag == "--head-dim") o.problem.head_dim = int_value();
    else if (flag == "--causal") o.problem.causal = true;
    else if (flag == "--window") {
      const std::string w = value();
      const std::size_t comma = w.find(',');
      if (comma == std::string::npos) throw std::invalid_argument("--window needs L,R (e.g. 256,0), got '" + w + "'");
      o.problem.window_left = static_cast<int>(parse_int(flag, w.substr(0, comma)));
      o.problem.window_right = static_cast<int>(parse_int(flag, w.substr(comma + 1)));
    }
    else if (flag == "--softcap") o.problem.softcap = parse_float(flag, value());
    else if (flag == "--scale") o.problem.softmax_scale = parse_float(flag, value());
    else if (flag == "--dtype") o.problem.dtype = parse_dtype(value());
    else if (flag == "--layout") { o.problem.layout = parse_layout(value()); layout_set = true; }
    else if (flag == "--varlen") varlen_q = parse_lengths(flag, value());
    else if (flag == "--varlen-k") varlen_k = parse_lengths(flag, value());
    else if (flag == "--iters") o.iters = int_value();
    else if (flag == "--seed") o.seed = static_cast<std::uint64_t>(parse_int(flag, value()));
    else if (flag == "--no-check") o.check = false;
    else if (flag == "--json") o.json = true;
    else throw std::invalid_argument("unknown option '" + flag + "' (see --help)");
  }
  if (!kv_heads_set) o.problem.kv_heads = o.problem.heads;
  if (!varlen_k.empty() && varlen_q.empty()) throw std::invalid_argument("--varlen-k needs --varlen (the query lengths)");
  if (!varlen_q.empty()) {  // one [1, total, H, D] problem whose rows hold the sequences one after another
    if (!sizes_flag.empty())
      throw std::invalid_argument("--varlen sets the batch (1) and the lengths (their sums): drop " + sizes_flag);
    if (layout_set && o.problem.layout != Layout::bshd)
      throw std::invalid_argument("--varlen packs the sequences as [1, total, H, D], layout bshd: drop --layout bhsd");
    if (varlen_k.empty()) varlen_k = varlen_q;
    if (varlen_k.size() != varlen_q.size())
      throw std::invalid_argument("--varlen-k needs as many lengths as --varlen (" + std::to_string(varlen_q.size()) +
                                  "), got " + std::to_string(varlen_k.size()));
    o.problem.cu_seqlens_q = offsets("--varlen", varlen_q);
    o.problem.cu_seqlens_k = offsets("--varlen-k", varlen_k);
    o.problem.batch = 1;
    o.problem.layout = Layout::bshd;
    o.problem.seqlen_q = o.problem.cu_seqlens_q.back();
    o.problem.seqlen_k = o.problem.cu_seqlens_k.back();
  }
  if (o.iters < 1) throw std::invalid_argument("--iters must be >= 1");
  o.problem.validate();
  return o;
}

std::string error_line(const std::string& chapter, const std::string& message) {
  std::string m = message;
  for (const std::string& prefix : {chapter + ": ", chapter + " "})
    while (!chapter.empty() && m.compare(0, prefix.size(), prefix) == 0) m.erase(0, prefix.size());
  return "error: " + chapter + ": " + m;
}

bool take_flag(int& argc, char** argv, const char* flag) {
  for (int a = 1; a < argc; ++a) {
    if (std::strcmp(argv[a], flag) != 0) continue;
    for (int b = a; b + 1 < argc; ++b) argv[b] = argv[b + 1];
    --argc;
    return true;
  }
  return false;
}

}  // namespace fa
