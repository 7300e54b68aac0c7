#!/usr/bin/env bash
# The whole GPU check in one go (for a lent GPU machine or your own):
#   build (Release, for the GPU present) -> every test (GPU ones included) -> compute-sanitizer
#   memcheck and racecheck on each chapter on a small awkward problem -> Nsight Compute
#   shared-memory bank-conflict counters for 02 -> the tour table -> benchmarks (JSON) ->
#   PyTorch SDPA on the same shapes -> summary table and plots.
# Everything lands in OUTDIR; the summary prints last.
#
#   bash scripts/gpu_check.sh OUTDIR [--max-seqlen-naive N] [--stages LIST] [--tests-range A,B] [--chapters LIST]
# LIST is a comma-separated subset of build,tests,tests-full,sanitizer,ncu,tour,assignments,pytorch,bench,decode,python,ring,pytest
# (default: all but tests-full, the full sweep of test cases; pytorch-fwd and pytorch-bwd are pytorch's
# forward and backward anchors alone;
# the build always runs, and is quick when the build directory is already up to date). --tests-range A,B runs
# ctest entries A..B only (ctest -I), to split the tests over calls of a time-limited lent machine;
# --chapters LIST (e.g. 01_naive,02_tiled) builds, tests (ctest -L), sanitizes and benchmarks only
# those chapters, for the same reason (the bench stage's JSON files accumulate in OUTDIR; the
# summary covers all of them). The build directory is build-gpu, or $FA_GPU_BUILD where set (for
# instance `build`, the one scripts/test.sh just built, to skip a second build). The stages that
# docs/results_<gpu>.md needs: --stages pytorch,bench,decode,python (its header names the run). On
# a lent machine whose calls are cut off after minutes, scripts/gpu_jobs.sh runs those stages as a
# queue of calls of this script into one OUTDIR (about 40 minutes on an H200 in all), each call
# taking the next jobs that fit in its time. On a machine of several GPUs, --stages tests,bench,ring
# --chapters 12_ring_attention is the multi-GPU run: its results file is docs/results_<N>x<gpu>.md.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: gpu_check.sh OUTDIR}
bdir=${FA_GPU_BUILD:-build-gpu}
shift
cmdline="$*"
naive_max=8192  # 01 and 02 materialize S: past 8k they take seconds per run and tens of GB
stages=build,tests,sanitizer,ncu,tour,assignments,pytorch,bench,decode,python,ring,pytest
ctest_extra=()
bench_chapters=()
only_chapters=
while (($#)); do
  case $1 in
    --max-seqlen-naive) naive_max=$2; shift 2 ;;
    --stages) stages=$2; shift 2 ;;
    --tests-range) ctest_extra=(-I "$2"); shift 2 ;;
    --chapters) bench_chapters=(--chapters "$2"); only_chapters=$2; shift 2 ;;
    *) echo "unknown option $1"; exit 2 ;;
  esac
done
mkdir -p "$out"
want() { [[ ,$stages, == *,$1,* ]]; }
# chosen CH: is chapter CH among --chapters (every chapter when none were named)?
chosen() { [[ -z $only_chapters || ,$only_chapters, == *,$1,* ]]; }
build_targets=()
if [[ -n $only_chapters ]]; then
  IFS=, read -ra chapter_list <<<"$only_chapters"
  for ch in "${chapter_list[@]}"; do
    [[ -d $ch ]] || { echo "unknown chapter $ch"; exit 2; }
    build_targets+=("$ch/all")  # Ninja's per-folder target; other generators build everything
  done
  labels=$(IFS='|'; echo "${chapter_list[*]}")
  ctest_extra+=(-L "^($labels)\$")
