"""What ``gputrace record`` costs a PyTorch training step, beside ``torch.profiler``, in one run.

Runs train_step.py three ways, alternating (the order rotates every repeat, so drift of the machine hits
each mode alike), ``--repeats`` times:

* ``plain``:    ``python train_step.py --steps N``
* ``record``:   ``python -m gputrace record --trace T -- python train_step.py --steps N`` (CUPTI and NVTX
                ranges where available; the DataLoader workers are recorded too)
* ``profiler``: ``python train_step.py --steps N --profile K.json`` (torch.profiler, CPU + CUDA activities)

Each run prints its median step time (``STEPS median_ms=...``: wall time of whole steps, after warm-up; process
start, recorder start-up and trace export are outside it). Per mode the figure is the median over repeats
of those medians; ratios are against ``plain`` of the same run. Targets (issue 24): record <= 1.03 x plain, and
record < profiler. Prints a short table last; ``--json PATH`` writes the figures too. A run that fails is
reported (with its output) and left out; the exit status is then 1.

    python benchmarks/real_programs/bench_record_overhead.py --steps 30 --repeats 3 --work /tmp/bro
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
STEPS_RE = re.compile(r"^STEPS median_ms=([0-9.]+|nan) n=(\d+) device=(\w+) ranges=(\w+)", re.MULTILINE)
MODES = ("plain", "record", "profiler")


def command(mode: str, steps: int, work: Path, i: int, extra: list[str]) -> list[str]:
    prog = [sys.executable, str(HERE / "train_step.py"), "--steps", str(steps), "--quiet", *extra]
    if mode == "record":
        return [sys.executable, "-m", "gputrace", "record", "--trace", str(work / f"record-{i}.jsonl"), "--", *prog]
    if mode == "profiler":
        return [*prog, "--profile", str(work / f"kineto-{i}.json")]
    return prog


def run_once(cmd: list[str], timeout: float) -> tuple[float, str, str]:
    """(median step ms, device, ranges) of one run; raises RuntimeError with the run's output on failure."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH", "")) if p)
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env, cwd=REPO)
    m = STEPS_RE.search(p.stdout)
    if p.returncode != 0 or m is None:
        raise RuntimeError(f"{' '.join(cmd)} exited {p.returncode}:\n{p.stdout[-2000:]}\n{p.stderr[-2000:]}")
    return float(m.group(1)), m.group(3), m.group(4)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--work", type=Path, default=None, help="folder for the traces (default: a temporary one)")
    ap.add_argument("--timeout", type=float, default=120.0, help="per run, seconds")
    ap.add_argument("--budget-s", type=float, default=float("inf"),
                    help="start no new repeat after this many seconds (whole repeats only)")
    ap.add_argument("--json", type=Path, default=None, help="also write the figures here")
    ap.add_argument("--keep", action="store_true", help="keep every trace (default: only the last of each mode)")
    ap.add_argument("extra", nargs="*", help="more train_step.py arguments (after --)")
    a = ap.parse_args(argv)
    work = a.work or Path(tempfile.mkdtemp(prefix="bench_record_"))
    work.mkdir(parents=True, exist_ok=True)
    per: dict[str, list[float]] = {m: [] for m in MODES}
    device = ranges = "?"
    t_all = time.perf_counter()
    failed: list[str] = []
    for r in range(a.repeats):
        if r and time.perf_counter() - t_all > a.budget_s:
            print(f"budget of {a.budget_s:.0f} s spent: stopping after {r} repeats", flush=True)
            break
        order = MODES[r % 3:] + MODES[:r % 3]
        for mode in order:
            cmd = command(mode, a.steps, work, r, a.extra)
            try:
                ms, dev, how = run_once(cmd, a.timeout)
            except (RuntimeError, subprocess.TimeoutExpired) as e:  # one failed run: say why, go on
                failed.append(mode)
                print(f"repeat {r} {mode:8s} FAILED: {e}", flush=True)
                continue
            if mode == "plain":
                device, ranges = dev, how
            per[mode].append(ms)
            print(f"repeat {r} {mode:8s} median_step_ms={ms:.3f}", flush=True)
            if not a.keep and r < a.repeats - 1:
                for f in (work / f"record-{r}.jsonl", work / f"kineto-{r}.json"):
                    f.unlink(missing_ok=True)
    nan = float("nan")
    med = {m: statistics.median(v) if v else nan for m, v in per.items()}
    ratio = {m: med[m] / med["plain"] if per["plain"] else nan for m in MODES}
    ok_3 = ratio["record"] <= 1.03
    ok_prof = med["record"] < med["profiler"]
    out = {"device": device, "ranges": ranges, "steps": a.steps, "repeats": a.repeats, "median_step_ms": med,
           "ratio_to_plain": ratio, "runs_ms": per, "record_within_3pct": ok_3, "record_below_profiler": ok_prof,
           "failed_runs": failed, "wall_s": round(time.perf_counter() - t_all, 1)}
    if a.json:
        a.json.write_text(json.dumps(out, indent=1))
    print(f"\nrecord overhead on train_step.py ({device}, ranges={ranges}, {a.steps} steps, {a.repeats} repeats, "
          f"{out['wall_s']} s)")
    print(f"{'mode':10s} {'median step ms':>15s} {'x plain':>8s}  runs (ms)")
    for m in MODES:
        runs = " ".join(f"{x:.2f}" for x in per[m])
        print(f"{m:10s} {med[m]:15.3f} {ratio[m]:8.3f}  {runs}")
    print(f"BENCH record_x={ratio['record']:.3f} profiler_x={ratio['profiler']:.3f} "
          f"record_within_3pct={int(ok_3)} record_below_profiler={int(ok_prof)} failed_runs={len(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
