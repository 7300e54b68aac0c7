#!/usr/bin/env bash
# The optional performance part of a grade (docs/grading_rubric.md): each chapter's benchmark in
# the student's build against the solution's, on the same GPU. For each row of the thresholds file
# (scripts/grading/perf.tsv: chapter, benchmark, filter, full_ratio, zero_ratio, points) it runs
# the two builds' benchmark interleaved, student, solution, student, solution (clock drift and a
# warming GPU hit both alike), takes the median TFLOPS of each case, r = the geometric mean over
# the cases of student / solution, and points linear in r from 0 at zero_ratio to all at full_ratio.
#
#   bash scripts/grade_perf.sh STUDENT_BUILD SOLUTION_BUILD [--grades GRADES_TSV] [--thresholds FILE]
#                              [--tsv FILE] [--out DIR] [--chapter NAME]...
# --grades: grade.sh's --tsv file for STUDENT_BUILD. Only chapters whose GPU tests all passed are
# timed (a fast wrong kernel earns nothing); the others score 0 and say why, and chapters whose GPU
# tests were skipped (no GPU) say skipped. Without --grades nothing is gated, and the table says
# so (grade.sh --perf SOLUTION_BUILD passes its own). --tsv: 'chapter r points max note
# student_tflops solution_tflops' per row (the TFLOP/s are geometric means over the cases, '-'
# where not timed).
# --out: keep the benchmarks' JSON files and logs there (default: a temporary folder). --chapter:
# only these rows. Without a GPU every row says skipped, with the benchmark's reason.
# Exit status 0 once the table is printed, 2 on bad arguments.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
student="" solution="" grades="" thresholds=$here/grading/perf.tsv tsv="" out="" only=()
while (($#)); do
  case $1 in
    --grades) grades=$2; shift 2 ;;
    --thresholds) thresholds=$2; shift 2 ;;
    --tsv) tsv=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --chapter) only+=("$2"); shift 2 ;;
    -h|--help) sed -n '2,19p' "$0"; exit 0 ;;
    -*) echo "grade_perf.sh: unknown option $1" >&2; exit 2 ;;
    *) if [[ -z $student ]]; then student=$1; elif [[ -z $solution ]]; then solution=$1;
       else echo "grade_perf.sh: one STUDENT_BUILD and one SOLUTION_BUILD" >&2; exit 2; fi; shift ;;
  esac
done
[[ -n $student && -n $solution ]] || { echo "usage: grade_perf.sh STUDENT_BUILD SOLUTION_BUILD [options] (--help)" >&2; exit 2; }
for dir in "$student" "$solution"; do
  [[ -d $dir ]] || { echo "grade_perf.sh: $dir is not a build directory" >&2; exit 2; }
done
[[ -f $thresholds ]] || { echo "grade_perf.sh: no thresholds file $thresholds" >&2; exit 2; }
[[ -z $grades || -f $grades ]] || { echo "grade_perf.sh: no grades file $grades" >&2; exit 2; }
if [[ -z $out ]]; then
  out=$(mktemp -d)
  trap 'rm -rf "$out"' EXIT
fi
mkdir -p "$out"

python3 - "$student" "$solution" "$thresholds" "$grades" "$tsv" "$out" "${only[@]}" <<'EOF'
import json
import math
import re
import statistics
import subprocess
import sys
from pathlib import Path

student, solution, thresholds = Path(sys.argv[1]).resolve(), Path(sys.argv[2]).resolve(), Path(sys.argv[3])
grades, tsv, out, only = sys.argv[4], sys.argv[5], Path(sys.argv[6]), set(sys.argv[7:])
COLUMNS = ["chapter", "bench", "filter", "full_ratio", "zero_ratio", "points"]

