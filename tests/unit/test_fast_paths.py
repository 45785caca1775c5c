"""The faster ways of computing what the viewer and the report show give exactly what the plain ways gave.

Each fast path here replaced a per-row computation (issue 24: `view` of a 1 M-row Nsight export, `report` of a
1 M-event Kineto trace); the plain computation is kept in this file as the reference, and both run on the
committed fixtures (a PyTorch step traced by torch.profiler and by nsys, a 2-rank job, our own traces) and on
random inputs made to hit the corner cases.
"""

from __future__ import annotations

import gzip
import shutil
from pathlib import Path

import numpy as np
import pytest

from gputrace.analysis.report import analyse_timeline
from gputrace.timeline.load import read_any
from gputrace.tui.layout import format_duration
from gputrace.tui.overlays import IdleLabels, compute_overlays

DATA = Path(__file__).resolve().parents[1] / "data"


def _fixtures(tmp: Path) -> dict[str, object]:
    nsys = tmp / "train_nsys.sqlite"
    with gzip.open(DATA / "foreign" / "train_nsys.sqlite.gz") as f, open(nsys, "wb") as out:
        shutil.copyfileobj(f, out)
    paths = {"kineto": [DATA / "foreign" / "train_kineto.json.gz"], "nsys": [nsys],
             "ranks": [DATA / "foreign" / "dist_rank0.json.gz", DATA / "foreign" / "dist_rank1.json.gz"],
             "kernels": [DATA / "sample_kernels.jsonl"], "2gpu": [DATA / "sample_2gpu.jsonl"],
             "pinning": [DATA / "sample_pinning.jsonl"]}
    return {k: read_any(v) for k, v in paths.items()}


@pytest.fixture(scope="module")
def timelines(tmp_path_factory):
    return _fixtures(tmp_path_factory.mktemp("fast"))


# ---- idle-gap labels: formatted when drawn -------------------------------------------------------------------

def test_idle_labels_equal_the_formatted_list():
    rng = np.random.default_rng(3)
    ns = np.concatenate([[0, 1, 999, 1000, 999_499, 999_500, 10**9, 10**12, 3_600 * 10**9],
                         rng.integers(0, 10**10, 500)])
    lazy = IdleLabels(ns)
    eager = [f"idle {format_duration(x, 2)}" for x in ns.tolist()]
    assert len(lazy) == len(eager)
    assert list(lazy) == eager
    assert lazy[-1] == eager[-1] and lazy[3:9] == eager[3:9] and lazy[::-7] == eager[::-7]
    assert bool(IdleLabels(np.zeros(0, np.int64))) is False and bool(lazy) is True
    with pytest.raises(IndexError):
        lazy[len(eager)]


def test_overlay_gap_labels_match_the_gaps_on_every_fixture(timelines):
    seen = 0
    for name, tl in timelines.items():
        ov = compute_overlays(tl, tl.t0, analyse_timeline(tl, critical=False))
        for key, iv in ov.gaps.items():
            assert isinstance(iv.labels, IdleLabels), name
            assert np.all(np.diff(iv.start) >= 0), (name, key)
            assert list(iv.labels) == [f"idle {format_duration(x, 2)}" for x in (iv.end - iv.start).tolist()]
            seen += len(iv)
    assert seen > 0  # some fixture has idle gaps to label
