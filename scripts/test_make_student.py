#!/usr/bin/env python3
"""Tests of scripts/make_student.py (ctest -L cpu): regions replaced by their TODO and STUB lines,
other files copied as they are, malformed markers refused with file:line, a student's edits kept,
and every chapter of this repository generating a student copy."""
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

SCRIPT = Path(__file__).resolve().parent / "make_student.py"
REPO = SCRIPT.parent.parent
sys.path.insert(0, str(SCRIPT.parent))
import make_student  # noqa: E402

KERNEL = """\
__global__ void add(const float* x, float* y, int n) {
  const int i = threadIdx.x;
  // BEGIN SOLUTION: y[i] = x[i] + 1
  if (i < n) y[i] = x[i] + 1.0f;
  // END SOLUTION
}
float sum(const float* x, int n) {
    // BEGIN SOLUTION: add up x
    // STUB: float acc = 0.0f;
    // STUB: (void)x;
    float acc = 0.0f;
    for (int i = 0; i < n; ++i) acc += x[i];
    // END SOLUTION
    return acc;
}
"""

STUDENT = """\
__global__ void add(const float* x, float* y, int n) {
  const int i = threadIdx.x;
  // TODO: y[i] = x[i] + 1
}
float sum(const float* x, int n) {
    // TODO: add up x
    float acc = 0.0f;
    (void)x;
    return acc;
}
"""


def run(*args):
    return subprocess.run([sys.executable, str(SCRIPT), *map(str, args)], capture_output=True, text=True)


class MakeStudent(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.root = Path(self.tmp.name) / "repo"
        self.out = Path(self.tmp.name) / "out"
        self.chapter = self.root / "07_demo"
        self.chapter.mkdir(parents=True)
        (self.chapter / "CMakeLists.txt").write_text("fa_add_chapter(07_demo KERNELS demo.cu)\n")
        (self.chapter / "README.md").write_text("# 07 (mentions // BEGIN SOLUTION in prose)\n")
        (self.chapter / "model.cpp").write_text("int model() { return 1; }\n")

    def tearDown(self):
        self.tmp.cleanup()

    def generate(self, kernel, *extra):
        (self.chapter / "demo.cu").write_text(kernel)
        return run("07_demo", "--root", self.root, "--out", self.out, *extra)

    def test_regions_become_todo_and_stub(self):
        r = self.generate(KERNEL)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual((self.out / "07_demo/demo.cu").read_text(), STUDENT)
        for name in ["CMakeLists.txt", "README.md", "model.cpp"]:  # copied as they are
            self.assertEqual((self.out / "07_demo" / name).read_bytes(), (self.chapter / name).read_bytes())
        self.assertIn("07_demo: 2 solution regions", r.stdout)
        listing = run("--all", "--root", self.root, "--list")
        self.assertEqual(listing.stdout, "07_demo 2\n")

    def test_malformed_markers_are_refused(self):
        begin, end = "  // BEGIN SOLUTION: do it\n", "  // END SOLUTION\n"
        cases = {
            "BEGIN SOLUTION without an END": ("x;\n" + begin + "y;\n", 2),
            "END SOLUTION without a BEGIN": ("x;\n" + end, 2),
            "inside the region opened at line 1": (begin + "y;\n" + begin + "z;\n" + end + end, 3),
            "STUB line belongs right after": (begin + "y;\n  // STUB: int a;\n" + end, 3),
            "needs the student's TODO": ("  // BEGIN SOLUTION\ny;\n" + end, 1),
            "malformed marker": ("  //BEGIN SOLUTION: x\ny;\n" + end, 1),
            "empty solution region": (begin + "  // STUB: int a;\n" + end, 3),
        }
        for message, (kernel, line) in cases.items():
            with self.subTest(message):
                r = self.generate(kernel)
                self.assertEqual(r.returncode, 1)
                self.assertIn(f"07_demo/demo.cu:{line}:", r.stderr)
                self.assertIn(message, r.stderr)
                self.assertFalse(self.out.exists(), "nothing is written when a marker is wrong")

    def test_edited_student_file_is_kept_unless_forced(self):
        self.generate(KERNEL)
        work = self.out / "07_demo/demo.cu"
        work.write_text(STUDENT.replace("// TODO: y[i] = x[i] + 1", "y[i] = x[i] + 1.0f;"))
        r = self.generate(KERNEL)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("kept", r.stdout)
        self.assertIn("y[i] = x[i] + 1.0f;", work.read_text())
        r = self.generate(KERNEL, "--force")
        self.assertEqual(work.read_text(), STUDENT)

    def test_every_chapter_of_the_repository(self):
        r = run("--all", "--out", self.out)
        self.assertEqual(r.returncode, 0, r.stderr)
        for chapter in sorted(REPO.glob("[0-9][0-9]_*/CMakeLists.txt")):
            name = chapter.parent.name
            for src in (p for p in chapter.parent.rglob("*") if p.is_file()):
                copy = self.out / name / src.relative_to(chapter.parent)
                self.assertTrue(copy.exists(), copy)
                if "BEGIN SOLUTION" in src.read_text(errors="replace"):
                    text = copy.read_text()
                    self.assertIn("> **Hint:** " if src.suffix == ".md" else "// TODO: ", text)
                    self.assertNotIn("SOLUTION", text)
                else:
                    self.assertEqual(copy.read_bytes(), src.read_bytes(), copy)
        # Shared code a chapter teaches (TAUGHT_IN) comes with its regions replaced.
        for folder in make_student.TAUGHT_IN:
            for src in (p for p in (REPO / folder).rglob("*") if p.is_file()):
                copy = self.out / src.relative_to(REPO)
                self.assertTrue(copy.exists(), copy)
                self.assertNotIn("SOLUTION", copy.read_text())

    def test_markdown_passages_become_hints(self):
        text = "# Title\n<!-- BEGIN SOLUTION: the rescale uses both maxima -->\n```\nm = max(m, s)\n```\n<!-- END SOLUTION -->\nmore\n"
        out, regions = make_student.transform_markdown(text, "README.md")
        self.assertEqual(regions, 1)
        self.assertEqual(out, "# Title\n> **Hint:** the rescale uses both maxima\nmore\n")
        with self.assertRaises(make_student.MarkerError):
            make_student.transform_markdown("<!-- BEGIN SOLUTION: x -->\nno end\n", "README.md")

    def test_export_is_a_fresh_repository_without_solutions(self):
        dest = self.out / "export"
        r = run("--export", dest)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("clean", r.stdout)
        log = subprocess.run(["git", "-C", str(dest), "log", "--oneline"], capture_output=True, text=True).stdout
        self.assertEqual(len(log.splitlines()), 1)
        self.assertFalse((dest / "docs" / "teacher").exists())
        for src in REPO.glob("[0-9][0-9]_*/**/*"):
            if src.is_file() and src.suffix in make_student.SOURCE_SUFFIXES and "BEGIN SOLUTION" in src.read_text(errors="replace"):
                self.assertNotIn("END SOLUTION", (dest / src.relative_to(REPO)).read_text())


if __name__ == "__main__":
    unittest.main()
