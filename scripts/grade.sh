#!/usr/bin/env bash
# Grades a build, chapter by chapter: how many of the chapter's GPU tests pass (the forward pass
# against the float64 reference on every shared shape, plus the teacher's hidden cases when
# FA_EXTRA_TESTS_DIR is set). Build the student copies first (README: For teachers):
#
#   cmake -S . -B build-student -DFA_STUDENT=ON [-DFA_STUDENT_DIR=DIR] && cmake --build build-student
#   FA_EXTRA_TESTS_DIR=/path/to/hidden bash scripts/grade.sh build-student
#
#   bash scripts/grade.sh [BUILD_DIR] [--tsv FILE] [--jobs N] [--timeout SECONDS] [--chapter-timeout SECONDS]
# BUILD_DIR defaults to ./build. --tsv also writes 'chapter passed total skipped note cpu_passed
# cpu_total' per chapter. Two parts per chapter: its CPU tests (the algorithm models and CSR
# builders a student completes without a GPU; they run anywhere) and its GPU tests (the kernels;
# skipped, and said so, without a GPU). --timeout: per test (default 300 s); --chapter-timeout:
# per chapter and part (default 900 s), after which the rest of that part counts as failed and
# the table says "TIME LIMIT" (a hanging kernel ends its chapter's grading, not the whole run).
# A chapter whose test binary did not build scores 0. Exit status 0 once the table is printed.
set -euo pipefail
build="" tsv="" jobs=8 timeout=300 chapter_timeout=900
while (($#)); do
  case $1 in
    --tsv) tsv=$2; shift 2 ;;
    --jobs) jobs=$2; shift 2 ;;
    --timeout) timeout=$2; shift 2 ;;
    --chapter-timeout) chapter_timeout=$2; shift 2 ;;
    -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
    -*) echo "grade.sh: unknown option $1" >&2; exit 2 ;;
    *) build=$1; shift ;;
  esac
done
[[ -n $build ]] || build=$(dirname "$0")/../build
[[ -f $build/CTestTestfile.cmake ]] || { echo "grade.sh: $build is not a configured build directory" >&2; exit 2; }
build=$(cd "$build" && pwd)
[[ -n $tsv ]] && tsv=$(cd "$(dirname "$tsv")" && pwd)/$(basename "$tsv")
results=$(mktemp -d)
trap 'rm -rf "$results"' EXIT

chapters=()
for dir in "$build"/[0-9][0-9]_*/; do
  [[ -f $dir/CTestTestfile.cmake ]] && chapters+=("$(basename "$dir")")
done
# run_part CHAPTER PART LABEL: the chapter's tests with that label, under the chapter time limit.
run_part() {
  local ch=$1 part=$2 label=$3 rc=0
  # How many tests the part has, so that those a time limit cuts off still count (as failed).
  ctest --test-dir "$build" -N -R "^$ch\\." -L "^$label\$" | sed -n 's/^Total Tests: //p' >"$results/$ch.$part.count"
  OMP_NUM_THREADS=${OMP_NUM_THREADS:-2} timeout --kill-after=10 "$chapter_timeout" \
    ctest --test-dir "$build" -R "^$ch\\." -L "^$label\$" -j "$jobs" --timeout "$timeout" \
    --output-junit "$results/$ch.$part.xml" >"$results/$ch.$part.log" 2>&1 || rc=$?
  if ((rc == 124 || rc == 137)); then
    echo "grade.sh: $ch ($part tests): TIME LIMIT of ${chapter_timeout}s reached, the rest counts as failed" >&2
    echo "time-limit" >"$results/$ch.$part.limit"
  fi
}
for ch in "${chapters[@]}"; do
  run_part "$ch" cpu cpu
  # fa_register_gtests (cmake/Chapter.cmake) names this file in the folder's CTestTestfile.cmake.
  if ! grep -q "${ch}_tests_extra_cases.cmake" "$build/$ch/CTestTestfile.cmake"; then
    echo "no-gpu-tests" >"$results/$ch.status"   # the chapter's GPU part is not configured
  elif [[ ! -x $build/$ch/${ch}_tests ]]; then
    echo "not-built" >"$results/$ch.status"
  else
    run_part "$ch" gpu gpu  # the name prefix fa_register_gtests gives them, and the gpu label
    echo "ran" >"$results/$ch.status"
  fi
