#!/usr/bin/env python3
"""scripts/grading/todos.tsv stays true (CI, no GPU; ctest scripts.todos). It fails (exit 1,
saying what and where) when
  * a `// BEGIN SOLUTION` region of a chapter has no row, or a row names no region (a row's
    region is the function the region stands in, `name#N` for the N-th region of a function
    with several); in a student export, which has no regions, each row's function must exist;
  * a row is malformed: part not cpu|gpu, points or baseline not a number, a regex that does not
    compile, a `shared` column that does not name exactly the rows with the same tests;
  * the points of a chapter's cpu (gpu) rows do not add up to its CPU (GPU) column in the
    rubric's "Summary: points per chapter" table (docs/grading_rubric.md);
  * the rubric's per-TODO table (between <!-- todos:begin --> and <!-- todos:end -->) is not the
    one this script generates from todos.tsv (--write regenerates it);
  * with --build: a row's regex selects no test of its part in that configured build, or a cpu
    row's baseline is not below the number of tests it selects (it could earn nothing).

    python3 scripts/check_todos.py [REPO] [--todos FILE] [--build BUILD_DIR] [--ctest CTEST]
    python3 scripts/check_todos.py [REPO] --write                  regenerate the rubric's table
    python3 scripts/check_todos.py [REPO] --baselines STUDENT_BUILD  recount the cpu baselines

--baselines runs each cpu row's tests in a FA_STUDENT=ON build (the unfinished copies) and prints
how many pass next to the baseline the row says. Python 3 standard library only.
"""
import argparse
import re
import os
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import make_student  # noqa: E402  the marker syntax, the source suffixes, the chapter folders

COLUMNS = ["chapter", "file", "region", "part", "points", "baseline", "shared", "tests", "what"]
KEYWORDS = {"if", "for", "while", "switch", "catch", "return", "sizeof", "alignof", "decltype",
            "static_assert", "__launch_bounds__", "alignas", "noexcept", "defined"}
TABLE = re.compile(r"(<!-- todos:begin -->\n)(.*?)(<!-- todos:end -->)", re.S)


def read_todos(path):
    """The rows of todos.tsv as dicts; raises SystemExit naming path:line on a malformed line."""
    rows, header = [], None
    for n, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        cells = line.split("\t")
        if header is None:
            header = cells
            if header != COLUMNS:
                raise SystemExit(f"check_todos: {path}:{n}: the header must be {' '.join(COLUMNS)} (tab-separated)")
            continue
        if len(cells) != len(COLUMNS):
            raise SystemExit(f"check_todos: {path}:{n}: {len(cells)} columns, not {len(COLUMNS)}")
        rows.append(dict(zip(COLUMNS, cells), line=n))
    return rows


def code_only(text):
    """text with comments, string and character literals and preprocessor lines blanked
    (newlines kept, so offsets still give line numbers)."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i) or (c == "#" and not text[text.rfind("\n", 0, i) + 1:i].strip()):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            out.append(" " * (min(j, n - 1) + 1 - i))
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def without_template_head(header):
    """header less a leading `template <...>` (whose defaults, `bool kBshd = false`, are no assignment)."""
    m = re.search(r"\btemplate\s*<", header)
    if not m:
        return header
    depth = 0
    for i in range(m.end() - 1, len(header)):
        depth += (header[i] == "<") - (header[i] == ">")
        if depth == 0:
            return header[:m.start()] + header[i + 1:]
    return header


def function_name(header):
    """The name a block's header defines if it is a function (`... name(args) const {`), else None."""
    header = without_template_head(header)
    depth = 0
    for m in re.finditer(r"[()]", header):
        if m.group() == ")":
            depth -= 1
            continue
        if depth == 0:
            before = re.search(r"([A-Za-z_]\w*)\s*$", header[:m.start()])
            if before and before.group(1) not in KEYWORDS and "=" not in header[:m.start()]:
                return before.group(1)
        depth += 1
    return None


