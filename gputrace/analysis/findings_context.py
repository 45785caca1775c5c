"""What the findings rules read: :class:`Context` (the ``report --json`` document, the collectives, the wall time
and the smallest saving listed) and the small helpers several rules share to read it (the start-up window, the
overlap of an interval with it, the host work a stall's text names). The rules and their table, :data:`RULES`,
are in gputrace/analysis/findings.py, which re-exports :class:`Context`.

Pure; any thread; raises nothing on missing sections (as the rules: a row of a section present is read as the
analysis writes it).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gputrace.analysis.findings_account import merge_spans


@dataclass
class Context:
    """What the rules read: ``data`` (``TimelineAnalysis.to_dict()``), ``comm`` (``collectives()`` output or
    empty), ``wall_ns`` and ``min_ns`` (the smallest saving listed)."""

    data: dict
    comm: dict = field(default_factory=dict)
    wall_ns: int = 0
    min_ns: int = 100_000

    @property
    def gpu(self) -> dict:
        return self.data.get("gpu_activity") or {}


def _roots(ctx: Context) -> set[str]:
    """Names of the top-level spans (a process's root under ``record``) that have unattributed time."""
    return {u["path"].split("/", 1)[0] for u in ctx.data.get("unattributed", []) if u.get("path")}


def _startup_window(ctx: Context) -> list[tuple[int, int]]:
    """The union of the processes' start-up intervals (``data["startup"]``, gputrace/analysis/startup.py),
    sorted, disjoint: the wall time that start-up took, counted once."""
    return merge_spans((d["start_ns"], d["end_ns"]) for d in ctx.data.get("startup") or [])


def _overlap(s: int, e: int, window: list[tuple[int, int]]) -> int:
    """How much of [s, e) lies in ``window`` (disjoint intervals)."""
    return sum(max(0, min(e, b) - max(s, a)) for a, b in window)


def _names(what: str) -> list[str]:
    """'A, B and C' -> ['A', 'B', 'C'] (the host work a gap names, as the stalls text lists it)."""
    head, _, last = what.rpartition(" and ")
    return [*head.split(", "), last] if head else [what]


def _join(names: list[str]) -> str:
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def _idle_split(ctx: Context, s: dict, window: list[tuple[int, int]]) -> tuple[int, bool]:
    """(the part of an idle stall's lost time inside start-up, whether the whole stall is start-up): a
    leading gap at least half inside start-up is the wait for the first GPU work, all of it start-up."""
    lost = int(s["lost_ns"])
    over = min(lost, _overlap(int(s.get("start", 0)), int(s.get("end", 0)), window)) if window else 0
    return over, bool(over) and "(leading)" in s["text"].partition(" while ")[0] and over * 2 >= lost
