#!/usr/bin/env python3
"""Prints one line per benchmark from Google Benchmark JSON files: loom's
figure, the anchor's, and the ratio, from the counters each benchmark sets."""
import json
import sys

SKIP = {"name", "run_name", "run_type", "repetitions", "repetition_index", "threads",
        "iterations", "real_time", "cpu_time", "time_unit", "family_index",
        "per_family_instance_index", "label", "error_occurred", "error_message",
        "aggregate_name", "aggregate_unit"}


def main(paths):
    print(f"{'benchmark':<48} counters")
    for path in paths:
        with open(path) as f:
            data = json.load(f)
        for b in data.get("benchmarks", []):
            if b.get("error_occurred"):
                print(f"{b['name']:<48} ERROR {b.get('error_message', '')}")
                continue
            counters = "  ".join(f"{k}={v:.4g}" for k, v in b.items()
                                 if k not in SKIP and isinstance(v, (int, float)))
            label = f" [{b['label']}]" if b.get("label") else ""
            print(f"{b['name'] + label:<48} {counters}")


if __name__ == "__main__":
    main(sys.argv[1:])
