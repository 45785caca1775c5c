"""Trace-file integrity under SIGKILL: a recorded job of N processes, one killed at a random point, T times.

Usage::

    .venv/bin/python benchmarks/bench_trace_kills.py                  # 32 processes x 50 kills (issue 33's target)
    .venv/bin/python benchmarks/bench_trace_kills.py -n 8 --trials 5  # smaller
    .venv/bin/python benchmarks/bench_trace_kills.py --tree /tmp/old  # the same against another checkout

Each trial runs ``gputrace record --no-cuda-activity -- python JOB`` where JOB forks N-1 multiprocessing workers
(``fork``); every process of the job (the main one included) records ``STEPS`` phases named ``step`` in bursts
(``--burst`` phases, ``--pause`` s apart: large batches, so the exporter's writes are long and a kill lands
inside one now and then) and ends normally.
The bench picks one process of the job at random (any of the N, the main one included) and a random moment
of its own work (once its CPU time reaches a uniform random fraction of what a process of the job uses in a
calibration run without kills: load on the machine does not move the point; a process that has finished
already is replaced by another still running), and SIGKILLs it. Then it reads the trace with the strict reader
(``read_any(lenient=False)``) and counts each process's ``step`` spans: every process that was not killed must
have all of its ``STEPS``.

Prints one row per trial and a summary: trials whose file the strict reader refused, trials where a
process that was not killed lost spans (and how many), spans the killed processes kept. ``--tree`` runs
another checkout's gputrace (``PYTHONPATH``) to compare. Exit status 1 when any trial failed.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: The job: N processes (main + N-1 fork workers), each recording STEPS phases in bursts, writing its pid
#: list to PIDS so the bench can pick one to kill.
JOB = r'''
import multiprocessing as mp, os, sys, time
import gputrace

N, STEPS, BURST, PIDS, PAUSE = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], float(sys.argv[5])

def work():
    done = 0
    while done < STEPS:
        for _ in range(min(BURST, STEPS - done)):
            with gputrace.phase("step", bytes=done):
                pass
            done += 1
        time.sleep(PAUSE)

if __name__ == "__main__":
    ctx = mp.get_context("fork")
    procs = [ctx.Process(target=work) for _ in range(N - 1)]
    for p in procs:
        p.start()
    with open(PIDS + ".tmp", "w") as f:
        f.write(" ".join(str(x) for x in [os.getpid()] + [p.pid for p in procs]))
    os.replace(PIDS + ".tmp", PIDS)
    work()
    for p in procs:
        p.join()
'''


def _env(tree: str | None) -> dict:
    env = dict(os.environ)
    src = tree or str(ROOT)
    env["PYTHONPATH"] = src + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def _cpu_s(pid: int) -> float | None:
    """CPU time (user + system) of a running process, from /proc; None once it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
    except OSError:
        return None
    if fields[0] == b"Z":
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def trial(n: int, steps: int, burst: int, seed: int, tree: str | None = None, workdir: str | None = None,
          pause: float = 0.1, window_s: float | None = None, cpu_s: float | None = None) -> dict:
    """One recorded job. With ``cpu_s`` (a process's CPU time over its whole run, from a calibration trial),
    one process is SIGKILLed once its CPU time reaches a uniform random fraction of it (a random point of its
    own work, whatever the machine's load); with ``window_s``, at a random moment of the first ``window_s``
    seconds; with neither, none is killed and the result's ``cpu_s`` is the median process's CPU time.
    Returns what the trace holds."""
    rng = random.Random(seed)
    tmp = tempfile.mkdtemp(prefix="gputrace-kills-", dir=workdir)
    job = Path(tmp, "job.py")
    job.write_text(JOB)
    pids_file = Path(tmp, "pids")
    trace = Path(tmp, "trace.jsonl")
    cmd = [sys.executable, "-m", "gputrace", "record", "--no-cuda-activity", "--trace", str(trace), "--",
           sys.executable, str(job), str(n), str(steps), str(burst), str(pids_file), str(pause)]
    t0 = time.perf_counter()
    rec = subprocess.Popen(cmd, env=_env(tree), cwd=tmp, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not pids_file.exists() and time.monotonic() < deadline and rec.poll() is None:
        time.sleep(0.005)
    pids = [int(x) for x in pids_file.read_text().split()] if pids_file.exists() else []
    started = time.perf_counter()
    killing = cpu_s is not None or window_s is not None
    victim = rng.choice(pids) if pids and killing else None
    used: dict[int, float] = {}
    if victim is not None:
        if cpu_s is not None:
            target = rng.uniform(0.0, cpu_s)
            while (c := _cpu_s(victim)) is not None and c < target:
                time.sleep(0.002)
        else:
            time.sleep(rng.uniform(0.0, window_s or 0.0))
        # (one that has finished already: another of the job still running instead, if any)
        for pid in [victim] + rng.sample(pids, len(pids)):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                continue
            victim = pid
            break
        else:
            victim = None
    elif pids:  # calibration: how much CPU a process of the job uses
        while rec.poll() is None:
            for p in pids:
                c = _cpu_s(p)
                if c is not None:
                    used[p] = c
            time.sleep(0.01)
    out, err = rec.communicate(timeout=300)
    wall = time.perf_counter() - t0
    out = {"seed": seed, "victim": victim, "main_killed": bool(pids) and victim == pids[0], "wall_s": wall,
           "job_s": time.perf_counter() - started, "cpu_s": sorted(used.values())[len(used) // 2] if used else None,
           "record_rc": rec.returncode, "closing": err.strip().splitlines()[-1:] or [""],
           **_check(trace, pids, victim, steps, tree)}
    if out["strict_ok"] and not out["survivors_losing"]:
        shutil.rmtree(tmp, ignore_errors=True)  # (a failing trial's files stay, for a look)
    else:
        out["dir"] = tmp
    return out


def _check(trace: Path, pids: list[int], victim: int | None, steps: int, tree: str | None) -> dict:
    """Strict read of ``trace`` in a fresh interpreter of ``tree``'s gputrace; per-process ``step`` counts."""
    code = r'''
import json, sys
import numpy as np
from gputrace.timeline.load import read_any
try:
    tl = read_any(sys.argv[1], lenient=False)
except Exception as e:
    print(json.dumps({"strict_error": f"{type(e).__name__}: {e}"[:300]}))
    raise SystemExit(0)
counts = {}
if "step" in tl.phases:
    k = tl.phases.index("step")
    rows = np.flatnonzero(tl.cols["phase"] == k)
    for r in tl.cols["resource"][rows].tolist():
        pid = tl.resources[r].get("process.pid", -1)
        counts[pid] = counts.get(pid, 0) + 1
print(json.dumps({"strict_error": None, "counts": {str(p): c for p, c in counts.items()}}))
'''
    r = subprocess.run([sys.executable, "-c", code, str(trace)], env=_env(tree), capture_output=True, text=True,
                       timeout=120)
    try:
        got = json.loads(r.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        got = {"strict_error": f"checker failed: {r.stderr.strip()[-300:]}"}
    counts = {int(p): c for p, c in (got.get("counts") or {}).items()}
    survivors = [p for p in pids if p != victim]
    lost = {p: steps - counts.get(p, 0) for p in survivors if counts.get(p, 0) != steps}
    return {"strict_ok": got.get("strict_error") is None, "strict_error": got.get("strict_error"),
            "survivors": len(survivors), "survivors_losing": len(lost), "spans_lost_by_survivors": sum(lost.values()),
            "victim_kept": counts.get(victim, 0) if victim is not None else None}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-n", type=int, default=32, help="processes in the job (default 32)")
    ap.add_argument("--trials", type=int, default=50, help="recorded jobs, one kill each (default 50)")
    ap.add_argument("--steps", type=int, default=10000, help="phases per process (default 10000)")
    ap.add_argument("--burst", type=int, default=1000, help="phases between two pauses (default 1000)")
    ap.add_argument("--pause", type=float, default=0.1, help="seconds between two bursts (default 0.1)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--tree", help="run this checkout's gputrace instead (PYTHONPATH)")
    ap.add_argument("--json", help="also write every trial's figures to this file")
    args = ap.parse_args(argv)
    print(f"trace integrity under SIGKILL: {args.n} processes x {args.trials} trials, {args.steps} phases each "
          f"(python {sys.version.split()[0]}, {os.cpu_count()} CPUs, gputrace from {args.tree or ROOT})")
    print(f"{'trial':>5} {'killed':>8} {'strict read':>12} {'survivors losing':>17} {'spans lost':>11} "
          f"{'victim kept':>12} {'wall s':>7}")
    cal = trial(args.n, args.steps, args.burst, args.seed, args.tree, pause=args.pause)
    cpu = cal["cpu_s"] or 1.0
    print(f"    0 calibration (no kill): strict read {'ok' if cal['strict_ok'] else 'REFUSED'}, "
          f"{cal['survivors_losing']} processes short; a process of the job uses {cpu:.2f} s of CPU: each kill "
          f"lands at a uniform random point of that")
    rows = []
    for i in range(args.trials):
        r = trial(args.n, args.steps, args.burst, args.seed + 1 + i, args.tree, pause=args.pause, cpu_s=cpu)
        rows.append(r)
        killed = "main" if r["main_killed"] else ("worker" if r["victim"] else "none")
        print(f"{i + 1:>5} {killed:>8} {'ok' if r['strict_ok'] else 'REFUSED':>12} "
              f"{r['survivors_losing']:>7} of {r['survivors']:<7} {r['spans_lost_by_survivors']:>11} "
              f"{r['victim_kept'] if r['victim_kept'] is not None else '-':>12} {r['wall_s']:>7.1f}")
        if not r["strict_ok"]:
            print(f"      strict reader: {r['strict_error']}")
    refused = sum(not r["strict_ok"] for r in rows)
    losing = sum(1 for r in rows if r["survivors_losing"])
    lost = sum(r["spans_lost_by_survivors"] for r in rows)
    print(f"summary: {len(rows)} trials, {sum(1 for r in rows if r['victim'])} kills; strict reader refused "
          f"{refused}; trials where a process that was not killed lost spans: {losing} ({lost} spans)")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 1 if refused or losing else 0


if __name__ == "__main__":
    raise SystemExit(main())
