#!/usr/bin/env bash
# One entry point for every benchmark: each chapter's forward (or backward) on FlashAttention-2's
# shapes, every dtype it supports, then the step-by-step versions of chapters that have them.
# Google Benchmark prints a line per case as it finishes (the progress); the per-chapter JSON
# files and one merged file, OUTDIR/benchmarks.json, land in OUTDIR.
#
#   bash scripts/bench_all.sh BUILD_DIR OUTDIR [--max-seqlen-naive N] [--chapters LIST]
#
# --chapters 01_naive,06_tensor_core: only those chapters (their benchmarks and steps), so that a
# machine with a time limit per command can take the chapters in several runs into one OUTDIR (the
# merged benchmarks.json covers every chapter's JSON there).
set -uo pipefail
cd "$(dirname "$0")/.."
usage="usage: bench_all.sh BUILD_DIR OUTDIR [--max-seqlen-naive N] [--chapters LIST]"
build=${1:?$usage}
out=${2:?$usage}
shift 2
naive_max=8192  # 01 and 02 materialize S: past 8k they take seconds per run and tens of GB
only=""         # comma-separated chapter folders, or empty: all
while (($#)); do
  case $1 in
    --max-seqlen-naive) naive_max=${2:?$usage}; shift 2 ;;
    --chapters) only=${2:?$usage}; shift 2 ;;
    *) echo "$usage"; exit 2 ;;
  esac
done
wanted() { [[ -z $only || ,$only, == *,$1,* ]]; }
mkdir -p "$out"
status=0
for dir in [0-9][0-9]_*/; do
  ch=${dir%/}
  bench=$build/$ch/${ch}_bench
  [[ -x $bench ]] && wanted "$ch" || continue
  limit=()  # each benchmark's own range (16k; 32k for 07), but 01 and 02 stop at naive_max
  [[ $ch == 01_* || $ch == 02_* ]] && limit=(--max-seqlen "$naive_max")
  # Head dims beyond 64 and 128 where a chapter's tiles differ (06: the 96, 192, 256 tiles; 08's
  # tensor-core backward: the 96, 192, 256 tiles; 09: D = 96 on the D = 128 tiles with 96 columns
  # of arithmetic, 11: D = 96 on the D = 128 kernel; both: 192 and 256 on tiles of their own): the rows the results files add for them. A benchmark registers the
  # head dims its chapter takes.
  [[ $ch == 06_* ]] && limit+=(--head-dims 64,96,128,192,256)
  [[ $ch == 08_* || $ch == 09_* || $ch == 11_* ]] && limit+=(--head-dims 64,96,128,192,256)
  # 12: each rank's block at 128k tokens where the ranks are GPUs (NCCL); on one GPU its simulated
  # ranks share the GPU, and the benchmark's own 8k keeps a ring of 8 to seconds.
  [[ $ch == 12_* ]] && (($(nvidia-smi -L 2>/dev/null | wc -l) > 1)) && limit+=(--rank-seqlen 131072)
  echo "== $(date +%T) $ch ${limit[*]}"
  "$bench" "${limit[@]}" --benchmark_out="$out/bench_$ch.json" --benchmark_out_format=json \
    2>&1 | tee "$out/bench_$ch.log" | grep -E "^(fwd|bwd|mem|ring)/" | awk '{printf "   %-60s %s %s\n", $1, $2, $3}'
  ((PIPESTATUS[0] == 0)) || status=1
  # 12 on four or more GPUs: one sequence of 1M tokens, causal forward + backward, over four of
  # them (and one GPU on the same 256k block, for the efficiency).
  if [[ $ch == 12_* ]] && (($(nvidia-smi -L 2>/dev/null | wc -l) >= 4)); then
    echo "== $(date +%T) $ch 1M tokens on 4 GPUs"
    "$bench" --rank-seqlen 262144 --benchmark_filter='fwd_bwd/bf16/D128/causal/nccl/ranks:(1|4)/' \
      --benchmark_out="$out/bench_12_ring_attention_1m.json" --benchmark_out_format=json 2>&1 |
      tee "$out/bench_12_ring_attention_1m.log" | grep -E "^ring/" | awk '{printf "   %-60s %s %s\n", $1, $2, $3}'
    ((PIPESTATUS[0] == 0)) || status=1
  fi
done
# Step-by-step versions (forward or backward ones): `--step NAME` each; the binary lists its steps
# when run without one.
# Steps at D 64 and 128 are timed at seqlen 4096 (a block-sparse step: its densities at 4096); a step for D = 512 (06's alt_split_d512, which
# takes that head dim only) at every seqlen, for its comparison with PyTorch.
for steps in "$build"/[0-9][0-9]_*/[0-9][0-9]_*_steps_bench; do
  [[ -x $steps ]] || continue
  ch=$(basename "$steps" _steps_bench)
  wanted "$ch" || continue
  for s in $("$steps" 2>&1 | awk -F: '/^  [a-z0-9_]+:/ {gsub(/ /, "", $1); print $1}'); do
    echo "== $(date +%T) $ch step $s"
    # 09's FP8 step at every seqlen: its column beside 09's bf16 rows in the results table.
    filter='(fwd|bwd)/.*/(D(64|128)/(full|causal)/seqlen:4096|D512|D576)/|bwd_sparse/.*/seqlen:4096'
    [[ $s == v6_fp8 ]] && filter='fwd/.*/fp8/D128/'
    "$steps" --step "$s" --head-dims 64,128,512,576 --benchmark_filter="$filter" \
      --benchmark_out="$out/steps_${ch}_$s.json" --benchmark_out_format=json >"$out/steps_${ch}_$s.log" 2>&1 ||
      { status=1; tail -3 "$out/steps_${ch}_$s.log"; }
  done
done
python3 - "$out" <<'PY'
import glob, json, os, sys
out = sys.argv[1]
merged = {"context": None, "benchmarks": []}
for path in sorted(glob.glob(os.path.join(out, "bench_*.json")) + glob.glob(os.path.join(out, "steps_*.json"))):
    try:
        with open(path) as f:
            data = json.load(f)
    except ValueError:  # a benchmark that ran no case leaves an empty file
        print(f"skipped {path}: not a benchmark JSON (no case ran)")
        continue
    merged["context"] = merged["context"] or data.get("context")
    merged["benchmarks"] += data.get("benchmarks", [])
with open(os.path.join(out, "benchmarks.json"), "w") as f:
    json.dump(merged, f, indent=1)
print(f"{len(merged['benchmarks'])} cases in {os.path.join(out, 'benchmarks.json')}")
PY
exit $status
