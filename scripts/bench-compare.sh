#!/usr/bin/env bash
# Runs one benchmark program of two builds in alternating processes and
# prints, per benchmark, the median of each counter over the processes, for
# the current build and the baseline side by side: how "changes no figure
# beyond noise" is checked (the machine's noise is per process).
# Usage: scripts/bench-compare.sh <current binary> <baseline binary> <filter> [processes]
# Writes JSON under $OUT (or the current folder) as compare-{current,baseline}.N.json.
set -uo pipefail
current="$1"
baseline="$2"
filter="$3"
processes="${4:-7}"
out="${OUT:-.}"
for i in $(seq 1 "$processes"); do
  for side in current baseline; do
    binary=$current
    [ "$side" = baseline ] && binary=$baseline
    "$binary" --benchmark_filter="$filter" --benchmark_out="$out/compare-$side.$i.json" \
      --benchmark_out_format=json >/dev/null 2>&1 || echo "$side run $i failed" >&2
  done
done
python3 - "$out" "$processes" <<'PY'
import json, statistics, sys, glob
out, n = sys.argv[1], int(sys.argv[2])
def load(side):
    runs = {}
    for path in sorted(glob.glob(f"{out}/compare-{side}.*.json")):
        for b in json.load(open(path)).get("benchmarks", []):
            for k, v in b.items():
                if isinstance(v, (int, float)) and k not in ("iterations", "repetitions", "threads", "family_index", "per_family_instance_index", "repetition_index"):
                    runs.setdefault(b["name"], {}).setdefault(k, []).append(v)
    return runs
cur, base = load("current"), load("baseline")
print(f"{'benchmark':<58} {'counter':<20} {'current':>10} {'baseline':>10} {'cur/base':>9}  (medians of {n} processes; [min-max])")
for name in cur:
    for k in cur[name]:
        if k in ("real_time", "cpu_time") or k not in base.get(name, {}):
            continue
        c, b = statistics.median(cur[name][k]), statistics.median(base[name][k])
        rel = c / b if b else float("nan")
        print(f"{name[:58]:<58} {k:<20} {c:>10.4g} {b:>10.4g} {rel:>9.3f}  [{min(cur[name][k]):.3g}-{max(cur[name][k]):.3g}] [{min(base[name][k]):.3g}-{max(base[name][k]):.3g}]")
PY
