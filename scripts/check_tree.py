#!/usr/bin/env python3
"""The tree reads as a textbook (CI, no GPU; ctest scripts.tree):

  1. No tracked file speaks of the project's development: no numbered work sessions, no issue
     numbers (a reader cannot open either), no docs/pending, docs/history or session logs.
  2. Every chapter page (a chapter's README.md and the Markdown pages beside it) reads in one
     sitting: at most MAX_LINES lines.
  3. Every lesson diff a README asks the reader to run (a `diff ...` line in a ```bash block) runs,
     shows a difference with context (not one file printed whole as new), and, where LESSONS
     names its size, changes that many lines.

    python3 scripts/check_tree.py [REPO]     exit 1, naming file:line, when any of these fails
"""
import re
import subprocess
import sys
from pathlib import Path

MAX_LINES = 450
# The regex is assembled so that this file does not match it.
DEVELOPMENT = "[Ss]ess" + "ion ?[0-9]|iss" + "ue [0-9]"
# README -> (fewest, most) changed lines of its lesson diff, and a word its added lines must use,
# where the size is the point: 06 -> 07 adds the block-sparse walk (walk_length, walk_tile) to 06's
# kernel, a few dozen lines, not a whole kernel.
LESSONS = {"07_block_sparse/README.md": (20, 45, "walk")}

root = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).resolve().parent.parent).resolve()
problems = []
if subprocess.run(["git", "rev-parse", "--git-dir"], cwd=root, capture_output=True).returncode != 0:
    print(f"check_tree: {root} is not a git checkout (an exported copy?): nothing to check")
    sys.exit(77)


def tracked(*patterns):
    out = subprocess.run(["git", "ls-files", *patterns], cwd=root, capture_output=True, text=True, check=True)
    return [Path(line) for line in out.stdout.splitlines()]


# 1. Development history stays in git, not in the tree.
grep = subprocess.run(["git", "grep", "-nE", DEVELOPMENT], cwd=root, capture_output=True, text=True)
for line in grep.stdout.splitlines():
    problems.append(f"{line}: names a development session or an issue (say what the code does instead)")
for path in tracked("docs/pending", "docs/history", "docs/session*"):
    problems.append(f"{path}: development notes belong in git history, not in the tree")

# 2. Pages a student reads in one sitting.
for path in tracked("[0-9][0-9]_*/*.md", "README.md", "python/README.md", "common/README.md"):
    lines = (root / path).read_text(errors="replace").count("\n")
    if lines > MAX_LINES:
        problems.append(f"{path}: {lines} lines; a page reads in one sitting (at most {MAX_LINES}): "
                        "move material to a linked second page")


# 3. The lesson diffs.
def diff_commands(text):
    """(line number, command) for each `diff` command of the ```bash blocks, continuations joined."""
    commands, in_bash, pending, start = [], False, "", 0
    for n, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if stripped.startswith("```"):
            in_bash = not in_bash and stripped in ("```bash", "```sh")
            pending = ""
            continue
        if not in_bash:
            continue
        if pending:
            pending += " " + stripped.rstrip("\\")
        elif stripped.startswith("diff "):
            pending, start = stripped.rstrip("\\"), n
        else:
            continue
        if not stripped.endswith("\\"):
            commands.append((start, re.sub(r"\s+#.*$", "", pending).strip()))
            pending = ""
    return commands


for readme in tracked("[0-9][0-9]_*/README.md"):
    for n, command in diff_commands((root / readme).read_text()):
        where = f"{readme}:{n}"
        run = subprocess.run(["bash", "-c", command], cwd=root, capture_output=True, text=True)
        if run.returncode != 1 or not run.stdout:
            problems.append(f"{where}: `{command}` shows no difference (exit {run.returncode}): {run.stderr.strip()[:200]}")
            continue
        body = [l for l in run.stdout.splitlines() if not l.startswith(("---", "+++", "@@"))]
        changed = sum(l.startswith(("+", "-")) for l in body)
        context = sum(l.startswith(" ") for l in body)
        if context == 0:
            problems.append(f"{where}: `{command}` shares no line between the two files: the lesson is lost "
                            "(does a pattern no longer match?)")
        if str(readme) in LESSONS:
            low, high, word = LESSONS[str(readme)]
            if not low <= changed <= high:
                problems.append(f"{where}: the lesson diff changes {changed} lines, expected {low}-{high}")
            if not any(l.startswith("+") and word in l for l in body):
                problems.append(f"{where}: no added line of the lesson diff mentions '{word}': the idea is not in it")
        print(f"{where}: {changed} changed lines, {context} shared")

for p in problems:
    print(p)
print(f"check_tree: {len(problems)} problem(s)" if problems else "check_tree: the tree reads as a textbook")
sys.exit(1 if problems else 0)
