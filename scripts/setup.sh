#!/usr/bin/env bash
# Installs what loom needs from the system's packages, only where missing.
# Debian/Ubuntu: apt-get (as root, or through sudo). The CUDA toolkit (nvcc,
# cudart, NCCL) is expected to be installed already; this says so if not.
set -euo pipefail

need_packages=()
have_header() { [ -e "/usr/include/$1" ] || [ -e "/usr/local/include/$1" ]; }

have_header spdlog/spdlog.h || need_packages+=(libspdlog-dev)
have_header fmt/format.h || need_packages+=(libfmt-dev)
have_header boost/lockfree/queue.hpp || need_packages+=(libboost-dev)
have_header gtest/gtest.h || need_packages+=(libgtest-dev)
have_header gmock/gmock.h || need_packages+=(libgmock-dev)
have_header benchmark/benchmark.h || need_packages+=(libbenchmark-dev)
command -v cmake >/dev/null || need_packages+=(cmake)
command -v ninja >/dev/null || need_packages+=(ninja-build)
command -v g++ >/dev/null || need_packages+=(g++)
command -v clang-format >/dev/null || need_packages+=(clang-format)
# CUTLASS's headers come from a Python package's wheel (fetch-cutlass.sh).
command -v python3 >/dev/null || need_packages+=(python3)
python3 -m pip --version >/dev/null 2>&1 || need_packages+=(python3-pip)
if [ "${LOOM_WITH_MPI:-ON}" != "OFF" ]; then
  command -v mpicxx >/dev/null || need_packages+=(libopenmpi-dev)
  command -v mpirun >/dev/null || need_packages+=(openmpi-bin)
fi

if [ ${#need_packages[@]} -gt 0 ]; then
  echo "loom setup: installing ${need_packages[*]}"
  if ! command -v apt-get >/dev/null; then
    echo "loom setup: no apt-get here; install these yourself: ${need_packages[*]}" >&2
    exit 1
  fi
  sudo_cmd=()
  if [ "$(id -u)" -ne 0 ]; then sudo_cmd=(sudo); fi
  export DEBIAN_FRONTEND=noninteractive
  "${sudo_cmd[@]}" apt-get update -qq
  "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${need_packages[@]}"
fi

# CUTLASS/CuTe headers, project-local (a private, header-only dependency).
"$(dirname "$0")/fetch-cutlass.sh"
