#!/usr/bin/env bash
# One command: install what is missing, configure, build, run the whole suite.
# GPU tests skip, saying why, where there is no GPU. Extra arguments go to ctest
# (for example: scripts/test.sh -L cpu).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
source scripts/env.sh
loom_configure -DLOOM_WERROR=ON
cmake --build "$LOOM_BUILD_DIR" -j "$LOOM_JOBS"
ctest --test-dir "$LOOM_BUILD_DIR" --output-on-failure -j "$LOOM_JOBS" "$@"
