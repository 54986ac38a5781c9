#!/usr/bin/env bash
# One command: install what is missing, configure, build, run the whole suite.
# GPU tests skip, saying why, where there is no GPU. Extra arguments go to ctest
# (for example: scripts/test.sh -L cpu). Fails when no test ran.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
source scripts/env.sh
# Every option this command relies on is set here: the folder may have been
# configured otherwise before (by hand, or an older quickstart), and CMake's
# cache would keep that.
loom_configure -DLOOM_BUILD_TESTS=ON -DLOOM_BUILD_SAMPLES=ON -DLOOM_BUILD_BENCHMARKS=ON \
  -DLOOM_WERROR=ON -DLOOM_SANITIZE=
cmake --build "$LOOM_BUILD_DIR" -j "$LOOM_JOBS"
ctest --test-dir "$LOOM_BUILD_DIR" --output-on-failure --no-tests=error -j "$LOOM_JOBS" "$@"
