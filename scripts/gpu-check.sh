#!/usr/bin/env bash
# On a GPU machine: configure with Ninja on all cores, build, run the whole
# suite and the benchmarks, keep the logs, print a short summary table last.
# Logs go to $OUT when it is set (the GPU machine's results folder), else to
# build-gpu/logs. Usage: scripts/gpu-check.sh [benchmark filter regex]
# CUTLASS's headers: .deps/cutlass (scripts/setup.sh fetches them; a machine
# that cannot fetch gets the folder carried with the tree), or CUTLASS_ROOT.
# Optional, through the environment:
#   LOOM_BASELINE_DIR=<tree>   also build that tree (an earlier commit with new
#                              tests copied in) and run LOOM_BASELINE_FILTER of
#                              its GPU and CPU tests, one process a test: shows
#                              which fail (or crash) before a fix
#   LOOM_COMPUTE_SANITIZER=1   run the GPU suite under compute-sanitizer
#                              memcheck and racecheck, where the device allows
#   LOOM_BENCH_REPEAT=N        run each benchmark program N times (medians)
#   LOOM_BENCHES="bench_a ..." run only these benchmark programs
#   LOOM_GPU_ONLY=1            skip the CPU/MPI tests and the samples (they run
#                              on any machine): the GPU tests and benchmarks only
#   LOOM_TEST_TIMEOUT=S        each GPU test's time limit (default 300 s)
set -uo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh
LOOM_BUILD_DIR="${LOOM_BUILD_DIR_GPU:-build-gpu}"
logs="$LOOM_BUILD_DIR/logs"
rm -rf "$logs"
mkdir -p "$logs"
filter="${1:-.}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0

status() { [ "$1" -eq 0 ] && echo ok || echo "FAILED ($1)"; }

nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm --format=csv >"$logs/gpu.txt" 2>&1
start=$(date +%s)
if [ ! -f .deps/cutlass/include/cute/tensor.hpp ] && [ -z "${CUTLASS_ROOT:-}" ]; then
  echo "loom gpu-check: CUTLASS's headers are missing: run scripts/setup.sh here, or bring" \
    ".deps/cutlass with the tree" >&2
fi
baseline_pid=""
if [ -n "${LOOM_BASELINE_DIR:-}" ] && [ -d "$LOOM_BASELINE_DIR" ]; then
  ( cmake -S "$LOOM_BASELINE_DIR" -B build-baseline -G Ninja -DCMAKE_BUILD_TYPE=Release \
      -DLOOM_BUILD_BENCHMARKS=OFF -DLOOM_BUILD_SAMPLES=OFF &&
    cmake --build build-baseline -j "$LOOM_JOBS" --target loom_gpu_tests loom_unit_tests ) \
    >"$logs/baseline-build.log" 2>&1 &
  baseline_pid=$!
fi
loom_configure -DLOOM_WERROR=ON >"$logs/configure.log" 2>&1
configure_rc=$?
# -k 0: one broken target leaves the rest built and tested.
cmake --build "$LOOM_BUILD_DIR" -j "$LOOM_JOBS" -- -k 0 >"$logs/build.log" 2>&1
build_rc=$?
build_s=$(( $(date +%s) - start ))

# CPU and MPI tests in parallel; GPU tests one at a time (some measure overlap).
cpu_rc=0
if [ "${LOOM_GPU_ONLY:-0}" != "1" ]; then
  ctest --test-dir "$LOOM_BUILD_DIR" --output-on-failure --no-tests=error -j 8 --timeout 300 -LE gpu \
    >"$logs/ctest.log" 2>&1
  cpu_rc=$?
else
  echo "LOOM_GPU_ONLY=1: the CPU and MPI tests were not run here" >"$logs/ctest.log"
fi
ctest --test-dir "$LOOM_BUILD_DIR" --output-on-failure --no-tests=error -j 1 \
  --timeout "${LOOM_TEST_TIMEOUT:-300}" -L gpu >"$logs/ctest-gpu.log" 2>&1
gpu_rc=$?
test_rc=$(( cpu_rc != 0 || gpu_rc != 0 ))
# The figures some GPU tests print (ctest keeps only failing output).
"$LOOM_BUILD_DIR/tests/loom_gpu_tests" --gtest_filter='*256MB*:*Overlap*' >"$logs/gpu-figures.log" 2>&1

sample_rc=0
flagship_rc=0
if [ "${LOOM_GPU_ONLY:-0}" != "1" ]; then
  "$LOOM_BUILD_DIR/samples/loom_quickstart" >"$logs/quickstart.log" 2>&1
  sample_rc=$?
  # The flagship sample, at full size, with its trace and latency plot.
  "$LOOM_BUILD_DIR/samples/loom_image_pipeline" --trace "$logs/image_pipeline_trace.json" \
    --plot "$logs/image_pipeline_latency.png" >"$logs/image_pipeline.log" 2>&1
  flagship_rc=$?
  [ $flagship_rc -eq 0 ] || sample_rc=$flagship_rc
else
  echo "not run (LOOM_GPU_ONLY=1)" | tee "$logs/quickstart.log" >"$logs/image_pipeline.log"
