#!/usr/bin/env python3
"""Makes the student copy of a chapter: every file copied, every solution region replaced.

A solution region in a chapter's source file is a block of whole statements between two
comment lines, each on a line of its own:

    // BEGIN SOLUTION: <one line: what the student writes here>
    // STUB: float acc = 0.0f;          (optional: kept, uncommented, so the copy still compiles)
    ...the solution...
    // END SOLUTION

In the student copy the block becomes `// TODO: <text>` followed by the STUB lines, at the
marker's indentation. The markers are comments, so they change nothing in the compiled solution.

    python3 scripts/make_student.py 04_flash_v1 --out DIR    # writes DIR/04_flash_v1/ (06: and
                                                              # DIR/common/fa2_tiles/, TAUGHT_IN)
    python3 scripts/make_student.py --all --out DIR           # every chapter (NN_name/)
    python3 scripts/make_student.py --all --list              # chapters and their regions
    python3 scripts/make_student.py --export DIR              # a standalone student repository
    python3 scripts/make_student.py --export DIR --chapters 03-05   # a staged handout (below)
    python3 scripts/make_student.py --check-export DIR        # ... holds no line of a solution

--export writes a new git repository (one commit, no history) of every file this repository
tracks, except the teacher-only ones (TEACHER_ONLY below): chapter sources with their regions
replaced as above, and Markdown files whose answer-giving passages, marked

    <!-- BEGIN SOLUTION: <one line: a hint for the student> -->
    ...the passage...
    <!-- END SOLUTION -->

become `> **Hint:** <the hint>`. It configures, builds, tests and grades like this repository.

--chapters NN or NN-MM makes a staged handout instead: the chapters NN..MM as TODOs, every chapter
before them complete (solutions in, markers gone: given code), and nothing after them: later
chapters, and the code that needs them (DEPENDS_ON below), are left out, since they call or copy
the answers of earlier ones. scripts/grading/handout.txt names the TODO chapters; grade.sh and
check_todos.py grade and check those only.
--check-export fails (exit 1) if any line of a solution region that appears nowhere outside the
regions (in this repository's tracked files) stands in a file of the export.

A file that already exists in DIR with other content (a student's work) is kept, saying so;
--force overwrites it. Unbalanced or malformed markers are refused with file:line.
Python 3 standard library only.
"""
import argparse
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCE_SUFFIXES = {".cu", ".cuh", ".h", ".hpp", ".cpp", ".cc", ".cxx", ".c"}
# Shared code that a chapter teaches and later chapters build on lives outside the chapter folder;
# its solution regions belong to that chapter (its copy, its TODO rows in grading/todos.tsv).
TAUGHT_IN = {"common/fa2_tiles": "06_tensor_core"}
BEGIN = re.compile(r"^(\s*)// BEGIN SOLUTION(?::\s*(.*?))?\s*$")
STUB = re.compile(r"^\s*// STUB:(?: (.*?))?\s*$")
END = re.compile(r"^\s*// END SOLUTION\s*$")
ANY_MARKER = re.compile(r"(BEGIN|END) SOLUTION|// STUB:")
MD_BEGIN = re.compile(r"^\s*<!-- BEGIN SOLUTION:\s*(.*?)\s*-->\s*$")
MD_END = re.compile(r"^\s*<!-- END SOLUTION -->\s*$")
# Files the student repository leaves out: answer keys, and the tooling that checks solutions;
# pending patches (docs/pending/), whose context lines quote the chapters' code, solutions included.
TEACHER_ONLY = ("docs/teacher/", "docs/pending/", "scripts/figures.py")  # figures.py: Python ports of answers
# Code outside the chapter folders that needs a chapter (its number): a staged handout that ends
# before that chapter leaves it out.
DEPENDS_ON = {"python/": 8, "examples/": 6}
HANDOUT_FILE = "scripts/grading/handout.txt"


class MarkerError(Exception):
    pass