fi
step() { echo "== $(date +%T) $*" | tee -a "$out/steps.log"; }
# The GPU's SM clock and power beside the pytorch and bench stages, about ten samples a second,
# appended to OUTDIR/gpu_samples.csv as "epoch seconds,nvidia-smi's timestamp,MHz,W": summarize.py
# reads the forward rows against them (under the power cap the clock moves with the load), with
# FA_BENCH_TIMES (the chapters' benchmarks) and compare_pytorch.py's t_begin / t_end giving each
# row's window.
sampler=
start_sampling() {
  command -v nvidia-smi >/dev/null && command -v pkill >/dev/null || return 0
  (LC_ALL=C  # EPOCHREALTIME with a decimal point
    nvidia-smi -i 0 --query-gpu=timestamp,clocks.sm,power.draw --format=csv,noheader,nounits -lms 100 2>/dev/null |
    while IFS= read -r line; do printf '%s,%s\n' "${EPOCHREALTIME:-$(date +%s.%N)}" "$line"; done \
      >>"$out/gpu_samples.csv") </dev/null >/dev/null 2>&1 &
  sampler=$!
}
stop_sampling() {
  [[ -n $sampler ]] || return 0
  pkill -P "$sampler" 2>/dev/null  # nvidia-smi and the loop; the subshell then ends
  sampler=
}
trap stop_sampling EXIT
FA_BENCH_TIMES="$(cd "$out" && pwd)/bench_times.csv"
export FA_BENCH_TIMES

step "environment"
{ nvidia-smi; nvidia-smi -L; nvcc --version; cmake --version | head -1; } >"$out/env.txt" 2>&1
# What docs/results_<gpu>.md's header names (summarize.py --results): the command and the commit
# (FA_COMMIT where set, else git's).
echo "bash scripts/gpu_check.sh $out${cmdline:+ $cmdline}" >"$out/command.txt"
# FA_COMMIT first: a copied tree can carry a .git that is not the tree's own commit.
if [[ -n ${FA_COMMIT:-} ]]; then echo "$FA_COMMIT" >"$out/commit.txt"
else git rev-parse --short HEAD >"$out/commit.txt" 2>/dev/null || echo unknown >"$out/commit.txt"; fi
head -20 "$out/env.txt"

step "build"
[[ -x /usr/local/cuda/bin/nvcc ]] && export PATH="/usr/local/cuda/bin:$PATH"
gen=(); command -v ninja >/dev/null && gen=(-G Ninja)
cmake -S . -B "$bdir" -DCMAKE_BUILD_TYPE=Release "${gen[@]}" >"$out/configure.log" 2>&1 ||
  { tail -40 "$out/configure.log"; exit 1; }
