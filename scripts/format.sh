#!/usr/bin/env bash
# Formats every C++ and CUDA source with .clang-format; --check only reports.
set -euo pipefail
cd "$(dirname "$0")/.."
clang_format="${CLANG_FORMAT:-clang-format}"
mapfile -t files < <(git ls-files --cached --others --exclude-standard '*.cpp' '*.hpp' '*.cu' '*.cuh' '*.h' 2>/dev/null ||
  find include src kernels samples tests bench -name '*.[ch]pp' -o -name '*.cu' -o -name '*.cuh')
if [ ${#files[@]} -eq 0 ]; then
  echo "format: no sources found" >&2
  exit 1
fi
if [ "${1:-}" = "--check" ]; then
  "$clang_format" --dry-run -Werror "${files[@]}"
  echo "format: ${#files[@]} files clean"
else
  "$clang_format" -i "${files[@]}"
fi