def transform(text, path):
    """Returns (student text, number of regions). Raises MarkerError naming path:line."""
    out, regions = [], 0
    lines = text.splitlines(keepends=True)
    open_at = None  # line number of the BEGIN of the region we are in
    header = False  # right after BEGIN: STUB lines allowed
    for n, line in enumerate(lines, 1):
        where = f"{path}:{n}"
        begin, stub, end = BEGIN.match(line), STUB.match(line), END.match(line)
        if begin:
            if open_at is not None:
                raise MarkerError(f"{where}: BEGIN SOLUTION inside the region opened at line {open_at}")
            if not begin.group(2):
                raise MarkerError(f"{where}: BEGIN SOLUTION needs the student's TODO: "
                                  "'// BEGIN SOLUTION: <what to write here>'")
            indent = begin.group(1)
            out.append(f"{indent}// TODO: {begin.group(2)}\n")
            open_at, header, body = n, True, 0
        elif stub:
            if open_at is None or not header:
                raise MarkerError(f"{where}: a STUB line belongs right after its BEGIN SOLUTION line")
            if not stub.group(1):
                raise MarkerError(f"{where}: empty STUB line")
            out.append(f"{indent}{stub.group(1)}\n")
        elif end:
            if open_at is None:
                raise MarkerError(f"{where}: END SOLUTION without a BEGIN SOLUTION")
            if body == 0:
                raise MarkerError(f"{where}: empty solution region (opened at line {open_at})")
            regions += 1
            open_at = None
        elif ANY_MARKER.search(line):
            raise MarkerError(f"{where}: malformed marker; markers are comment lines of their own: "
                              "'// BEGIN SOLUTION: <todo>', '// STUB: <code>', '// END SOLUTION'")
        else:
            header = False
            if open_at is None:
                out.append(line)
            else:
                body += 1
    if open_at is not None:
        raise MarkerError(f"{path}:{open_at}: BEGIN SOLUTION without an END SOLUTION")
    return "".join(out), regions


def transform_markdown(text, path):
    """Returns (student text, number of regions) of a Markdown file: each marked passage becomes
    its hint. Raises MarkerError naming path:line."""
    out, regions, open_at = [], 0, None
    for n, line in enumerate(text.splitlines(keepends=True), 1):
        begin, end = MD_BEGIN.match(line), MD_END.match(line)
        if begin:
            if open_at is not None:
                raise MarkerError(f"{path}:{n}: BEGIN SOLUTION inside the region opened at line {open_at}")
            if not begin.group(1):
                raise MarkerError(f"{path}:{n}: BEGIN SOLUTION needs a hint: '<!-- BEGIN SOLUTION: <hint> -->'")
            out.append(f"> **Hint:** {begin.group(1)}\n")
            open_at = n
        elif end:
            if open_at is None:
                raise MarkerError(f"{path}:{n}: END SOLUTION without a BEGIN SOLUTION")
            regions += 1
            open_at = None
        elif "BEGIN SOLUTION" in line and line.lstrip().startswith("<!--"):
            raise MarkerError(f"{path}:{n}: malformed marker: '<!-- BEGIN SOLUTION: <hint> -->' on a line of its own")
        elif open_at is None:
            out.append(line)
    if open_at is not None:
        raise MarkerError(f"{path}:{open_at}: BEGIN SOLUTION without an END SOLUTION")
    return "".join(out), regions


def tracked_files(root):
    """The files git tracks in root (the export never sees build trees or untracked files)."""
    listed = subprocess.run(["git", "-C", str(root), "ls-files", "-z"], capture_output=True, check=True)
    return [p for p in listed.stdout.decode().split("\0") if p and (root / p).is_file()]


def owner(rel):
    """The number of the chapter a tracked file belongs to or needs, or None (shared by all)."""
    m = re.match(r"^(\d\d)_", rel)
    if m:
        return int(m.group(1))
    for folder, chapter in TAUGHT_IN.items():
        if rel.startswith(folder + "/"):
            return int(chapter[:2])
    for folder, chapter in DEPENDS_ON.items():
        if rel.startswith(folder):
            return chapter
    return None


def parse_range(spec):
    """'03-05' -> (3, 5); '08' -> (8, 8)."""
    m = re.match(r"^(\d{1,2})(?:-(\d{1,2}))?$", spec)
    if not m:
        raise SystemExit(f"make_student: --chapters takes NN or NN-MM (e.g. 03-05), not {spec!r}")
    first, last = int(m.group(1)), int(m.group(2) or m.group(1))
    if first > last:
        raise SystemExit(f"make_student: --chapters {spec}: the range runs backwards")
    return first, last


def strip_markers(text):
    """The solution as given code: every marker line (BEGIN, STUB, END) dropped, the rest kept."""
    keep = [ln for ln in text.splitlines(keepends=True)
            if not (BEGIN.match(ln) or STUB.match(ln) or END.match(ln) or MD_BEGIN.match(ln) or MD_END.match(ln))]
    return "".join(keep)


def student_text(root, rel, stage=None):
    """(bytes of the student version of root/rel, regions), or (None, 0) for a file the student
    does not get. stage: (first, last) TODO chapters of a staged handout, or None: all of them."""
    if rel.startswith(TEACHER_ONLY):
        return None, 0
    chapter = owner(rel)
    if stage and chapter is not None and chapter > stage[1]:
        return None, 0  # after the handout: it calls or copies the handout's answers
    data = (root / rel).read_bytes()
    suffix = Path(rel).suffix
    if suffix in SOURCE_SUFFIXES or suffix == ".md":
        text = data.decode("utf-8", "surrogateescape")
        if stage and chapter is not None and chapter < stage[0]:
            return strip_markers(text).encode("utf-8", "surrogateescape"), 0  # before: given code
        new, regions = (transform_markdown if suffix == ".md" else transform)(text, rel)
        if regions:
            return new.encode("utf-8", "surrogateescape"), regions
    return data, 0


