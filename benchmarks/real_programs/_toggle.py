"""In-process on/off blocks for measuring what collection costs (train_step.py ``--toggle-blocks K``).

Alternating whole processes cannot resolve a 3 % cost when two plain runs of one program differ by 26-33 %
(issue 24, H200). Inside one process that noise is gone: after warm-up the steps run in blocks of ``K``, pairs
of blocks with collection on and off, the order of the two within each pair drawn from a seeded generator
(so slow drift, and the position within a pair, hit both alike). Per pair the ratio is (median step of the on
block) / (median step of the off block); the figure is the median over pairs, with a percentile bootstrap
interval that resamples pairs.

Stdlib only, no torch (gputrace only imported by ``find_control``): importable and tested anywhere. ``plan``
says what each block does, ``Blocks`` switches collection at block starts and keeps each step's time in its
block, ``summarize`` turns the timed blocks into the figures, ``line`` prints them as one machine-readable line:

    TOGGLE on_median_ms=9.812 off_median_ms=9.640 ratio=1.018 pairs=12 ci95=1.006-1.031 k=10 steps=240 \
        mean_ratio=1.022 mean_ci95=1.004-1.041 pair_ms=98.1/96.4,...

``ratio`` is robust (medians: a rare slow step does not move it); ``mean_ratio`` is what the program pays in
time (all 'on' step time over all 'off' step time; stalls count), with a bootstrap interval over pairs.
``pair_ms`` gives each pair's summed on/off step times, so runs can be pooled (``pooled``).

The same blocks measure ``torch.profiler`` (train_step.py ``--toggle-profiler``): ``ProfilerToggle`` has the
``pause``/``resume`` of ``gputrace.record_control``, but 'on' opens a profiler session (from a factory callable;
no torch here) and 'off' closes it, so ``Blocks`` drives both tools alike. ``pooled_ratio_ci`` compares two
tools' pooled runs (the ratio of their time-weighted on/off ratios, with a two-level bootstrap interval).
"""

from __future__ import annotations

import math
import random
import re
import statistics

#: The line train_step.py prints when collection cannot be toggled (not under ``gputrace record`` with CUPTI).
UNAVAILABLE = "TOGGLE unavailable (not under gputrace record)"
LINE_RE = re.compile(
    r"^TOGGLE on_median_ms=(?P<on>[0-9.]+|nan) off_median_ms=(?P<off>[0-9.]+|nan) ratio=(?P<ratio>[0-9.]+|nan) "
    r"pairs=(?P<pairs>\d+) ci95=(?P<lo>[0-9.]+|nan)-(?P<hi>[0-9.]+|nan)(?P<rest>[^\n]*)", re.MULTILINE)
MEAN_RE = re.compile(r" mean_ratio=(?P<m>[0-9.]+|nan) mean_ci95=(?P<lo>[0-9.]+|nan)-(?P<hi>[0-9.]+|nan)"
                     r"(?: pair_ms=(?P<pairs>[0-9.,/]*))?")


def plan(pairs: int, seed: int = 24) -> list[bool]:
    """Collection state of each block (True: on), two blocks per pair, one of each, the order within each
    pair drawn from ``random.Random(seed)``. ``2 * pairs`` entries."""
    rng = random.Random(seed)
    out: list[bool] = []
    for _ in range(max(0, pairs)):
        first = rng.random() < 0.5
        out += [first, not first]
    return out


def pairs_for(steps: int, k: int) -> int:
    """Whole pairs of blocks of ``k`` steps that fit in ``steps`` timed steps (0 when ``k`` < 1)."""
    return steps // (2 * k) if k >= 1 else 0


def find_control():
    """``gputrace.record_control`` when this process collects CUDA activity now (under ``gputrace record`` with
    CUPTI), else None (gputrace not importable, not recorded, CUPTI off)."""
    try:
        from gputrace.trace import record_control
    except ImportError:
        return None
    return record_control if record_control.is_collecting() else None


