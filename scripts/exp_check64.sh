#!/usr/bin/env bash
# Temporary: 09's ctest tier, memcheck of v7, and D = 64 against PyTorch's FLASH and cuDNN in one call. Not committed.
set -u
out=${OUT:-/tmp/out}; mkdir -p "$out"; res=/tmp/res; mkdir -p $res
export PATH=$PATH:/usr/local/cuda/bin
gen=(); command -v ninja >/dev/null && gen=(-G Ninja)
t0=$(date +%s)
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release "${gen[@]}" >"$res/configure.log" 2>&1 || { tail -30 "$res/configure.log"; exit 1; }
cmake --build build -j16 --target 09_flash_v3/all >"$res/build.log" 2>&1 || { grep -B2 -A8 error "$res/build.log" | head -60; exit 1; }
echo "build $(( $(date +%s) - t0 )) s"
B=build/09_flash_v3
bash scripts/run_ctest.sh build -L '^09_flash_v3$' --timeout 200 > "$res/ctest.log" 2>&1; echo "ctest 09 rc=$?"; tail -4 "$res/ctest.log"
echo "t $(( $(date +%s) - t0 )) s"
timeout 150 compute-sanitizer --tool memcheck $B/09_flash_v3_tests --gtest_filter='*v7_three*' > "$res/memcheck.log" 2>&1; echo "memcheck v7 rc=$? $(grep -E 'ERROR SUMMARY' $res/memcheck.log) $(grep -cE '^\[       OK' $res/memcheck.log) ok"
timeout 100 compute-sanitizer --tool racecheck $B/09_flash_v3_tests --gtest_filter='*v7_three*bf16*' > "$res/racecheck.log" 2>&1; echo "racecheck v7 rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $res/racecheck.log | head -2 | tr '\n' ' ') $(grep -cE '^\[       OK' $res/racecheck.log) ok"
echo "t $(( $(date +%s) - t0 )) s"
for round in 1 2; do
  $B/09_flash_v3_bench --head-dims 64 --benchmark_filter='fwd/09_flash_v3/.*seqlen:(1024|2048|4096|8192|16384)/' \
    --benchmark_out="$res/bench09_r$round.json" --benchmark_out_format=json > "$res/bench09_r$round.log" 2>&1 || tail -3 "$res/bench09_r$round.log"
  python3 scripts/compare_pytorch.py --dtypes bf16,f16 --backends flash,cudnn --head-dims 64 --directions fwd \
    --out "$res/pytorch_r$round.json" > "$res/pytorch_r$round.log" 2>&1 || tail -5 "$res/pytorch_r$round.log"
  echo "round $round t $(( $(date +%s) - t0 )) s"
done
python3 - "$res" <<'PY'
import json, sys, re
res = sys.argv[1]
rows = {}
for r in (1, 2):
    for b in json.load(open(f"{res}/bench09_r{r}.json"))["benchmarks"]:
        m = re.match(r"fwd/09_flash_v3/(\w+)/D64/(\w+)/seqlen:(\d+)", b["name"])
        if m and "TFLOPS" in b: rows.setdefault((m[1], m[2], int(m[3])), {}).setdefault("ours", []).append(b["TFLOPS"])
    for rec in json.load(open(f"{res}/pytorch_r{r}.json"))["results"]:
        if "tflops" in rec and rec["seqlen"] >= 1024:
            k = (rec["dtype"], "causal" if rec["causal"] else "full", rec["seqlen"])
            rows.setdefault(k, {}).setdefault(rec["backend"], []).append(rec["tflops"])
print("dtype mask seqlen | 09 r1 r2 | cudnn r1 r2 | flash r1 r2 | 09/cudnn per round")
for k in sorted(rows):
    d = rows[k]; o = d.get("ours", []); c = d.get("cudnn", []); f = d.get("flash", [])
    rat = " ".join(f"{a / b:.3f}" for a, b in zip(o, c))
    print(*k, "|", " ".join(f"{x:.1f}" for x in o), "|", " ".join(f"{x:.1f}" for x in c), "|",
          " ".join(f"{x:.1f}" for x in f), "|", rat)
PY
tar czf "$out/res.tgz" -C $res .
echo "total $(( $(date +%s) - t0 )) s"
