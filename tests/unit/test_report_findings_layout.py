"""The Findings list reads whole at 80, 100 and 160 columns (issue 35): every finding's rank, estimated saving,
title (the advice), evidence and rule are printed in full, wrapped under the title, never cut to ``…``
(the table it replaced showed only ``…`` for the savings at 100 columns and a cut title at 80)."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest
from rich.console import Console

from gputrace.commands.report import analyse, finding_saving, render_findings
from gputrace.testing.synth import make_timeline
from gputrace.timeline import read_any

DATA = Path(__file__).resolve().parents[1] / "data" / "foreign"
MS = 1_000_000


def _printed(items, width: int) -> list[str]:
    out = io.StringIO()
    render_findings(items, Console(file=out, width=width, highlight=False, emoji=False))
    return out.getvalue().splitlines()


def _words(text: str) -> list[str]:
    return re.sub(r"\s+", " ", text).strip().split(" ")


def _long_named_findings():
    """A GPU idle while the host runs a phase with a long unbreakable name (a C++-kernel-like name)."""
    long = "at::native::vectorized_elementwise_kernel<4,at::native::BinaryFunctor<float,float,float>>_host_side"
    spans = [{"id": "root", "name": "step", "start": 0, "end": 400 * MS},
             {"name": long, "start": 0, "end": 300 * MS, "parent": "root"},
             {"name": "gemm", "start": 300 * MS, "end": 400 * MS, "device": 0, "kind": "gpu", "parent": "root"}]
    return analyse(make_timeline(spans))["findings"]


@pytest.fixture(scope="module")
def record_findings():
    return analyse(read_any([DATA / "train_record_toggle.jsonl.gz"], lenient=True))["findings"]


@pytest.mark.parametrize("width", [80, 100, 160])
def test_every_finding_reads_whole_at_normal_widths(record_findings, width):
    items = record_findings + _long_named_findings()
    assert len(items) >= 3 and any(len(f["title"]) + len(f["evidence"]) > 2 * width for f in items)  # premise
    lines = _printed(items, width)
    assert lines[0].startswith("Findings") and all(len(ln) <= width for ln in lines)
    assert "…" not in "\n".join(lines)
    # each finding is one block: "N." and its saving on its first line, then its words in order
    starts = [i for i, ln in enumerate(lines) if re.match(r"\d+\. ", ln)]
    assert len(starts) == len(items)
    for k, (i, f) in enumerate(zip(starts, items, strict=True)):
        block = lines[i:starts[k + 1] if k + 1 < len(starts) else len(lines)]
        assert block[0].startswith(f"{k + 1}. ") and finding_saving(f) in block[0]
        text = " ".join(ln[ln.index(finding_saving(f)) + len(finding_saving(f)):] if j == 0 else ln
                        for j, ln in enumerate(block))
        flat = "".join(text.split())
        want = "".join(_words(f["title"]) + _words(f["evidence"]) + ["rule:", f["rule"]])
        assert flat == want, (width, block)


def test_no_findings_is_one_line():
    assert _printed([], 80) == ["Findings: none above the listing threshold (1% of the wall time)"]
