#!/usr/bin/env python3
"""Checks a results.json (grade.sh --json) against the fields Gradescope's autograder documents
("Autograder Specifications: Output format"): every key is one of them, with its type and its
allowed values, and the scores add up.

    python3 scripts/grading/check_results_json.py results.json     exit 1, naming the field
"""
import json
import sys

VISIBILITY = {"hidden", "after_due_date", "after_published", "visible"}
FORMATS = {"text", "html", "simple_format", "md", "ansi"}
NUMBER = (int, float)
TOP = {"score": NUMBER, "execution_time": NUMBER, "output": str, "output_format": str,
       "test_output_format": str, "test_name_format": str, "visibility": str, "stdout_visibility": str,
       "extra_data": dict, "tests": list, "leaderboard": list}
TEST = {"score": NUMBER, "max_score": NUMBER, "status": str, "name": str, "name_format": str, "number": str,
        "output": str, "output_format": str, "tags": list, "visibility": str, "extra_data": dict}
LEADER = {"name": str, "value": (int, float, str), "order": str}


def check(doc):
    problems = []

    def fields(obj, allowed, where):
        if not isinstance(obj, dict):
            problems.append(f"{where}: not an object")
            return
        for key, value in obj.items():
            if key not in allowed:
                problems.append(f"{where}: {key!r} is not a documented field")
            elif not isinstance(value, allowed[key]) or isinstance(value, bool):
                problems.append(f"{where}.{key}: {type(value).__name__}, not {allowed[key]}")
        for key in ("visibility", "stdout_visibility"):
            if key in obj and obj[key] not in VISIBILITY:
                problems.append(f"{where}.{key}: {obj[key]!r} is not one of {sorted(VISIBILITY)}")
        for key in ("output_format", "test_output_format", "test_name_format", "name_format"):
            if key in obj and obj[key] not in FORMATS:
                problems.append(f"{where}.{key}: {obj[key]!r} is not one of {sorted(FORMATS)}")

    fields(doc, TOP, "results")
    tests = doc.get("tests", [])
    if "score" not in doc and any("score" not in t for t in tests if isinstance(t, dict)):
        problems.append("results: no score, and a test without one (Gradescope needs one or the other)")
    for n, t in enumerate(tests):
        fields(t, TEST, f"tests[{n}]")
        if isinstance(t, dict):
            if t.get("status") not in (None, "passed", "failed"):
                problems.append(f"tests[{n}].status: {t['status']!r} is neither passed nor failed")
            if isinstance(t.get("score"), NUMBER) and isinstance(t.get("max_score"), NUMBER) and t["score"] > t["max_score"] + 1e-9:
                problems.append(f"tests[{n}]: score {t['score']} above max_score {t['max_score']}")
    for n, e in enumerate(doc.get("leaderboard", [])):
        fields(e, LEADER, f"leaderboard[{n}]")
        if isinstance(e, dict) and e.get("order", "desc") not in ("asc", "desc"):
            problems.append(f"leaderboard[{n}].order: {e['order']!r} is neither asc nor desc")
    if isinstance(doc.get("score"), NUMBER) and tests:
        total = sum(t.get("score", 0) for t in tests if isinstance(t, dict))
        if abs(total - doc["score"]) > 0.01 * max(1, len(tests)):
            problems.append(f"results.score {doc['score']} is not the tests' sum {total:.2f}")
    return problems


def main(argv):
    if len(argv) != 2:
        print("usage: check_results_json.py results.json", file=sys.stderr)
        return 2
    with open(argv[1]) as f:
        doc = json.load(f)
    problems = check(doc)
    for p in problems:
        print(f"check_results_json: {p}")
    print(f"check_results_json: {argv[1]}: {len(doc.get('tests', []))} tests, score {doc.get('score')}: "
          + ("OK" if not problems else f"{len(problems)} problems"))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
