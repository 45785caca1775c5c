"""Do ``gputrace record`` (CUPTI), ``torch.profiler`` (Kineto) and Nsight Systems agree on one PyTorch step?

Issue 24's target: GPU busy per device and time per kernel name agree within 2 % across the three. This reads
two traces of the same program with gputrace's own readers (``gputrace.timeline.load.read_any``: a Kineto JSON
is mapped onto the GPU-activity conventions by ``timeline/formats/chrome/kineto.py``, an Nsight SQLite export by
``timeline/formats/nsys``), picks the steps (host ranges whose name matches a pattern, e.g. ``train_step``),
drops warm-up steps, and compares per step:

* **GPU busy per device**: the union of the device intervals of the kernels the step launched (overlapping
  streams count once; copies and memsets are left out);
* **time per kernel name**: the summed device time of the step's kernels per short name
  (``gputrace.kernel_names.display_name``: CUPTI and Kineto write ``4``, Nsight ``(int)4`` in template
  arguments; the short form elides them, so one kernel has one name in every source);
* **all kernels**: the summed device time of all the step's kernels.

A kernel belongs to a step when its launching API call started inside the step's range (the launch time
``cuda.launch.api_start_ns``, else the kernel's own start), so host/device clock offsets do not move kernels
between steps. Figures are per step (total over the selected steps / their number). The relative difference
is (B - A) / A; "within" means |difference| <= the tolerance (2 %).

The traces compared are different runs of the same program, not one run seen by two tools: the figures can
differ by run-to-run variation as well as by what each tool measures.

    # the H200 run of 2026-12-01 (record vs torch.profiler) and the committed Kineto vs Nsight fixtures
    python benchmarks/real_programs/agreement.py
    # any two traces
    python benchmarks/real_programs/agreement.py --pair A.jsonl B.json --labels record kineto \\
        --steps train_step --skip 5 2 --count 13
"""

from __future__ import annotations

import argparse
import gzip
import math
import re
import shutil
import sys
import tarfile
import tempfile
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
if str(REPO) not in sys.path:  # run from a checkout: import this tree's gputrace
    sys.path.insert(0, str(REPO))

from gputrace import activity as A  # noqa: E402  (after the path set-up above)
from gputrace.analysis._common import union_by_group  # noqa: E402
from gputrace.analysis.activity_index import KERNEL, activity_index  # noqa: E402
from gputrace.kernel_names import display_name  # noqa: E402
from gputrace.textsafe import visible  # noqa: E402
from gputrace.timeline.load import read_any  # noqa: E402
from gputrace.timeline.model import KIND_CODES, Timeline  # noqa: E402

TOLERANCE = 0.02
RUN_DIR = HERE / "h200-2026-12-01"
FIXTURES = REPO / "tests" / "data" / "foreign"


@dataclass(frozen=True)
class Source:
    """One trace and which of its steps to compare: host ranges named by ``steps`` (a full-match regex), in
    start order, the first ``skip`` dropped, then at most ``count`` kept (None: all)."""

    label: str
    path: Path
    steps: str
    skip: int = 0
    count: int | None = None


@dataclass
class StepStats:
    """Per-step figures of one Source (ms per step, averaged over ``n_steps``)."""

    label: str
    n_steps: int
    step_ms: float  # median host length of the selected steps
    busy_ms: dict[int, float]  # device -> union of kernel intervals
    kernel_ms: dict[str, float]  # short kernel name -> summed kernel time
    kernels_per_step: float
    total_kernel_ms: float = field(init=False)

    def __post_init__(self) -> None:
        self.total_kernel_ms = sum(self.kernel_ms.values())


@dataclass(frozen=True)
class Row:
    """One compared figure: ``a``/``b`` in ms per step (nan where a side has none), ``rel`` = (b - a) / a."""

    metric: str  # "busy", "kernels", "kernel"
    key: str  # device label, "all", or the kernel's short name
    a: float
    b: float

    @property
    def rel(self) -> float:
        if math.isnan(self.a) or math.isnan(self.b):
            return math.inf
        if self.a == 0:
            return 0.0 if self.b == 0 else math.inf
        return (self.b - self.a) / self.a

    def within(self, tol: float = TOLERANCE) -> bool:
        return abs(self.rel) <= tol


class AgreementError(ValueError):
    """A trace that cannot be compared (no matching steps, no kernels); the message names the file."""


