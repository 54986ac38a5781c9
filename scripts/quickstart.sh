#!/usr/bin/env bash
# One command: install what is missing, configure, build, run the flagship sample.
# It builds in its own folder, build-quickstart (LOOM_BUILD_DIR overrides), so
# it never changes the options of scripts/test.sh's folder, build, and each
# stays incremental whichever command ran last.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
LOOM_BUILD_DIR="${LOOM_BUILD_DIR:-build-quickstart}"
source scripts/env.sh
# Every option this command relies on is set here, whatever the folder held.
loom_configure -DLOOM_BUILD_SAMPLES=ON -DLOOM_BUILD_TESTS=OFF -DLOOM_BUILD_BENCHMARKS=OFF \
  -DLOOM_WERROR=OFF -DLOOM_SANITIZE=
cmake --build "$LOOM_BUILD_DIR" -j "$LOOM_JOBS" --target loom_quickstart
"$LOOM_BUILD_DIR/samples/loom_quickstart"