def function_blocks(text):
    """[(start, end, name)]: the bodies of the functions a source file defines, as offsets of
    their braces (a block opened inside parentheses, a lambda argument, is not one)."""
    code = code_only(text)
    blocks, stack, header, paren = [], [], [], 0
    for i, c in enumerate(code):
        paren += (c == "(") - (c == ")")
        if c == "{":
            stack.append((i, function_name("".join(header)) if paren == 0 else None))
            header = []
        elif c == "}":
            if stack:
                start, name = stack.pop()
                if name:
                    blocks.append((start, i, name))
            header = []
        elif c == ";" and paren == 0:
            header = []
        else:
            header.append(c)
    return blocks


def enclosing_function(blocks, offset):
    """The innermost function whose body holds offset, or None."""
    inside = [b for b in blocks if b[0] < offset < b[1]]
    return max(inside)[2] if inside else None


def regions(root):
    """[(chapter, file, region, line)] of every BEGIN SOLUTION region in the chapters' sources."""
    found = []
    folders = [(c, c) for c in make_student.chapter_dirs(root)]
    folders += [(root / owner, root / folder) for folder, owner in make_student.TAUGHT_IN.items()]
    for chapter, folder in folders:
        for src in sorted(p for p in folder.rglob("*") if p.is_file() and p.suffix in make_student.SOURCE_SUFFIXES):
            text = src.read_text("utf-8", "surrogateescape")
            begins = [m.start() for m in re.finditer(r"^[ \t]*// BEGIN SOLUTION", text, re.M)]
            if not begins:
                continue
            blocks = function_blocks(text)
            named = [(enclosing_function(blocks, b), text.count("\n", 0, b) + 1) for b in begins]
            rel = str(src.relative_to(chapter if folder == chapter else root))  # common/...: from the root
            for name, line in named:
                same = [ln for nm, ln in named if nm == name]
                region = name or "?"
                if len(same) > 1:
                    region += f"#{same.index(line) + 1}"
                found.append((chapter.name, rel, region, line))
    return found


def rubric_summary(text):
    """{chapter: (cpu points, gpu points)} from the rubric's 'Summary: points per chapter' table."""
    section = text.split("## Summary: points per chapter", 1)
    if len(section) < 2:
        raise SystemExit("check_todos: the rubric has no '## Summary: points per chapter' section")
    lines = [ln for ln in section[1].split("\n## ", 1)[0].splitlines() if ln.startswith("|")]
    head = [c.strip() for c in lines[0].strip("|").split("|")]
    cpu, gpu = head.index("CPU"), head.index("GPU")
    points = {}
    for line in lines[2:]:
        cells = [c.strip() for c in line.strip("|").split("|")]
        first = lambda cell: int(re.match(r"\d+", cell).group()) if re.match(r"\d+", cell) else 0  # noqa: E731
        points[cells[0]] = (first(cells[cpu]), first(cells[gpu]))
    return points


def markdown_table(rows):
    """The rubric's per-TODO table, generated from todos.tsv (a `|` in a regex is escaped, as a
    Markdown table needs even inside code)."""
    out = ["| chapter | file, region: what the student writes | points | part | tests (ctest -R) | shared with |",
           "|---|---|---|---|---|---|"]
    last = None
    for r in rows:
        chapter = r["chapter"] if r["chapter"] != last else ""
        last = r["chapter"]
        part = r["part"].upper() + (f", baseline {r['baseline']}" if r["part"] == "cpu" else "")
        shared = r["shared"].replace(",", ", ") if r["shared"] != "-" else ""
        cells = [chapter, f"`{r['file']}`, `{r['region']}`: {r['what']}", r["points"], part,
                 "`" + r["tests"].replace("|", "\\|") + "`", shared]
        out.append(("| " + " | ".join(cells) + " |").replace("|  |", "| |"))
    return "\n".join(out) + "\n"


