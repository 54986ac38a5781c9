# Sourced by loom's scripts: puts nvcc on PATH when the toolkit is installed
# in its usual place but not on PATH, and picks the build folder and job count.
if ! command -v nvcc >/dev/null 2>&1; then
  for candidate in /usr/local/cuda/bin /opt/cuda/bin; do
    if [ -x "$candidate/nvcc" ]; then
      export PATH="$candidate:$PATH"
      break
    fi
  done
fi
if ! command -v nvcc >/dev/null 2>&1; then
  echo "loom: the CUDA toolkit (nvcc) was not found; install CUDA 12.8 or newer" >&2
  exit 1
fi
LOOM_BUILD_DIR="${LOOM_BUILD_DIR:-build}"
LOOM_JOBS="${LOOM_JOBS:-$(nproc)}"
export CUDACXX="${CUDACXX:-$(command -v nvcc)}"

loom_configure() {
  cmake -S . -B "$LOOM_BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release "$@"
}
