#!/usr/bin/env bash
# The results run (docs/results_<gpu>.md) as a queue of gpu_check.sh jobs, for a lent machine whose
# calls are cut off after a few minutes: call it again and again on the same machine, and each
# call runs the next jobs that fit in its time, in the order below, into one OUTDIR.
#
#   bash scripts/gpu_jobs.sh STATE_DIR [--limit SECONDS] [--jobs LIST]
#
# STATE_DIR keeps the queue between calls (STATE_DIR/done/<job>, STATE_DIR/log) and the run's
# OUTDIR (STATE_DIR/run); put it where the machine keeps files between calls (an ignored folder of
# the tree, e.g. build/jobs). --limit: the seconds this call may use (default 560); a job starts
# only when its estimate (seconds, measured on an H200) fits in what is left, and one cut off by
# the limit runs again, whole, in the next call. --jobs: a comma-separated subset of the names
# below. Where $OUT is set (the lent machine's folder that comes back), the call leaves
# run.tgz (OUTDIR) and jobs.log there. When the queue is empty, run here:
#   python3 scripts/summarize.py STATE_DIR/run --readmes . --results docs
set -uo pipefail
cd "$(dirname "$0")/.."
usage="usage: gpu_jobs.sh STATE_DIR [--limit SECONDS] [--jobs LIST]"
state=${1:?$usage}
shift
limit=560
only=
while (($#)); do
  case $1 in
    --limit) limit=${2:?$usage}; shift 2 ;;
    --jobs) only=$2; shift 2 ;;
    *) echo "$usage"; exit 2 ;;
  esac
done
start=$(date +%s)
run=$state/run
mkdir -p "$state/done" "$run"
export FA_GPU_BUILD=${FA_GPU_BUILD:-build}
[[ -x /usr/local/cuda/bin/nvcc ]] && export PATH="/usr/local/cuda/bin:$PATH"
log() { echo "$*" | tee -a "$state/log"; }
pack() {
  [[ -n ${OUT:-} ]] || return 0
  tar czf "$OUT/run.tgz" -C "$state" run 2>/dev/null
  cp "$state/log" "$OUT/jobs.log" 2>/dev/null
}

# The benchmarks' executables (every chapter's) and the PyTorch extension, the two builds side by side.
build() {
  local gen=(); command -v ninja >/dev/null && gen=(-G Ninja)
  cmake -S . -B "$FA_GPU_BUILD" -DCMAKE_BUILD_TYPE=Release "${gen[@]}" >"$run/jobs_configure.log" 2>&1 || return 1
  local targets=()
  if ((${#gen[@]})); then
    mapfile -t targets < <(ninja -C "$FA_GPU_BUILD" -t targets all | sed -n 's/^\([0-9][0-9]_[a-z0-9_]*_bench\): .*/\1/p' | sort -u)
  fi
  cmake --build "$FA_GPU_BUILD" -j "$(nproc)" ${targets[@]+--target "${targets[@]}"} >"$run/jobs_build.log" 2>&1 &
  { cmake -S . -B build-python -DCMAKE_BUILD_TYPE=Release -DFA_PYTHON_EXTENSION=ON "${gen[@]}" &&
      cmake --build build-python -j "$(nproc)" --target flash_tutorial_C; } >"$run/jobs_python_build.log" 2>&1 &
  wait
}

gc="bash scripts/gpu_check.sh $run"
# name | estimate (s) | command. The PyTorch anchors and the models first: every table needs them.
# A backward row runs two calls for each timed one (compare_pytorch.py: BACKWARD_AHEAD), which the
# estimates of pytorch_bwd, bench_08 and bench_11 count. Each estimate is a job's measured time on
# an H200 (the anchors' rows at least 0.1 s untimed and 0.3 s timed, compare_pytorch.py: SUSTAINED)
# plus a margin: build 152 s, pytorch_fwd 224, pytorch_bwd 307, python 206, bench_09 135, bench_10
# 206, bench_11 241.
jobs=(
  "build|200|build"
  "pytorch_fwd|250|$gc --stages pytorch-fwd --chapters 09_flash_v3"
  "pytorch_bwd|340|$gc --stages pytorch-bwd --chapters 09_flash_v3"
  "python|240|$gc --stages python"
  "bench_09|150|$gc --stages bench --chapters 09_flash_v3"
  "bench_11|250|$gc --stages bench --chapters 11_backward_v3"
  "bench_10|220|$gc --stages bench,decode --chapters 10_decoding"
  "bench_06|80|$gc --stages bench --chapters 06_tensor_core"
  "bench_07|90|$gc --stages bench --chapters 07_block_sparse"
  "bench_08|400|$gc --stages bench --chapters 08_backward"
  "bench_12|90|$gc --stages bench --chapters 12_ring_attention"
  "bench_01_05|300|$gc --stages bench --chapters 01_naive,02_tiled,03_online_softmax,04_flash_v1,05_flash_v2"
  "pytest|220|$gc --stages pytest"
)
[[ -f $state/first ]] || { date +%s >"$state/first"; log "queue started $(date -u +%FT%TZ)"; }
while :; do
  ran=0
  for job in "${jobs[@]}"; do
    IFS='|' read -r name estimate cmd <<<"$job"
    [[ -z $only || ,$only, == *,$name,* ]] || continue
    [[ -f $state/done/$name ]] && continue
    if [[ $name != build && ! -f $state/done/build ]]; then break; fi  # nothing runs before the build
    left=$((limit - ($(date +%s) - start)))
    ((estimate <= left)) || continue
    log "== $name: start $(date +%T), ${left}s left"
    t0=$(date +%s)
    timeout $((left - 5)) bash -c "$(declare -f build); run=$run; $cmd" >"$run/job_$name.log" 2>&1
    rc=$?
    log "== $name: rc=$rc, $(($(date +%s) - t0))s"
    ((rc == 124)) || touch "$state/done/$name"  # cut off by the limit: again, whole, next call
    pack
    ran=1
    break
  done
  ((ran)) || break
done
pending=()
for job in "${jobs[@]}"; do
  name=${job%%|*}
  [[ -z $only || ,$only, == *,$name,* ]] && [[ ! -f $state/done/$name ]] && pending+=("$name")
done
log "call done $(date +%T); pending: ${pending[*]:-none}"
# The queue as the results file's header names it (each gpu_check.sh call wrote its own command).
((${#pending[@]})) || echo "bash scripts/gpu_jobs.sh STATE_DIR${only:+ --jobs $only}  # $(grep -c '^call done' "$state/log") calls" >"$run/command.txt"
pack