def listed_cases(build):
    """(name, label) of every test case, as a per-case build (FA_TESTS_PER_CASE, cmake/Chapter.cmake)
    names them in ctest: `<chapter>.<suite>.<test>`, from each test binary's --gtest_list_tests in
    the full tier. The refusal cases (suite Inputs/...) of a GPU binary are cpu, the rest gpu."""
    cases = []
    env = dict(os.environ, FA_TEST_TIER="full")
    for exe in sorted(Path(build).glob("*/*_tests")):
        chapter = exe.parent.name
        if not exe.name.startswith(chapter + "_") or not os.access(exe, os.X_OK):
            continue
        cpu_binary = exe.name.endswith("_cpu_tests")
        out = subprocess.run([str(exe), "--gtest_list_tests"], capture_output=True, text=True, env=env).stdout
        suite = ""
        for line in out.splitlines():
            if not line.strip():
                continue
            if not line.startswith(" "):
                suite = line.strip()
                continue
            name = suite + line.split("#")[0].strip()
            cases.append((f"{chapter}.{name}", "cpu" if cpu_binary or name.startswith("Inputs") else "gpu"))
    return cases


def ctest_names(ctest, build, part, regex=None):
    """The names of the tests of a part (label) that regex selects: `ctest -N` of a per-case build,
    else the cases the test binaries list (listed_cases)."""
    if _per_case_off(build):
        global _listed
        if _listed is None:
            _listed = listed_cases(build)
        return [n for n, label in _listed if label == part and (regex is None or re.search(regex, n))]
    cmd = [ctest, "--test-dir", str(build), "-N", "-L", f"^{part}$"] + (["-R", regex] if regex else [])
    out = subprocess.run(cmd, capture_output=True, text=True).stdout
    return re.findall(r"^\s*Test\s+#\d+: (\S+)", out, re.M)


_listed = None
# A row of the rubric's per-chapter CPU table: | 03 | 25 | 12 |, or | 01, 02 | 12 | 12 |.
CPU_ROW = re.compile(r"^\| ((?:\d\d, )*\d\d) \| (\d+) \| (\d+) \|", re.M)


def cpu_counts(args):
    """{chapter number: its CPU tests in args.build}."""
    counts = {}
    for name in ctest_names(args.ctest, args.build, "cpu"):
        counts[name[:2]] = counts.get(name[:2], 0) + 1
    return counts


def _per_case_off(build):
    cache = Path(build) / "CMakeCache.txt"
    return not (cache.exists() and re.search(r"^FA_TESTS_PER_CASE:BOOL=ON$", cache.read_text(errors="replace"), re.M))


