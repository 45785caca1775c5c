"""A CPU-only PyTorch-profiler trace (tests/data/foreign/train_kineto_cpu.json.gz: ``torch.profiler`` with
``activities=[ProfilerActivity.CPU]``, no device or CUDA-API row): its profiler bookkeeping and operators are
not phases, and only phases are reported as parents with unattributed time (docs/interop.md, docs/findings.md)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from gputrace import activity as A
from gputrace.analysis.api_calls import phase_mask, profiler_rows
from gputrace.analysis.report import analyse_timeline
from gputrace.analysis.unattributed import unattributed_time
from gputrace.timeline.load import read_any

DATA = Path(__file__).resolve().parents[1] / "data" / "foreign"
#: The record_function annotations of benchmarks/capture_cpu_kineto.py, and the optimizer's own ones.
CPU_PHASES = {"step0", "step1", "forward", "backward", "optimizer", "Optimizer.step#SGD.step",
              "Optimizer.zero_grad#SGD.zero_grad"}


@pytest.fixture(scope="module")
def cpu():
    return read_any([DATA / "train_kineto_cpu.json.gz"])


@pytest.fixture(scope="module")
def gpu():
    return read_any([DATA / "train_kineto.json.gz"])


def _phase_names(tl) -> set[str]:
    m = phase_mask(tl)
    return {tl.name_of(r) for r in np.flatnonzero(m).tolist()}


def test_cpu_trace_has_no_device_rows_and_is_mapped(cpu):
    cats = {a.get("chrome.cat") for a in cpu.attrs.values()}
    assert {"cpu_op", "user_annotation", "Trace"} <= cats
    assert not cats & {"kernel", "gpu_memcpy", "cuda_runtime", "cuda_driver"}
    assert any(res.get(A.SOURCE) == "kineto" for res in cpu.resources)
    prof = [cpu.name_of(int(r)) for r in profiler_rows(cpu)]
    assert prof == ["PyTorch Profiler (0)"]


def test_bookkeeping_and_operators_are_not_phases(cpu):
    assert _phase_names(cpu) == CPU_PHASES
    names = {p.phase for p in analyse_timeline(cpu).phases}
    assert names == CPU_PHASES  # not "PyTorch Profiler (0)", not aten::addmm


def test_only_phases_have_unattributed_time(cpu, gpu):
    for tl in (cpu, gpu):
        ta = analyse_timeline(tl)
        m = phase_mask(tl)
        assert len(ta.unattributed) and m[ta.unattributed.row].all()
        d = ta.to_dict()
        unatt = [f for f in d["findings"] if f["rule"] == "unattributed"]
        assert unatt and not any("aten::" in f["title"] or "Backward0" in f["title"] for f in unatt)
        assert not any("aten::" in u["path"] or "Backward0" in u["path"] for u in d["unattributed"])
    # The rule still speaks for phases: step0's backward spent time outside the operators it ran.
    d = analyse_timeline(cpu).to_dict()
    assert [(f["rule"], f["where"]) for f in d["findings"]] == [("unattributed", "step0/backward")]


def test_operators_still_cover_their_phase(cpu):
    """Operators are children that explain a phase's time: without them forward would be 100 % unattributed."""
    un = unattributed_time(cpu, among=phase_mask(cpu))
    fwd = [i for i in range(len(un)) if cpu.name_of(int(un.row[i])) == "forward"]
    assert fwd and all(un.fraction[i] < 0.5 for i in fwd)


def test_among_must_match_the_timeline(cpu):
    with pytest.raises(ValueError, match="among has 3 rows"):
        unattributed_time(cpu, among=np.ones(3, bool))