class Blocks:
    """The on/off blocks of one run. ``control`` has ``pause()``/``resume()`` (``gputrace.record_control``);
    ``steps`` timed steps, blocks of ``k``. Call ``before(j)`` before timed step ``j`` (0-based) and
    ``after(j, ms)`` after it, both outside the step's timer; ``finish()`` once at the end (collection is left
    on) returns ``summarize``'s figures. Steps past the last whole pair run with collection on, in no block."""

    def __init__(self, control, steps: int, k: int, seed: int = 24) -> None:
        if k < 1:
            raise ValueError(f"blocks of k >= 1 steps, got {k}")
        self.control = control
        self.k = k
        self.states = plan(pairs_for(steps, k), seed)
        self.blocks: list[tuple[bool, list[float]]] = []

    def before(self, j: int) -> None:
        if j % self.k:
            return
        b = j // self.k
        if b < len(self.states):
            on = self.states[b]
            if on:
                self.control.resume()
            else:  # drained here, outside any step: the on block's export work does not spill into this block
                self.control.pause(drain=True)
            self.blocks.append((on, []))
        elif b == len(self.states):
            self.control.resume()

    def after(self, j: int, ms: float) -> None:
        b = j // self.k
        if b < len(self.states):
            self.blocks[b][1].append(ms)

    def finish(self) -> dict:
        """Collection back on (``resume``), or, for a control with ``close()`` (``ProfilerToggle``), its last
        session closed; then ``summarize``'s figures of the blocks."""
        close = getattr(self.control, "close", None)
        if callable(close):
            close()
        else:
            self.control.resume()
        return summarize(self.blocks)


class ProfilerToggle:
    """A ``Blocks`` control that turns a profiler on and off, one session per 'on' block: ``resume()`` opens a
    fresh session (``make()``, then ``__enter__``), closing the open one first (two 'on' blocks in a row, across
    pairs, get a session each); ``pause(drain=...)`` closes the open one, if any (``sync()`` first, so the device
    work of the 'on' block is in it; then ``__exit__(None, None, None)``). ``drain`` is accepted and ignored: a
    closed session keeps its events in memory, nothing is exported (export cost is per session, not per step).
    ``close()`` closes the open session, if any (``Blocks.finish`` calls it); it may be called again.
    ``sessions`` counts the sessions opened; ``switch_ms`` sums the time spent opening and closing them (outside
    the step timer, not in the figures). Main thread; the session's own exceptions propagate, and a session whose
    ``__exit__`` raised is not closed again."""

    def __init__(self, make, sync=None, clock=None) -> None:
        import time

        self.make = make
        self.sync = sync
        self.clock = clock or time.perf_counter
        self.session = None
        self.sessions = 0
        self.switch_ms = 0.0

    @property
    def on(self) -> bool:
        return self.session is not None

    def resume(self) -> bool:
        self.pause()
        t0 = self.clock()
        prof = self.make()
        prof.__enter__()
        self.session = prof
        self.sessions += 1
        self.switch_ms += (self.clock() - t0) * 1e3
        return True

    def pause(self, drain: bool = False) -> bool:
        prof, self.session = self.session, None
        if prof is not None:
            t0 = self.clock()
            try:
                if self.sync is not None:
                    self.sync()
            finally:
                prof.__exit__(None, None, None)
                self.switch_ms += (self.clock() - t0) * 1e3
        return True

    def close(self) -> None:
        self.pause()


def interval(values: list[float], level: float = 0.95) -> tuple[float, float]:
    """The percentile interval of bootstrap statistics ``values`` (sorted here; NaNs left out); (nan, nan) when
    none is a number."""
    xs = sorted(x for x in values if x == x)
    if not xs:
        return math.nan, math.nan
    m = len(xs)
    return xs[int((1 - level) / 2 * m)], xs[min(m - 1, int((1 + level) / 2 * m))]


def time_ratio(pairs) -> float:
    """All on time / all off time of (on, off) pairs; nan when there is no off time."""
    on = off = 0.0
    for a, b in pairs:
        on += a
        off += b
    return on / off if off > 0 else math.nan


