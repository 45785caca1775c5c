"""Kineto's ``gpu_user_annotation`` rows (the device-side copy of a ``record_function`` range, written with
``pid`` = the GPU index and ``tid`` = the stream, without ``device``/``stream`` args) sit on their GPU's lane
``annotations:stream N`` next to the stream's lane ``stream:N``, as Perfetto draws them on the stream's track,
not on a host thread lane. The GPU is known from the trace's device rows on that track or from
``process_labels`` ``GPU N``; otherwise the rows stay where the reader always put them. They keep
``gputrace.role = "profiler"`` (no device time, host kind). The batch and per-event paths agree."""

from __future__ import annotations

import json

import pytest

import gputrace.timeline.formats.chrome.events as chrome_events
import gputrace.timeline.formats.chrome.scan as scan
from gputrace.activity import ANNOTATION_LANE_PREFIX, ROLE
from gputrace.timeline.formats.chrome.foreign import ForeignBatch
from gputrace.timeline.formats.chrome.read import read_chrome
from gputrace.timeline.model import KIND_CODES, Lane
from tests.unit.test_chrome_foreign import _per_event
from tests.unit.timeline_equality import assert_same_timeline

FOREIGN = "tests/data/foreign"


def _annotations(tl):
    return [r for r, a in tl.attrs.items() if a.get("chrome.cat") == "gpu_user_annotation"]


def test_fixture_annotations_sit_on_their_gpu_beside_the_stream():
    tl = read_chrome(f"{FOREIGN}/train_kineto.json.gz")
    rows = _annotations(tl)
    assert len(rows) == 20
    lanes = {tl.lanes[int(tl.cols["lane"][r])] for r in rows}
    assert {(ln.device, ln.name) for ln in lanes} == {(0, "annotations:stream 7")}
    assert {int(tl.cols["device"][r]) for r in rows} == {0}
    assert all(tl.attrs[r][ROLE] == "profiler" for r in rows)  # still bookkeeping: in no analysis
    assert {int(tl.cols["kind"][r]) for r in rows} == {KIND_CODES["host"]}
    assert all(tl.cols["gpu_start"][r] == -1 and tl.cols["gpu_end"][r] == -1 for r in rows)
    names = [ln.name for ln in tl.lanes]
    assert names.index("annotations:stream 7") == names.index("stream:7") + 1
    assert not any(ln.name.startswith("thread:stream") for ln in tl.lanes)


@pytest.mark.parametrize("f", ["dist_rank0", "dist_rank1"])
def test_streams_without_kernels_take_the_gpu_from_process_labels(f):
    """dist_rank*: annotations on streams 24..40, where no kernel ran; the process is labelled ``GPU 0``."""
    tl = read_chrome(f"{FOREIGN}/{f}.json.gz")
    gpu0 = [ln.name for ln in tl.lanes if ln.device == 0]
    assert set(gpu0) >= {f"{ANNOTATION_LANE_PREFIX}{s}" for s in (7, 24, 28, 32, 36, 40)}
    for k, name in enumerate(gpu0):  # each annotation lane right after its stream's lane, where that exists
        if name.startswith(ANNOTATION_LANE_PREFIX) and f"stream:{name[len(ANNOTATION_LANE_PREFIX):]}" in gpu0:
            assert gpu0[k - 1] == f"stream:{name[len(ANNOTATION_LANE_PREFIX):]}"
    assert {int(tl.cols["device"][r]) for r in _annotations(tl)} == {0}