def check(args, root, all_rows):
    problems = []
    def bad(msg):
        problems.append(msg)
        print(f"check_todos: {msg}")

    # A staged handout (make_student.py --chapters) holds its own chapters' TODOs, the chapters
    # before them complete and none after them: its rows are the ones checked.
    handout = root / make_student.HANDOUT_FILE
    staged = handout.exists()
    rows = all_rows
    if staged:
        chosen = {ln.strip() for ln in handout.read_text().splitlines() if re.match(r"^\d\d_", ln)}
        rows = [r for r in all_rows if r["chapter"] in chosen]
        print(f"check_todos: a staged handout: checking {', '.join(sorted(chosen))}")

    keys = {}
    for r in rows:
        where = f"{args.todos.name}:{r['line']}"
        if r["part"] not in ("cpu", "gpu"):
            bad(f"{where}: part {r['part']!r} is neither cpu nor gpu")
        if not r["points"].isdigit():
            bad(f"{where}: points {r['points']!r} is not a number")
        if r["part"] == "cpu" and not r["baseline"].isdigit():
            bad(f"{where}: a cpu row needs a baseline (a number), not {r['baseline']!r}")
        if r["part"] == "gpu" and r["baseline"] != "-":
            bad(f"{where}: a gpu row's baseline is '-' (an unfinished copy fails every GPU test)")
        try:
            re.compile(r["tests"])
        except re.error as e:
            bad(f"{where}: tests regex {r['tests']!r}: {e}")
        if not r["tests"].startswith(f"^{r['chapter']}\\."):
            bad(f"{where}: the tests regex must start with ^{r['chapter']}\\. (the chapter's own tests)")
        key = (r["chapter"], r["file"], r["region"])
        if key in keys:
            bad(f"{where}: {'/'.join(key)} has a row already (line {keys[key]})")
        keys[key] = r["line"]
        src = root / r["file"] if r["file"].startswith("common/") else root / r["chapter"] / r["file"]
        if not src.is_file():
            bad(f"{where}: {r['chapter']}/{r['file']} does not exist")
        elif r["region"].split("#")[0] not in {b[2] for b in function_blocks(src.read_text("utf-8", "surrogateescape"))}:
            bad(f"{where}: {r['chapter']}/{r['file']} defines no function {r['region'].split('#')[0]}")
        same = sorted(o["region"] for o in rows if o is not r and (o["chapter"], o["part"], o["tests"]) ==
                      (r["chapter"], r["part"], r["tests"]))
        said = sorted(s for s in r["shared"].split(",") if s and s != "-")
        if said != same:
            bad(f"{where}: shared says {','.join(said) or '-'}, but the rows with the same tests are "
                f"{','.join(same) or '-'}")

    found = regions(root)
    if found:
        in_tree = {(c, f, g): line for c, f, g, line in found}
        for (c, f, g), line in sorted(in_tree.items()):
            if (c, f, g) not in keys:
                bad(f"{c}/{f}:{line}: a solution region in {g} has no row in {args.todos.name}")
        for key, line in keys.items():
            if key not in in_tree:
                bad(f"{args.todos.name}:{line}: no solution region in {key[2]} of {key[0]}/{key[1]}")
    else:
        print("check_todos: no BEGIN SOLUTION regions in this tree (a student export?): "
              "each row's function checked to exist, not its region")

    rubric_path = root / "docs" / "grading_rubric.md"
    rubric = rubric_path.read_text()
    summary = rubric_summary(rubric)
    # A staged handout's summary table still lists every chapter: only its own are compared.
    for ch in sorted({r["chapter"] for r in rows} | (set() if staged else set(summary))):
        sums = tuple(sum(int(r["points"]) for r in rows if r["chapter"] == ch and r["part"] == part
                         and r["points"].isdigit()) for part in ("cpu", "gpu"))
        if ch not in summary:
            bad(f"{ch}: rows in {args.todos.name} but no row in the rubric's summary table")
        elif sums != summary[ch]:
            bad(f"{ch}: todos.tsv gives CPU {sums[0]}, GPU {sums[1]} points; the rubric's summary table "
                f"says CPU {summary[ch][0]}, GPU {summary[ch][1]}")
    table = TABLE.search(rubric)
    if not table:
        bad("docs/grading_rubric.md: no <!-- todos:begin --> ... <!-- todos:end --> table")
    elif table.group(2) != markdown_table(all_rows):
        bad("docs/grading_rubric.md: the per-TODO table is not todos.tsv's "
            "(python3 scripts/check_todos.py --write regenerates it)")

    if args.build:
        # The rubric's per-chapter CPU table: its "CPU tests" column is the build's count.
        counts = cpu_counts(args)
        for m in CPU_ROW.finditer(rubric):
            for number in m.group(1).split(", "):
                if number in counts and counts[number] != int(m.group(2)):
                    bad(f"docs/grading_rubric.md: chapter {number} has {counts[number]} CPU tests in "
                        f"{args.build}, the table says {m.group(2)} (check_todos.py --write --build regenerates it)")
        for r in rows:
            names = ctest_names(args.ctest, args.build, r["part"], r["tests"])
            where = f"{args.todos.name}:{r['line']}"
            if not names:
                bad(f"{where}: {r['tests']!r} selects no {r['part']} test in {args.build}")
            elif r["baseline"].isdigit() and int(r["baseline"]) >= len(names):
                bad(f"{where}: baseline {r['baseline']} of {len(names)} selected tests: the row can earn nothing")
            else:
                print(f"check_todos: {r['chapter']} {r['region']}: {len(names)} {r['part']} tests")
    else:
        print("check_todos: no --build: the rows' test regexes are not counted")
    print(f"check_todos: {len(rows)} rows, {len(found)} regions: "
          + ("OK" if not problems else f"{len(problems)} problems"))
    return 1 if problems else 0