def readme_with_stage(data, todo, given):
    """The top README of a staged handout: a note under its title on what this handout holds (the
    chapter table still lists every chapter of the course)."""
    text = data.decode("utf-8", "surrogateescape")
    title, _, rest = text.partition("\n")
    note = (f"\n> **This handout**: your assignment is {', '.join(todo)} (the TODOs in their files, "
            f"`scripts/grading/handout.txt`)" + (f"; {', '.join(given)} are given complete" if given else "")
            + ". The chapters after them come in a later handout.\n")
    return (title + "\n" + note + rest).encode("utf-8", "surrogateescape")


def export(root, dest, stage=None):
    """Writes the student repository to dest (new, or empty) and commits it once. stage: (first,
    last) for a staged handout (--chapters)."""
    if dest.exists() and any(dest.iterdir()):
        raise SystemExit(f"make_student: {dest} exists and is not empty")
    plans = [(rel, *student_text(root, rel, stage)) for rel in tracked_files(root)]  # MarkerError: nothing written
    if stage:
        todo = [d.name for d in chapter_dirs(root) if stage[0] <= int(d.name[:2]) <= stage[1]]
        if not todo:
            raise SystemExit(f"make_student: --chapters {stage[0]:02d}-{stage[1]:02d} names no chapter")
        note = ("# The chapters this handout asks for (make_student.py --chapters): grade.sh and\n"
                "# check_todos.py grade and check these only. The chapters before them are given.\n")
        plans.append((HANDOUT_FILE, (note + "\n".join(todo) + "\n").encode(), 0))
        given = [d.name for d in chapter_dirs(root) if int(d.name[:2]) < stage[0]]
        plans = [(rel, readme_with_stage(data, todo, given) if rel == "README.md" and data else data, n)
                 for rel, data, n in plans]
    files = regions = 0
    for rel, data, n in plans:
        if data is None:
            continue
        out = dest / rel
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_bytes(data)
        if (root / rel).exists():
            shutil.copymode(root / rel, out)
        files, regions = files + 1, regions + n
    git = ["git", "-C", str(dest), "-c", "user.name=make_student", "-c", "user.email=make_student@localhost"]
    subprocess.run(git[:3] + ["init", "-q"], check=True)
    subprocess.run(git + ["add", "-A"], check=True)
    subprocess.run(git + ["commit", "-q", "-m", "Student repository (scripts/make_student.py --export)"], check=True)
    print(f"make_student: exported {files} files, {regions} solution regions replaced -> {dest}")


def solution_lines(root, stage=None):
    """Lines (stripped) that stand inside a solution region of root's tracked files and nowhere
    outside one (teacher-only files aside): what a student copy must never contain. Short lines (braces, `#pragma unroll`)
    are left out: they say nothing. stage (a staged handout): only the TODO chapters' regions are
    secret; the chapters before them are given code, those after them are not in the handout."""
    inside, outside = set(), set()
    for rel in tracked_files(root):
        suffix = Path(rel).suffix
        if rel.startswith(TEACHER_ONLY):  # answer keys and patches quote solutions: never outside
            continue
        chapter = owner(rel)
        given = stage is not None and chapter is not None and chapter < stage[0]
        if stage is not None and chapter is not None and chapter > stage[1]:
            continue
        if suffix not in SOURCE_SUFFIXES and suffix != ".md":
            continue
        begin, end = (MD_BEGIN, MD_END) if suffix == ".md" else (BEGIN, END)
        depth = 0
        for line in (root / rel).read_text("utf-8", "surrogateescape").splitlines():
            if begin.match(line):
                depth = 1
                continue
            if end.match(line):
                depth = 0
                continue
            key = line.strip()
            if STUB.match(line) or len(key) < 16 or key.startswith("#pragma"):
                continue
            (inside if depth and not given else outside).add(key)
    return inside - outside


def handout_stage(dest):
    """(first, last) from a staged handout's HANDOUT_FILE, or None for a whole export."""
    path = dest / HANDOUT_FILE
    if not path.exists():
        return None
    numbers = [int(ln[:2]) for ln in path.read_text().splitlines() if re.match(r"^\d\d_", ln)]
    return (min(numbers), max(numbers)) if numbers else None


