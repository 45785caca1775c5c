"""``gputrace import`` stores the columnar-cache entry of the file it writes: the Timeline predicted by
``readback`` must be exactly what an uncached read of that file gives (columns and dtypes, lanes and
their order, phases, resources, trace ids, attributes with their key order, load report), whole or in
parallel; where it cannot be predicted, no entry."""

from __future__ import annotations

import argparse
import json

import numpy as np
import pytest

import gputrace.timeline.formats.otlp_jsonl.parallel as par
from gputrace.timeline.formats.otlp_jsonl.plan import groups, span_ids
from gputrace.timeline.formats.otlp_jsonl.write import write_otlp_jsonl
from gputrace.timeline.formats.otlp_jsonl.readback import readback_timeline
from gputrace.testing.synthetic import SyntheticSpec, synthetic_timeline
from gputrace.timeline import cache
from gputrace.timeline.load import read_any
from gputrace.timeline.model import Lane, Timeline
from gputrace.timeline.formats.nsys.read import read_nsys
from gputrace.timeline.row_attrs import RowAttrs
from tests.unit.nsys_random_report import random_report
from tests.unit.test_nsys import build_report
from tests.unit.timeline_equality import assert_same_timeline


@pytest.fixture
def uncached(monkeypatch):
    monkeypatch.setenv("GPUTRACE_CACHE", "0")


def _predict(tl, out, max_spans=512):
    plan = (groups(tl), span_ids(tl))
    lines = write_otlp_jsonl(tl, out, max_spans, plan=plan)
    return readback_timeline(tl, out, lines, *plan)


def assert_exact(pred, back) -> None:
    """Equal Timelines, attribute key order and load report included."""
    assert_same_timeline(pred, back)
    assert {r: list(a) for r, a in pred.attrs.items()} == {r: list(a) for r, a in back.attrs.items()}
    assert {r: [type(v) for v in a.values()] for r, a in pred.attrs.items()} == \
        {r: [type(v) for v in a.values()] for r, a in back.attrs.items()}
    assert [list(r) for r in pred.resources] == [list(r) for r in back.resources]
    assert vars(pred.load_report) == vars(back.load_report)


def _check(tl, tmp_path, monkeypatch, name="t.jsonl", max_spans=512):
    out = tmp_path / name
    pred = _predict(tl, out, max_spans)
    assert pred is not None
    assert_exact(pred, read_any(out))
    monkeypatch.setattr(par, "MIN_PARALLEL_BYTES", 0)  # the same file read in parallel gives the same
    parallel = read_any(out, workers=3)
    monkeypatch.undo()
    monkeypatch.setenv("GPUTRACE_CACHE", "0")
    assert_same_timeline(pred, parallel)
    return pred


@pytest.mark.parametrize("opts", [{}, {"runtime": False}, {"correlation_ids": True}])
@pytest.mark.parametrize("report", ["plain", "no_session", "random1", "random2", "random3", "random4"])
@pytest.mark.slow
def test_nsys_imports_read_back_as_predicted(tmp_path, uncached, monkeypatch, report, opts):
    if report == "plain":
        src = build_report(tmp_path / "r.sqlite")
    elif report == "no_session":
        src = build_report(tmp_path / "r.sqlite", session=False, event_enum=False)
    else:
        src = random_report(tmp_path / "r.sqlite", seed=int(report[-1]), n=1200)
    tl = read_nsys(src, **opts)
    _check(tl, tmp_path, monkeypatch)
    _check(tl, tmp_path, monkeypatch, "small_lines.jsonl", max_spans=7)


def test_chrome_imports_read_back_as_predicted(tmp_path, uncached, monkeypatch):
    from gputrace.timeline.formats.chrome.read import read_chrome
    from gputrace.timeline.formats.chrome.export import write_chrome
    from tests.unit.test_chrome import KINETO

    p = tmp_path / "k.json"
    p.write_text(json.dumps(KINETO))
    _check(read_chrome(str(p)), tmp_path, monkeypatch, "k.jsonl")
    syn = synthetic_timeline(SyntheticSpec(hosts=2, gpus=2, target_spans=2000, seed=3))
    q = tmp_path / "s.json"
    write_chrome(syn, q)
    _check(read_chrome(str(q)), tmp_path, monkeypatch, "s.jsonl")


