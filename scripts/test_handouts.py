#!/usr/bin/env python3
"""Tests of the staged handouts (make_student.py --export --chapters) and of check_leaks.py
(ctest -L cpu): for each range a course hands out, the handout holds its chapters as TODOs, the
chapters before them complete and nothing after them, no solution line, and no answer by meaning;
an answer planted elsewhere in a handout, its variables renamed, is found."""
import re
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))
import check_leaks  # noqa: E402
import make_student  # noqa: E402

RANGES = ["03-05", "06-07", "08", "09-10"]


def export(dest, spec):
    return subprocess.run([sys.executable, str(HERE / "make_student.py"), "--export", str(dest), "--chapters", spec],
                          capture_output=True, text=True)


class Handouts(unittest.TestCase):
    def setUp(self):
        if not check_leaks.regions(REPO, None):
            self.skipTest("a student copy: it holds no solution regions to hand out")
        self.tmp = tempfile.TemporaryDirectory()
        self.root = Path(self.tmp.name)

    def tearDown(self):
        if hasattr(self, "tmp"):
            self.tmp.cleanup()

    def test_every_course_range(self):
        chapters = [d.name for d in make_student.chapter_dirs(REPO)]
        for spec in RANGES:
            with self.subTest(spec=spec):
                dest = self.root / spec
                r = export(dest, spec)
                self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
                first, last = make_student.parse_range(spec)
                listed = (dest / make_student.HANDOUT_FILE).read_text()
                for ch in chapters:
                    n = int(ch[:2])
                    if n > last:
                        self.assertFalse((dest / ch).exists(), f"{spec}: {ch} comes after the handout")
                        continue
                    self.assertEqual(ch in listed, n >= first, f"{spec}: {ch} in handout.txt")
                    text = "".join(p.read_text(errors="replace") for p in (dest / ch).rglob("*") if p.is_file())
                    self.assertNotIn("SOLUTION", text, f"{spec}: {ch} keeps a marker")
                self.assertFalse((dest / "scripts" / "figures.py").exists(), "figures.py ports answers")
                self.assertEqual(check_leaks.main(["check_leaks.py", str(dest)]), 0, spec)

    def test_given_chapters_are_complete(self):
        dest = self.root / "h"
        self.assertEqual(export(dest, "06-07").returncode, 0)
        given = (dest / "05_flash_v2" / "model.cpp").read_text()
        self.assertIn("const float m_new = std::max(m, *std::max_element(s, s + Bc));", given)
        self.assertNotIn("TODO", given)
        todo = (dest / "common" / "fa2_tiles" / "tile_math.cuh").read_text()  # 06's, taught in common/
        self.assertIn("// TODO: ", todo)

    def test_a_renamed_copy_is_found(self):
        dest = self.root / "h"
        self.assertEqual(export(dest, "03-05").returncode, 0)
        region = [text for rel, _, text in check_leaks.regions(REPO, (5, 5))
                  if rel == "05_flash_v2/model.cpp"][0]
        renamed = re.sub(r"\bm_new\b", "biggest", region)
        renamed = re.sub(r"\browsum\b", "total", renamed)
        renamed = re.sub(r"\bpv\b", "acc", renamed)
        (dest / "04_flash_v1" / "helpers.cpp").write_text("void helper() {\n" + renamed + "\n}\n")
        self.assertEqual(check_leaks.main(["check_leaks.py", str(dest)]), 1)

    def test_a_bad_range_is_refused(self):
        for spec in ("5-3", "x", "03-"):
            r = export(self.root / spec.replace("-", "_"), spec)
            self.assertNotEqual(r.returncode, 0, spec)


if __name__ == "__main__":
    unittest.main()
