#!/usr/bin/env bash
# 05's 3xTF32 forward (flash_v2_tf32x3.cu: 05's and 08's fp32 forward up to D = 128) against main plus
# docs/pending/exp_05_<VARIANT>.patch, in one device call: the builds side by side, the rounding
# probe (probe_to_tf32.cu), each variant's O and LSE bits against main's on fixed inputs
# (dump_tf32x3.cu: the same bits mean 08's backward, which recomputes S_ij bit for bit, is still
# paired with it), each variant's forward tests up to D = 128, compute-sanitizer on one, then the kernel timed for
# every variant interleaved over two rounds (f32, D 64 and 128, full and causal, 1k-16k) with
# PyTorch's efficient forward on the same shapes in the same call. Logs and summary.md in OUTDIR.
#
#   bash docs/pending/check_exp_05.sh OUTDIR VARIANT...
set -uo pipefail
cd "$(dirname "$0")/../.."
source docs/pending/variant.sh  # copy_variant, experiment_setup
out=${1:?usage: check_exp_05.sh OUTDIR VARIANT...}
experiment_setup "$out"  # variant.sh: step, PATH, gen
variants=(main "${@:2}")

step "copies and builds: ${variants[*]}"
root=$(mktemp -d)
for v in "${variants[@]}"; do
  copy_variant "$root" "$v" "docs/pending/exp_05_$v.patch" "$out/patch.log" || exit 1
  (cmake -S "$root/$v" -B "$root/$v/build" -DCMAKE_BUILD_TYPE=Release "${gen[@]}" >"$out/configure_$v.log" 2>&1 &&
    cmake --build "$root/$v/build" -j 4 --target 05_flash_v2_bench 05_flash_v2_tests 05_flash_v2 >"$out/build_$v.log" 2>&1 &&
    nvcc -I"$root/$v" -std=c++17 --expt-relaxed-constexpr -arch=sm_90 -o "$root/$v/dump" "$root/$v/docs/pending/dump_tf32x3.cu" \
      "$root/$v/build/05_flash_v2/libfa_05_flash_v2.a" "$root/$v/build/common/libfa_common_cuda.a" \
      "$root/$v/build/common/libfa_common_cpu.a" -Xcompiler -fopenmp >>"$out/build_$v.log" 2>&1 ||
    echo "BUILD FAILED: $v (build_$v.log)") &
done
nvcc -arch=sm_90 -o "$root/probe_to_tf32" docs/pending/probe_to_tf32.cu >"$out/probe_build.log" 2>&1 &
wait

step "cvt.rna.tf32.f32 against the integer rounding, every 32-bit pattern"
"$root/probe_to_tf32" | tee "$out/probe_to_tf32.txt"

step "O and LSE bits of each variant against main's"
for v in "${variants[@]}"; do mkdir -p "$root/dump_$v" && "$root/$v/dump" "$root/dump_$v" >"$out/dump_$v.log" 2>&1 || echo "dump failed: $v"; done
for v in "${variants[@]:1}"; do
  for f in "$root"/dump_main/*.bin; do
    if cmp -s "$f" "$root/dump_$v/$(basename "$f")"; then echo "$v $(basename "$f"): same bits"; else echo "$v $(basename "$f"): DIFFERENT"; fi
  done
done | tee "$out/bits.txt"

step "each variant's forward tests up to D = 128 (the 3xTF32 kernel); compute-sanitizer on the last"
for v in "${variants[@]:1}"; do
  "$root/$v/build/05_flash_v2/05_flash_v2_tests" --gtest_filter='Shapes/Forward.*-*_D160_*:*_D192_*:*_D256_*' >"$out/tests_$v.log" 2>&1
  echo "$v: rc=$? $(grep -E '^\[  (PASSED|FAILED)' "$out/tests_$v.log" | tr '\n' ' ')"
done
last=${variants[-1]}
for tool in memcheck racecheck; do
  compute-sanitizer --tool "$tool" --error-exitcode 99 "$root/$last/build/05_flash_v2/05_flash_v2_tests" \
    --gtest_filter='Shapes/Forward.*B2_H4x2_Sq127_Sk127_D128_causal*:Shapes/Forward.*_D7_causal*' >"$out/san_$tool.log" 2>&1
  echo "$last $tool: rc=$? $(grep -E 'ERROR SUMMARY' "$out/san_$tool.log" | head -1)"
done

step "benchmarks: 05's f32 forward (3xTF32 up to D = 128) of every variant, interleaved, two rounds"
filter="fwd/05_flash_v2/f32/D(64|128)/(full|causal)/seqlen:(1024|2048|4096|8192|16384)/"
for round in 1 2; do
  for v in "${variants[@]}"; do
    "$root/$v/build/05_flash_v2/05_flash_v2_bench" --dtype f32 --benchmark_filter="$filter" \
      --benchmark_out="$out/bench_${v}_$round.json" --benchmark_out_format=json >"$out/bench_${v}_$round.log" 2>&1 || echo "bench failed: $v"
  done
done

step "PyTorch efficient forward, same shapes"
PYTHONUNBUFFERED=1 python3 scripts/compare_pytorch.py --directions fwd --dtypes f32 --backends efficient \
  --head-dims 64,128 --out "$out/pytorch_fwd.json" >"$out/pytorch_fwd.log" 2>&1 || tail -3 "$out/pytorch_fwd.log"

step "summary"
python3 - "$out" "${variants[@]}" <<'PY' | tee "$out/summary.md"
import json, re, sys
out, variants = sys.argv[1], sys.argv[2:]
tf = {}
for v in variants:
    for r in (1, 2):
        try:
            for b in json.load(open(f"{out}/bench_{v}_{r}.json"))["benchmarks"]:
                m = re.match(r"fwd/[\w.]+/f32/D(\d+)/(full|causal)/seqlen:(\d+)", b["name"])
                if m: tf.setdefault((v, (int(m[1]), m[2], int(m[3]))), []).append(b["TFLOPS"])
        except (OSError, ValueError):
            pass
eff = {}
try:
    for r in json.load(open(f"{out}/pytorch_fwd.json"))["results"]:
        if "tflops" in r: eff[(r["head_dim"], "causal" if r["causal"] else "full", r["seqlen"])] = r["tflops"]
except (OSError, ValueError):
    pass
cells = sorted({k for (_, k) in tf})
print("| D | mask | seqlen | efficient | " + " | ".join(variants) + " | " + " | ".join(f"{v} / main" for v in variants[1:])
      + " | " + " | ".join(f"{v} / efficient" for v in variants) + " |")
print("|" + "---|" * (4 + 3 * len(variants) - 1))
for c in cells:
    mean = {v: sum(tf.get((v, c), [0])) / max(1, len(tf.get((v, c), []))) for v in variants}
    e = eff.get(c)
    row = f"| {c[0]} | {c[1]} | {c[2]} | {e or '-'} | " + " | ".join(f"{mean[v]:.1f}" for v in variants)
    row += " | " + " | ".join(f"{mean[v] / (mean['main'] or 1):.3f}" for v in variants[1:])
    row += " | " + " | ".join(f"{mean[v] / e:.3f}" if e else "-" for v in variants)
    print(row + " |")
PY
step "done"
