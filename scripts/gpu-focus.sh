#!/usr/bin/env bash
# On a GPU machine: build only some targets (Ninja, all cores), then run a list
# of steps, each with its own log and time limit, and print a summary table
# last. For one short, full call while working on a kernel; gpu-check.sh is
# the whole suite.
#   LOOM_TARGETS="loom_attention_gpu_tests bench_attention" \
#     scripts/gpu-focus.sh 'B/tests/loom_attention_gpu_tests' 'python3 bench/x.py'
# In a step, B names the build folder. Logs go to $OUT (else build-gpu/focus):
# step-N.log each, build.log, gpu.txt. LOOM_STEP_TIMEOUT (default 300 s) limits
# each step.
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh
B="${LOOM_BUILD_DIR_GPU:-build-gpu}"
logs="${OUT:-$B/focus}"
mkdir -p "$logs"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0 B

nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv \
  >"$logs/gpu.txt" 2>&1
start=$(date +%s)
if [ ! -f "$B/build.ninja" ]; then
  LOOM_BUILD_DIR="$B" loom_configure -DLOOM_WERROR=ON >"$logs/configure.log" 2>&1
fi
# -k 0: one broken target leaves the rest built.
cmake --build "$B" -j "$LOOM_JOBS" --target ${LOOM_TARGETS:-all} -- -k 0 >"$logs/build.log" 2>&1
build_rc=$?
summary="build (${LOOM_TARGETS:-all}): rc $build_rc, $(( $(date +%s) - start )) s"$'\n'

n=0
for step in "$@"; do
  n=$((n + 1))
  t0=$(date +%s)
  timeout "${LOOM_STEP_TIMEOUT:-300}" bash -c "$step" >"$logs/step-$n.log" 2>&1
  rc=$?
  summary+="step $n: rc $rc, $(( $(date +%s) - t0 )) s: ${step:0:90}"$'\n'
done

echo "---- gpu"
cat "$logs/gpu.txt"
echo "---- summary"
printf '%s' "$summary"
[ $build_rc -eq 0 ] || tail -30 "$logs/build.log"
