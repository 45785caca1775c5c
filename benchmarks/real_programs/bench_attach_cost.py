"""What being recorded with collection paused costs a step, from process pairs of ``attach_cost.py``.

The in-process on/off measurement (``train_step.py --toggle-blocks``) gives the cost of *collecting*; it cannot
see what stays while collection is paused (CUPTI's hooks in the driver, the NVTX injection library, the exporter
thread). That part reaches a step only through its CUDA launches and NVTX ranges, and ``attach_cost.py`` times
both per call, in tight loops. This runs it in ``--pairs`` pairs of processes, back to back, the order alternating
(plain first in even pairs, recorded first in odd ones):

* ``plain``:    ``python attach_cost.py --repeats R``  -> ``ATTACH mode=plain``
* ``recorded``: ``python -m gputrace record -- python attach_cost.py --repeats R`` -> ``ATTACH mode=on`` and
                ``ATTACH mode=paused``

Per pair: the paused-minus-plain ns per launch and per NVTX range. The figure of each is the median over pairs
with a 95 % bootstrap interval (resampling pairs). With a step's counts (``--launches-per-step``,
``--ranges-per-step``, ``--step-ms``: from a recorded trace of the step and its ``STEPS`` line), the attached cost
of a step is (d_launch x launches + d_nvtx x ranges) / step time, per pair, with its median and interval: the
figure to put beside the in-process collection cost (their sum is what ``record`` costs the step).

The machine's state differs between processes (on the H200 some ran NVTX at 255-280 ns a range, others at
470-570 ns), so each pair also reports plain's and paused's NVTX time; pairs whose two processes disagree on it by
more than ``--state-tolerance`` (default 25 %) ran in different states and are left out of the figures (counted).

Prints one line per pair and, last:

    ATTACHBENCH pairs=8 kept=7 d_launch_ns=1805.2 d_launch_ci=950.1-2488.0 d_nvtx_ns=19.6 d_nvtx_ci=17.0-21.0 \\
        step_frac=0.0118 step_frac_ci=0.0062-0.0163

``--json PATH`` writes the pairs and figures.

    python benchmarks/real_programs/bench_attach_cost.py --pairs 8 --launches-per-step 47 --ranges-per-step 7 \\
        --step-ms 7.2
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import _toggle

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
ATTACH_RE = re.compile(r"^ATTACH mode=(?P<mode>[\w-]+) launch_ns=(?P<launch>[0-9.]+) nvtx_ns=(?P<nvtx>[0-9.]+)",
                       re.MULTILINE)


def commands(repeats: int, trace: Path, pin: int | None = None) -> dict[str, list[str]]:
    prog = [sys.executable, str(HERE / "attach_cost.py"), "--repeats", str(repeats)]
    if pin is not None:
        prog += ["--pin", str(pin)]
    return {"plain": prog,
            "recorded": [sys.executable, "-m", "gputrace", "record", "--trace", str(trace), "--", *prog]}


def parse(text: str) -> dict[str, dict[str, float]]:
    """``{mode: {"launch": ns, "nvtx": ns}}`` of the ATTACH lines in ``text`` (the last line of each mode)."""
    return {m["mode"]: {"launch": float(m["launch"]), "nvtx": float(m["nvtx"])} for m in ATTACH_RE.finditer(text)}


def run_once(cmd: list[str], timeout: float) -> dict[str, dict[str, float]]:
    """The ATTACH figures of one process; raises RuntimeError with its output when it fails or prints none."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH", "")) if p)
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env, cwd=REPO)
    got = parse(p.stdout)
    if p.returncode != 0 or not got:
        raise RuntimeError(f"{' '.join(cmd)} exited {p.returncode}:\n{p.stdout[-2000:]}\n{p.stderr[-2000:]}")
    return got


def pair_figures(plain: dict, recorded: dict, tolerance: float) -> dict:
    """One pair's deltas (paused - plain, ns per call) and whether its two processes ran in one machine state
    (their NVTX times within ``tolerance`` of each other)."""
    a, b = plain["plain"], recorded["paused"]
    same = abs(b["nvtx"] - a["nvtx"]) <= tolerance * min(a["nvtx"], b["nvtx"])
    out = {"plain": a, "paused": b, "d_launch_ns": b["launch"] - a["launch"], "d_nvtx_ns": b["nvtx"] - a["nvtx"],
           "same_state": bool(same)}
    if "on" in recorded:
        out["on"] = recorded["on"]
    return out


def median_ci(xs: list[float]) -> tuple[float, float, float]:
    """(median, low, high): the median and its percentile bootstrap interval (``_toggle.bootstrap_ci``); nan
    where too few."""
    if not xs:
        return math.nan, math.nan, math.nan
    lo, hi = _toggle.bootstrap_ci(xs)
    return statistics.median(xs), lo, hi