# Keep going past a broken target, so one chapter's compile error does not hide the others' results.
keep_going=(-k 0); ((${#gen[@]})) || keep_going=(-k)
targets=(); ((${#gen[@]})) && targets=("${build_targets[@]}")
# Stages that run no test, sanitizer or tour need only the chosen chapters' benchmark executables
# (bench, decode) or nothing of this build (pytorch, python): with Ninja, build just those.
build_needed=1
if ((${#gen[@]})) && ! want tests && ! want tests-full && ! want sanitizer && ! want ncu && ! want tour &&
  ! want assignments; then
  targets=()
  if want bench || want decode; then
    while read -r t; do
      ch=${t%_bench}; ch=${ch%_steps}
      chosen "$ch" && targets+=("$t")
    done < <(ninja -C "$bdir" -t targets all 2>/dev/null | sed -n 's/^\([0-9][0-9]_[a-z0-9_]*_bench\): .*/\1/p' | sort -u)
  fi
  ((${#targets[@]})) || build_needed=0
fi
if ((build_needed)); then
  cmake --build "$bdir" -j "$(nproc)" ${targets[@]+--target "${targets[@]}"} -- "${keep_going[@]}" >"$out/build.log" 2>&1 ||
    { echo "BUILD FAILED (continuing with what was built):"; grep -E "error|FAILED" "$out/build.log" | head -30; }
else
  echo "nothing of $bdir to build for these stages" >"$out/build.log"
fi

tests_rc=skipped
san_rc=skipped
if want tests; then
step "tests (core tier)"
bash scripts/run_ctest.sh "$bdir" --timeout 600 "${ctest_extra[@]}" >"$out/tests.log" 2>&1
tests_rc=$?
cp "$bdir"/ctest.log "$out/ctest.log"
grep -E "^== |failed" "$out/tests.log" | head -40
fi
if want tests-full; then
step "tests (full tier)"
FA_TEST_TIER=full bash scripts/run_ctest.sh "$bdir" -LE '^core$' --timeout 900 "${ctest_extra[@]}" >"$out/tests_full.log" 2>&1
tests_rc=$?
cp "$bdir"/ctest.log "$out/ctest_full.log"
grep -E "^== |failed" "$out/tests_full.log" | head -40
fi

if want sanitizer; then
step "compute-sanitizer"
small=(--batch 1 --heads 4 --kv-heads 2 --seqlen-q 77 --seqlen-k 131 --causal --iters 1)  # --head-dim below
san_rc=0
: >"$out/sanitizer.log"
for exe in "$bdir"/[0-9][0-9]_*/[0-9][0-9]_*[a-z0-9]; do
  [[ $exe == *_tests || $exe == *_bench ]] && continue
  [[ -x $exe ]] || continue
  name=$(basename "$exe")
  chosen "$name" || continue
  # 09 and 11 run another kernel at D = 128 (09: the warp-specialized one; 11: 64 query rows a
  # step instead of 128): both head dims there; 11's deterministic mode (its own kernel, with the
  # turn counters) at D = 128 too.
  runs=("--head-dim 64"); [[ $name == 09_flash_v3 || $name == 11_backward_v3 ]] && runs+=("--head-dim 128")
  [[ $name == 09_flash_v3 ]] && runs+=("--head-dim 192" "--head-dim 256")  # 09's wide key tiles (Bc = 112, 80)
  [[ $name == 11_backward_v3 ]] && runs+=("--head-dim 128 --deterministic")
  problem=("${small[@]}")
  # 12's ring takes Sq = Sk, a multiple of 2R x 128: two ranks sharing this GPU (the copy transport),
  # at both head dims; the grid beyond 65,535 blocks below is 09's and 11's, which the ring calls.
  [[ $name == 12_ring_attention ]] && { problem=(--batch 1 --heads 4 --kv-heads 2 --seqlen 512 --causal --iters 1)
    runs+=("--head-dim 128"); export FA_RING_RANKS=2 FA_RING_TRANSPORT=copy; }
  for run in "${runs[@]}"; do
    for tool in memcheck racecheck synccheck; do
      # shellcheck disable=SC2086  # $run is several flags
      if compute-sanitizer --tool "$tool" --error-exitcode 99 "$exe" "${problem[@]}" $run >>"$out/sanitizer.log" 2>&1; then
        echo "sanitizer $tool $name ($run): clean" | tee -a "$out/sanitizer_summary.txt"
      else
        echo "sanitizer $tool $name ($run): FAILED (see sanitizer.log)" | tee -a "$out/sanitizer_summary.txt"
        san_rc=1
      fi
    done
  done
  [[ $name == 12_ring_attention ]] && { unset FA_RING_RANKS FA_RING_TRANSPORT; continue; }
  # memcheck on a grid beyond 65,535 blocks along y (batch x heads = 66,048; spare blocks exit).
  many=(--batch 129 --heads 512 --kv-heads 128 --seqlen-q 3 --seqlen-k 130 --head-dim 64 --iters 1 --no-check)
  if compute-sanitizer --tool memcheck --error-exitcode 99 "$exe" "${many[@]}" >>"$out/sanitizer.log" 2>&1; then
    echo "sanitizer memcheck $name (B*H = 66,048): clean" | tee -a "$out/sanitizer_summary.txt"
  else
    echo "sanitizer memcheck $name (B*H = 66,048): FAILED (see sanitizer.log)" | tee -a "$out/sanitizer_summary.txt"
    san_rc=1
  fi
done
fi

want ncu && {
step "bank conflicts (Nsight Compute) for 02_tiled"
ncu --clock-control none --metrics \
  l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum,gpu__time_duration.sum \
  "$bdir"/02_tiled/02_tiled --batch 1 --heads 4 --seqlen 1024 --iters 1 --no-check >"$out/ncu_02.txt" 2>&1 ||
  echo "ncu failed (see ncu_02.txt)"
if [[ -x "$bdir"/06_tensor_core/06_tensor_core ]]; then
  step "bank conflicts (Nsight Compute) for 06_tensor_core"
  ncu --clock-control none --metrics \
    l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum,smsp__sass_inst_executed_op_ldsm.sum,smsp__sass_inst_executed_op_ldgsts.sum,gpu__time_duration.sum \
    "$bdir"/06_tensor_core/06_tensor_core --batch 2 --heads 16 --seqlen 2048 --head-dim 128 --iters 1 --no-check \
    >"$out/ncu_06.txt" 2>&1 || echo "ncu failed (see ncu_06.txt)"
  # The same counters for the step without the swizzle (the README's before/after).
  ncu --clock-control none -k regex:tensor_core_kernel --launch-count 1 --metrics \
    l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum,gpu__time_duration.sum \
    "$bdir"/06_tensor_core/06_tensor_core_steps_bench --step v1_plain --benchmark_filter='fwd/.*/D128/full/seqlen:2048/' \
    >"$out/ncu_06_v1_plain.txt" 2>&1 || echo "ncu failed (see ncu_06_v1_plain.txt)"
fi
}

if want assignments; then
  step "assignments: student stubs fail their GPU tests, solutions pass"
  bash scripts/check_assignments.sh "$bdir" "$out" >"$out/assignments.log" 2>&1
  cat "$out/assignments.md" 2>/dev/null || tail -20 "$out/assignments.log"
fi

if want tour; then
step "tour"
: >"$out/tour.jsonl"
for dir in [0-9][0-9]_*/; do
  ch=${dir%/}
  [[ -x "$bdir"/$ch/$ch ]] && "$bdir"/$ch/$ch --json 2>&1 | tee -a "$out/tour.log" | grep '^{' >>"$out/tour.jsonl"
done
awk -f scripts/tour_table.awk "$out/tour.jsonl" | tee "$out/tour.md"
fi

want_fwd() { want pytorch || want pytorch-fwd; }
want_bwd() { want pytorch || want pytorch-bwd; }
if want_fwd || want_bwd || want bench; then start_sampling; fi
if want_fwd; then
  step "PyTorch SDPA, forward"
  PYTHONUNBUFFERED=1 python3 scripts/compare_pytorch.py --dtypes f32,bf16,f16 --backends math,efficient,flash,cudnn \
    --varlen --out "$out/pytorch.json" >"$out/pytorch.log" 2>&1 || tail -5 "$out/pytorch.log"
  # The forward's other tile widths (06 at D 96, 192, 256; bench_all.sh times them).
  PYTHONUNBUFFERED=1 python3 scripts/compare_pytorch.py --dtypes bf16,f16 --backends flash,cudnn --head-dims 96,192,256 \
    --out "$out/pytorch_dims.json" >"$out/pytorch_dims.log" 2>&1 || tail -5 "$out/pytorch_dims.log"
  # D = 512 (06's step alt_split_d512): FLASH stops at 256, so the backends that take it.
  PYTHONUNBUFFERED=1 python3 scripts/compare_pytorch.py --dtypes bf16 --backends efficient,cudnn,math --head-dims 512 \
    --out "$out/pytorch_d512.json" >"$out/pytorch_d512.log" 2>&1 || tail -5 "$out/pytorch_d512.log"
  # MLA's head dims, 576 for Q and K and 512 for V (06's step alt_split_d576_512).
  PYTHONUNBUFFERED=1 python3 scripts/compare_pytorch.py --dtypes bf16 --backends efficient,cudnn,math --head-dims 576 \
    --head-dim-v 512 --out "$out/pytorch_d576.json" >"$out/pytorch_d576.log" 2>&1 || tail -5 "$out/pytorch_d576.log"
fi
if want_bwd; then
  step "PyTorch SDPA, backward"
  # Backward anchors: fp32 for 08's fp32 kernel, bf16 and f16 for the tensor-core backward.
  PYTHONUNBUFFERED=1 python3 scripts/compare_pytorch.py --directions bwd --dtypes f32 --backends math,efficient \
    --out "$out/pytorch_bwd_f32.json" >"$out/pytorch_bwd_f32.log" 2>&1 || tail -5 "$out/pytorch_bwd_f32.log"
  # --varlen: the packed batch's FlashAttention-2 varlen backward (full, causal, window) beside 11's.
  PYTHONUNBUFFERED=1 python3 scripts/compare_pytorch.py --directions bwd --dtypes bf16,f16 --backends flash,cudnn \
    --head-dims 64,96,128,192,256 --varlen --out "$out/pytorch_bwd_bf16.json" >"$out/pytorch_bwd_bf16.log" 2>&1 ||
    tail -5 "$out/pytorch_bwd_bf16.log"
fi
if want bench; then
  step "benchmarks"
  bash scripts/bench_all.sh "$bdir" "$out" --max-seqlen-naive "$naive_max" "${bench_chapters[@]}" >>"$out/bench_all.log" 2>&1 ||
    { echo "some benchmarks failed:"; grep -iE "error|fail" "$out/bench_all.log" | head; }
  grep "^==" "$out/bench_all.log"
  if [[ -f $out/bench_07_block_sparse.json ]]; then
    python3 scripts/plot_sparse.py "$out/bench_07_block_sparse.json" "$out/sparse_speedup.png" >"$out/sparse_table.md" 2>&1 ||
      tail -3 "$out/sparse_table.md"
  fi
  if [[ -f $out/bench_08_backward.json ]]; then
    python3 scripts/plot_sparse.py "$out/bench_08_backward.json" "$out/sparse_backward_speedup.png" \
      >"$out/sparse_backward_table.md" 2>&1 || tail -3 "$out/sparse_backward_table.md"
  fi
fi

if want decode && [[ -x "$bdir"/10_decoding/10_decoding_bench ]]; then
  # Chapter 10's decode rows (GB/s, L2 flushed) and PyTorch's FLASH and cuDNN on the same rows.
  # Three rounds, the chapter and PyTorch taking turns: at batch 8 the two differ by less than
  # calls do (10 README), so each row's median over interleaved rounds is what the table shows.
  step "decoding: 10_decoding against PyTorch, ${DECODE_ROUNDS:-3} interleaved rounds"
  for r in $(seq 1 "${DECODE_ROUNDS:-3}"); do
    "$bdir"/10_decoding/10_decoding_bench --benchmark_filter=decode/ --benchmark_out="$out/bench_decode_$r.json" \
      --benchmark_out_format=json >"$out/bench_decode_$r.log" 2>&1 || tail -5 "$out/bench_decode_$r.log"
    PYTHONUNBUFFERED=1 python3 scripts/compare_pytorch_decode.py --out "$out/pytorch_decode_$r.json" \
      >"$out/pytorch_decode_$r.log" 2>&1 || tail -5 "$out/pytorch_decode_$r.log"
    echo "   round $r:"
    grep -E "^decode" "$out/bench_decode_$r.log" | awk '{print "   " $1, $NF}'; grep -E "decode|plain" "$out/pytorch_decode_$r.log"
  done
fi

# The PyTorch op's extension (python/README.md), in build-python: the python and pytest stages'.
build_extension() {
  cmake -S . -B build-python -DCMAKE_BUILD_TYPE=Release -DFA_PYTHON_EXTENSION=ON "${gen[@]}" >"$out/python_configure.log" 2>&1 &&
    cmake --build build-python -j "$(nproc)" --target flash_tutorial_C >"$out/python_build.log" 2>&1 ||
    { echo "python extension build failed"; tail -20 "$out/python_build.log"; }
}

if want python; then
  # The PyTorch op with the chapters' kernels (python/README.md): build the extension, then the
  # small GPT with SDPA and with the kernels, two seeds, a short packed pair, one profile of its
  # training step with each, and a transformers Llama.
  step "python: flash_tutorial._C, the GPT comparison, the Llama step"
  build_extension
  # Both attentions train in one process, in turns (train_gpt.py's docstring: the host's speed drifts
  # by more than the attentions differ between separate runs), one such run a seed.
  for seed in 0 1; do
    PYTHONPATH=python PYTHONUNBUFFERED=1 python3 python/examples/train_gpt.py --attn sdpa tutorial --seed $seed \
      --steps 1500 --out "$out/gpt_{attn}_s$seed.json" >"$out/gpt_s$seed.log" 2>&1 || tail -5 "$out/gpt_s$seed.log"
  done
  python3 python/examples/plot_gpt.py --out "$out/gpt_loss.png" "$out"/gpt_sdpa_s0.json "$out"/gpt_sdpa_s1.json \
    "$out"/gpt_tutorial_s0.json "$out"/gpt_tutorial_s1.json | tee "$out/gpt_table.md"
  # The GPT on packed documents (--pack: attention_varlen against varlen_attn), 300 steps each; the final lines.
  PYTHONPATH=python python3 python/examples/train_gpt.py --attn sdpa tutorial --pack --steps 300 \
    --out "$out/gpt_{attn}_pack.json" >"$out/gpt_pack.log" 2>&1; tail -2 "$out/gpt_pack.log"
  # Where a training step's time goes, both attentions timed in turn (python/README.md); its table
  # goes into the results file next to the GPT's (scripts/summarize.py).
  PYTHONPATH=python python3 python/examples/profile_gpt.py --out "$out/gpt_profile" >"$out/gpt_profile.log" 2>&1 ||
    tail -5 "$out/gpt_profile.log"
  rm -f "$out"/gpt_profile/trace_*.json  # large; profile_gpt.py writes them again
  # A transformers Llama's training step with SDPA (its own choice of backend, then FLASH and cuDNN
  # held) and with the op (python/README.md).
  PYTHONPATH=python python3 python/examples/bench_hf.py --attn sdpa sdpa_flash sdpa_cudnn tutorial --profile 2 --out "$out/hf" \
    >"$out/hf.log" 2>&1 || tail -5 "$out/hf.log"
fi

if want ring; then
  # Ring attention over every GPU of the machine, one process a GPU (python/examples/bench_ring.py):
  # its check against the float64 reference and its scaling table; on one GPU, nothing to split.
  ngpu=$(nvidia-smi -L 2>/dev/null | wc -l)
  if ((ngpu > 1)); then
    step "python: ring attention on $ngpu GPUs (torchrun)"
    build_extension
    PYTHONPATH=python python3 -m torch.distributed.run --nproc-per-node "$ngpu" python/examples/bench_ring.py \
      --out "$out/ring" >"$out/ring.log" 2>&1 || tail -5 "$out/ring.log"
    cat "$out/ring/ring.md" 2>/dev/null
  fi
fi

if want pytest; then
  # The PyTorch op's tests, the CUDA ones included (the CPU ones run in CI too).
  step "python: pytest python/tests"
  build_extension
  # -rfEs: the short summary names every failure and error (the lines printed here) and every skip.
  PYTHONPATH=python python3 -m pytest python/tests -q -rfEs >"$out/pytest.log" 2>&1; echo "pytest rc=$?"
  grep -E '^(FAILED|ERROR) ' "$out/pytest.log"; tail -1 "$out/pytest.log"
fi

if want bench; then  # last, so that it sees the decode rows too
  step "summary"
  python3 scripts/summarize.py "$out" --readmes . --results docs || true
  cp -r docs "$out/docs_updated" 2>/dev/null; for f in */README.md README.md; do mkdir -p "$out/readmes/$(dirname "$f")"; cp "$f" "$out/readmes/$f"; done
fi

step "done: tests rc=$tests_rc, sanitizer rc=$san_rc"
cat "$out/sanitizer_summary.txt" "$out/tour.md" 2>/dev/null
if [[ -f $out/ctest.log ]]; then tail -3 "$out/ctest.log"; fi
# The exit status: 1 where the tests or the sanitizers failed, else 0 (stages that did not run
# count as passed; the other stages report in their logs and the summary).
[[ $tests_rc == skipped || $tests_rc == 0 ]] && [[ $san_rc == skipped || $san_rc == 0 ]]
