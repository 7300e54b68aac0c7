#!/usr/bin/env python3
"""READMEs that stay true (CI, no GPU): every figure a chapter README quotes in its prose as
'N TFLOP/s' or 'A -> B' / 'A against B' (measured throughputs) must stand in a table: the README's
own generated tables, docs/results_h100.md, or a docs/session*_h100.md measurement log. A number
that no table holds is drift: regenerate the table (scripts/summarize.py --readmes) or change
the sentence. Derived figures (ratios, percentages, FLOP formulas) are not checked.

    python3 scripts/check_readmes.py [REPO]      exit 1 and file:line for each figure without a table
"""
import re
import sys
from pathlib import Path

root = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).resolve().parent.parent)
FIGURE = re.compile(r"(\d+\.\d+)(?=\s*TFLOP/s)|(\d+\.\d+)\s*(?:->|→|against)\s*(?:v\d\S*'s\s+)?(\d+\.\d+)")


def table_numbers(text):
    found = set()
    for line in text.splitlines():
        if line.lstrip().startswith("|"):
            found.update(re.findall(r"\d+\.\d+", line))
    return found


logs = [root / "docs" / "results_h100.md"] + sorted((root / "docs").glob("session*_h100.md"))
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
