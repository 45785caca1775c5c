"""Experimental designs over optimisation switches, and the run schedule.

A `Variant` is a named set of switches turned on. Designs:

* `opt_sets`: variants given explicitly (``"none"``, ``"all"``, ``"a1,b1"``); the first is the
  baseline.
* `one_at_a_time`: baseline (none), each switch alone, all, and all-but-one (leave-one-out).
* `factorial`: all 2^k combinations, or the half fraction 2^(k-1) with the last switch
  aliased to the product of the others (defining relation I = AB...K, resolution k: for
  k >= 5 main effects and two-way interactions are aliased only with interactions of order
  >= 3, so both stay estimable).

`schedule` interleaves runs in rounds (every variant once per round: A B A B ...), so slow
drift of the machine (thermals, caches, other tenants) hits every variant alike; with
``shuffle`` each round's order is a seeded permutation. Pure; any thread.
"""

from __future__ import annotations

import itertools
import random
from dataclasses import dataclass


@dataclass(frozen=True)
class Variant:
    """A named switch set. ``name`` is also the folder name of its traces."""

    name: str
    switches: frozenset[str]

    def coded(self, universe: tuple[str, ...]) -> tuple[int, ...]:
        """0/1 per switch of ``universe`` (in that order)."""
        return tuple(int(s in self.switches) for s in universe)


def parse_switches(text: str) -> tuple[str, ...]:
    """'A1,A2,B1' -> ('a1', 'a2', 'b1'). Raises ValueError on empty or repeated names."""
    items = [t.strip().lower() for t in text.split(",") if t.strip()]
    if not items:
        raise ValueError("--switches: give at least one switch name, e.g. a1,b1")
    dup = {s for s in items if items.count(s) > 1}
    if dup:
        raise ValueError(f"--switches: {sorted(dup)[0]!r} given twice")
    return tuple(items)


def _name(on: frozenset[str], universe: tuple[str, ...]) -> str:
    if not on:
        return "none"
    if universe and on == frozenset(universe):
        return "all"
    return "+".join(s for s in universe if s in on) if universe else "+".join(sorted(on))


def variant(on, universe: tuple[str, ...] = ()) -> Variant:
    on = frozenset(on)
    return Variant(_name(on, universe), on)


def opt_sets(specs: list[str], universe: tuple[str, ...]) -> list[Variant]:
    """Variants from ``--opt-sets`` strings: 'none', 'all' or comma lists of switches from
    ``universe``. Raises ValueError naming an unknown switch or a repeated set."""
    out: list[Variant] = []
    for spec in specs:
        t = spec.strip().lower()
        if t == "none" or t == "":
            on: frozenset[str] = frozenset()
        elif t == "all":
            on = frozenset(universe)
        else:
            items = [x.strip() for x in t.replace("+", ",").split(",") if x.strip()]
            bad = [x for x in items if x not in universe]
            if bad:
                raise ValueError(f"--opt-sets {spec!r}: unknown switch {bad[0]!r} (known: {', '.join(universe)})")
            on = frozenset(items)
        v = variant(on, universe)
        if any(v.switches == o.switches for o in out):
            raise ValueError(f"--opt-sets: {spec!r} repeats an earlier set")
        out.append(v)
    if len(out) < 2:
        raise ValueError("--opt-sets: give at least two sets (the first is the baseline)")
    return out


def one_at_a_time(switches: tuple[str, ...]) -> list[Variant]:
    """none, each alone, all, and all-but-each (duplicates removed: with one switch,
    'alone' is 'all')."""
    u = tuple(switches)
    cands: list[frozenset[str]] = ([frozenset()] + [frozenset([s]) for s in u] + [frozenset(u)]
                                   + [frozenset(u) - {s} for s in u])
    out: list[Variant] = []
    for on in cands:
        if not any(on == v.switches for v in out):
            out.append(variant(on, u))
    return out


def factorial(switches: tuple[str, ...], fraction: str = "auto") -> list[Variant]:
    """Full 2^k (``fraction='full'``) or the half fraction 2^(k-1) (``'half'``: the last
    switch is on exactly when an even number of the others are off, I = +AB...K);
    ``'auto'``: half for k >= 5, else full. Raises ValueError for k < 2 (nothing to
    interact), a half fraction below k = 3, or an unknown fraction."""
    u = tuple(switches)
    k = len(u)
    if k < 2:
        raise ValueError("a factorial design needs at least two switches")
    if fraction == "auto":
        fraction = "half" if k >= 5 else "full"
    if fraction not in ("full", "half"):
        raise ValueError(f"fraction must be auto, full or half, got {fraction!r}")
    if fraction == "half" and k < 3:
        raise ValueError("a half fraction needs at least three switches")
    out = []
    if fraction == "full":
        for bits in itertools.product((0, 1), repeat=k):
            out.append(variant({s for s, b in zip(u, bits, strict=True) if b}, u))
    else:
        # Generator: last = product of the others in +-1 coding, i.e. on iff an even number
        # of the first k-1 switches are off (I = +AB...K).
        for bits in itertools.product((0, 1), repeat=k - 1):
            off = (k - 1) - sum(bits)
            last = 1 if off % 2 == 0 else 0
            on = {s for s, b in zip(u[:-1], bits, strict=True) if b} | ({u[-1]} if last else set())
            out.append(variant(on, u))
    return out


def schedule(variants: list[Variant], runs: int, warmup: int = 0, shuffle: bool = False,
             seed: int = 0) -> list[tuple[int, Variant, bool]]:
    """(round, variant, is_warmup) in execution order: ``warmup`` rounds first, then ``runs``
    rounds; each round runs every variant once. Raises ValueError for runs < 1."""
    if runs < 1:
        raise ValueError(f"--runs must be >= 1, got {runs}")
    if warmup < 0:
        raise ValueError(f"--warmup must be >= 0, got {warmup}")
    rng = random.Random(seed)
    out = []
    for r in range(warmup + runs):
        order = list(variants)
        if shuffle:
            rng.shuffle(order)
        out += [(r, v, r < warmup) for v in order]
    return out
