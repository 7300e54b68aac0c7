#!/usr/bin/env bash
# On a GPU machine: checks that every assignment is gradable. For each chapter with solution
# regions (scripts/make_student.py), its student copy, built as generated (TODOs not filled in),
# must FAIL every GPU test that a TODO row of scripts/grading/todos.tsv selects -- a stub never
# earns a point -- while the solution build passes all of the chapter's GPU tests. (A few GPU tests
# depend on no TODO, such as refusals, and pass either way: they belong to no row; the table
# counts them.)
#
#   bash scripts/check_assignments.sh BUILD_DIR OUTDIR
#
# BUILD_DIR is the solution build (configured and built here if needed; gpu_check.sh's build-gpu
# is reused as it is); the student copies are generated afresh and built in BUILD_DIR-student.
# Writes OUTDIR/assignments.md (the verdicts), the two grade tables and the build logs.
# Exit status 1 if a chapter's solution fails a test, its stub passes one, or its copy does not build.
set -uo pipefail
solution=${1:?usage: check_assignments.sh BUILD_DIR OUTDIR}
out=${2:?usage: check_assignments.sh BUILD_DIR OUTDIR}
mkdir -p "$solution" "$out"
solution=$(cd "$solution" && pwd) out=$(cd "$out" && pwd)
student=$solution-student
cd "$(dirname "$0")/.."
[[ -x /usr/local/cuda/bin/nvcc ]] && export PATH="/usr/local/cuda/bin:$PATH"

build() {  # build DIR LOG CMAKE_ARGS...: configure (keeping the directory's generator) and build, going on past errors
  local dir=$1 log=$2
  shift 2
  local gen=()
  command -v ninja >/dev/null && [[ ! -f $dir/CMakeCache.txt ]] && gen=(-G Ninja)
  cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=Release "${gen[@]}" "$@" >"$log" 2>&1 ||
    { echo "configure of $dir failed:"; tail -20 "$log"; return 1; }
  local keep_going=(-k 0)
  grep -q "CMAKE_GENERATOR:INTERNAL=Ninja" "$dir/CMakeCache.txt" || keep_going=(-k)
  cmake --build "$dir" -j "$(nproc)" -- "${keep_going[@]}" >>"$log" 2>&1 ||
    echo "build of $dir had errors (see $log); a chapter that did not build scores 0"
}

echo "== solution build: $solution"
build "$solution" "$out/assignments_build_solution.log" -DFA_STUDENT=OFF || exit 1
echo "== student build: $student (fresh student copies in $student/student)"
rm -rf "$student/student"
build "$student" "$out/assignments_build_student.log" -DFA_STUDENT=ON -DFA_STUDENT_DIR="$student/student" || exit 1

echo "== grading both"
bash scripts/grade.sh "$solution" --tsv "$out/assignments_solution.tsv" | tee "$out/assignments_solution.txt"
bash scripts/grade.sh "$student" --tsv "$out/assignments_student.tsv" --todo-tsv "$out/assignments_student_todos.tsv" |
  tee "$out/assignments_student.txt"

python3 scripts/make_student.py --all --list >"$out/assignments_regions.txt" || exit 1
python3 - "$out" <<'EOF'
import sys
from pathlib import Path

out = Path(sys.argv[1])
def table(name):
    rows = {}
    for line in (out / name).read_text().splitlines():
        ch, passed, total, skipped, note = (line.split("\t") + [""])[:5]
        rows[ch] = (int(passed), int(total), int(skipped), note)
    return rows

solution, student = table("assignments_solution.tsv"), table("assignments_student.tsv")
# Per chapter, the most tests a stub passes on one GPU row of todos.tsv (grade.sh --todo-tsv).
row_passes = {}
for line in (out / "assignments_student_todos.tsv").read_text().splitlines()[1:]:
    f = line.split("\t")
    if len(f) > 5 and f[3] == "gpu":
        row_passes[f[0]] = max(row_passes.get(f[0], 0), int(f[4]))
regions = dict(line.split() for line in (out / "assignments_regions.txt").read_text().splitlines())
lines = ["| chapter | regions | solution passes | stub passes (all GPU tests) | stub passes on a TODO row | verdict |",
         "|---|---|---|---|---|---|"]
bad = 0
for ch in sorted(set(solution) | set(student)):
    s = solution.get(ch, (0, 0, 0, "not in the build"))
    t = student.get(ch, (0, 0, 0, "not in the build"))
    n = int(regions.get(ch, 0))
    if n == 0:
        verdict = "no assignment (no solution regions)"
    elif s[3] == "no GPU tests in this build":
        verdict = "no GPU tests in this build"
    elif s[2] or t[2]:
        verdict = "NOT CHECKED: tests skipped (no GPU?)"
        bad += 1
    elif s[1] == 0 or s[0] != s[1]:
        verdict = f"SOLUTION FAILS {s[1] - s[0]} of {s[1]}" + (f" ({s[3]})" if s[3] else "")
        bad += 1
    elif "NOT BUILT" in t[3]:
        verdict = "STUDENT COPY DOES NOT BUILD"
        bad += 1
    elif t[1] == 0:
        verdict = "STUDENT COPY RAN NO TESTS" + (f" ({t[3]})" if t[3] else "")
        bad += 1
    elif row_passes.get(ch, 0) > 0:
        verdict = f"STUB PASSES {row_passes[ch]} tests of a TODO row"
        bad += 1
    else:
        verdict = (f"ok: the stub fails every test of its TODO rows ({t[0]} of {t[1]} GPU tests, on no row, pass), "
                   f"the solution passes all {s[1]}")
    lines.append(f"| {ch} | {n} | {s[0]}/{s[1]} | {t[0]}/{t[1]} | {row_passes.get(ch, 0)} | {verdict} |")
text = "\n".join(lines) + "\n"
(out / "assignments.md").write_text(text)
print(text, end="")
print("assignments: " + ("OK" if bad == 0 else f"{bad} chapter(s) need attention"))
sys.exit(1 if bad else 0)
EOF
