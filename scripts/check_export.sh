#!/usr/bin/env bash
# Checks the student repository end to end (README: For teachers), as CI does:
#   1. `make_student.py --export DIR`: a fresh repository, one commit, no docs/teacher/ or docs/pending/;
#   2. no line of a solution region stands in it (make_student.py --check-export);
#   3. it configures, builds and runs its own tests and grade.sh: the unfinished TODOs of the CPU
#      models (03, 04, 05, 07, 08, 10) fail their CPU tests, the other CPU tests pass, and no test
#      binary crashes.
#
#   bash scripts/check_export.sh DIR [--chapters NN-MM]   (DIR must not exist yet, or be empty)
#
# --chapters: a staged handout (make_student.py --chapters) instead: its chapters' TODOs fail as
# above, the chapters before them are given and pass, and the chapters after them are absent.
# Exit status 1 if any check fails.
set -uo pipefail
cd "$(dirname "$0")/.."
dest=${1:?usage: check_export.sh DIR [--chapters NN-MM]}
stage=()
[[ ${2:-} == --chapters ]] && stage=(--chapters "${3:?--chapters NN-MM}")
python3 scripts/make_student.py --export "$dest" "${stage[@]}" || exit 1
# No TODO's answer elsewhere in the handout, by meaning (check_leaks.py). A whole export hands out
# every chapter at once, so later chapters' given code holds patterns of earlier answers: there the
# check reports; a staged handout must pass it.
if ((${#stage[@]})); then
  python3 scripts/check_leaks.py "$dest" || exit 1
else
  python3 scripts/check_leaks.py "$dest" --report
fi
[[ -x /usr/local/cuda/bin/nvcc ]] && export PATH="/usr/local/cuda/bin:$PATH"
gen=(); command -v ninja >/dev/null && gen=(-G Ninja)
cmake -S "$dest" -B "$dest/build" -DCMAKE_BUILD_TYPE=Release "${gen[@]}" >"$dest/configure.log" 2>&1 ||
  { echo "check_export: the export does not configure:"; tail -20 "$dest/configure.log"; exit 1; }
cmake --build "$dest/build" -j "$(nproc)" >"$dest/build.log" 2>&1 ||
  { echo "check_export: the export does not build:"; grep -E "error|FAILED" "$dest/build.log" | head -20; exit 1; }
ctest --test-dir "$dest/build" -L cpu -j "$(nproc)" --timeout 300 >"$dest/ctest_cpu.log" 2>&1
bash "$dest/scripts/grade.sh" "$dest/build" --jobs "$(nproc)" --tsv "$dest/grade.tsv" --json "$dest/results.json" |
  tee "$dest/grade.txt"
python3 scripts/grading/check_results_json.py "$dest/results.json" || exit 1

python3 - "$dest" <<'EOF'
import re, sys
from pathlib import Path

dest = Path(sys.argv[1])
log = (dest / "ctest_cpu.log").read_text(errors="replace")
crashes = re.findall(r"^\s*\d+/\d+ Test +#\d+: (\S+) .*(SEGFAULT|Subprocess aborted|Child aborted|Exception|Timeout)", log, re.M)
failed = re.findall(r"^\s*\d+/\d+ Test +#\d+: (\S+) .*\*\*\*Failed", log, re.M)
bad = 0
for name, why in crashes:
    print(f"check_export: {name}: {why} (a stub must fail cleanly, never crash)")
    bad += 1
# Chapters whose CPU code has solution regions must fail some CPU test in the export; the others
# (and common/, scripts/) must pass every one.
stubbed = {"03_online_softmax", "04_flash_v1", "05_flash_v2", "07_block_sparse", "08_backward", "10_decoding"}
handout = dest / "scripts" / "grading" / "handout.txt"
if handout.exists():  # a staged handout: only its own chapters have TODOs
    stubbed &= {ln.strip() for ln in handout.read_text().splitlines() if re.match(r"^\d\d_", ln)}
failing = {re.sub(r"[./].*", "", name) for name in failed}
for ch in sorted(stubbed - failing):
    print(f"check_export: {ch}: every CPU test passes with its TODOs unfinished (a stub earns points)")
    bad += 1
for ch in sorted(failing - stubbed):
    print(f"check_export: {ch}: CPU tests fail in the export, where nothing of it is a TODO")
    bad += 1
print(f"check_export: {len(failed)} CPU tests fail as they should ({', '.join(sorted(failing))}), "
      f"{len(crashes)} crashes: " + ("OK" if not bad else f"{bad} problems"))
sys.exit(1 if bad else 0)
EOF
