#!/usr/bin/env bash
# Runs ctest and ends with one summary (passed, failed, skipped and why) instead of ctest's list
# of every skipped test. On screen: a progress line every 10 ctest entries, each failure with its
# output, and any error ctest reports; ctest's full output goes to BUILD_DIR/ctest.log.
# Used by test.sh and tour.sh.
#
#   bash scripts/run_ctest.sh BUILD_DIR [CTEST_ARGS...]     e.g. run_ctest.sh build -L cpu
#
# Exit status 1 if a test failed or ctest itself reported an error, else 0.
set -uo pipefail
build=${1:?usage: run_ctest.sh BUILD_DIR [CTEST_ARGS...]}
shift
log=$build/ctest.log
status_file=$(mktemp)
trap 'rm -f "$status_file"' EXIT
result='^ *[0-9]+/([0-9]+) Test +#[0-9]+: ([^ ]+) .* sec$'  # "  12/1678 Test  #12: name ... Passed 0.01 sec"

passed=0 failed=0 skipped=0 total=0 finished="" failures=()
resources=()
junit=$(cd "$build" && pwd)/ctest_junit.xml
counts=$(cd "$build" && pwd)/case_counts.txt  # common/harness/gtest_main.cpp appends each binary's counts
times=$(cd "$build" && pwd)/case_times.txt    # ... and each case's milliseconds
rm -f "$junit" "$counts" "$times"
touch "$counts" "$times"
[[ -f $build/gpu_resources.json ]] && resources=(--resource-spec-file "$(cd "$build" && pwd)/gpu_resources.json")
while IFS= read -r line; do
  if [[ -n $finished ]]; then
    continue  # ctest's own summary and its list of skipped tests: the summary below replaces them
  elif [[ $line =~ $result ]]; then
    total=${BASH_REMATCH[1]}
    if [[ $line == *" Passed "* ]]; then
      ((passed++))
    elif [[ $line == *"***Skipped "* || $line == *"Not Run (Disabled)"* ]]; then
      ((skipped++))
    else  # Failed, Timeout, Exception, Not Run: ctest prints the test's output next
      ((failed++))
      failures+=("${BASH_REMATCH[2]}")
      echo "$line"
    fi
    n=$((passed + failed + skipped))
    ((n % 10)) || echo "  ... $n/$total ctest entries run: $passed passed, $failed failed, $skipped skipped"
  elif [[ $line =~ ^[0-9]+%\ tests\ passed ]]; then
    finished=1
  elif [[ ! $line =~ ^\ *Start\ +[0-9]+: && $line != "Internal ctest changing into directory"* ]]; then
    echo "$line"  # with --output-on-failure only failures and errors print anything else
  fi
# The CPU reference uses OpenMP; keep each test process from taking every core. The GPU entries
# take one slot each of gpu_resources.json's `gpus` (cmake/Chapter.cmake): at most FA_GPU_JOBS
# processes share the GPU while the CPU tests use the other cores. ctest's job count is every core:
# GNU nproc returns OMP_NUM_THREADS when it is set, so it is asked without it.
done < <(FA_CASE_COUNTS=$counts FA_CASE_TIMES=$times OMP_NUM_THREADS=${OMP_NUM_THREADS:-2} ctest --test-dir "$build" --output-on-failure \
           -j "$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc)" ${resources[@]+"${resources[@]}"} --output-junit "$junit" "$@" 2>&1 | tee "$log"
         echo "${PIPESTATUS[0]}" >"$status_file")
status=$(<"$status_file")

# A GPU entry runs many gtest cases (a shard of a test binary): count those too (each binary's
# main appends its counts to $counts), and name each failing case from ctest's JUnit file, which
# holds the output of every entry that failed.
read -r cases case_fails case_skips < <(awk '{p += $1; f += $2; s += $3} END {print p + 0, f + 0, s + 0}' "$counts")
mapfile -t failed_cases < <(grep -h '^\[  FAILED  \] [A-Za-z]' "$junit" 2>/dev/null | sed 's/^\[  FAILED  \] //; s/,.*//; s/ ([0-9]* ms)$//' | sort -u)
echo "== $total ctest entries: $passed passed, $failed failed, $skipped skipped" \
     "($cases test cases passed, $case_fails failed, $case_skips skipped)"
for name in "${failures[@]:0:20}"; do echo "   failed: $name"; done
((failed > 20)) && echo "   ... and $((failed - 20)) more failed (see $log)"
for name in "${failed_cases[@]:0:30}"; do echo "   failed case: $name"; done
((${#failed_cases[@]} > 30)) && echo "   ... and $((${#failed_cases[@]} - 30)) more failed cases (see $log)"
if ((skipped)); then
  # Why: each skipped test's message, the line after gtest's "file:line: Skipped".
  grep -h -A1 ': Skipped$' "$build/Testing/Temporary/LastTest.log" 2>/dev/null |
    grep -v -e ': Skipped$' -e '^--$' | sort | uniq -c | sort -rn | head -5 |
    while read -r count why; do echo "   skipped: $count x \"$why\""; done
  if ! nvidia-smi -L >/dev/null 2>&1; then
    echo "   (no NVIDIA GPU on this machine: the GPU tests need one, so run them on a GPU machine;" \
         "the CPU tests alone: ctest --test-dir $build -L cpu)"
  fi
fi
if [[ -s $times ]]; then
  echo "   slowest test cases (ms, binary, case; all in $times):"
  sort -rn "$times" | head -5 | sed 's/^/     /'
fi
echo "   ctest's full output: $log"
if [[ $status != 0 ]] && ((failed == 0)); then
  echo "== ctest reported an error (exit status $status): see above, or $log"
fi
[[ $status == 0 ]] && ((failed == 0))