rows, header = [], None
for n, line in enumerate(thresholds.read_text().splitlines(), 1):
    if not line.strip() or line.startswith("#"):
        continue
    cells = line.split("\t")
    if header is None:
        header = cells
        if header != COLUMNS:
            sys.exit(f"grade_perf.sh: {thresholds}:{n}: the header must be {' '.join(COLUMNS)} (tab-separated)")
        continue
    row = dict(zip(COLUMNS, cells))
    try:
        row["full"], row["zero"], row["max"] = float(row["full_ratio"]), float(row["zero_ratio"]), float(row["points"])
        assert len(cells) == len(COLUMNS) and row["full"] > row["zero"] >= 0
    except (ValueError, AssertionError, KeyError):
        sys.exit(f"grade_perf.sh: {thresholds}:{n}: six tab-separated columns, full_ratio > zero_ratio >= 0")
    if not only or row["chapter"] in only:
        rows.append(row)

gate = {}  # chapter -> (passed, total, skipped, note) of its GPU tests, from grade.sh's --tsv
if grades:
    for line in Path(grades).read_text().splitlines():
        cells = line.split("\t")
        if len(cells) >= 4 and cells[1].isdigit():
            gate[cells[0]] = (int(cells[1]), int(cells[2]), int(cells[3]), cells[4] if len(cells) > 4 else "")

def cache_value(build, key):
    path = build / "CMakeCache.txt"
    text = path.read_text(errors="replace") if path.exists() else ""
    m = re.search(rf"^{key}:[A-Z]+=(.*)$", text, re.M)
    return m.group(1) if m else ""

warnings = []
if student == solution:
    warnings.append("the student's and the solution's build are the same directory: r is about 1 by construction")
for build in (student, solution):
    kind = cache_value(build, "CMAKE_BUILD_TYPE")
    if kind and kind != "Release":
        warnings.append(f"{build} is a {kind} build: time Release builds")

def no_gpu_reason(exe):
    """The benchmark's own reason for timing nothing ('no NVIDIA GPU found'), or None."""
    run = subprocess.run([str(exe), "--benchmark_list_tests=true", "--benchmark_filter=^$"],
                         capture_output=True, text=True)
    m = re.search(r"nothing to time: (.*)", run.stdout + run.stderr)
    return m.group(1).strip() if m else None

def cases_of(path):
    """{case name: (TFLOPS or None, error)} of one Google Benchmark JSON file."""
    found = {}
    if not path.exists():
        return found
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError:
        return found
    for b in data.get("benchmarks", []):
        if b.get("run_type") == "aggregate":
            continue
        name = re.sub(r"/(min_time|iterations|manual_time|real_time).*$", "", b["name"])
        found[name] = (b.get("TFLOPS"), b.get("error_message", "") if b.get("error_occurred") else "")
    return found