fi

baseline_lines=""
if [ -n "$baseline_pid" ]; then
  wait "$baseline_pid"
  bfilter="${LOOM_BASELINE_FILTER:-*}"
  # One process a test: a test that crashes the baseline shows as its own line.
  for bin in loom_gpu_tests loom_unit_tests; do
    [ -x "build-baseline/tests/$bin" ] || { baseline_lines+="baseline $bin: not built"$'\n'; continue; }
    for t in $("build-baseline/tests/$bin" --gtest_list_tests --gtest_filter="$bfilter" |
      awk '/^[^ ]/ { suite = $1 } /^  / { print suite $1 }'); do
      timeout "${LOOM_BASELINE_TIMEOUT:-60}" "build-baseline/tests/$bin" --gtest_filter="$t" >>"$logs/baseline-$bin.log" 2>&1
      rc=$?
      baseline_lines+="baseline $t: $([ $rc -eq 0 ] && echo passed || echo "FAILED (rc $rc)")"$'\n'
    done
  done
fi

bench_rc=0
bench_lines=""
for bench in "$LOOM_BUILD_DIR"/bench/bench_*; do
  [ -x "$bench" ] || continue
  name=$(basename "$bench")
  # LOOM_BENCHES="bench_a bench_b" runs only those programs.
  if [ -n "${LOOM_BENCHES:-}" ] && [[ " $LOOM_BENCHES " != *" $name "* ]]; then continue; fi
  for rep in $(seq 1 "${LOOM_BENCH_REPEAT:-1}"); do
    suffix=$([ "$rep" -eq 1 ] && echo "" || echo ".$rep")
    "$bench" --benchmark_filter="$filter" --benchmark_out="$logs/$name$suffix.json" \
      --benchmark_out_format=json >"$logs/$name$suffix.txt" 2>&1
    rc=$?
    [ $rc -eq 0 ] || bench_rc=$rc
  done
  bench_lines+="$name: $(status $rc)"$'\n'
done

# Communicators on this GPU: nccl with one rank, and the mpi backend with two
# ranks sharing the GPU (device tensors staged through pinned memory).
comm_lines=""
allreduce="$LOOM_BUILD_DIR/samples/loom_allreduce"
if [ -x "$allreduce" ] && command -v mpirun >/dev/null; then
  for run in "nccl 1" "mpi 2"; do
    set -- $run
    for mode in "" "--ring"; do
      log="$logs/allreduce-$1-$2${mode:+-ring}.log"
      LOOM_COMM=$1 timeout 240 mpirun --oversubscribe -np "$2" "$allreduce" --max 256M $mode >"$log" 2>&1
      rc=$?
      comm_lines+="allreduce $1 np $2 ${mode:-all_reduce}: $(status $rc); largest: $(grep -vE '^#' "$log" | tail -1 | tr -s ' ')"$'\n'
    done
    # The data-parallel training step: the loss falls and is equal on every rank.
    if [ -x "$LOOM_BUILD_DIR/samples/loom_data_parallel" ]; then
      log="$logs/data_parallel-$1-$2.log"
      LOOM_COMM=$1 timeout 240 mpirun --oversubscribe -np "$2" "$LOOM_BUILD_DIR/samples/loom_data_parallel" 200 >"$log" 2>&1
      comm_lines+="data_parallel $1 np $2: $(status $?); $(tail -1 "$log")"$'\n'
    fi
    # Against bare MPI / NCCL loops in the same run.
    if [ -x "$LOOM_BUILD_DIR/bench/bench_comm_mpi" ]; then
      log="$logs/bench_comm_mpi-$1-$2.txt"
      LOOM_COMM=$1 timeout 240 mpirun --oversubscribe -np "$2" "$LOOM_BUILD_DIR/bench/bench_comm_mpi" >"$log" 2>&1
      comm_lines+="bench_comm_mpi $1 np $2: $(status $?)"$'\n'"$(cat "$log")"$'\n'
      if [ "$1" = mpi ]; then
        # Open MPI's shared-memory transport alone (no TCP loopback).
        log="$logs/bench_comm_mpi-$1-$2-shm.txt"
        OMPI_MCA_btl=self,vader LOOM_COMM=$1 timeout 240 mpirun --oversubscribe -np "$2" "$LOOM_BUILD_DIR/bench/bench_comm_mpi" >"$log" 2>&1
        comm_lines+="bench_comm_mpi $1 np $2 btl self,vader: $(status $?)"$'\n'"$(cat "$log")"$'\n'
      fi
    fi
  done
fi

# A training step at full size (its time a step), and PyTorch's figures for
# the same ops and step (bench/torch_anchors.py), in the same call.
step_lines=""
if [ -x "$LOOM_BUILD_DIR/samples/loom_mlp_training" ]; then
  timeout 240 "$LOOM_BUILD_DIR/samples/loom_mlp_training" --time >"$logs/mlp_training.log" 2>&1
  step_lines+="mlp_training: $(status $?); $(grep -E '^step time' "$logs/mlp_training.log")"$'\n'
