#!/usr/bin/env bash
# One command: install what is missing, configure, build, run the flagship sample
# (arguments go to it: --frames N, --width W, --height H, --radius R, --slots S).
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
cmake --build "$LOOM_BUILD_DIR" -j "$LOOM_JOBS" --target loom_image_pipeline loom_quickstart
# The flagship sample: a real-time image pipeline against the naive way.
"$LOOM_BUILD_DIR/samples/loom_image_pipeline" \
  --trace "$LOOM_BUILD_DIR/image_pipeline_trace.json" \
  --plot "$LOOM_BUILD_DIR/image_pipeline_latency.png" "$@"
