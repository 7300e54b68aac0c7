#!/usr/bin/env bash
# Builds everything and runs every chapter on its default problem (batch 4, 16 heads,
# seqlen 1024, head_dim 64), printing one table: error against the CPU reference, pass/fail,
# time, TFLOP/s and speed-up over chapter 01. Without a GPU it says so and runs the CPU tests.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup_deps.sh
bash scripts/configure.sh

if ! nvidia-smi -L >/dev/null 2>&1; then
  echo
  echo "No NVIDIA GPU found on this machine: the kernels cannot run here."
  echo "Running what can run without one: the CPU reference and the algorithm models (ctest -L cpu)."
  exec bash scripts/run_ctest.sh build -L cpu
fi

results=build/tour.jsonl
: >"$results"
status=0
for dir in [0-9][0-9]_*/; do
  chapter=${dir%/}
  exe=build/$chapter/$chapter
  [[ -x $exe ]] || continue
  echo "running $chapter ..." >&2
  "$exe" --json | grep '^{' >>"$results" || status=1
done
echo
awk -f scripts/tour_table.awk "$results"
exit $status