def test_shared_kineto_args_read_back_as_predicted(tmp_path, uncached, monkeypatch):
    """Kernels whose args are shared as TemplateAttrs (values equal under == but of other types kept
    apart) read back as predicted, and the prediction keeps them shared."""
    from gputrace.timeline.formats.chrome.read import read_chrome
    from gputrace.timeline.row_attrs import TemplateAttrs

    ev = [{"ph": "X", "cat": "kernel", "name": f"k{i % 3}", "pid": 0, "tid": 7, "ts": 10 * i, "dur": 2,
           "args": {"External id": i, "device": 0, "stream": 7, "correlation": i + 100, "grid": [64, 1, i % 2],
                    "block": [128, 1, 1], "registers per thread": [24, 24.0, True][i % 3], "warps per SM": 2.0,
                    "est. achieved occupancy %": [3, 3.5][i % 2]}} for i in range(300)]
    p = tmp_path / "k.json"
    p.write_text(json.dumps({"schemaVersion": 1, "traceEvents": ev}))
    tl = read_chrome(str(p))
    assert {type(a) for a in tl.attrs.values()} == {TemplateAttrs}
    pred = _check(tl, tmp_path, monkeypatch, "k.jsonl")
    assert {type(a) for a in pred.attrs.values()} == {TemplateAttrs}


@pytest.mark.parametrize("seed", [1, 2])
def test_synthetic_and_selected_timelines_read_back_as_predicted(tmp_path, uncached, monkeypatch, seed):
    tl = synthetic_timeline(SyntheticSpec(hosts=2, gpus=3, target_spans=1000, seed=seed))  # (3000: 3x the time)
    _check(tl, tmp_path, monkeypatch)
    _check(tl.select(tl.cols["kind"] != 0), tmp_path, monkeypatch, "sel.jsonl", max_spans=33)


def _odd(attrs=None, resources=None, lanes=None, names=None, trace_ids=None, **cols) -> Timeline:
    n = 6
    c = {
        "start": np.array([10, 10, 30, 40, 50, 60], np.int64), "end": np.array([100, 15, 35, 45, 55, 65], np.int64),
        "phase": np.array([0, 1, 1, 2, 0, 1], np.int32), "lane": np.array([0, 0, 1, 1, 2, 3], np.int32),
        "gpu_start": np.array([-1, 11, -1, 41, 51, -1]), "gpu_end": np.array([-1, 14, 36, 44, -1, -1]),
        "nbytes": np.array([-1, 64, -1, -1, 0, -1]), "circuit": np.array([-1, 2, -1, -1, -1, -1], np.int32),
        "batch": np.array([-3, -1, 1, -1, -1, -1], np.int32), "kind": np.array([0, 1, 7, 1, 2, 3], np.int8),
        "status": np.array([-1, 0, 1, 2, 0, 0], np.int8),
        "span_id": np.array([5, 0, 0, 9, 11, 12], np.uint64), "parent_span_id": np.array([0, 5, 0, 7, 0, 0], np.uint64),
        "resource": np.array([0, 0, 1, 1, 2, 2], np.int32), "trace": np.array([0, 0, -1, 1, 2, 0], np.int32),
    }
    c.update(cols)
    lanes = lanes or [Lane("h", 1, -1, "thread:main"), Lane("h", 1, 0, "stream:7"), Lane("", -1, 1, "stream:9"),
                      Lane("g", 3, -1, "thread:w")]
    resources = resources if resources is not None else [
        {"service.name": "a", "process.pid": 1}, {"service.name": "b", "host.name": "x"},
        {"service.name": "c", "process.pid": 44, "gputrace.device": 3}]
    trace_ids = trace_ids if trace_ids is not None else ["AB" * 16, "", "0123456789abcdef" * 2]
    tl = Timeline.from_unsorted(c, ["zeta", "alpha", "mid"], lanes, resources, trace_ids, attrs or {}, names or {})
    assert tl.n == n
    return tl


def test_odd_timelines_read_back_as_predicted(tmp_path, uncached, monkeypatch):
    """Names that differ from their phase, unset status, missing span ids, a lane without pid under a
    resource with one, an empty host, unusable trace ids, unknown kinds, values that change type (tuple),
    floats, bools, shared and overlaid attributes, empty attribute dicts."""
    shared = {"cuda.grid": (4, 1, 1), "s": "x", "f": 0.25, "b": True}
    attrs = {0: {"z": 1, "a": [1, 2], "neg": -5}, 1: RowAttrs(shared, ("corr", "s"), (7, 8)),
             2: RowAttrs(shared, ("corr",), ("text",)), 3: {}, 4: RowAttrs({}, (), ()), 5: shared}
    tl = _odd(attrs=attrs, names={1: "renamed", 4: "zeta", 5: ""})
    pred = _check(tl, tmp_path, monkeypatch)
    assert pred.attrs and any(type(a) is RowAttrs for a in pred.attrs.values())


