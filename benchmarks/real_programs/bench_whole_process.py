"""What a user pays for a profiler: whole processes of one program, plain and under each tool, alternated in rounds.

Each round runs every mode once, in an order rotated per round (so no mode always follows another), each a fresh
process of ``cnn_step.py`` (or any program printing ``mean_ms=``). A mode's cost in a round is its mean step time
divided by the plain run's of the same round; the table gives every round, then the median and the worst round.

Modes: ``plain``; ``record`` (``gputrace record``); ``record-host`` (``record --no-cuda-activity``: attached,
no CUPTI); ``nsys`` (``nsys profile -t cuda,nvtx``: ``$NSYS``, else nsys on
PATH or under /opt/nvidia); ``profiler`` (the program's own ``--profile``: torch.profiler CPU + CUDA).

    python benchmarks/real_programs/bench_whole_process.py --rounds 9 -- --steps 300 --warmup 30
    python benchmarks/real_programs/bench_whole_process.py --rounds 9 --modes plain,record -- --model matmul

Last lines, machine-readable, one per mode:

    WHOLE mode=record rounds=9 median=1.041 worst=1.090 ratios=1.03,1.05,...
"""

from __future__ import annotations

import argparse
import glob
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
MEAN = re.compile(r"mean_ms=([0-9.]+)")


def nsys_path() -> str | None:
    found = shutil.which("nsys")
    if found:
        return found
    env = os.environ.get("NSYS")
    if env:
        return env
    cands = sorted(glob.glob("/opt/nvidia/nsight-systems*/*/bin/nsys") + glob.glob("/opt/nvidia/nsight-systems*/bin/nsys")
                   + glob.glob("/usr/local/cuda*/bin/nsys")
                   + glob.glob("/opt/nvidia/nsight-compute/*/host/target-linux-x64/nsys"))
    return cands[-1] if cands else None


def command(mode: str, program: list[str], work: str, i: int) -> list[str]:
    py = [sys.executable, *program]
    if mode == "plain":
        return py
    if mode == "record":
        return [sys.executable, "-m", "gputrace", "record", "--trace", os.path.join(work, f"r{i}.jsonl"), "--", *py]
    if mode == "record-host":
        return [sys.executable, "-m", "gputrace", "record", "--no-cuda-activity", "--trace",
                os.path.join(work, f"h{i}.jsonl"), "--", *py]
    if mode == "nsys":
        nsys = nsys_path()
        if nsys is None:
            raise SystemExit("bench_whole_process: nsys not found")
        return [nsys, "profile", "-t", "cuda,nvtx", "-s", "none", "--cpuctxsw", "none", "--force-overwrite", "true",
                "-o", os.path.join(work, f"n{i}"), *py]
    if mode == "profiler":
        return [*py, "--profile"]
    raise SystemExit(f"bench_whole_process: unknown mode {mode!r}")


def run(cmd: list[str], timeout: float) -> tuple[float | None, float, str]:
    t0 = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    wall = time.perf_counter() - t0
    m = MEAN.findall(p.stdout)
    tail = (p.stdout + p.stderr)[-400:]
    return (float(m[-1]) if m and p.returncode == 0 else None), wall, tail


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--modes", default="plain,record,nsys,profiler")
    ap.add_argument("--program", default=os.path.join(HERE, "cnn_step.py"))
    ap.add_argument("--timeout", type=float, default=300)
    ap.add_argument("args", nargs="*", help="after --: the program's own arguments")
    a = ap.parse_args()
    modes = a.modes.split(",")
    if "plain" not in modes:
        modes.insert(0, "plain")
    program = [a.program, *a.args]
    ratios: dict[str, list[float]] = {m: [] for m in modes if m != "plain"}
    walls: dict[str, list[float]] = {m: [] for m in modes}
    with tempfile.TemporaryDirectory(prefix="whole-") as work:
        for r in range(a.rounds):
            order = modes[r % len(modes):] + modes[:r % len(modes)]
            got: dict[str, float | None] = {}
            for m in order:
                ms, wall, tail = run(command(m, program, work, r), a.timeout)
                got[m] = ms
                walls[m].append(wall)
                if ms is None:
                    print(f"round {r} {m}: no mean_ms; tail: {tail!r}", flush=True)
            base = got.get("plain")
            line = [f"round {r} plain={base}"]
            for m in ratios:
                if base and got.get(m):
                    ratios[m].append(got[m] / base)  # type: ignore[operator]
                    line.append(f"{m}={got[m]:.4f} ({got[m] / base:.3f}x)")  # type: ignore[operator]
            print(" ".join(line), flush=True)
    print(f"{'mode':10} {'rounds':>6} {'median':>8} {'worst':>8} {'best':>8} {'wall_s median':>14}")
    for m in modes:
        rs = ratios.get(m, [])
        med = f"{statistics.median(rs):.3f}" if rs else "-"
        worst = f"{max(rs):.3f}" if rs else "-"
        best = f"{min(rs):.3f}" if rs else "-"
        print(f"{m:10} {len(rs) if m != 'plain' else len(walls[m]):>6} {med:>8} {worst:>8} {best:>8} "
              f"{statistics.median(walls[m]):>14.2f}")
    for m, rs in ratios.items():
        if rs:
            print(f"WHOLE mode={m} rounds={len(rs)} median={statistics.median(rs):.4f} worst={max(rs):.4f} "
                  f"ratios={','.join(f'{x:.3f}' for x in rs)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