def _doc(n: int) -> dict:
    """Annotation rows on four tracks: (0, 7) labelled GPU 0 with kernels on stream 7; (3, 9) labelled GPU 3
    without kernels; (5, 5) unlabelled but with kernels of device 2 stream 11; (6, 1) unlabelled, no kernels."""
    ev: list[dict] = [
        {"ph": "M", "name": "process_name", "pid": 100, "tid": 0, "args": {"name": "python3"}},
        {"ph": "M", "name": "process_labels", "pid": 100, "tid": 0, "args": {"labels": "CPU"}},
        {"ph": "M", "name": "thread_name", "pid": 100, "tid": 100, "args": {"name": "thread 100 (python3)"}},
        {"ph": "M", "name": "process_name", "pid": 0, "tid": 0, "args": {"name": "python3"}},
        {"ph": "M", "name": "process_labels", "pid": 0, "tid": 0, "args": {"labels": "GPU 0"}},
        {"ph": "M", "name": "process_labels", "pid": 3, "tid": 0, "args": {"labels": "GPU 3"}},
        {"ph": "M", "name": "process_labels", "pid": 6, "tid": 0, "args": {"labels": "CPU"}},
    ]
    for i in range(n):
        t = 10.0 * i
        ev.append({"ph": "X", "cat": "user_annotation", "name": "step", "pid": 100, "tid": 100, "ts": t, "dur": 9,
                   "args": {"External id": i}})
        ev.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 100, "tid": 100,
                   "ts": t + 1, "dur": 1, "args": {"correlation": i}})
        ev.append({"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": t + 2, "dur": 3,
                   "args": {"device": 0, "stream": 7, "correlation": i}})
        ev.append({"ph": "X", "cat": "kernel", "name": "k2", "pid": 5, "tid": 5, "ts": t + 2, "dur": 2,
                   "args": {"device": 2, "stream": 11}})
        for pid, tid in ((0, 7), (3, 9), (5, 5), (6, 1)):
            ev.append({"ph": "X", "cat": "gpu_user_annotation", "name": "step", "pid": pid, "tid": tid,
                       "ts": t + 2, "dur": 4, "args": {"External id": i}})
    return {"schemaVersion": 1, "traceEvents": ev}


@pytest.mark.parametrize("reads, min_run", [(997, 1), (1 << 20, 64)])
def test_the_gpu_of_an_annotation_track(tmp_path, monkeypatch, reads, min_run):
    monkeypatch.setattr(scan, "READ_BYTES", reads)
    monkeypatch.setattr(chrome_events, "_MIN_RUN", min_run)
    taken: list[bool] = []
    for name in ("_add_foreign_batch", "_add_foreign_typed"):
        real = getattr(ForeignBatch, name)
        monkeypatch.setattr(ForeignBatch, name, lambda self, evs, real=real: taken.append(real(self, evs)) or taken[-1])
    p = tmp_path / "ann.json"
    p.write_text(json.dumps(_doc(120), indent=1))
    fast = read_chrome(p)
    assert any(taken)
    slow = _per_event(monkeypatch, lambda: read_chrome(p))
    assert_same_timeline(fast, slow)
    where = {}
    for r in _annotations(fast):
        ln = fast.lanes[int(fast.cols["lane"][r])]
        assert int(fast.cols["device"][r]) == ln.device
        where.setdefault((ln.device, ln.name), 0)
        where[(ln.device, ln.name)] += 1
    assert where == {(0, "annotations:stream 7"): 120, (3, "annotations:stream 9"): 120,
                     (2, "annotations:stream 11"): 120, (-1, "thread:1"): 120}
    # The GPU groups: each stream's lane, then its annotations; the unknown track stays a thread lane.
    names = [(ln.device, ln.name) for ln in fast.lanes]
    assert names.index((0, "annotations:stream 7")) == names.index((0, "stream:7")) + 1
    assert names.index((2, "annotations:stream 11")) == names.index((2, "stream:11")) + 1
    assert Lane(fast.lanes[0].host, 6, -1, "thread:1") in fast.lanes


def test_annotations_with_device_args_use_them(tmp_path):
    ev = [{"ph": "X", "cat": "gpu_user_annotation", "name": "fwd", "pid": 9, "tid": 9, "ts": i, "dur": 1,
           "args": {"device": 1, "stream": 4}} for i in range(3)]
    p = tmp_path / "a.json"
    p.write_text(json.dumps({"traceEvents": ev}))
    tl = read_chrome(p)
    assert {(ln.device, ln.name) for ln in tl.lanes} == {(1, "annotations:stream 4")}
    assert set(tl.cols["gpu_start"].tolist()) == {-1}  # profiler rows: no device time
