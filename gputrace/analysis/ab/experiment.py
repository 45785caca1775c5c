"""Run an A/B experiment through a callable, keep every trace, and analyse the folder.

The runner is any callable ``run_variant(switches: frozenset[str], trace_path: Path) -> None``
that performs one run with those switches on and writes its trace to ``trace_path`` (the
CLI passes one that calls the prover; tests pass a synthetic one), so the statistics never
depend on the prover. Layout of ``out_dir``::

    manifest.json                 design, switches, variants, one record per run
    <variant>/run-003.jsonl       one trace per run (warm-up runs: warmup-000.jsonl)

The manifest is rewritten after every run, so an interrupted experiment can still be
analysed. Runs execute on the calling thread, in `design.schedule` order.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from gputrace.analysis.ab.design import Variant, schedule
from gputrace.analysis.ab.measures import RunMeasures, run_measures
from gputrace.timeline.model import Timeline

MANIFEST = "manifest.json"


class ExperimentError(RuntimeError):
    """A run failed; the message names the variant and round, ``manifest`` has the records."""


@dataclass
class RunRecord:
    """One run: ``path`` relative to the experiment folder; ``error`` set if it failed."""

    variant: str
    switches: list[str]
    round: int
    seq: int
    path: str
    warmup: bool
    seconds: float
    error: str | None = None


@dataclass
class Experiment:
    """An experiment folder: design name, switch universe, variants (baseline first), runs."""

    out_dir: Path
    design: str
    switches: tuple[str, ...]
    variants: list[Variant]
    records: list[RunRecord] = field(default_factory=list)
    #: Why the schedule stopped early ("deadline": no further run fitted ``deadline_s``), else None.
    stopped: str | None = None

    @property
    def baseline(self) -> Variant:
        return self.variants[0]

    def variant_named(self, name: str) -> Variant:
        for v in self.variants:
            if v.name == name:
                return v
        raise KeyError(f"no variant {name!r} in {self.out_dir / MANIFEST}")

    def traces(self, v: Variant, warmup: bool = False) -> list[Path]:
        """Trace files of successful runs of ``v`` (warm-ups only if ``warmup``), run order."""
        return [self.out_dir / r.path for r in self.records
                if r.variant == v.name and r.error is None and r.warmup == warmup]

    def save(self) -> None:
        doc = {
            "design": self.design,
            "switches": list(self.switches),
            "variants": [{"name": v.name, "switches": sorted(v.switches)} for v in self.variants],
            "runs": [asdict(r) for r in self.records],
        }
        if self.stopped:
            doc["stopped"] = self.stopped
        from gputrace.atomic_write import write_atomic

        write_atomic(self.out_dir / MANIFEST, json.dumps(doc, indent=1))

    @classmethod
    def load(cls, out_dir: str | Path) -> Experiment:
        """Read ``out_dir/manifest.json``. Raises FileNotFoundError, or ValueError naming the
        file and the missing field."""
        out_dir = Path(out_dir)
        path = out_dir / MANIFEST
        doc = json.loads(path.read_text())
        try:
            variants = [Variant(v["name"], frozenset(v["switches"])) for v in doc["variants"]]
            recs = [RunRecord(**r) for r in doc["runs"]]
            stopped = doc.get("stopped")
            return cls(out_dir, doc["design"], tuple(doc["switches"]), variants, recs,
                       stopped if isinstance(stopped, str) else None)
        except (KeyError, TypeError) as e:
            raise ValueError(f"{path}: malformed manifest ({e})") from None

    def measures(self, reader: Callable[[Path], object] | None = None) -> dict[Variant, list[RunMeasures]]:
        """Measured non-warm-up runs per variant. ``reader(path) -> Timeline`` defaults to the
        entrance, :func:`gputrace.timeline.load.read_any` (any format, by content)."""
        if reader is None:
            from gputrace.timeline.load import read_any

            reader = read_any
        out: dict[Variant, list[RunMeasures]] = {}
        for v in self.variants:
            recs = [r for r in self.records if r.variant == v.name and r.error is None and not r.warmup]
            out[v] = []
            for r in recs:
                tl = reader(self.out_dir / r.path)
                if not isinstance(tl, Timeline):
                    raise TypeError(f"reader returned {type(tl).__name__} for {r.path}, not a Timeline")
                m = run_measures(tl, f"{v.name}/{Path(r.path).name}")
                m.round = r.round
                out[v].append(m)
        return out


def run_experiment(
    run_variant: Callable[[frozenset[str], Path], None],
    variants: Sequence[Variant],
    runs: int,
    out_dir: str | Path,
    *,
    design: str = "opt-sets",
    switches: Sequence[str] = (),
    warmup: int = 0,
    shuffle: bool = False,
    seed: int = 0,
    progress: Callable[[int, int, Variant, bool], None] | None = None,
    prime: int = 0,
    deadline_s: float | None = None,
) -> Experiment:
    """Run every variant ``runs`` times (after ``warmup`` rounds), interleaved, writing traces
    under ``out_dir``; return the Experiment. ``progress(done, total, variant, warmup)`` is
    called before each run. A failing run raises ExperimentError (the manifest keeps what ran).
    Raises ValueError if ``out_dir`` already holds a manifest (never overwrite evidence). ``prime``: runs of the
    first variant before the schedule (``<variant>/prime-NNN.jsonl``, recorded with ``round`` -1 and ``warmup``
    True, so the analysis leaves them out): the process's own first-run costs stay out of every round.
    ``deadline_s``: seconds from the call after which no run starts that would not end in time (predicted as the
    longest earlier run of its variant, else the longest run so far); the schedule then stops (``stopped`` =
    "deadline", saved in the manifest) and what ran is returned, so a time-boxed call still gets an analysable
    experiment (incomplete last round included; the factorial model blocks by round).
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    if (out / MANIFEST).exists():
        raise ValueError(f"{out} already holds an experiment ({MANIFEST}); choose a new --out folder")
    exp = Experiment(out, design, tuple(switches), list(variants))
    if prime < 0:
        raise ValueError(f"prime must be >= 0, got {prime}")
    plan = [(-1 - i, variants[0], True) for i in range(prime)] + schedule(list(variants), runs, warmup, shuffle, seed)
    t_start = time.perf_counter()
    for seq, (rnd, v, is_warm) in enumerate(plan):
        if deadline_s is not None and _too_late(exp.records, v.name, time.perf_counter() - t_start, deadline_s):
            exp.stopped = "deadline"
            exp.save()
            break
        if rnd < 0:
            rel = Path(v.name) / f"prime-{-1 - rnd:03d}.jsonl"
        else:
            rel = Path(v.name) / (f"warmup-{rnd:03d}.jsonl" if is_warm else f"run-{rnd - warmup:03d}.jsonl")
        (out / v.name).mkdir(exist_ok=True)
        if progress is not None:
            progress(seq, len(plan), v, is_warm)
        t0 = time.perf_counter()
        rec = RunRecord(v.name, sorted(v.switches), rnd, seq, str(rel), is_warm, 0.0)
        try:
            run_variant(frozenset(v.switches), out / rel)
        except Exception as e:
            rec.seconds = time.perf_counter() - t0
            rec.error = f"{type(e).__name__}: {e}"
            exp.records.append(rec)
            exp.save()
            raise ExperimentError(f"run {seq + 1}/{len(plan)} (variant {v.name}, round {rnd}) failed: "
                                  f"{rec.error}") from e
        rec.seconds = time.perf_counter() - t0
        if not (out / rel).exists():
            rec.error = "the runner wrote no trace"
            exp.records.append(rec)
            exp.save()
            raise ExperimentError(f"run {seq + 1}/{len(plan)} (variant {v.name}): no trace at {out / rel}")
        exp.records.append(rec)
        exp.save()
    return exp


def _too_late(records: Sequence[RunRecord], variant: str, elapsed: float, deadline_s: float) -> bool:
    """Whether a run of ``variant`` started now would end after ``deadline_s`` (predicted from earlier runs)."""
    mine = [r.seconds for r in records if r.variant == variant]
    guess = max(mine) if mine else max((r.seconds for r in records), default=0.0)
    return elapsed + guess > deadline_s
