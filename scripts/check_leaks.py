#!/usr/bin/env python3
"""Looks for the answers of a student handout's TODOs anywhere else in the handout, by meaning.

make_student.py --check-export compares whole lines; a port of an answer into another file, a
renamed copy or the same loop in Python passes that. This check compares the *shape* of the code:

  1. Each solution region of the handout's TODO chapters (this repository's sources) becomes a
     token sequence: comments dropped; variable names -> I (the names of the functions it calls
     stay), numbers -> N, strings -> S; type names,
     qualifiers and the punctuation that differs between C++ and Python (; { } and the like)
     dropped, so that `const float m_new = fmaxf(m, s);` and `m_new = max(m, s)` read the same.
  2. Its shingles (every run of SHINGLE consecutive tokens) are looked up in every C/C++/CUDA and
     Python file of the handout but the region's own: that one holds the TODO's neighbours, which
     the TODO texts point to as models (06's tile_scores for accumulate_pv), and a copy into it is
     the line check's (make_student.py --check-export).
  3. A region whose shingles stand, to at least THRESHOLD of them, in one file is reported with
     that file: the answer ships in given code there.

Regions too short to say anything (fewer than MIN_SHINGLES shingles) are skipped, and so are
STUB lines (they are handed out on purpose). What it does not see: a port into another language
whose loops are shaped differently (scripts/figures.py's Python versions of 03's and 10's
answers never ship: make_student.py TEACHER_ONLY).

    python3 scripts/check_leaks.py HANDOUT_DIR [--report]   exit 1, naming region and file, on a
                                                            leak (--report: print only)

HANDOUT_DIR is a make_student.py --export (whole, or staged with --chapters); its
scripts/grading/handout.txt, if present, names the TODO chapters. Python 3 standard library only.
"""
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import make_student  # noqa: E402

SHINGLE = 12
MIN_SHINGLES = 30
# Unrelated code that shares a loop nest or an index pattern stays below a third of a region's
# shingles here; 05's CPU update copied into 07's model, variables renamed, stood at 39%.
THRESHOLD = 0.35
PY_SUFFIXES = {".py"}

TOKEN = re.compile(r"""
    (?P<comment>//[^\n]*|/\*.*?\*/|\#[^\n]*)
  | (?P<string>"(?:\\.|[^"\\])*"|'(?:\\.|[^'\\])*')
  | (?P<number>\d+\.?\d*(?:[eE][-+]?\d+)?[fFuUlL]*|\.\d+(?:[eE][-+]?\d+)?[fF]?)
  | (?P<ident>[A-Za-z_]\w*)
  | (?P<op><<=|>>=|\+=|-=|\*=|/=|==|!=|<=|>=|&&|\|\||<<|>>|->|::|[-+*/%=<>!&|^~?:.,()\[\]])
  | (?P<skip>[;{}\s\\@$`]+)
""", re.X | re.S)
# Words that differ between the languages or say nothing of the computation.
DROP = {
    "const", "constexpr", "static", "inline", "auto", "unsigned", "signed", "volatile", "register",
    "float", "double", "int", "bool", "char", "void", "long", "short", "size_t", "int64_t", "uint32_t",
    "int32_t", "uint64_t", "std", "__device__", "__forceinline__", "__host__", "__global__", "typename",
    "template", "static_cast", "reinterpret_cast", "self", "def", "pass", "elif", "in", "range", "let",
    "pragma", "unroll", "np", "math", "f", "numpy",
}
# C++ and Python spellings of the same thing.
SAME = {"fmaxf": "max", "fminf": "min", "std::max": "max", "expf": "exp", "exp2f": "exp2", "logf": "log",
        "sqrtf": "sqrt", "true": "True", "false": "False", "nullptr": "None", "&&": "and", "||": "or",
        "!": "not", "->": ".", "::": "."}
KEEP = {"for", "while", "if", "else", "return", "break", "continue", "max", "min", "exp", "exp2", "log",
        "sqrt", "and", "or", "not", "True", "False", "None"}


def tokens(text):
    out = []
    found = [m for m in TOKEN.finditer(text) if m.lastgroup not in ("comment", "skip")]
    for n, m in enumerate(found):
        kind = m.lastgroup
        word = m.group()
        if kind == "string":
            out.append("S")
        elif kind == "number":
            out.append("N")
        elif kind == "ident":
            word = SAME.get(word, word)
            if word in DROP:
                continue
            # A name that is called keeps its name (a copy calls what the answer calls, whatever
            # its variables are named); every other name is I.
            called = n + 1 < len(found) and found[n + 1].group() in ("(", "<")
            out.append(word if word in KEEP or called else "I")
        else:
            word = SAME.get(word, word)
            if word in (":", "(", ")", ","):  # Python's `:` and the call punctuation say little
                continue
            out.append(word)
    return out


def shingles(seq):
    return {tuple(seq[i:i + SHINGLE]) for i in range(len(seq) - SHINGLE + 1)}


def regions(root, stage):
    """[(file, first line, text)] of the solution regions of the TODO chapters (all, without stage)."""
    found = []
    for rel in make_student.tracked_files(root):
        if Path(rel).suffix not in make_student.SOURCE_SUFFIXES or rel.startswith(make_student.TEACHER_ONLY):
            continue
        chapter = make_student.owner(rel)
        if stage and (chapter is None or not stage[0] <= chapter <= stage[1]):
            continue
        body, start = None, 0
        for n, line in enumerate((root / rel).read_text("utf-8", "surrogateescape").splitlines(), 1):
            if make_student.BEGIN.match(line):
                body, start = [], n
            elif make_student.END.match(line) and body is not None:
                found.append((rel, start, "\n".join(body)))
                body = None
            elif body is not None and not make_student.STUB.match(line):
                body.append(line)
    return found


def main(argv):
    report = "--report" in argv
    args = [a for a in argv[1:] if a != "--report"]
    if len(args) != 1:
        print("usage: check_leaks.py HANDOUT_DIR [--report]", file=sys.stderr)
        return 2
    dest = Path(args[0]).resolve()
    root = Path(__file__).resolve().parent.parent
    stage = make_student.handout_stage(dest)
    files = {}
    for path in sorted(p for p in dest.rglob("*") if p.is_file() and ".git" not in p.relative_to(dest).parts
                       and "build" not in p.relative_to(dest).parts[:1]):
        if path.suffix in make_student.SOURCE_SUFFIXES or path.suffix in PY_SUFFIXES:
            files[str(path.relative_to(dest))] = shingles(tokens(path.read_text("utf-8", "surrogateescape")))
    leaks = checked = 0
    for rel, line, text in regions(root, stage):
        mine = shingles(tokens(text))
        if len(mine) < MIN_SHINGLES:
            continue
        checked += 1
        for other, theirs in files.items():
            if other == rel:
                continue
            share = len(mine & theirs) / len(mine)
            if share >= THRESHOLD:
                print(f"check_leaks: {rel}:{line}: {share:.0%} of the region's code stands in {other}")
                leaks += 1
    print(f"check_leaks: {checked} regions of {dest.name} compared with {len(files)} files: "
          + ("no answer found elsewhere" if not leaks else f"{leaks} leaks"))
    return 1 if leaks and not report else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
