#!/usr/bin/env bash
# On a GPU machine: configure with Ninja on all cores, build, run the whole
# suite and the benchmarks, keep the logs, print a short summary table last.
# Logs go to $OUT when it is set (the GPU machine's results folder), else to
# build-gpu/logs. Usage: scripts/gpu-check.sh [benchmark filter regex]
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh
LOOM_BUILD_DIR="${LOOM_BUILD_DIR_GPU:-build-gpu}"
logs="${OUT:-$LOOM_BUILD_DIR/logs}"
mkdir -p "$logs"
filter="${1:-.}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0

status() { [ "$1" -eq 0 ] && echo ok || echo "FAILED ($1)"; }

nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm --format=csv >"$logs/gpu.txt" 2>&1
start=$(date +%s)
loom_configure -DLOOM_WERROR=ON >"$logs/configure.log" 2>&1
configure_rc=$?
cmake --build "$LOOM_BUILD_DIR" -j "$LOOM_JOBS" >"$logs/build.log" 2>&1
build_rc=$?
build_s=$(( $(date +%s) - start ))

ctest --test-dir "$LOOM_BUILD_DIR" --output-on-failure -j 4 --timeout 300 \
  --output-junit "$PWD/$logs/ctest.xml" >"$logs/ctest.log" 2>&1
test_rc=$?

"$LOOM_BUILD_DIR/samples/loom_quickstart" >"$logs/quickstart.log" 2>&1
sample_rc=$?

bench_rc=0
bench_lines=""
for bench in "$LOOM_BUILD_DIR"/bench/bench_*; do
  [ -x "$bench" ] || continue
  name=$(basename "$bench")
  "$bench" --benchmark_filter="$filter" --benchmark_out="$logs/$name.json" \
    --benchmark_out_format=json >"$logs/$name.txt" 2>&1
  rc=$?
  [ $rc -eq 0 ] || bench_rc=$rc
  bench_lines+="$name: $(status $rc)"$'\n'
done

echo "================ loom GPU check summary ================"
echo "GPU:       $(tail -n +2 "$logs/gpu.txt" | head -1)"
echo "commit:    $(git rev-parse --short HEAD 2>/dev/null || echo unknown) $(git diff --quiet 2>/dev/null || echo '(+ uncommitted changes)')"
echo "date:      $(date -u +%Y-%m-%dT%H:%MZ)"
echo "configure: $(status $configure_rc)   build: $(status $build_rc) in ${build_s}s"
echo "tests:     $(grep -E 'tests passed|tests failed' "$logs/ctest.log" | tail -1)"
grep -E '^\s+[0-9]+ - .*\((Failed|Timeout|Not Run|SEGFAULT|Subprocess aborted)\)' "$logs/ctest.log" | head -20
skipped=$(grep -c '\*\*\*Skipped' "$logs/ctest.log" || true)
echo "skipped:   $skipped"
echo "sample:    $(status $sample_rc): $(tail -1 "$logs/quickstart.log")"
echo "$bench_lines"
if command -v python3 >/dev/null; then
  python3 scripts/bench_table.py "$logs"/bench_*.json 2>/dev/null || true
fi
[ $configure_rc -eq 0 ] && [ $build_rc -eq 0 ] && [ $test_rc -eq 0 ] && [ $sample_rc -eq 0 ] && [ $bench_rc -eq 0 ]
