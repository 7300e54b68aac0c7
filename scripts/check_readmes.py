#!/usr/bin/env python3
"""READMEs that stay true (CI, no GPU): every figure a chapter README quotes in its prose as
'N TFLOP/s' or 'A -> B' / 'A against B' (measured throughputs) must stand in a table: the README's
own generated tables or a docs/results_<gpu>.md (one run each, scripts/summarize.py --results). A number
that no table holds is drift: regenerate the table (scripts/summarize.py --readmes) or change
the sentence. Derived figures (ratios, percentages, FLOP formulas) are not checked.

    python3 scripts/check_readmes.py [REPO]      exit 1 and file:line for each figure without a table
    python3 scripts/check_readmes.py [REPO] --support BUILD_DIR [--write]

--support: each chapter README's "Supports" line (between <!-- support:begin --> and
<!-- support:end -->) must say what the chapter's executable says in its --help, which comes from
the same Support table its refusals use (common/host/support.h); --write regenerates the lines.
"""
import re
import subprocess
import sys
from pathlib import Path

args = list(sys.argv[1:])
if "-h" in args or "--help" in args:
    print(__doc__)
    sys.exit(0)
unknown = [a for a in args if a.startswith("-") and a not in ("--support", "--write")]
if unknown:
    sys.exit(f"check_readmes: unknown option {unknown[0]} (--help)")
write = "--write" in args
build = None
if "--support" in args:
    build = Path(args[args.index("--support") + 1]).resolve()
    del args[args.index("--support"):args.index("--support") + 2]
args = [a for a in args if a != "--write"]
root = Path(args[0] if args else Path(__file__).resolve().parent.parent)
FIGURE = re.compile(r"(\d+\.\d+)(?=\s*TFLOP/s)|(\d+\.\d+)\s*(?:->|→|against)\s*(?:v\d\S*'s\s+)?(\d+\.\d+)")


def table_numbers(text):
    found = set()
    for line in text.splitlines():
        if line.lstrip().startswith("|"):
            found.update(re.findall(r"\d+\.\d+", line))
    return found


SUPPORT = re.compile(r"<!-- support:begin -->\n(.*?)<!-- support:end -->", re.S)


def support_line(exe):
    """'Supports: dtypes ...; head dims ...' from the executable's --help."""
    out = subprocess.run([str(exe), "--help"], capture_output=True, text=True).stdout
    dims = re.search(r"^\s+--head-dim N\s+(.*?)\s*\(default", out, re.M)
    dtypes = re.search(r"^\s+--dtype T\s+(.*?)\s*\(default", out, re.M)
    layout = re.search(r"^\s+--layout L\s+(bhsd only|bhsd:.*bshd[^(\n]*)(?:\((.*)\))?", out, re.M)
    if not dims or not dtypes or not layout:
        raise SystemExit(f"check_readmes: {exe} --help names no --head-dim, --dtype or --layout")
    layouts = "[B, H, S, D] only" if layout.group(1) == "bhsd only" else "[B, H, S, D] or [B, S, H, D] (--layout bshd" + (
        f"; {layout.group(2)} only)" if layout.group(2) else ")")
    window = "; a sliding window (`--window L,R`)" if re.search(r"^\s+--window L,R", out, re.M) else ""
    softcap = "; a logit softcap (`--softcap X`)" if re.search(r"^\s+--softcap X", out, re.M) else ""
    varlen = "; a packed batch of sequences (`--varlen L,L,...`)" if re.search(r"^\s+--varlen L", out, re.M) else ""
    return (f"Supports (from `--help`): dtype {dtypes.group(1)}; head dim {dims.group(1)}; tensors {layouts}{window}"
            f"{softcap}{varlen}.\n")


if build is not None:
    bad = 0
    for readme in sorted(root.glob("[0-9][0-9]_*/README.md")):
        ch = readme.parent.name
        exe = build / ch / ch
        if not exe.exists():
            print(f"check_readmes: {ch}: no executable in {build} (not built here): its Supports line is not checked")
            continue
        want = support_line(exe)
        text = readme.read_text()
        m = SUPPORT.search(text)
        if write:
            block = f"<!-- support:begin -->\n{want}<!-- support:end -->"
            if m:
                text = text[:m.start()] + block + text[m.end():]
            else:  # after the learning objectives' prerequisites line
                at = text.index("\n", text.index("Prerequisites:"))
                at = text.index("\n\n", at) if "\n\n" in text[at:] else at
                text = text[:at] + "\n\n" + block + text[at:]
            readme.write_text(text)
        elif not m:
            print(f"check_readmes: {readme.relative_to(root)}: no <!-- support:begin --> line")
            bad += 1
        elif m.group(1) != want:
            print(f"check_readmes: {readme.relative_to(root)}: says {m.group(1).strip()!r}, the code says {want.strip()!r}")
            bad += 1
    print(f"check_readmes --support: {'OK' if not bad else f'{bad} READMEs disagree with the code'}")
    sys.exit(1 if bad else 0)

logs = sorted((root / "docs").glob("results_*.md"))
shared = set().union(*(table_numbers(p.read_text()) for p in logs if p.exists()))
bad = 0
for readme in sorted(root.glob("[0-9][0-9]_*/README.md")):
    text = readme.read_text()
    allowed = table_numbers(text) | shared
    fence = False
    for n, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith("```"):
            fence = not fence
            continue
        if fence or line.lstrip().startswith("|"):
            continue
        for m in FIGURE.finditer(line):
            for number in filter(None, m.groups()):
                if number not in allowed:
                    print(f"{readme.relative_to(root)}:{n}: '{number}' is quoted but stands in no table: {line.strip()}")
                    bad += 1
print(f"check_readmes: {'OK' if not bad else f'{bad} figures without a table'}")
sys.exit(1 if bad else 0)