done

python3 - "$results" "$tsv" "${chapters[@]}" <<'EOF'
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

results, tsv, chapters = Path(sys.argv[1]), sys.argv[2], sys.argv[3:]
def count(xml, expected):
    """(passed, total, skipped, hidden, hidden_passed) of a JUnit file; `expected`: how many
    tests ctest knows (those a time limit cut off never reach the file and count as failed)."""
    passed = total = skipped = hidden = hidden_passed = 0
    if xml.exists():
        for case in ET.parse(xml).getroot().iter("testcase"):
            total += 1
            ok = case.find("failure") is None and case.find("error") is None and case.get("status") != "fail"
            skip = case.find("skipped") is not None or case.get("status") in ("notrun", "disabled")
            passed += ok and not skip
            skipped += skip
            if "/Extra_" in case.get("name", ""):
                hidden += 1
                hidden_passed += ok and not skip
    return passed, max(total, expected), skipped, hidden, hidden_passed

def listed(ch, part):
    """How many tests the part has (ctest -N), whether or not they all ran."""
    path = results / f"{ch}.{part}.count"
    text = path.read_text().strip() if path.exists() else ""
    return int(text) if text.isdigit() else 0

rows = []
for ch in chapters:
    status = (results / f"{ch}.status").read_text().strip()
    cpu_passed, cpu_total, _, _, _ = count(results / f"{ch}.cpu.xml", listed(ch, "cpu"))
    notes = []
    if (results / f"{ch}.cpu.limit").exists():
        notes.append("CPU TIME LIMIT")
    passed = total = skipped = 0
    if status == "ran":
        passed, total, skipped, hidden, hidden_passed = count(results / f"{ch}.gpu.xml", listed(ch, "gpu"))
        if (results / f"{ch}.gpu.limit").exists():
            notes.append("GPU TIME LIMIT: a hanging kernel? the tests it did not reach count as failed")
        if skipped:
            notes.append(f"{skipped} GPU tests skipped (no GPU?)")
        if hidden:
            notes.append(f"hidden cases {hidden_passed}/{hidden}")
        if total == 0:
            notes.append("no GPU tests ran (see ctest -L gpu)")
    else:
        notes.append({"no-gpu-tests": "no GPU tests in this build", "not-built": "NOT BUILT (compile error?)"}[status])
    rows.append((ch, passed, total, skipped, ", ".join(notes), cpu_passed, cpu_total))

width = max([len("chapter")] + [len(r[0]) for r in rows])
print(f"{'chapter':<{width}} | CPU passed / total | GPU passed / total | GPU score | notes")
print(f"{'-' * width}-|--------------------|--------------------|-----------|------")
for ch, passed, total, skipped, note, cpu_passed, cpu_total in rows:
    score = f"{100.0 * passed / total:5.1f}%" if total else "  0.0%"
    print(f"{ch:<{width}} | {cpu_passed:>8} / {cpu_total:<7} | {passed:>8} / {total:<7} | {score:>9} | {note}")
graded = [100.0 * r[1] / r[2] if r[2] else 0.0 for r in rows if r[4] != "no GPU tests in this build"]
if graded:  # a chapter that did not build counts 0
    print(f"{'mean':<{width}} | {'':>18} | {'':>18} | {sum(graded) / len(graded):8.1f}% | GPU part, over {len(graded)} chapters")
if tsv:
    with open(tsv, "w") as f:
        for row in rows:
            f.write("\t".join(map(str, row)) + "\n")
EOF
