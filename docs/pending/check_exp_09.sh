#!/usr/bin/env bash
# docs/pending/exp_09_VARIANT.patch (README.md here says what it is) against main in one device call:
# both builds of chapter 09, the patched chapter's tests, compute-sanitizer on a persistent
# problem without a mask, then the chapter's benchmark (bf16 and f16, D = 128, full and causal,
# 512-16k) main and patched interleaved over two rounds, with PyTorch's FLASH and cuDNN on the
# same shapes in the same call. Logs and a summary table land in OUTDIR.
#
#   bash docs/pending/check_exp_09.sh OUTDIR [VARIANT]    (default tma_store; session 14: 2.5 minutes
#                                                          for bc176, its first use)
set -uo pipefail
cd "$(dirname "$0")/../.."
source docs/pending/variant.sh  # copy_variant, experiment_setup
out=${1:?usage: check_exp_09.sh OUTDIR [VARIANT]}
var=${2:-tma_store}
experiment_setup "$out"  # variant.sh: step, PATH, gen

step "main and patched, built side by side"
root=$(mktemp -d)
for v in main "$var"; do
  copy_variant "$root" "$v" "docs/pending/exp_09_$v.patch" "$out/patch.log" || exit 1
  (cmake -S "$root/$v" -B "$root/$v/build" -DCMAKE_BUILD_TYPE=Release "${gen[@]}" >"$out/configure_$v.log" 2>&1 &&
    cmake --build "$root/$v/build" -j 8 --target 09_flash_v3_tests 09_flash_v3_cpu_tests 09_flash_v3_bench 09_flash_v3 >"$out/build_$v.log" 2>&1 ||
    echo "BUILD FAILED: $v (build_$v.log)") &
done
wait

step "the patched chapter's tests"
ctest --test-dir "$root/$var/build" -L 09_flash_v3 -j "$(nproc)" --timeout 300 --output-on-failure >"$out/ctest_09.log" 2>&1
tail -3 "$out/ctest_09.log"; grep -E "\((Failed|Timeout|SEGFAULT|Subprocess)" "$out/ctest_09.log" | head -20

step "compute-sanitizer: a persistent problem without a mask (384 tiles on 132 blocks, Sq = 1000: a partial last query tile), and a causal one with rows that see no key (Sq > Sk)"
for tool in memcheck racecheck synccheck; do
  compute-sanitizer --tool "$tool" --error-exitcode 99 "$root/$var/build/09_flash_v3/09_flash_v3" --dtype bf16 \
    --head-dim 128 --batch 3 --heads 16 --kv-heads 4 --seqlen-q 1000 --seqlen-k 1234 --iters 1 --no-check >"$out/san_$tool.log" 2>&1
  echo "$tool full: rc=$?"
  compute-sanitizer --tool "$tool" --error-exitcode 99 "$root/$var/build/09_flash_v3/09_flash_v3" --dtype f16 \
    --head-dim 128 --batch 2 --heads 8 --kv-heads 2 --seqlen-q 700 --seqlen-k 300 --causal --iters 1 >"$out/san_causal_$tool.log" 2>&1
  echo "$tool causal Sq > Sk: rc=$?"
done | tee "$out/sanitizer_summary.txt"

step "benchmarks, interleaved, two rounds"
for round in 1 2; do
  for v in main "$var"; do
    "$root/$v/build/09_flash_v3/09_flash_v3_bench" --benchmark_filter='fwd/09_flash_v3/(bf16|f16)/D128/' \
      --benchmark_out="$out/bench_${v}_$round.json" --benchmark_out_format=json >"$out/bench_${v}_$round.log" 2>&1 ||
      echo "bench failed: $v"
  done
done
PYTHONUNBUFFERED=1 python3 scripts/compare_pytorch.py --dtypes bf16,f16 --backends flash,cudnn --head-dims 128 \
  --out "$out/pytorch.json" >"$out/pytorch.log" 2>&1 || tail -3 "$out/pytorch.log"

step "summary"
python3 - "$out" "$var" <<'PY' | tee "$out/summary.md"
import json, re, sys
out, var = sys.argv[1], sys.argv[2]
tf = {}
for v in ("main", var):
    for r in (1, 2):
        try:
            for b in json.load(open(f"{out}/bench_{v}_{r}.json"))["benchmarks"]:
                m = re.match(r"fwd/09_flash_v3/(\w+)/D(\d+)/(full|causal)/seqlen:(\d+)", b["name"])
                if m:
                    tf.setdefault((v, (m[1], int(m[2]), m[3], int(m[4]))), []).append(b["TFLOPS"])
        except (OSError, ValueError):
            pass
torch = {}
for line in open(f"{out}/pytorch.log"):
    m = re.search(r"fwd (\w+) D=(\d+) (full|causal)\s+seqlen=\s*(\d+) (flash|cudnn)\s+[\d.]+ ms\s+([\d.]+) TFLOP", line)
    if m:
        torch[(m[5], (m[1], int(m[2]), m[3], int(m[4])))] = float(m[6])
print(f"| dtype | D | mask | seqlen | main | {var} | {var} / main | flash | cudnn | {var} / cudnn |")
print("|---|---|---|---|---|---|---|---|---|---|")
for c in sorted({k for (_, k) in tf}):
    a = tf.get(("main", c), [0]); b = tf.get((var, c), [0])
    ma, mb = sum(a) / len(a), sum(b) / len(b)
    cu = torch.get(("cudnn", c))
    print(f"| {c[0]} | {c[1]} | {c[2]} | {c[3]} | {ma:.1f} | {mb:.1f} | {mb / ma:.3f} | {torch.get(('flash', c), '-')} | "
          f"{cu or '-'} | " + (f"{mb / cu:.2f}" if cu else "-") + " |")
PY
step "done"
