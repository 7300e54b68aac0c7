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
  printf "| %-22s | %-5s | %-14s | %-5s | %10s | %8s | %8s |\n", "chapter", "dtype", "max err vs ref", "check", "ms", "TFLOP/s", "x 01"
  printf "|%s|%s|%s|%s|%s|%s|%s|\n", "------------------------", "-------", "----------------", "-------", "------------", "----------", "----------"
}
{
  name = field($0, "chapter"); ms = field($0, "ms") + 0; tflops = field($0, "tflops") + 0
  err = field($0, "max_abs_err") + 0
  if (field($0, "bwd_ms") != "") {  # 08: the backward pass (its forward is chapter 05's)
    name = name " (backward)"; ms = field($0, "bwd_ms") + 0; tflops = field($0, "bwd_tflops") + 0
    err = field($0, "dq_max_abs_err") + 0
  }
  if (NR == 1) base = ms
  speedup = (ms > 0 && field($0, "bwd_ms") == "") ? sprintf("%7.1fx", base / ms) : "      -"
  printf "| %-22s | %-5s | %14.2e | %-5s | %10.3f | %8.2f | %s |\n", name, field($0, "dtype"), err,
         field($0, "pass") == "true" ? "PASS" : "FAIL", ms, tflops, speedup
}