fi
if command -v python3 >/dev/null; then
  timeout 300 python3 bench/torch_anchors.py >"$logs/torch_anchors.log" 2>&1
  step_lines+="torch anchors: $(status $?)"$'\n'"$(grep -E 'cross_entropy|mlp_step' "$logs/torch_anchors.log")"$'\n'
  # PyTorch on bench_small_shapes' cases, beside loom's figures from its JSON.
  if [ -f "$logs/bench_small_shapes.json" ]; then
    timeout 300 python3 bench/torch_small_shapes.py "$logs/bench_small_shapes.json" \
      >"$logs/torch_small_shapes.log" 2>&1
    step_lines+="small shapes vs torch: $(status $?); $(grep -E '^lowest' "$logs/torch_small_shapes.log")"$'\n'
  fi
  # PyTorch's attention (flash and cuDNN backends) on bench_attention's shapes.
  if [ -z "${LOOM_BENCHES:-}" ] || [[ " $LOOM_BENCHES " == *" bench_attention "* ]]; then
    timeout 300 python3 bench/torch_attention.py >"$logs/torch_attention.log" 2>&1
    step_lines+="torch attention: $(status $?)"$'\n'
  fi
  # loom's attention against PyTorch's on the same inputs (forward and backward).
  if [ -x "$LOOM_BUILD_DIR/bench/attention_files" ]; then
    timeout 300 python3 bench/torch_attention_check.py "$LOOM_BUILD_DIR/bench/attention_files" \
      >"$logs/torch_attention_check.log" 2>&1
    step_lines+="attention vs torch, same inputs: $(status $?)"$'\n'
  fi
fi

sanitizer_lines=""
if [ "${LOOM_COMPUTE_SANITIZER:-0}" = "1" ] && command -v compute-sanitizer >/dev/null; then
  # Timing tests and the child-process fault test are left out (a sanitizer
  # slows kernels, and a planted fault is the point of that test).
  sfilter='-*Overlap*:*Poison*:*Disjoint*:*256MB*:*WorkLeftBy*'
  for tool in memcheck racecheck; do
    # API errors are not reported: several tests plant them on purpose.
    timeout 420 compute-sanitizer --tool "$tool" --error-exitcode 99 --report-api-errors no \
      "$LOOM_BUILD_DIR/tests/loom_gpu_tests" --gtest_filter="$sfilter" \
      >"$logs/sanitizer-$tool.log" 2>&1
    sanitizer_lines+="compute-sanitizer $tool: rc $? ($(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$logs/sanitizer-$tool.log" | tail -1))"$'\n'
  done
fi

echo "================ loom GPU check summary ================"
echo "GPU:       $(tail -n +2 "$logs/gpu.txt" | head -1)"
# The tree may arrive without its own git metadata: LOOM_COMMIT names it then.
if [ -n "${LOOM_COMMIT:-}" ]; then
  echo "commit:    $LOOM_COMMIT (as given)"
else
  echo "commit:    $(git rev-parse --short HEAD 2>/dev/null || echo unknown) $(git diff --quiet 2>/dev/null || echo '(+ uncommitted changes)')"
fi
echo "date:      $(date -u +%Y-%m-%dT%H:%MZ)"
echo "configure: $(status $configure_rc)   build: $(status $build_rc) in ${build_s}s"
echo "cpu+mpi:   $(grep -E 'tests passed|tests failed' "$logs/ctest.log" | tail -1)"
echo "gpu:       $(grep -E 'tests passed|tests failed' "$logs/ctest-gpu.log" | tail -1)"
grep -hE '^(pageable 256 MB upload|4 x 1 ms kernels)' "$logs/gpu-figures.log" | head -4
grep -hE '^\s+[0-9]+ - .*\((Failed|Timeout|Not Run|SEGFAULT|Subprocess aborted|Exception)\)' "$logs/ctest.log" "$logs/ctest-gpu.log" | head -20
skipped=$(cat "$logs/ctest.log" "$logs/ctest-gpu.log" | grep -c '\*\*\*Skipped' || true)
echo "skipped:   $skipped"
echo "sample:    $(status $sample_rc): $(tail -1 "$logs/quickstart.log")"
echo "flagship:  $(status $flagship_rc)"
grep -vE '^\s*$' "$logs/image_pipeline.log" | tail -7
echo "$bench_lines"
[ -n "$comm_lines" ] && echo "$comm_lines"
[ -n "$step_lines" ] && echo "$step_lines"
[ -n "$sanitizer_lines" ] && echo "$sanitizer_lines"
[ -n "$baseline_lines" ] && echo "$baseline_lines"
if command -v python3 >/dev/null; then
  python3 scripts/bench_table.py "$logs"/bench_*.json 2>/dev/null || true
fi
# The results folder takes few files: one archive of the logs and JSON.
if [ -n "${OUT:-}" ]; then
  tar czf "$OUT/gpu-logs.tgz" -C "$logs" .
fi
[ $configure_rc -eq 0 ] && [ $build_rc -eq 0 ] && [ $test_rc -eq 0 ] && [ $sample_rc -eq 0 ] && [ $bench_rc -eq 0 ]
