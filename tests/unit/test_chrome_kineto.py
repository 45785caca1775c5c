"""Chrome export for PyTorch-profiler tools: GPU activity carries Kineto's categories and args (the
fields Holistic Trace Analysis reads: cat "kernel"/"gpu_memcpy"/"gpu_memset", args.device, args.stream,
copies named "Memcpy <dir> (<src> -> <dst>)"); gputrace's own reader restores the original spans; the
writer streams in chunks with progress."""

from __future__ import annotations

import importlib.util
import json

import numpy as np
import pytest

from gputrace.timeline.formats.chrome.read import read_chrome

from gputrace.timeline.formats.chrome.export import write_chrome
from gputrace.timeline.formats.nsys.read import read_nsys
from tests.unit.test_nsys import build_report


@pytest.fixture
def nsys_timeline(tmp_path):
    return read_nsys(build_report(tmp_path / "r.sqlite"), correlation_ids=True)


def _events(path):
    return [e for e in json.loads(path.read_text())["traceEvents"] if e.get("ph") == "X"]


def test_gpu_activity_has_kineto_categories_and_args(tmp_path, nsys_timeline):
    out = tmp_path / "k.json"
    write_chrome(nsys_timeline, out)
    ev = _events(out)
    kernels = [e for e in ev if e["cat"] == "kernel"]
    assert [e["name"] for e in kernels] == ["ntt_kernel"]
    k = kernels[0]["args"]
    assert k["device"] == 0 and k["stream"] == 7 and k["grid"] == [1024, 1, 1] and k["block"] == [256, 1, 1]
    assert k["registers per thread"] == 40 and k["correlation"] == k["External id"] == 10
    copies = [e for e in ev if e["cat"] == "gpu_memcpy"]
    assert copies and all(e["name"].startswith("Memcpy ") and " -> " in e["name"] for e in copies)
    assert {e["args"]["name"] for e in copies} <= {"[CUDA memcpy HtoD]", "[CUDA memcpy DtoH]"}
    assert all(isinstance(e["args"]["stream"], int) and isinstance(e["args"]["device"], int) for e in copies)
    # phases (not GPU activity) keep their kind as category
    assert {e["cat"] for e in ev if e["args"].get("phase") == "prove"} == {"host"}


def test_our_reader_gets_the_original_spans_back(tmp_path, nsys_timeline):
    out = tmp_path / "k.json"
    write_chrome(nsys_timeline, out)
    back = read_chrome(out)
    tl = nsys_timeline
    assert back.n == tl.n
    assert sorted(back.phases[p] for p in back.cols["phase"].tolist()) == sorted(tl.phases[p] for p in tl.cols["phase"].tolist())
    assert not back.names  # Kineto names did not leak into span names
    for r, a in back.attrs.items():
        assert not {"stream", "correlation", "External id", "grid", "block"} & set(a), a
    k = next(r for r, a in back.attrs.items() if a.get("gputrace.activity") == "kernel")
    assert back.attrs[k]["cuda.grid"] == [1024, 1, 1]
    assert np.array_equal(np.sort(back.cols["start"]), np.sort(tl.cols["start"]))


def test_the_writer_streams_in_chunks_with_progress(tmp_path, monkeypatch):
    import gputrace.timeline.formats.chrome.stream as cs
    from gputrace.testing.synthetic import synthetic_timeline

    tl = synthetic_timeline(hosts=1, gpus=2, circuits=4, batches=3)
    monkeypatch.setattr(cs, "CHUNK_ROWS", 7)
    seen = []
    n = write_chrome(tl, tmp_path / "s.json", progress=lambda done, total: seen.append((done, total)))
    assert seen[-1] == (tl.n, tl.n) and len(seen) == -(-tl.n // 7)
    doc = json.loads((tmp_path / "s.json").read_text())
    assert len(doc["traceEvents"]) == n
    assert sum(1 for e in doc["traceEvents"] if e["ph"] == "X") == tl.n


def test_a_failed_write_leaves_no_file(tmp_path, monkeypatch):
    import gputrace.timeline.formats.chrome.stream as cs
    from gputrace.testing.synthetic import synthetic_timeline

    tl = synthetic_timeline(hosts=1, gpus=1, circuits=2, batches=1)

    def boom(*a, **k):
        yield b'{"traceEvents":['
        raise OSError("disk full")

    monkeypatch.setattr("gputrace.timeline.formats.chrome.export.chrome_chunks", boom)
    with pytest.raises(OSError, match="disk full"):
        write_chrome(tl, tmp_path / "x.json")
    assert list(tmp_path.iterdir()) == []
    assert cs.CHUNK_ROWS > 0


@pytest.mark.skipif(importlib.util.find_spec("hta") is None, reason="Holistic Trace Analysis not installed")
def test_holistic_trace_analysis_finds_the_kernels(tmp_path, nsys_timeline):  # pragma: no cover - optional tool
    from hta.trace_analysis import TraceAnalysis

    d = tmp_path / "traces"
    d.mkdir()
    write_chrome(nsys_timeline, d / "rank-0.json")
    _, per_kernel = TraceAnalysis(trace_dir=str(d)).get_gpu_kernel_breakdown(visualize=False)
    kinds = dict(zip(per_kernel["name"], per_kernel["kernel_type"]))
    assert kinds["ntt_kernel"] == "COMPUTATION"
    assert any(n.startswith("Memcpy") and t == "MEMORY" for n, t in kinds.items())
