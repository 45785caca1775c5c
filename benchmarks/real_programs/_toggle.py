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

    TOGGLE on_median_ms=9.812 off_median_ms=9.640 ratio=1.018 pairs=12 ci95=1.006-1.031 k=10 steps=240
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
    r"pairs=(?P<pairs>\d+) ci95=(?P<lo>[0-9.]+|nan)-(?P<hi>[0-9.]+|nan)", re.MULTILINE)


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
        self.control.resume()
        return summarize(self.blocks)


def bootstrap_ci(xs: list[float], n: int = 4000, level: float = 0.95, seed: int = 24) -> tuple[float, float]:
    """Percentile bootstrap interval of the median of ``xs`` (resampling its items); (nan, nan) under 2."""
    if len(xs) < 2:
        return math.nan, math.nan
    rng = random.Random(seed)
    meds = sorted(statistics.median(rng.choices(xs, k=len(xs))) for _ in range(n))
    return meds[int((1 - level) / 2 * n)], meds[min(n - 1, int((1 + level) / 2 * n))]


def summarize(blocks: list[tuple[bool, list[float]]]) -> dict:
    """The figures of timed blocks, in run order, each (collection on?, step times in ms); consecutive blocks
    2i and 2i+1 form pair i (one on, one off, as ``plan`` gives them; a pair that is not one of each, or has
    an empty block, is left out). Returns ``on_median_ms`` / ``off_median_ms`` (medians over all steps of
    each state), ``ratios`` (per pair: on block median / off block median), ``ratio`` (their median),
    ``ci95`` and ``pairs``."""
    ratios: list[float] = []
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
        on_steps += on
        off_steps += off
    nan = math.nan
    lo, hi = bootstrap_ci(ratios)
    return {"on_median_ms": statistics.median(on_steps) if on_steps else nan,
            "off_median_ms": statistics.median(off_steps) if off_steps else nan,
            "ratios": ratios, "ratio": statistics.median(ratios) if ratios else nan, "ci95": [lo, hi],
            "pairs": len(ratios)}


def _f(x: float, digits: int) -> str:
    return "nan" if x != x else f"{x:.{digits}f}"


def line(s: dict, k: int | None = None) -> str:
    """The one machine-readable line of ``summarize``'s figures (``LINE_RE`` parses it back)."""
    out = (f"TOGGLE on_median_ms={_f(s['on_median_ms'], 3)} off_median_ms={_f(s['off_median_ms'], 3)} "
           f"ratio={_f(s['ratio'], 4)} pairs={s['pairs']} ci95={_f(s['ci95'][0], 4)}-{_f(s['ci95'][1], 4)}")
    if k is not None:
        out += f" k={k} steps={2 * k * s['pairs']}"
    return out


def parse(text: str) -> dict | None:
    """The figures of the last TOGGLE line in ``text``, or None (none, or ``UNAVAILABLE``)."""
    found = list(LINE_RE.finditer(text))
    if not found:
        return None
    m = found[-1]
    return {"on_median_ms": float(m["on"]), "off_median_ms": float(m["off"]), "ratio": float(m["ratio"]),
            "pairs": int(m["pairs"]), "ci95": [float(m["lo"]), float(m["hi"])]}