def check_export(root, dest):
    """Exit status 1, naming file:line, if the export at dest holds a solution line."""
    secret = solution_lines(root, handout_stage(dest))
    found = 0
    for path in sorted(p for p in dest.rglob("*") if p.is_file() and ".git" not in p.relative_to(dest).parts):
        try:
            lines = path.read_text("utf-8").splitlines()
        except UnicodeDecodeError:
            continue
        for n, line in enumerate(lines, 1):
            if line.strip() in secret:
                print(f"make_student: solution line in the export: {path.relative_to(dest)}:{n}: {line.strip()}")
                found += 1
    for folder in TEACHER_ONLY:
        if (dest / folder).exists():
            print(f"make_student: the export holds {folder} (teacher only)")
            found += 1
    print(f"make_student: export checked against {len(secret)} solution lines: "
          + ("clean" if not found else f"{found} problems"))
    return 1 if found else 0


def chapter_dirs(root):
    return sorted(d for d in root.iterdir()
                  if d.is_dir() and re.match(r"^\d\d_", d.name) and (d / "CMakeLists.txt").exists())


def taught_folders(chapter):
    """The folders outside the chapter (TAUGHT_IN) whose regions the chapter teaches."""
    return [chapter.parent / folder for folder, owner in TAUGHT_IN.items() if owner == chapter.name]


def student_files(chapter):
    """Yields (path relative to the repository, student bytes, regions) for every file of the
    chapter, and of the shared folders it teaches."""
    root = chapter.parent
    for folder in [chapter] + taught_folders(chapter):
        for src in sorted(p for p in folder.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
            rel = src.relative_to(root)
            data = src.read_bytes()
            regions = 0
            if src.suffix in SOURCE_SUFFIXES or src.suffix == ".md":
                how = transform_markdown if src.suffix == ".md" else transform
                text, regions = how(data.decode("utf-8", "surrogateescape"), str(rel))
                if regions:
                    data = text.encode("utf-8", "surrogateescape")
            yield rel, data, regions


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("chapters", nargs="*", help="chapter folders, e.g. 04_flash_v1")
    ap.add_argument("--all", action="store_true", help="every chapter folder NN_name/")
    ap.add_argument("--out", type=Path, help="write DIR/<chapter>/")
    ap.add_argument("--list", action="store_true", help="print '<chapter> <regions>' per chapter")
    ap.add_argument("--force", action="store_true", help="overwrite files that differ in DIR")
    ap.add_argument("--root", type=Path, default=ROOT, help="the repository (default: this one)")
    ap.add_argument("--quiet", action="store_true", help="print only what was kept or refused")
    ap.add_argument("--export", type=Path, metavar="DIR", help="write a standalone student repository to DIR")
    ap.add_argument("--check-export", type=Path, metavar="DIR", help="check that the export in DIR holds no solution")
    ap.add_argument("--chapters", dest="stage", metavar="NN-MM", help="with --export: a staged handout of chapters NN..MM")
    args = ap.parse_args(argv)
    if args.export or args.check_export:
        try:
            if args.export:
                export(args.root, args.export, parse_range(args.stage) if args.stage else None)
            return check_export(args.root, args.export or args.check_export)
        except MarkerError as e:
            print(f"make_student: {e}", file=sys.stderr)
            return 1

    names = [c.rstrip("/") for c in args.chapters]
    chapters = chapter_dirs(args.root) if args.all else [args.root / n for n in names]
    if not chapters or (args.out is None and not args.list):
        ap.error("name chapters or --all, and --out DIR or --list")
    for ch in chapters:
        if not ch.is_dir():
            ap.error(f"no chapter folder {ch}")

    try:
        plans = [(ch, list(student_files(ch))) for ch in chapters]
    except MarkerError as e:  # nothing is written unless every chapter's markers are sound
        print(f"make_student: {e}", file=sys.stderr)
        return 1
    for ch, files in plans:
        regions = sum(r for _, _, r in files)
        if args.list:
            print(ch.name, regions)
        if args.out is None:
            continue
        written = kept = 0
        for rel, data, _ in files:
            dst = args.out / rel
            if dst.exists() and dst.read_bytes() == data:
                continue
            if dst.exists() and not args.force:
                print(f"make_student: kept {dst} (it differs from a fresh copy; --force overwrites)")
                kept += 1
                continue
            dst.parent.mkdir(parents=True, exist_ok=True)
            dst.write_bytes(data)
            shutil.copymode(args.root / rel, dst)
            written += 1
        if not args.quiet:
            print(f"make_student: {ch.name}: {regions} solution regions, {written} files written, "
                  f"{kept} kept -> {args.out / ch.name}" + "".join(
                      f", {args.out / f.relative_to(args.root)}" for f in taught_folders(ch)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
