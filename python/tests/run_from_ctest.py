#!/usr/bin/env python3
"""ctest's entry to the Python package's tests (ctest -L python): runs pytest on python/tests with
the package importable from the source tree; exits 77 (ctest: skipped) with the reason where
PyTorch or pytest is not installed. Everything runs under `if __name__ == "__main__"`: the ring
attention tests start processes by spawning, and a spawned process imports this file again."""
import importlib
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    for module, install in (("torch", "pip install torch"), ("pytest", "pip install pytest")):
        try:
            importlib.import_module(module)
        except Exception as e:  # not installed, or installed but broken here (a missing library)
            print("python/tests: Skipped")  # the form scripts/run_ctest.sh reports skips by
            print(f"the Python package's tests need {module}, which does not import here ({install}): "
                  f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")
            return 77
    sys.path.insert(0, os.path.dirname(HERE))  # flash_tutorial from the source tree
    import pytest
    return pytest.main([HERE, "-q", "-p", "no:cacheprovider"])


if __name__ == "__main__":
    sys.exit(main())
