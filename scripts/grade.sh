#!/usr/bin/env bash
# Grades a build, chapter by chapter: how many of the chapter's GPU tests pass (the forward pass
# against the float64 reference on every shared shape, plus the teacher's hidden cases when
# FA_EXTRA_TESTS_DIR is set), then the same results per TODO region. Build the student copies
# first (README: For teachers):
#
#   cmake -S . -B build-student -DFA_STUDENT=ON [-DFA_STUDENT_DIR=DIR] && cmake --build build-student
#   FA_EXTRA_TESTS_DIR=/path/to/hidden bash scripts/grade.sh build-student
#
#   bash scripts/grade.sh [BUILD_DIR] [--chapter NN[,NN...]] [--tsv FILE] [--todo-tsv FILE] [--todos FILE]
#        [--jobs N] [--timeout SECONDS] [--chapter-timeout SECONDS] [--perf SOLUTION_BUILD [--perf-tsv FILE]]
#   bash scripts/grade.sh --submission DIR [--chapter NN ...] [the options above but BUILD_DIR]
# --submission DIR: grade a student's repository without trusting anything in it but their TODO
# files. A clean handout is made from this repository (make_student.py --export, staged as DIR's
# scripts/grading/handout.txt says, if it has one), only the files todos.tsv names for the graded
# chapters are copied into it from DIR, and that tree is built and graded (in a temporary folder).
# --chapter grades only those chapters (03 or 03_online_softmax; repeatable). Each graded chapter's
# test binaries are rebuilt first from its sources: one that does not compile scores 0 (never an
# older binary's result), and grading goes on with the next chapter.
# BUILD_DIR defaults to ./build. --tsv also writes 'chapter passed total skipped note cpu_passed
# cpu_total' per chapter. Two parts per chapter: its CPU tests (the algorithm models and CSR
# builders a student completes without a GPU; they run anywhere) and its GPU tests (the kernels;
# skipped, and said so, without a GPU). --timeout: per test (default 300 s); --chapter-timeout:
# per chapter and part (default 900 s), after which the rest of that part counts as failed and
# the table says "TIME LIMIT" (a hanging kernel ends its chapter's grading, not the whole run).
# A chapter whose test binary did not build scores 0.
# Per TODO region (scripts/grading/todos.tsv, or --todos FILE): the tests that grade it, passed /
# total, the fraction (CPU: (passed - baseline) / (total - baseline), the baseline being what an
# unfinished copy passes) and the points; regions graded by the same tests say "shared with". A
# GPU region whose tests skipped (no GPU) earns nothing and says so. --todo-tsv writes those rows,
# after a header line: chapter file region part passed total skipped baseline fraction points max note.
# --json FILE writes the per-TODO results as Gradescope's autograder results.json: one test per
# TODO region (name, score, max_score, status, output), and one per chapter with the teacher's
# hidden cases (FA_EXTRA_TESTS_DIR), visible after the grades are published.
# --perf SOLUTION_BUILD: then the optional performance part, scripts/grade_perf.sh (thresholds in
# scripts/grading/perf.tsv): the chapters whose GPU tests all passed, timed against the solution's
# build on the same GPU; --perf-tsv writes its rows. Exit status 0 once the tables are printed.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build="" only="" submission="" json="" tsv="" todo_tsv="" todos=$here/grading/todos.tsv perf="" perf_tsv="" jobs=8 timeout=300 chapter_timeout=900
while (($#)); do
  case $1 in
    --tsv) tsv=$2; shift 2 ;;
    --todo-tsv) todo_tsv=$2; shift 2 ;;
    --todos) todos=$2; shift 2 ;;
    --perf) perf=$2; shift 2 ;;
    --perf-tsv) perf_tsv=$2; shift 2 ;;
    --jobs) jobs=$2; shift 2 ;;
    --timeout) timeout=$2; shift 2 ;;
    --chapter-timeout) chapter_timeout=$2; shift 2 ;;
    --chapter) only=${only:+$only,}$2; shift 2 ;;
    --submission) submission=$2; shift 2 ;;
    --json) json=$2; shift 2 ;;
    -h|--help) sed -n '2,29p' "$0"; exit 0 ;;
    -*) echo "grade.sh: unknown option $1" >&2; exit 2 ;;
    *) build=$1; shift ;;
  esac
