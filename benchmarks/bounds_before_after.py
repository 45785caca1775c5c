"""Savings before and after the bounds (docs/findings.md, "What bounds each saving"): for each trace, the largest
``gpu-idle-host`` and ``exposed-comm`` savings of ``gputrace report --json`` by this checkout and by another one
(``--before DIR``, a checkout's root or a folder holding its ``gputrace`` package), beside the GPU's busy time, and
whether every finding keeps ``saving_ns <= bound_ns``. Prints a Markdown table.

    python benchmarks/bounds_before_after.py --before /tmp/old tests/data/foreign/train_kineto.json.gz \\
        tests/data/foreign/train_nsys.sqlite.gz benchmarks/traces/prover-2_20-cupti.jsonl.gz

Two rank files read together: join them with a comma (``dist_rank0.json.gz,dist_rank1.json.gz``).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def report(paths: list[str], pythonpath: str) -> dict:
    env = {**os.environ, "PYTHONPATH": pythonpath}  # run from that checkout: `-m` puts the working folder first
    out = subprocess.run([sys.executable, "-m", "gputrace", "report", *(str(Path(p).resolve()) for p in paths),
                          "--json"], capture_output=True, text=True, env=env, check=True, cwd=pythonpath,
                         timeout=900).stdout
    return json.loads(out)


def largest(d: dict, rule: str) -> int:
    return max((int(f["saving_ns"]) for f in d["findings"] if f["rule"] == rule), default=0)


def ms(ns: int) -> str:
    return f"{ns / 1e6:,.2f}"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", required=True, help="the other checkout (its root, holding gputrace/)")
    ap.add_argument("traces", nargs="+", help="trace files; rank files of one job joined with a comma")
    a = ap.parse_args(argv)
    print("| trace | GPU busy ms | gpu-idle-host before | after | exposed-comm before | after | all within bound |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | --- |")
    for t in a.traces:
        paths = t.split(",")
        old, new = report(paths, str(Path(a.before).resolve())), report(paths, str(ROOT))
        busy = sum(int(x["busy_ns"]) for x in new["gpu_idle"]["per_device"])
        ok = all(0 <= f["saving_ns"] <= f["bound_ns"] for f in new["findings"])
        name = ", ".join(Path(p).name for p in paths)
        print(f"| {name} | {ms(busy)} | {ms(largest(old, 'gpu-idle-host'))} | {ms(largest(new, 'gpu-idle-host'))} | "
              f"{ms(largest(old, 'exposed-comm'))} | {ms(largest(new, 'exposed-comm'))} | {'yes' if ok else 'NO'} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
