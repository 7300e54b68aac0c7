#!/usr/bin/env bash
# Builds everything and runs every test. GPU tests skip (with the reason) on a machine
# without a GPU; CPU tests (reference, algorithm models, index math, error handling) always run.
# Ends with one summary: passed, failed, skipped and why (scripts/run_ctest.sh); ctest's full
# output is in build/ctest.log. Exit status 1 if the build or a test failed.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup_deps.sh
bash scripts/configure.sh
bash scripts/run_ctest.sh build