no_gpu = None
results = []  # (chapter, r, points, max, note)
for row in rows:
    ch, mx = row["chapter"], row["max"]
    exe_student, exe_solution = student / row["bench"], solution / row["bench"]
    if ch in gate:
        passed, total, skipped, why = gate[ch]
        if skipped and not passed:
            why = (no_gpu_reason(exe_solution) if exe_solution.exists() else None) or "no GPU?"
            results.append((ch, None, 0.0, mx, f"skipped: its GPU tests were skipped ({why})", None, None))
            continue
        if total == 0:
            results.append((ch, None, 0.0, mx, f"0: no GPU tests ran ({why or 'see grade.sh'})", None, None))
            continue
        if passed < total:
            results.append((ch, None, 0.0, mx, f"0: GPU tests {passed}/{total} passed; only a correct kernel is timed", None, None))
            continue
    elif grades:
        results.append((ch, None, 0.0, mx, "0: the chapter is not in the grades file (not built?)", None, None))
        continue
    if not exe_solution.exists():
        results.append((ch, None, 0.0, mx, f"NOT GRADED: the solution build has no {row['bench']}", None, None))
        continue
    if not exe_student.exists():
        results.append((ch, None, 0.0, mx, f"0: the student build has no {row['bench']} (not built?)", None, None))
        continue
    if no_gpu is None:
        no_gpu = no_gpu_reason(exe_solution) or ""
    if no_gpu:
        results.append((ch, None, 0.0, mx, f"skipped: {no_gpu} ({row['bench']} times nothing)", None, None))
        continue
    runs = {"student": [], "solution": []}
    for rnd in (1, 2):
        for side, exe in (("student", exe_student), ("solution", exe_solution)):
            stem = out / f"{ch}_{rnd}_{side}"
            print(f"grade_perf.sh: {ch} round {rnd}: {side}", file=sys.stderr, flush=True)
            with open(f"{stem}.log", "w") as log:
                try:
                    subprocess.run([str(exe), f"--benchmark_filter={row['filter']}", f"--benchmark_out={stem}.json",
                                    "--benchmark_out_format=json"], stdout=log, stderr=subprocess.STDOUT, timeout=900)
                except subprocess.TimeoutExpired:
                    log.write("grade_perf.sh: TIME LIMIT (900 s)\n")
            runs[side].append(cases_of(Path(f"{stem}.json")))
    names = sorted({n for r in runs["solution"] for n, (t, _) in r.items() if t})
    if not names:
        results.append((ch, None, 0.0, mx, f"NOT GRADED: the filter selects no case of the solution's benchmark ({out})", None, None))
        continue
    ratios, notes, tflops = [], [], {"student": [], "solution": []}
    for name in names:
        sol = statistics.median(r[name][0] for r in runs["solution"] if r.get(name, (None,))[0])
        got = [r[name][0] for r in runs["student"] if r.get(name, (None,))[0]]
        if not got:
            errors = {r[name][1] for r in runs["student"] if name in r and r[name][1]}
            notes.append(f"{name}: no student result ({'; '.join(errors) or 'crashed or missing'})")
            ratios.append(0.0)
            continue
        ratios.append(statistics.median(got) / sol)
        tflops["student"].append(statistics.median(got))
        tflops["solution"].append(sol)
        print(f"grade_perf.sh: {name}: student {statistics.median(got):.2f}, solution {sol:.2f} TFLOP/s, "
              f"ratio {ratios[-1]:.3f}", file=sys.stderr)
    r = 0.0 if min(ratios) <= 0 else math.exp(sum(math.log(x) for x in ratios) / len(ratios))
    points = mx * min(1.0, max(0.0, (r - row["zero"]) / (row["full"] - row["zero"])))
    note = f"{len(ratios)} cases, student/solution min {min(ratios):.3f}, max {max(ratios):.3f}"
    geo = {side: math.exp(sum(math.log(x) for x in v) / len(v)) if v and len(v) == len(names) else None
           for side, v in tflops.items()}
    results.append((ch, r, points, mx, "; ".join([note] + notes), geo["student"], geo["solution"]))

width = max([len("chapter")] + [len(r[0]) for r in results])
print(f"{'chapter':<{width}} | r (geomean) | performance points | notes")
print(f"{'-' * width}-|-------------|--------------------|------")
for ch, r, points, mx, note, *_ in results:
    shown = f"{r:.3f}" if r is not None else "-"
    print(f"{ch:<{width}} | {shown:>11} | {points:6.1f} of {mx:<8g} | {note}")
print(f"{'total':<{width}} | {'':>11} | {sum(x[2] for x in results):6.1f} of {sum(x[3] for x in results):<8g} | "
      f"student {student}, solution {solution}" + ("" if grades else "; NOT GATED on the GPU tests (no --grades)"))
for w in warnings:
    print(f"grade_perf.sh: warning: {w}")
if tsv:
    with open(tsv, "w") as f:
        for ch, r, points, mx, note, mine, theirs in results:
            f.write("\t".join([ch, f"{r:.4f}" if r is not None else "-", f"{points:.2f}", f"{mx:g}", note,
                               f"{mine:.3f}" if mine else "-", f"{theirs:.3f}" if theirs else "-"]) + "\n")
EOF
