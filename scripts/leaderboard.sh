#!/usr/bin/env bash
# A class's performance leaderboard for one chapter, on one GPU in one run. Each submission is
# graded as `grade.sh --submission` grades it: a clean handout with only the submission's TODO
# files, the chapter's tests, then (if every GPU test passed) the chapter's benchmark interleaved
# with the solution's on the same GPU (scripts/grade_perf.sh, cases from scripts/grading/perf.tsv).
# The board ranks the submissions whose tests all pass by r, their TFLOP/s over the solution's
# (geometric mean over the cases), and lists the others below, untimed: a fast wrong kernel earns
# no place on it.
#
#   bash scripts/leaderboard.sh --chapter NN --solution SOLUTION_BUILD [--out DIR] [--markdown FILE]
#                               SUBMISSION_DIR...
#
# SOLUTION_BUILD: a Release build of this repository on this machine (scripts/test.sh builds one in
# ./build). A submission's name on the board is its folder's name. --out keeps each submission's
# log, TSV files and Gradescope results.json (default: a temporary folder); --markdown also writes
# the board to FILE.
# Without a GPU every submission's GPU part says skipped. Exit status 0 once the board is printed.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
chapter="" solution="" out="" markdown="" submissions=()
while (($#)); do
  case $1 in
    --chapter) chapter=$2; shift 2 ;;
    --solution) solution=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --markdown) markdown=$2; shift 2 ;;
    -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
    -*) echo "leaderboard.sh: unknown option $1" >&2; exit 2 ;;
    *) submissions+=("$1"); shift ;;
  esac
done
usage="usage: leaderboard.sh --chapter NN --solution SOLUTION_BUILD [--out DIR] [--markdown FILE] SUBMISSION_DIR..."
[[ -n $chapter && -n $solution && ${#submissions[@]} -gt 0 ]] || { echo "$usage" >&2; exit 2; }
[[ -f $solution/CMakeCache.txt ]] || { echo "leaderboard.sh: $solution is not a build directory" >&2; exit 2; }
solution=$(cd "$solution" && pwd)
for dir in "${submissions[@]}"; do
  [[ -d $dir ]] || { echo "leaderboard.sh: $dir is not a folder" >&2; exit 2; }
done
if [[ -z $out ]]; then
  out=$(mktemp -d)
  trap 'rm -rf "$out"' EXIT
fi
mkdir -p "$out"
out=$(cd "$out" && pwd)

names=()
for dir in "${submissions[@]}"; do
  name=$(basename "$(cd "$dir" && pwd)")
  names+=("$name")
  echo "== $(date +%T) $name: grading chapter $chapter (log: $out/$name.log)"
  bash "$here/grade.sh" --submission "$dir" --chapter "$chapter" --tsv "$out/$name.grades.tsv" \
    --perf "$solution" --perf-tsv "$out/$name.perf.tsv" --json "$out/$name.results.json" >"$out/$name.log" 2>&1 ||
    echo "   grade.sh failed for $name (see $out/$name.log)"
  tail -3 "$out/$name.log" | sed 's/^/   /'
done

gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1 || true)
python3 - "$out" "$chapter" "${gpu:-no GPU}" "$markdown" "${names[@]}" <<'EOF'
import sys
from pathlib import Path

out, chapter, gpu, markdown, names = Path(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5:]

def rows(path):
    if not path.exists():
        return []
    return [line.split("\t") for line in path.read_text().splitlines() if line.strip()]

board = []
for name in names:
    grades = [r for r in rows(out / f"{name}.grades.tsv") if r[0].startswith(chapter)]
    perf = [r for r in rows(out / f"{name}.perf.tsv") if r[0].startswith(chapter)]
    tests = "not graded (see the log)"
    if grades:
        passed, total, skipped = (int(x) for x in grades[0][1:4])
        tests = f"{passed}/{total}" + (f" ({skipped} skipped)" if skipped else "")
    r = mine = theirs = None
    points, note = "-", "not timed"
    if perf:
        p = perf[0] + ["-"] * 7
        r = float(p[1]) if p[1] != "-" else None
        points = f"{float(p[2]):.1f} of {p[3]}"
        note = p[4]
        mine = float(p[5]) if p[5] != "-" else None
        theirs = float(p[6]) if p[6] != "-" else None
    board.append((name, tests, mine, theirs, r, points, note))

# The timed submissions by r, fastest first; then the others in the order given.
board.sort(key=lambda b: (b[4] is None, -(b[4] or 0.0)))
lines = [f"Leaderboard, chapter {chapter}, {gpu}: TFLOP/s are geometric means over the cases of "
         "scripts/grading/perf.tsv; each submission's benchmark ran interleaved with the solution's.",
         "",
         "| rank | submission | GPU tests passed | TFLOP/s | solution TFLOP/s (same run) | r | performance points | notes |",
         "|---:|---|---|---:|---:|---:|---|---|"]
for n, (name, tests, mine, theirs, r, points, note) in enumerate(board, 1):
    rank = str(n) if r is not None else "-"
    fmt = lambda x: f"{x:.2f}" if x is not None else "-"
    lines.append(f"| {rank} | {name} | {tests} | {fmt(mine)} | {fmt(theirs)} | "
                 f"{f'{r:.3f}' if r is not None else '-'} | {points} | {note} |")
text = "\n".join(lines)
print(text)
if markdown:
    Path(markdown).write_text(text + "\n")
EOF