done
if [[ -n $submission ]]; then
  [[ -d $submission ]] || { echo "grade.sh: --submission $submission is not a folder" >&2; exit 2; }
  submission=$(cd "$submission" && pwd)
  work=$(mktemp -d)
  stage=()
  if [[ -f $submission/scripts/grading/handout.txt ]]; then
    numbers=$(grep -oE '^[0-9][0-9]' "$submission/scripts/grading/handout.txt" | sort -n)
    stage=(--chapters "$(head -1 <<<"$numbers")-$(tail -1 <<<"$numbers")")
  fi
  python3 "$here/make_student.py" --export "$work/handout" "${stage[@]}" >"$work/export.log" 2>&1 ||
    { cat "$work/export.log" >&2; exit 2; }
  # The student's TODO files, and nothing else: tests, CMake files, todos.tsv and this script
  # stay the handout's. A file named in todos.tsv that the submission lacks stays unfinished.
  copied=0
  while IFS=$'\t' read -r ch file _; do
    [[ $ch =~ ^[0-9][0-9]_ ]] || continue
    [[ -z $only || ,$only, == *,${ch:0:2},* || ,$only, == *,$ch,* ]] || continue
    [[ -d $work/handout/$ch ]] || continue
    rel=$ch/$file; [[ $file == common/* ]] && rel=$file
    [[ -f $submission/$rel && ! -L $submission/$rel ]] || { echo "grade.sh: the submission has no $rel" >&2; continue; }
    cp "$submission/$rel" "$work/handout/$rel" && ((copied++)) || true
  done < <(grep -v '^#' "$todos" | sort -u -t$'\t' -k1,2)
  echo "grade.sh: a clean handout with the submission's $copied TODO files: $work/handout" >&2
  gen=(); command -v ninja >/dev/null && gen=(-G Ninja)
  cmake -S "$work/handout" -B "$work/handout/build" -DCMAKE_BUILD_TYPE=Release -DFA_TESTS_PER_CASE=ON "${gen[@]}" \
    >"$work/configure.log" 2>&1 || { tail -20 "$work/configure.log" >&2; exit 2; }
  # With --chapter and Ninja, only the graded chapters' folders are built (and what they link).
  targets=()
  if [[ -n $only && ${#gen[@]} -gt 0 ]]; then
    IFS=, read -ra wanted <<<"$only"
    for w in "${wanted[@]}"; do
      for dir in "$work/handout"/[0-9][0-9]_*/; do
        ch=$(basename "$dir")
        [[ $w == "$ch" || $w == "${ch:0:2}" ]] && targets+=("$ch/all")
      done
    done
  fi
  cmake --build "$work/handout/build" -j "$jobs" ${targets[@]+--target "${targets[@]}"} \
    -- $([[ ${#gen[@]} -gt 0 ]] && echo "-k 0" || echo "-k") \
    >"$work/build.log" 2>&1 || echo "grade.sh: some of the submission does not build (see $work/build.log)" >&2
  args=()
  [[ -n $only ]] && args+=(--chapter "$only")
  [[ -n $tsv ]] && args+=(--tsv "$(cd "$(dirname "$tsv")" && pwd)/$(basename "$tsv")")
  [[ -n $todo_tsv ]] && args+=(--todo-tsv "$(cd "$(dirname "$todo_tsv")" && pwd)/$(basename "$todo_tsv")")
  [[ -n $json ]] && args+=(--json "$(cd "$(dirname "$json")" && pwd)/$(basename "$json")")
  [[ -n $perf ]] && args+=(--perf "$(cd "$perf" && pwd)")
  [[ -n $perf_tsv ]] && args+=(--perf-tsv "$(cd "$(dirname "$perf_tsv")" && pwd)/$(basename "$perf_tsv")")
  exec bash "$work/handout/scripts/grade.sh" "$work/handout/build" "${args[@]}" --jobs "$jobs" --timeout "$timeout" \
    --chapter-timeout "$chapter_timeout"
fi
[[ -n $build ]] || build=$(dirname "$0")/../build
# A staged handout (make_student.py --chapters) grades its own chapters; the ones before are given.
if [[ -z $only && -f $here/grading/handout.txt ]]; then
  only=$(grep -E '^[0-9][0-9]_' "$here/grading/handout.txt" | paste -sd, -)
  echo "grade.sh: a staged handout: grading $only (scripts/grading/handout.txt)" >&2
fi
[[ -f $build/CTestTestfile.cmake ]] || { echo "grade.sh: $build is not a configured build directory" >&2; exit 2; }
build=$(cd "$build" && pwd)
absolute() { echo "$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"; }
[[ -n $tsv ]] && tsv=$(absolute "$tsv")
[[ -n $todo_tsv ]] && todo_tsv=$(absolute "$todo_tsv")
[[ -n $perf_tsv ]] && perf_tsv=$(absolute "$perf_tsv")
[[ -n $json ]] && json=$(absolute "$json")
[[ -f $todos ]] || { echo "grade.sh: no $todos: the per-TODO table is left out" >&2; todos=""; }
if [[ -n $perf ]]; then
  [[ -d $perf ]] || { echo "grade.sh: --perf $perf is not a build directory" >&2; exit 2; }
  perf=$(cd "$perf" && pwd)
fi
restore_shards="" keep_going=()
results=$(mktemp -d)
finish() {
  rm -rf "$results"
  if [[ -n $restore_shards ]]; then
    cmake "$build" -DFA_TESTS_PER_CASE=OFF >>"$build/grade_configure.log" 2>&1 &&
      cmake --build "$build" -j "$jobs" -- "${keep_going[@]}" >>"$build/grade_build.log" 2>&1 ||
      echo "grade.sh: setting $build back to shards failed (see $build/grade_build.log)" >&2
  fi
}
trap finish EXIT
# Grading reads one ctest entry per test case (cmake/Chapter.cmake: FA_TESTS_PER_CASE, on in
# FA_STUDENT builds). A build that registers its tests in shards (a plain build, a student's own
# repository) is reconfigured with it and its tests relinked first, and set back when grading ends.
if ! grep -q '^FA_TESTS_PER_CASE:BOOL=ON$' "$build/CMakeCache.txt"; then
  restore_shards=1
  echo "grade.sh: $build runs its tests in shards; reconfiguring it with -DFA_TESTS_PER_CASE=ON" \
       "(one ctest entry per case, which grading reads)" >&2
  cmake "$build" -DFA_TESTS_PER_CASE=ON >"$build/grade_configure.log" 2>&1 ||
    { echo "grade.sh: reconfiguring $build failed (see $build/grade_configure.log)" >&2; exit 2; }
  keep_going=(-k 0); grep -q '^CMAKE_GENERATOR:INTERNAL=Ninja$' "$build/CMakeCache.txt" || keep_going=(-k)
  # Past a chapter that does not build: its test binary is missing, and the chapter scores 0.
  cmake --build "$build" -j "$jobs" -- "${keep_going[@]}" >"$build/grade_build.log" 2>&1 ||
    echo "grade.sh: some targets of $build did not build (see $build/grade_build.log)" >&2
fi

chapters=()
for dir in "$build"/[0-9][0-9]_*/; do
  ch=$(basename "$dir")
  [[ -f $dir/CTestTestfile.cmake ]] || continue
  # --chapter: only the chapters named (by number or folder name).
  [[ -z $only || ,$only, == *,${ch:0:2},* || ,$only, == *,$ch,* ]] && chapters+=("$ch")
done
((${#chapters[@]})) || { echo "grade.sh: no chapter of $build matches --chapter $only" >&2; exit 2; }

# A chapter's test binaries are built afresh before it is graded, after removing the old ones: a
# source that no longer compiles leaves no binary of an earlier build behind, and its tests then
# fail (ctest's <chapter>.NOT_BUILT), so the chapter scores 0, while the next chapter is graded.
if grep -q '^CMAKE_GENERATOR:INTERNAL=Ninja$' "$build/CMakeCache.txt"; then
  build_targets=$(ninja -C "$build" -t targets all 2>/dev/null | sed 's/:.*//')
else
  build_targets=$(cmake --build "$build" --target help 2>/dev/null | sed -n 's/^\.\.\. \([^ ]*\).*/\1/p')
fi
rebuild_chapter() {
  local ch=$1 t wanted=()
  for t in "${ch}_cpu_tests" "${ch}_tests"; do
    grep -qx "$t" <<<"$build_targets" && wanted+=("$t")
  done
  ((${#wanted[@]})) || return 0
  for t in "${wanted[@]}"; do rm -f "$build/$ch/$t"; done
  if ! cmake --build "$build" -j "$jobs" --target "${wanted[@]}" >>"$build/grade_build.log" 2>&1; then
    echo "grade.sh: $ch does not build (see $build/grade_build.log): the tests of what did not build score 0" >&2
    touch "$results/$ch.build_failed"
  fi
}
# run_part CHAPTER PART LABEL: the chapter's tests with that label, under the chapter time limit.
run_part() {
  local ch=$1 part=$2 label=$3 rc=0
  # The tests the part has, so that those a time limit cuts off still count (as failed).
  ctest --test-dir "$build" -N -R "^$ch\\." -L "^$label\$" >"$results/$ch.$part.list"
  OMP_NUM_THREADS=${OMP_NUM_THREADS:-2} timeout --kill-after=10 "$chapter_timeout" \
    ctest --test-dir "$build" -R "^$ch\\." -L "^$label\$" -j "$jobs" --timeout "$timeout" \
    --output-junit "$results/$ch.$part.xml" >"$results/$ch.$part.log" 2>&1 || rc=$?
  if ((rc == 124 || rc == 137)); then
    echo "grade.sh: $ch ($part tests): TIME LIMIT of ${chapter_timeout}s reached, the rest counts as failed" >&2
    echo "time-limit" >"$results/$ch.$part.limit"
  fi
}
for ch in "${chapters[@]}"; do
  rebuild_chapter "$ch"
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

GRADE_JSON=$json GRADE_ONLY=$only python3 - "$results" "$tsv" "$todos" "$todo_tsv" "${chapters[@]}" <<'EOF'
import os
import re
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

results, tsv, todos, todo_tsv, chapters = Path(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5:]

def outcomes(ch, part):
    """{test name: 'passed' | 'failed' | 'skipped'} of a chapter's part: the JUnit file, plus the
    tests ctest lists that never reached it (cut off by a time limit: failed)."""
    found = {}
    listing = results / f"{ch}.{part}.list"
    if listing.exists():
        for name in re.findall(r"^\s*Test\s+#\d+: (\S+)", listing.read_text(), re.M):
            found[name] = "failed"
    # ctest's own lines, which a time limit leaves behind (it kills ctest before the JUnit file is
    # written): a test that passed before the limit keeps its points.
    log = results / f"{ch}.{part}.log"
    if log.exists():
        for name, what in re.findall(r"^\s*\d+/\d+ Test\s+#\d+: (\S+) \.*\s*(\*\*\*\w+|Passed)", log.read_text(errors="replace"), re.M):
            found[name] = "passed" if what == "Passed" else "skipped" if what == "***Skipped" else "failed"
    xml = results / f"{ch}.{part}.xml"
    if xml.exists():
        for case in ET.parse(xml).getroot().iter("testcase"):
            ok = case.find("failure") is None and case.find("error") is None and case.get("status") != "fail"
            skip = case.find("skipped") is not None or case.get("status") in ("notrun", "disabled")
            found[case.get("name", "")] = "skipped" if skip else "passed" if ok else "failed"
    return found

def count(tests):
    """(passed, total, skipped, hidden, hidden_passed) of {name: outcome}."""
    values = list(tests.values())
    hidden = [o for n, o in tests.items() if "/Extra_" in n]
    return (values.count("passed"), len(values), values.count("skipped"), len(hidden), hidden.count("passed"))

rows, status, results_of = [], {}, {}
for ch in chapters:
    status[ch] = (results / f"{ch}.status").read_text().strip()
    results_of[ch, "cpu"] = outcomes(ch, "cpu")
    cpu_passed, cpu_total, _, _, _ = count(results_of[ch, "cpu"])
    notes = []
    if (results / f"{ch}.cpu.limit").exists():
        notes.append("CPU TIME LIMIT")
    passed = total = skipped = 0
    if status[ch] == "ran":
        results_of[ch, "gpu"] = outcomes(ch, "gpu")
        passed, total, skipped, hidden, hidden_passed = count(results_of[ch, "gpu"])
        if (results / f"{ch}.gpu.limit").exists():
            notes.append("GPU TIME LIMIT: a hanging kernel? the tests it did not reach count as failed")
        if skipped:
            notes.append(f"{skipped} GPU tests skipped (no GPU?)")
        if hidden:
            notes.append(f"hidden cases {hidden_passed}/{hidden}")
        if total == 0:
            notes.append("no GPU tests ran (see ctest -L gpu)")
    else:
        notes.append({"no-gpu-tests": "no GPU tests in this build", "not-built": "NOT BUILT (compile error?)"}[status[ch]])
    if (results / f"{ch}.build_failed").exists():
        notes.insert(0, "DOES NOT BUILD (grade_build.log): its missing tests score 0")
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
for out in (tsv, str(results / "chapters.tsv")):
    if out:
        with open(out, "w") as f:
            for row in rows:
                f.write("\t".join(map(str, row)) + "\n")

# Per TODO region: the rows of todos.tsv (scripts/check_todos.py keeps them true).
if not todos:
    sys.exit(0)
todo_rows, header = [], None
for line in Path(todos).read_text().splitlines():
    if not line.strip() or line.startswith("#"):
        continue
    cells = line.split("\t")
    if header is None:
        header = cells
        continue
    todo_rows.append(dict(zip(header, cells)))
if os.environ.get("GRADE_ONLY"):  # --chapter: the rows of the chapters graded
    todo_rows = [t for t in todo_rows if t["chapter"] in chapters]
graded_rows = []  # (chapter, file, region, part, passed, total, skipped, baseline, fraction, points, max, note)
for t in todo_rows:
    ch, part, regex, mx = t["chapter"], t["part"], re.compile(t["tests"]), float(t["points"])
    base = int(t["baseline"]) if t["baseline"].isdigit() else 0
    notes = [f"shared with {t['shared'].replace(',', ', ')}"] if t["shared"] not in ("", "-") else []
    fraction, passed, total, skipped = None, 0, 0, 0
    if ch not in status:
        notes.insert(0, "chapter not in this build")
    elif part == "gpu" and status[ch] != "ran":
        notes.insert(0, {"no-gpu-tests": "no GPU tests in this build", "not-built": "NOT BUILT (compile error?)"}[status[ch]])
    else:
        tests = {n: o for n, o in results_of[ch, part].items() if regex.search(n)}
        passed, total, skipped, _, _ = count(tests)
        if total == 0:
            notes.insert(0, f"no {part} test matches {t['tests']}")
        elif part == "gpu" and skipped == total:
            notes.insert(0, "skipped (no GPU)")
        else:
            if skipped:
                notes.insert(0, f"{skipped} skipped")
            if total > base:
                fraction = min(1.0, max(0.0, (passed - base) / (total - base)))
            else:
                notes.insert(0, f"baseline {base} >= {total} tests: nothing to earn")
            if (results / f"{ch}.{part}.limit").exists():
                notes.insert(0, "TIME LIMIT")
    earned = mx * fraction if fraction is not None else 0.0
    graded_rows.append((ch, t["file"], t["region"], part, passed, total, skipped, base if part == "cpu" else "-",
                        fraction, earned, mx, ", ".join(notes)))

where = [f"{r[1]}:{r[2]}" for r in graded_rows]
cw = max([len("chapter")] + [len(r[0]) for r in graded_rows])
ww = max([len("file:region")] + [len(w) for w in where])
print()
print(f"{'chapter':<{cw}} | {'file:region':<{ww}} | part | passed / total | baseline | fraction | points        | notes")
print(f"{'-' * cw}-|-{'-' * ww}-|------|----------------|----------|----------|---------------|------")
for r, w in zip(graded_rows, where):
    ch, _, _, part, passed, total, skipped, base, fraction, earned, mx, note = r
    frac = f"{fraction:.3f}" if fraction is not None else "-"
    print(f"{ch:<{cw}} | {w:<{ww}} | {part:<4} | {passed:>6} / {total:<5} | {base!s:>8} | {frac:>8} | "
          f"{earned:5.1f} of {mx:<4g} | {note}")
earned_total, possible = sum(r[9] for r in graded_rows), sum(r[10] for r in graded_rows)
earned = earned_total
skipped_gpu = sum(r[10] for r in graded_rows if r[11].startswith("skipped"))
print(f"{'total':<{cw}} | {'':<{ww}} |      |                |          |          | {earned:5.1f} of {possible:<4g} | "
      f"over {len(graded_rows)} TODO regions" + (f"; {skipped_gpu:g} points not graded (GPU tests skipped)" if skipped_gpu else ""))
if os.environ.get("GRADE_JSON"):
    # Gradescope's autograder results (its documented fields only): a test per TODO region, and
    # per chapter with hidden cases one more, shown once the grades are published.
    import json
    tests = []
    for r, w in zip(graded_rows, where):
        ch, _, _, part, passed, total, skipped, base, fraction, earned, mx, note = r
        tests.append({"name": f"{ch} {w} ({part})", "number": str(len(tests) + 1), "score": round(earned, 2),
                      "max_score": mx, "status": "passed" if fraction == 1.0 else "failed",
                      "output": f"{passed} of {total} tests passed" + (f" ({skipped} skipped)" if skipped else "")
                                + (f"; baseline {base}" if part == "cpu" else "") + (f"; {note}" if note else ""),
                      "visibility": "visible"})
    for ch in chapters:
        for part in ("cpu", "gpu"):
            hidden = {n: o for n, o in results_of.get((ch, part), {}).items() if "/Extra_" in n}
            if hidden:
                passed = list(hidden.values()).count("passed")
                tests.append({"name": f"{ch} hidden cases ({part})", "number": str(len(tests) + 1), "score": 0.0,
                              "max_score": 0.0, "status": "passed" if passed == len(hidden) else "failed",
                              "output": f"{passed} of {len(hidden)} hidden cases passed (their points are in the "
                                        "TODO rows above)", "visibility": "after_published"})
    doc = {"score": round(earned_total, 2), "output": f"{earned_total:.1f} of {possible:g} points over "
           f"{len(graded_rows)} TODO regions (scripts/grade.sh)", "visibility": "visible",
           "stdout_visibility": "hidden", "tests": tests}
    with open(os.environ["GRADE_JSON"], "w") as f:
        json.dump(doc, f, indent=1)
if todo_tsv:
    with open(todo_tsv, "w") as f:
        f.write("\t".join("chapter file region part passed total skipped baseline fraction points max note".split()) + "\n")
        for r in graded_rows:
            cells = list(r)
            cells[8] = f"{r[8]:.4f}" if r[8] is not None else "-"
            cells[9], cells[10] = f"{r[9]:.2f}", f"{r[10]:g}"
            f.write("\t".join(map(str, cells)) + "\n")
EOF
if [[ -n $perf ]]; then
  echo
  perf_rows=()
  for ch in "${chapters[@]}"; do perf_rows+=(--chapter "$ch"); done  # the graded chapters' rows only
  bash "$here/grade_perf.sh" "$build" "$perf" --grades "$results/chapters.tsv" ${perf_tsv:+--tsv "$perf_tsv"} \
    "${perf_rows[@]}" ||
    echo "grade.sh: the performance part (grade_perf.sh) failed" >&2
fi