def bootstrap_ci(xs: list[float], n: int = 4000, level: float = 0.95, seed: int = 24) -> tuple[float, float]:
    """Percentile bootstrap interval of the median of ``xs`` (resampling its items); (nan, nan) under 2."""
    if len(xs) < 2:
        return math.nan, math.nan
    rng = random.Random(seed)
    return interval([statistics.median(rng.choices(xs, k=len(xs))) for _ in range(n)], level)


def sum_ratio_ci(pair_ms: list[tuple[float, float]], n: int = 4000, level: float = 0.95,
                 seed: int = 24) -> tuple[float, float]:
    """Percentile bootstrap interval of sum(on) / sum(off) over pairs (resampling pairs); (nan, nan) under 2."""
    if len(pair_ms) < 2:
        return math.nan, math.nan
    rng = random.Random(seed)
    return interval([time_ratio(rng.choices(pair_ms, k=len(pair_ms))) for _ in range(n)], level)


def pooled(runs: list[list[tuple[float, float]]], n: int = 4000, level: float = 0.95,
           seed: int = 24) -> dict:
    """Several runs' ``pair_ms`` pooled: ``ratio`` (median of all pairs' on/off ratios) and ``mean_ratio``
    (all on time / all off time), each with a two-level bootstrap interval (resample runs, then pairs within
    each drawn run: pairs of one process are not independent of each other). Runs with no pairs are left out;
    nan figures when no run has pairs, nan intervals when fewer than two runs do."""
    runs = [r for r in runs if r]
    nan = math.nan
    if not runs:
        return {"ratio": nan, "ci95": [nan, nan], "mean_ratio": nan, "mean_ci95": [nan, nan], "pairs": 0}
    flat = [p for r in runs for p in r]
    ratio = statistics.median(a / b for a, b in flat if b > 0)
    mean_ratio = time_ratio(flat)
    if len(runs) < 2:
        return {"ratio": ratio, "ci95": [nan, nan], "mean_ratio": mean_ratio, "mean_ci95": [nan, nan],
                "pairs": len(flat)}
    rng = random.Random(seed)
    meds, means = [], []
    for _ in range(n):
        pick = [p for r in rng.choices(runs, k=len(runs)) for p in rng.choices(r, k=len(r))]
        meds.append(statistics.median(a / b for a, b in pick if b > 0))
        means.append(time_ratio(pick))
    return {"ratio": ratio, "ci95": list(interval(meds, level)), "mean_ratio": mean_ratio,
            "mean_ci95": list(interval(means, level)), "pairs": len(flat)}


def pooled_ratio_ci(a_runs: list[list[tuple[float, float]]], b_runs: list[list[tuple[float, float]]],
                    n: int = 4000, level: float = 0.95, seed: int = 24) -> dict:
    """Two tools' runs (each run a ``pair_ms`` list) compared: ``a`` and ``b`` are each tool's pooled
    ``mean_ratio`` (all on time / all off time over all its runs' pairs), ``ratio`` is ``a / b`` (below 1: tool
    a costs less than tool b), ``ci95`` its percentile bootstrap interval: per resample, each tool's runs are
    drawn with replacement, then pairs within each drawn run (as ``pooled``), independently for the two tools.
    Runs with no pairs are left out; nan figures when a tool has no pairs, a nan interval when either tool has
    fewer than two runs."""
    a_runs = [r for r in a_runs if r]
    b_runs = [r for r in b_runs if r]
    nan = math.nan

    def mean(runs):
        return time_ratio(p for r in runs for p in r)

    a, b = (mean(a_runs), mean(b_runs)) if a_runs and b_runs else (nan, nan)
    ratio = a / b if b == b and b > 0 else nan
    out = {"a": a, "b": b, "ratio": ratio, "ci95": [nan, nan], "runs": [len(a_runs), len(b_runs)]}
    if len(a_runs) < 2 or len(b_runs) < 2:
        return out
    rng = random.Random(seed)
    xs = []
    for _ in range(n):
        ra = [rng.choices(r, k=len(r)) for r in rng.choices(a_runs, k=len(a_runs))]
        rb = [rng.choices(r, k=len(r)) for r in rng.choices(b_runs, k=len(b_runs))]
        ma, mb = mean(ra), mean(rb)
        xs.append(ma / mb if mb == mb and mb > 0 else nan)
    out["ci95"] = list(interval(xs, level))
    return out


