#!/usr/bin/env bash
# Before/after speed of a change, in one run on one GPU: the benchmarks of two source trees, each
# filter run old, new, old, new (so that clock drift and a warming GPU hit both alike), and a
# table of the median TFLOP/s of each and the ratio new / old.
#
#   bash scripts/bench_compare.sh OLD_BUILD NEW_BUILD OUTDIR [FILTER_SET]
# OLD_BUILD, NEW_BUILD: build directories holding the NN_chapter/NN_chapter_bench binaries (build
# the old tree with e.g. `git worktree add /tmp/old REV` or `git archive REV | tar x -C /tmp/old`,
# then `cmake --build /tmp/old/build --target 05_flash_v2_bench ...`).
# FILTER_SET: restructure (default): the README tables' shapes of chapters 05-08 at 1k, 4k and 16k;
# bwd_bf16: 08's bf16 backward alone (dense, deterministic, sparse) at 4k and 16k.
set -uo pipefail
cd "$(dirname "$0")/.."
old=${1:?usage: bench_compare.sh OLD_BUILD NEW_BUILD OUTDIR}
new=${2:?usage: bench_compare.sh OLD_BUILD NEW_BUILD OUTDIR}
out=${3:?usage: bench_compare.sh OLD_BUILD NEW_BUILD OUTDIR}
set_name=${4:-restructure}
mkdir -p "$out"
shapes='D(64|128)/(full|causal)/seqlen:(1024|4096|16384)/'
# chapter benchmark | Google Benchmark filter
cases=(
  "05_flash_v2|^fwd/05_flash_v2(_ffma)?/f32/$shapes"
  "06_tensor_core|^fwd/06_tensor_core/bf16/$shapes"
  "07_block_sparse|^(sparse|dense06)/.*/bf16/D(64|128)/(blockk128/random/density:(1.00|0.50|0.10)|full)/seqlen:(4096|16384)/"
  "08_backward|^bwd/08_backward(_ffma)?/(f32|bf16)/$shapes"
  "08_backward|^bwd/08_backward_deterministic/bf16/D(64|128)/(full|causal)/seqlen:(4096|16384)/"
  "08_backward|^bwd_sparse/08_backward/bf16/D(64|128)/blockk128/random/density:(1.00|0.50|0.10)/seqlen:16384/"
)
if [[ $set_name == bwd_bf16 ]]; then
  cases=(
    "08_backward|^bwd/08_backward(_deterministic)?/bf16/D(64|128)/(full|causal)/seqlen:(4096|16384)/"
    "08_backward|^bwd_sparse/08_backward/bf16/D(64|128)/blockk128/random/density:(1.00|0.50)/seqlen:16384/"
  )
fi
n=0
for c in "${cases[@]}"; do
  ch=${c%%|*}
  filter=${c#*|}
  for round in 1 2; do
    for side in old new; do
      dir=$old; [[ $side == new ]] && dir=$new
      exe=$dir/$ch/${ch}_bench
      [[ -x $exe ]] || { echo "missing $exe"; continue; }
      n=$((n + 1))
      echo "== $(date +%T) $side $ch round $round: $filter"
      "$exe" --benchmark_filter="$filter" --benchmark_out="$out/cmp_${n}_${side}.json" \
        --benchmark_out_format=json >"$out/cmp_${n}_${side}.log" 2>&1 || tail -3 "$out/cmp_${n}_${side}.log"
    done
  done
done
python3 - "$out" <<'PY' | tee "$out/compare.md"
import glob, json, os, re, statistics, sys
out = sys.argv[1]
runs = {"old": {}, "new": {}}
gpu = None
for path in sorted(glob.glob(os.path.join(out, "cmp_*_*.json"))):
    side = re.search(r"_(old|new)\.json$", path).group(1)
    with open(path) as f:
        data = json.load(f)
    for b in data.get("benchmarks", []):
        if "TFLOPS" not in b:
            continue
        name = re.sub(r"/(min_time|iterations|manual_time|real_time).*$", "", b["name"])
        runs[side].setdefault(name, []).append(b["TFLOPS"])
print("| benchmark | before TFLOP/s | after TFLOP/s | after/before |")
print("|---|---|---|---|")
ratios = []
for name in runs["new"]:
    if name not in runs["old"]:
        continue
    o, n = statistics.median(runs["old"][name]), statistics.median(runs["new"][name])
    ratios.append(n / o)
    print(f"| `{name}` | {o:.1f} | {n:.1f} | {n / o:.3f} |")
if ratios:
    print(f"\n{len(ratios)} cases: after/before min {min(ratios):.3f}, median {statistics.median(ratios):.3f}, max {max(ratios):.3f}")
PY
