# Turns the chapters' JSON lines into the tour's table (no dependencies beyond awk).
function field(line, key,    m) {
  if (match(line, "\"" key "\":(\"[^\"]*\"|[^,}]*)")) {
    m = substr(line, RSTART + length(key) + 3, RLENGTH - length(key) - 3)
    gsub(/"/, "", m)
    return m
  }
  return ""
}
NR == 1 {
  printf "GPU: %s   CUDA runtime: %s   problem: B=%s H=%s S=%s D=%s %s\n\n", field($0, "gpu"),
         field($0, "cuda_runtime"), field($0, "batch"), field($0, "heads"), field($0, "seqlen_q"),
         field($0, "head_dim"), field($0, "causal") == "true" ? "causal" : "non-causal"
  printf "| %-18s | %-5s | %-14s | %-5s | %10s | %8s | %8s |\n", "chapter", "dtype", "max err vs ref", "check", "ms", "TFLOP/s", "x 01"
  printf "|%s|%s|%s|%s|%s|%s|%s|\n", "--------------------", "-------", "----------------", "-------", "------------", "----------", "----------"
}
{
  ms = field($0, "ms") + 0
  if (NR == 1) base = ms
  printf "| %-18s | %-5s | %14.2e | %-5s | %10.3f | %8.2f | %7.1fx |\n", field($0, "chapter"), field($0, "dtype"),
         field($0, "max_abs_err"), field($0, "pass") == "true" ? "PASS" : "FAIL", ms, field($0, "tflops"), base / ms
}