def baselines(args, rows):
    """Runs each cpu row's tests in a student build; prints passed (the baseline) / selected."""
    status = 0
    cache = args.baselines / "CMakeCache.txt"
    if cache.exists() and not re.search(r"^FA_STUDENT:BOOL=ON$", cache.read_text(errors="replace"), re.M):
        print(f"check_todos: warning: {args.baselines} is not a FA_STUDENT=ON build: "
              "its counts are baselines only if it builds unfinished copies (an export)")
    with tempfile.TemporaryDirectory() as tmp:
        for r in (r for r in rows if r["part"] == "cpu"):
            xml = Path(tmp) / f"{r['line']}.xml"
            subprocess.run([args.ctest, "--test-dir", str(args.baselines), "-L", "^cpu$", "-R", r["tests"],
                            "--output-junit", str(xml)], capture_output=True)
            passed = total = 0
            if xml.exists():
                for case in ET.parse(xml).getroot().iter("testcase"):
                    total += 1
                    passed += case.find("failure") is None and case.get("status") not in ("fail", "notrun")
            same = "" if str(passed) == r["baseline"] else f"  <- todos.tsv says {r['baseline']}"
            status |= bool(same)
            print(f"{r['chapter']}\t{r['region']}\tbaseline {passed} of {total}{same}")
    return status


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("repo", nargs="?", default=Path(__file__).resolve().parent.parent, type=Path)
    ap.add_argument("--todos", type=Path, help="default: REPO/scripts/grading/todos.tsv")
    ap.add_argument("--build", type=Path, help="a configured build: count each row's tests")
    ap.add_argument("--ctest", default="ctest")
    ap.add_argument("--write", action="store_true", help="regenerate the rubric's per-TODO table")
    ap.add_argument("--baselines", type=Path, metavar="STUDENT_BUILD", help="recount the cpu baselines")
    args = ap.parse_args()
    root = args.repo.resolve()
    args.todos = args.todos or root / "scripts" / "grading" / "todos.tsv"
    rows = read_todos(args.todos)
    if args.baselines:
        return baselines(args, rows)
    if args.write:
        path = root / "docs" / "grading_rubric.md"
        text = path.read_text()
        if not TABLE.search(text):
            raise SystemExit(f"check_todos: {path}: no <!-- todos:begin --> ... <!-- todos:end --> to write between")
        text = TABLE.sub(lambda m: m.group(1) + markdown_table(rows) + m.group(3), text)
        print(f"check_todos: wrote the per-TODO table of {path}")
        if args.build:  # and the CPU tests column of the per-chapter table, counted in the build
            counts = cpu_counts(args)
            def row(m):
                numbers = m.group(1).split(", ")
                if all(n in counts for n in numbers) and len({counts[n] for n in numbers}) == 1:
                    return f"| {m.group(1)} | {counts[numbers[0]]} | {m.group(3)} |"
                return m.group(0)
            text = CPU_ROW.sub(row, text)
            print(f"check_todos: wrote the CPU test counts of {args.build} into {path}")
        path.write_text(text)
        return 0
    return check(args, root, rows)


if __name__ == "__main__":
    sys.exit(main())