def summarize(pairs: list[dict], launches: float | None = None, ranges: float | None = None,
              step_ms: float | None = None) -> dict:
    """The figures of the pairs that ran in one machine state: median deltas with intervals, and the attached
    fraction of a step when its counts are given; the same over every pair under ``*_all`` keys (no pair left
    out: the state filter itself could be biased when being recorded makes the slow state likelier)."""
    kept = [p for p in pairs if p["same_state"]]
    out: dict = {"pairs": len(pairs), "kept": len(kept)}
    for suffix, group in (("", kept), ("_all", pairs)):
        for key in ("d_launch_ns", "d_nvtx_ns"):
            med, lo, hi = median_ci([p[key] for p in group])
            out[key.replace("_ns", suffix + "_ns")] = med
            out[key.replace("_ns", suffix + "_ci")] = [lo, hi]
        if launches is not None and step_ms:
            fr = [(p["d_launch_ns"] * launches + p["d_nvtx_ns"] * (ranges or 0)) / (step_ms * 1e6) for p in group]
            med, lo, hi = median_ci(fr)
            out.update({"step_frac" + suffix: med, "step_frac" + suffix + "_ci": [lo, hi]})
    if launches is not None and step_ms:
        out.update({"launches_per_step": launches, "ranges_per_step": ranges or 0, "step_ms": step_ms})
    return out


def _f(x: float, digits: int = 1) -> str:
    return "nan" if x != x else f"{x:.{digits}f}"


def line(s: dict) -> str:
    out = (f"ATTACHBENCH pairs={s['pairs']} kept={s['kept']} d_launch_ns={_f(s['d_launch_ns'])} "
           f"d_launch_ci={_f(s['d_launch_ci'][0])}-{_f(s['d_launch_ci'][1])} d_nvtx_ns={_f(s['d_nvtx_ns'])} "
           f"d_nvtx_ci={_f(s['d_nvtx_ci'][0])}-{_f(s['d_nvtx_ci'][1])}")
    if "step_frac" in s:
        out += (f" step_frac={_f(s['step_frac'], 4)} step_frac_ci={_f(s['step_frac_ci'][0], 4)}-"
                f"{_f(s['step_frac_ci'][1], 4)}")
    if "d_launch_all_ns" in s:
        out += (f" | all pairs: d_launch_ns={_f(s['d_launch_all_ns'])} d_launch_ci={_f(s['d_launch_all_ci'][0])}-"
                f"{_f(s['d_launch_all_ci'][1])}")
    if "step_frac_all" in s:
        out += (f" step_frac={_f(s['step_frac_all'], 4)} step_frac_ci={_f(s['step_frac_all_ci'][0], 4)}-"
                f"{_f(s['step_frac_all_ci'][1], 4)}")
    return out


def run_pairs(n: int, repeats: int, work: Path, tolerance: float, timeout: float,
              runner: Callable[[list[str], float], dict] = run_once,
              pin: int | None = None) -> tuple[list[dict], list[str]]:
    """``n`` pairs, order alternating; a pair with a failed process is reported and left out."""
    pairs: list[dict] = []
    failed: list[str] = []
    for i in range(n):
        cmds = commands(repeats, work / f"attach-{i}.jsonl", pin)
        order = ("plain", "recorded") if i % 2 == 0 else ("recorded", "plain")
        got: dict = {}
        for mode in order:
            try:
                got[mode] = runner(cmds[mode], timeout)
            except (RuntimeError, subprocess.TimeoutExpired) as e:
                failed.append(f"pair {i} {mode}")
                print(f"pair {i} {mode} FAILED: {e}", flush=True)
        (work / f"attach-{i}.jsonl").unlink(missing_ok=True)
        if "plain" not in got.get("plain", {}) or "paused" not in got.get("recorded", {}):
            continue
        p = pair_figures(got["plain"], got["recorded"], tolerance)
        p["pair"] = i
        pairs.append(p)
        print(f"pair {i} plain launch={_f(p['plain']['launch'])} nvtx={_f(p['plain']['nvtx'])} | paused "
              f"launch={_f(p['paused']['launch'])} nvtx={_f(p['paused']['nvtx'])} | d_launch={_f(p['d_launch_ns'])} "
              f"d_nvtx={_f(p['d_nvtx_ns'])} {'same state' if p['same_state'] else 'DIFFERENT STATE (left out)'}",
              flush=True)
    return pairs, failed


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pairs", type=int, default=8)
    ap.add_argument("--repeats", type=int, default=5, help="attach_cost.py --repeats (default 5)")
    ap.add_argument("--launches-per-step", type=float, default=None)
    ap.add_argument("--ranges-per-step", type=float, default=None)
    ap.add_argument("--step-ms", type=float, default=None)
    ap.add_argument("--state-tolerance", type=float, default=0.25)
    ap.add_argument("--pin", type=int, default=None, metavar="CPU",
                    help="attach_cost.py --pin CPU in every process (its timing thread on that CPU)")
    ap.add_argument("--timeout", type=float, default=120.0, help="per process, seconds")
    ap.add_argument("--work", type=Path, default=None)
    ap.add_argument("--json", type=Path, default=None)
    a = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="attach-") as tmp:
        work = a.work or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        pairs, failed = run_pairs(a.pairs, a.repeats, work, a.state_tolerance, a.timeout, pin=a.pin)
    s = summarize(pairs, a.launches_per_step, a.ranges_per_step, a.step_ms)
    if a.json:
        a.json.write_text(json.dumps({"pairs": pairs, "summary": s, "failed": failed}, indent=1))
    print(line(s), flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
