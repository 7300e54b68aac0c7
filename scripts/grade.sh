#!/usr/bin/env bash
# Grades a build, chapter by chapter: how many of the chapter's GPU tests pass (the forward pass
# against the float64 reference on every shared shape, plus the teacher's hidden cases when
# FA_EXTRA_TESTS_DIR is set). Build the student copies first (README: For teachers):
#
#   cmake -S . -B build-student -DFA_STUDENT=ON [-DFA_STUDENT_DIR=DIR] && cmake --build build-student
#   FA_EXTRA_TESTS_DIR=/path/to/hidden bash scripts/grade.sh build-student
#
#   bash scripts/grade.sh [BUILD_DIR] [--tsv FILE] [--jobs N] [--timeout SECONDS]
# BUILD_DIR defaults to ./build. --tsv also writes 'chapter passed total skipped note' per chapter.
# A chapter whose test binary did not build scores 0. Needs a GPU: without one every test is
# skipped and the table says so. Exit status 0 once the table is printed.
set -euo pipefail
build="" tsv="" jobs=8 timeout=300
while (($#)); do
  case $1 in
    --tsv) tsv=$2; shift 2 ;;
    --jobs) jobs=$2; shift 2 ;;
    --timeout) timeout=$2; shift 2 ;;
    -h|--help) sed -n '2,12p' "$0"; exit 0 ;;
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
for ch in "${chapters[@]}"; do
  # fa_register_gtests (cmake/Chapter.cmake) names this file in the folder's CTestTestfile.cmake.
  if ! grep -q "${ch}_tests_extra_cases.cmake" "$build/$ch/CTestTestfile.cmake"; then
    echo "no-gpu-tests" >"$results/$ch.status"   # the chapter's GPU part is not configured
  elif [[ ! -x $build/$ch/${ch}_tests ]]; then
    echo "not-built" >"$results/$ch.status"
  else
    # This chapter's GPU tests: the name prefix fa_register_gtests gives them, and the gpu label.
    OMP_NUM_THREADS=${OMP_NUM_THREADS:-2} ctest --test-dir "$build" -R "^$ch\\." -L '^gpu$' -j "$jobs" \
      --timeout "$timeout" --output-junit "$results/$ch.xml" >"$results/$ch.log" 2>&1 || true
    echo "ran" >"$results/$ch.status"
  fi
done

python3 - "$results" "$tsv" "${chapters[@]}" <<'EOF'
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

results, tsv, chapters = Path(sys.argv[1]), sys.argv[2], sys.argv[3:]
rows = []
for ch in chapters:
    status = (results / f"{ch}.status").read_text().strip()
    passed = total = skipped = hidden = hidden_passed = 0
    note = {"no-gpu-tests": "no GPU tests in this build", "not-built": "NOT BUILT (compile error?)"}.get(status, "")
    xml = results / f"{ch}.xml"
    if status == "ran" and xml.exists():
        for case in ET.parse(xml).getroot().iter("testcase"):
            total += 1
            ok = case.find("failure") is None and case.find("error") is None and case.get("status") != "fail"
            skip = case.find("skipped") is not None or case.get("status") in ("notrun", "disabled")
            passed += ok and not skip
            skipped += skip
            if "/Extra_" in case.get("name", ""):
                hidden += 1
                hidden_passed += ok and not skip
        notes = []
        if skipped:
            notes.append(f"{skipped} skipped (no GPU?)")
        if hidden:
            notes.append(f"hidden cases {hidden_passed}/{hidden}")
        if total == 0:
            notes.append("no tests ran (see ctest -L gpu)")
        note = ", ".join(notes)
    elif status == "ran":
        note = "ctest wrote no results"
    rows.append((ch, passed, total, skipped, note))

width = max([len("chapter")] + [len(r[0]) for r in rows])
print(f"{'chapter':<{width}} | passed / total | score  | notes")
print(f"{'-' * width}-|----------------|--------|------")
for ch, passed, total, skipped, note in rows:
    score = f"{100.0 * passed / total:5.1f}%" if total else "  0.0%"
    print(f"{ch:<{width}} | {passed:>6} / {total:<5} | {score} | {note}")
graded = [100.0 * r[1] / r[2] if r[2] else 0.0 for r in rows if r[4] != "no GPU tests in this build"]
if graded:  # a chapter that did not build counts 0
    print(f"{'mean':<{width}} | {'':>14} | {sum(graded) / len(graded):5.1f}% | over {len(graded)} chapters")
if tsv:
    with open(tsv, "w") as f:
        for row in rows:
            f.write("\t".join(map(str, row)) + "\n")
EOF