def step_ranges(tl: Timeline, pattern: str) -> list[tuple[int, int]]:
    """(start, end) ns of the host rows whose name fully matches ``pattern``, by start; rows the Kineto mapping
    marks as the profiler's own (``gputrace.role``, e.g. the device-side copy of an annotation) are not steps."""
    rx = re.compile(pattern)
    host = KIND_CODES["host"]
    out = []
    for r in range(tl.n):
        if int(tl.cols["kind"][r]) != host or not rx.fullmatch(tl.name_of(r)):
            continue
        if A.ROLE in tl.attrs.get(r, {}):
            continue
        out.append((int(tl.cols["start"][r]), int(tl.cols["end"][r])))
    out.sort()
    return out


def measure(tl: Timeline, src: Source) -> StepStats:
    """The per-step figures of ``tl`` over the steps ``src`` selects (see the module docstring)."""
    steps = step_ranges(tl, src.steps)
    sel = steps[src.skip:]
    if src.count is not None:
        sel = sel[:src.count]
    if not sel:
        raise AgreementError(f"{src.path}: {len(steps)} range(s) named like {src.steps!r}, none left after "
                             f"skipping {src.skip}")
    idx = activity_index(tl)
    k = idx.what == KERNEL
    rows, ks, ke, dev = idx.rows[k], idx.start[k], idx.end[k], idx.device[k].astype(np.int64)
    launch = np.array([int(tl.attrs[int(r)].get(A.LAUNCH_API_START, s)) for r, s in zip(rows, ks, strict=True)],
                      np.int64)
    starts = np.array([s for s, _ in sel], np.int64)
    ends = np.array([e for _, e in sel], np.int64)
    # step of each kernel: the last selected step starting at or before its launch, if the launch is inside it
    j = np.searchsorted(starts, launch, side="right") - 1
    inside = (j >= 0) & (launch <= ends[np.clip(j, 0, None)])
    if not inside.any():
        raise AgreementError(f"{src.path}: no kernel launched inside the {len(sel)} selected step(s)")
    rows, ks, ke, dev, j = rows[inside], ks[inside], ke[inside], dev[inside], j[inside]
    n = len(sel)
    kernel_ms: dict[str, float] = defaultdict(float)
    for r, s, e in zip(rows.tolist(), ks.tolist(), ke.tolist(), strict=True):
        kernel_ms[display_name(str(tl.attrs[r].get(A.KERNEL_NAME, tl.name_of(r))))] += (e - s) / 1e6 / n
    # busy: union of kernel intervals per (device, step), summed per device
    g = dev * (n + 1) + j
    ug, us, ue = union_by_group(g, ks, ke)
    busy: dict[int, float] = defaultdict(float)
    for gg, s, e in zip(ug.tolist(), us.tolist(), ue.tolist(), strict=True):
        busy[gg // (n + 1)] += (e - s) / 1e6 / n
    return StepStats(src.label, n, float(np.median((ends - starts) / 1e6)), dict(busy), dict(kernel_ms),
                     int(inside.sum()) / n)


def compare(a: StepStats, b: StepStats) -> list[Row]:
    """Busy per device, all kernels, then each kernel name (by A's time, largest first; names only one side
    has come last, with nan on the other side)."""
    rows = [Row("busy", f"GPU {d}", a.busy_ms.get(d, math.nan), b.busy_ms.get(d, math.nan))
            for d in sorted(set(a.busy_ms) | set(b.busy_ms))]
    rows.append(Row("kernels", "all", a.total_kernel_ms, b.total_kernel_ms))
    names = sorted(set(a.kernel_ms) | set(b.kernel_ms),
                   key=lambda nm: (nm not in a.kernel_ms, -a.kernel_ms.get(nm, b.kernel_ms.get(nm, 0.0)), nm))
    rows += [Row("kernel", nm, a.kernel_ms.get(nm, math.nan), b.kernel_ms.get(nm, math.nan)) for nm in names]
    return rows


def agreeing_share(a: StepStats, rows: Sequence[Row], tol: float = TOLERANCE) -> float:
    """The share of A's kernel time in kernel names whose times agree within ``tol``."""
    ok = sum(r.a for r in rows if r.metric == "kernel" and r.within(tol) and not math.isnan(r.a))
    return ok / a.total_kernel_ms if a.total_kernel_ms else 0.0


def _cell(name: str, width: int = 70) -> str:
    """A kernel name as one inert markdown table cell (trace text is untrusted)."""
    s = visible(name).replace("|", "\\|")
    return s if len(s) <= width else s[: width - 1] + "…"


def _fmt(x: float, digits: int = 4) -> str:
    return "-" if math.isnan(x) else f"{x:.{digits}f}"


def _pct(rel: float) -> str:
    return "only one side" if math.isinf(rel) else f"{rel * 100:+.2f} %"


def render(title: str, a: StepStats, b: StepStats, rows: Sequence[Row], tol: float = TOLERANCE) -> str:
    """A markdown section: the steps compared, then one table row per figure."""
    out = [f"### {title}", "",
           f"{a.label}: {a.n_steps} steps (median {a.step_ms:.3f} ms, {a.kernels_per_step:.1f} kernels per step); "
           f"{b.label}: {b.n_steps} steps (median {b.step_ms:.3f} ms, {b.kernels_per_step:.1f} kernels per step). "
           f"Figures in ms per step.", "",
           f"| figure | {a.label} | {b.label} | difference | within {tol * 100:g} % |",
           "| --- | ---: | ---: | ---: | --- |"]
    for r in rows:
        what = {"busy": f"GPU busy, {r.key}", "kernels": "kernel time, all kernels"}.get(r.metric)
        what = what or f"`{_cell(r.key)}`"
        out.append(f"| {what} | {_fmt(r.a)} | {_fmt(r.b)} | {_pct(r.rel)} | {'yes' if r.within(tol) else 'no'} |")
    kern = [r for r in rows if r.metric == "kernel"]
    out += ["", f"{sum(r.within(tol) for r in kern)} of {len(kern)} kernel names within {tol * 100:g} %, "
            f"{agreeing_share(a, rows, tol) * 100:.1f} % of {a.label}'s kernel time."]
    return "\n".join(out)


def run_pair(title: str, sa: Source, sb: Source, tol: float = TOLERANCE) -> tuple[str, list[Row]]:
    a, b = measure(read_any([sa.path]), sa), measure(read_any([sb.path]), sb)
    rows = compare(a, b)
    return render(title, a, b, rows, tol), rows


def default_pairs(work: Path) -> list[tuple[str, Source, Source]]:
    """The two pairs of the issue: the 2026-12-01 H200 run's record trace against the bench's last Kineto trace,
    and the committed Kineto and Nsight fixtures (the SQLite is unpacked into ``work``)."""
    with tarfile.open(RUN_DIR / "traces.tar.gz") as tar:
        for name in ("./train.jsonl", "./bench/kineto-2.json"):
            member = tar.getmember(name)
            if not member.isfile():
                raise AgreementError(f"{RUN_DIR / 'traces.tar.gz'}: {name} is not a plain file")
            src = tar.extractfile(member)
            if src is None:
                raise AgreementError(f"{RUN_DIR / 'traces.tar.gz'}: {name} cannot be read")
            with src, open(work / Path(name).name, "wb") as out:
                shutil.copyfileobj(src, out)
    nsys = work / "train_nsys.sqlite"
    with gzip.open(FIXTURES / "train_nsys.sqlite.gz") as gz, open(nsys, "wb") as out:
        shutil.copyfileobj(gz, out)
    # record: 3 untimed warm-up steps + 20 timed (program steps 0-22); Kineto: the bench's profiled steps
    # (program steps 3-17). Both: program steps 5-17 (13 steps).
    return [
        ("H200 run of 2026-12-01: gputrace record (CUPTI) vs torch.profiler (Kineto), train_step.py",
         Source("record", work / "train.jsonl", "train_step", skip=5, count=13),
         Source("kineto", work / "kineto-2.json", "train_step", skip=2, count=13)),
        ("Fixtures tests/data/foreign/: torch.profiler (Kineto) vs nsys, capture_fixtures.py train",
         Source("kineto", FIXTURES / "train_kineto.json.gz", r"step\d+"),
         Source("nsys", nsys, r"step\d+")),
    ]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pair", nargs=2, type=Path, metavar=("A", "B"), help="compare these two traces instead")
    ap.add_argument("--labels", nargs=2, default=("A", "B"))
    ap.add_argument("--steps", default="train_step", help="step range names, a full-match regex")
    ap.add_argument("--skip", nargs=2, type=int, default=(0, 0), help="warm-up steps dropped in A and in B")
    ap.add_argument("--count", type=int, default=None, help="then keep at most this many steps of each")
    ap.add_argument("--tolerance", type=float, default=TOLERANCE)
    a = ap.parse_args(argv)
    try:
        with tempfile.TemporaryDirectory(prefix="agreement_") as tmp:
            if a.pair:
                pairs = [(f"{a.labels[0]} vs {a.labels[1]}",
                          Source(a.labels[0], a.pair[0], a.steps, a.skip[0], a.count),
                          Source(a.labels[1], a.pair[1], a.steps, a.skip[1], a.count))]
            else:
                pairs = default_pairs(Path(tmp))
            for title, sa, sb in pairs:
                print(run_pair(title, sa, sb, a.tolerance)[0], end="\n\n")
    except (AgreementError, OSError, ValueError, tarfile.TarError) as e:
        print(f"agreement: {visible(str(e))}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
