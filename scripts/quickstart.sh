#!/usr/bin/env bash
# One command: install what is missing, configure, build, run the flagship sample.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
source scripts/env.sh
loom_configure -DLOOM_BUILD_TESTS=OFF -DLOOM_BUILD_BENCHMARKS=OFF
cmake --build "$LOOM_BUILD_DIR" -j "$LOOM_JOBS" --target loom_quickstart
"$LOOM_BUILD_DIR/samples/loom_quickstart"