@pytest.mark.parametrize("case", ["column key", "nan", "huge int", "none", "kvlist", "bytes", "resource order",
                                  "negative start", "bad status", "column key in overlay"])
def test_what_cannot_be_predicted_gets_no_entry(tmp_path, uncached, case):
    attrs, resources, cols = {}, None, {}
    if case == "column key":
        attrs = {0: {"gputrace.device": 3}}
    elif case == "column key in overlay":
        attrs = {0: RowAttrs({"a": 1}, ("gputrace.batch",), (3,))}
    elif case in ("nan", "huge int", "none", "kvlist", "bytes"):
        attrs = {1: {"v": {"nan": float("nan"), "huge int": 1 << 70, "none": None, "kvlist": {"k": 1},
                           "bytes": b"x"}[case]}}
    elif case == "resource order":
        resources = [{"service.name": "a", "x": 1}, {"x": 1, "service.name": "a"}, {"service.name": "c"}]
    elif case == "negative start":
        cols = {"start": np.array([-10, 10, 30, 40, 50, 60], np.int64)}
    elif case == "bad status":
        cols = {"status": np.array([0, 0, 3, 0, 0, 0], np.int8)}
    tl = _odd(attrs=attrs, resources=resources, **cols)
    assert _predict(tl, tmp_path / "x.jsonl") is None


def _run_import(src, out, **kw):
    from gputrace.commands import import_

    args = argparse.Namespace(source="nsys", input=str(src), output=str(out), host=None, no_runtime=False,
                              correlation_ids=False, **kw)
    return import_.run(args)


def test_import_stores_the_entry_the_first_view_reopens(tmp_path, monkeypatch):
    monkeypatch.setenv("GPUTRACE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("GPUTRACE_CACHE_MIN_BYTES", "0")
    src = random_report(tmp_path / "r.sqlite", seed=5, n=800)
    out = tmp_path / "r.jsonl"
    assert _run_import(src, out) == 0
    assert len(list((tmp_path / "cache").glob("*.gtc"))) == 1
    import gputrace.timeline.load as load

    real = load._read
    monkeypatch.setattr(load, "_read", lambda *a, **k: (_ for _ in ()).throw(AssertionError("not cached")))
    cached = read_any(out)
    monkeypatch.setattr(load, "_read", real)
    monkeypatch.setenv("GPUTRACE_CACHE", "0")
    assert_exact(cached, read_any(out))


def test_no_entry_when_the_cache_is_off_or_the_file_small(tmp_path, monkeypatch):
    monkeypatch.setenv("GPUTRACE_CACHE_DIR", str(tmp_path / "cache"))
    src = build_report(tmp_path / "r.sqlite")
    monkeypatch.setenv("GPUTRACE_CACHE_MIN_BYTES", "0")
    monkeypatch.setenv("GPUTRACE_CACHE", "0")
    assert _run_import(src, tmp_path / "a.jsonl") == 0
    monkeypatch.setenv("GPUTRACE_CACHE", "1")
    monkeypatch.setenv("GPUTRACE_CACHE_MIN_BYTES", str(1 << 30))
    assert _run_import(src, tmp_path / "b.jsonl") == 0
    assert not list((tmp_path / "cache").glob("*.gtc"))


def test_a_cache_failure_never_fails_the_import(tmp_path, monkeypatch):
    monkeypatch.setenv("GPUTRACE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("GPUTRACE_CACHE_MIN_BYTES", "0")

    def boom(*a, **k):
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(cache, "store", boom)
    src = build_report(tmp_path / "r.sqlite")
    out = tmp_path / "r.jsonl"
    assert _run_import(src, out) == 0
    monkeypatch.setenv("GPUTRACE_CACHE", "0")
    assert read_any(out).n == read_nsys(src).n


def test_consuming_the_import_gives_the_same_entry(tmp_path, uncached):
    """``consume=True`` (the import's: its columns are taken as they are used) predicts the same Timeline."""
    src = random_report(tmp_path / "r.sqlite", seed=6, n=900)
    out = tmp_path / "c.jsonl"
    keep = _predict(read_nsys(src), out)
    tl = read_nsys(src)
    plan = (groups(tl), span_ids(tl))
    lines = write_otlp_jsonl(tl, out, plan=plan)
    eaten = readback_timeline(tl, out, lines, *plan, consume=True)
    assert not tl.cols  # every column was taken
    assert_exact(eaten, keep)
    assert_exact(eaten, read_any(out))