def summarize(blocks: list[tuple[bool, list[float]]]) -> dict:
    """The figures of timed blocks, in run order, each (collection on?, step times in ms); consecutive blocks
    2i and 2i+1 form pair i (one on, one off, as ``plan`` gives them; a pair that is not one of each, or has
    an empty block, is left out). Returns ``on_median_ms`` / ``off_median_ms`` (medians over all steps of
    each state), ``ratios`` (per pair: on block median / off block median), ``ratio`` (their median),
    ``ci95`` and ``pairs``; ``pair_ms`` (per pair: summed on step ms, summed off step ms), ``mean_ratio`` (all on
    time / all off time) and ``mean_ci95`` (``sum_ratio_ci``)."""
    ratios: list[float] = []
    pair_ms: list[tuple[float, float]] = []
    on_steps: list[float] = []
    off_steps: list[float] = []
    for i in range(0, len(blocks) - 1, 2):
        (s0, t0), (s1, t1) = blocks[i], blocks[i + 1]
        if s0 == s1 or not t0 or not t1:
            continue
        on, off = (t0, t1) if s0 else (t1, t0)
        m_off = statistics.median(off)
        if m_off <= 0:
            continue
        ratios.append(statistics.median(on) / m_off)
        pair_ms.append((sum(on), sum(off)))
        on_steps += on
        off_steps += off
    nan = math.nan
    lo, hi = bootstrap_ci(ratios)
    return {"on_median_ms": statistics.median(on_steps) if on_steps else nan,
            "off_median_ms": statistics.median(off_steps) if off_steps else nan,
            "ratios": ratios, "ratio": statistics.median(ratios) if ratios else nan, "ci95": [lo, hi],
            "pairs": len(ratios), "pair_ms": pair_ms,
            "mean_ratio": time_ratio(pair_ms),
            "mean_ci95": list(sum_ratio_ci(pair_ms))}


def _f(x: float, digits: int) -> str:
    return "nan" if x != x else f"{x:.{digits}f}"


def line(s: dict, k: int | None = None) -> str:
    """The one machine-readable line of ``summarize``'s figures (``LINE_RE`` parses it back)."""
    out = (f"TOGGLE on_median_ms={_f(s['on_median_ms'], 3)} off_median_ms={_f(s['off_median_ms'], 3)} "
           f"ratio={_f(s['ratio'], 4)} pairs={s['pairs']} ci95={_f(s['ci95'][0], 4)}-{_f(s['ci95'][1], 4)}")
    if k is not None:
        out += f" k={k} steps={2 * k * s['pairs']}"
    if "mean_ratio" in s:
        mlo, mhi = s["mean_ci95"]
        out += (f" mean_ratio={_f(s['mean_ratio'], 4)} mean_ci95={_f(mlo, 4)}-{_f(mhi, 4)} pair_ms="
                + ",".join(f"{a:.3f}/{b:.3f}" for a, b in s.get("pair_ms", [])))
    return out


def parse(text: str) -> dict | None:
    """The figures of the last TOGGLE line in ``text``, or None (none, or ``UNAVAILABLE``)."""
    found = list(LINE_RE.finditer(text))
    if not found:
        return None
    m = found[-1]
    out = {"on_median_ms": float(m["on"]), "off_median_ms": float(m["off"]), "ratio": float(m["ratio"]),
           "pairs": int(m["pairs"]), "ci95": [float(m["lo"]), float(m["hi"])]}
    x = MEAN_RE.search(m["rest"])
    if x is not None:
        out["mean_ratio"] = float(x["m"])
        out["mean_ci95"] = [float(x["lo"]), float(x["hi"])]
        out["pair_ms"] = [(float(a), float(b)) for a, b in
                          (p.split("/") for p in (x["pairs"] or "").split(",") if "/" in p)]
    return out
