#!/usr/bin/env bash
# Fetches CUTLASS/CuTe's C++ headers (header-only, a private build dependency
# of loom's kernels) into the project-local, git-ignored folder .deps/cutlass,
# when they are not there yet. They come from the nvidia-cutlass Python
# package (its wheel carries the headers); nothing is installed into any
# Python environment: pip only downloads the wheel, and the headers are
# unpacked from it. CMake finds the folder (cmake/FindCUTLASS.cmake); so do
# scripts that carry the tree to another machine.
# Environment: LOOM_CUTLASS_VERSION (default below), LOOM_CUTLASS_DIR.
set -euo pipefail
cd "$(dirname "$0")/.."
version="${LOOM_CUTLASS_VERSION:-4.2.0}"
dest="${LOOM_CUTLASS_DIR:-.deps/cutlass}"
stamp="$dest/VERSION"

if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$version" ] && [ -f "$dest/include/cute/tensor.hpp" ]; then
  exit 0
fi

python=$(command -v python3 || true)
if [ -z "$python" ]; then
  echo "loom setup: python3 is needed to fetch CUTLASS's headers; install python3 and python3-pip" >&2
  exit 1
fi
if ! "$python" -m pip --version >/dev/null 2>&1; then
  echo "loom setup: pip is needed to fetch CUTLASS's headers (the python3-pip package)" >&2
  exit 1
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
echo "loom setup: fetching CUTLASS $version headers into $dest"
"$python" -m pip download --quiet --no-deps --only-binary=:all: \
  "nvidia-cutlass==$version" -d "$work" >&2
wheel=$(ls "$work"/nvidia_cutlass-*.whl | head -1)

# Only the C++ headers: include/ (cute, cutlass) and tools/util/include.
"$python" - "$wheel" "$work/out" <<'PY'
import sys, zipfile, pathlib
wheel, out = sys.argv[1], pathlib.Path(sys.argv[2])
prefixes = {
    "cutlass_library/source/include/": out / "include",
    "cutlass_library/source/tools/util/include/": out / "tools/util/include",
}
count = 0
with zipfile.ZipFile(wheel) as z:
    for name in z.namelist():
        for prefix, target in prefixes.items():
            if name.startswith(prefix) and not name.endswith("/"):
                path = target / name[len(prefix):]
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(z.read(name))
                count += 1
if count == 0:
    sys.exit("loom setup: the nvidia-cutlass wheel holds no C++ headers where expected")
PY
[ -f "$work/out/include/cute/tensor.hpp" ] || {
  echo "loom setup: CUTLASS's headers were not where expected in the wheel" >&2
  exit 1
}
echo "$version" >"$work/out/VERSION"
rm -rf "$dest"
mkdir -p "$(dirname "$dest")"
mv "$work/out" "$dest"
