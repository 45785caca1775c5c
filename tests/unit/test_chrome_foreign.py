"""The batch path for other tools' Chrome traces (chrome_foreign) gives the same Timeline as the
per-event path: Kineto-shaped traces with CPU ops, runtime calls, kernels, B/E pairs across batches,
metadata, skipped events and awkward values; bad events keep their per-event errors."""

from __future__ import annotations

import json
import random

import msgspec
import pytest

import gputrace.timeline.formats.chrome.events as chrome_events
import gputrace.timeline.formats.chrome.scan as scan
from gputrace.timeline.formats.chrome.read import ChromeFormatError, from_chrome, read_chrome
from gputrace.timeline.formats.chrome.foreign import ForeignBatch
from tests.unit.test_chrome import KINETO
from tests.unit.timeline_equality import assert_same_timeline

_BATCH_PATHS = ("_add_foreign_batch", "_add_foreign_typed")


#: (path, events) of each batch a batch path took, filled by the ``batches`` fixture.
accepted: list[tuple[str, int]] = []


@pytest.fixture
def batches(monkeypatch):
    """Records whether each batch took a batch path (dicts or typed Structs); which one and the
    batch's size in ``accepted``."""
    taken: list[bool] = []
    accepted.clear()
    for name in _BATCH_PATHS:
        real = getattr(ForeignBatch, name)

        def counting(self, events, real=real, name=name):
            ok = real(self, events)
            taken.append(ok)
            if ok:
                accepted.append((name, len(events)))
            return ok

        monkeypatch.setattr(ForeignBatch, name, counting)
    return taken


def _exact(attrs) -> bytes:
    return msgspec.json.encode(dict(attrs))


def _per_event(monkeypatch, fn):
    with monkeypatch.context() as m:
        for name in _BATCH_PATHS:
            m.setattr(ForeignBatch, name, lambda self, events: False)
        return fn()


def _kineto(n: int, seed: int = 1, paired: bool = True) -> dict:
    rnd = random.Random(seed)
    ev: list[dict] = [
        {"ph": "M", "name": "process_name", "pid": 321, "tid": 0, "args": {"name": "python3"}},
        {"ph": "M", "name": "thread_name", "pid": 321, "tid": 321, "args": {"name": "python3"}},
        {"ph": "M", "name": "thread_name", "pid": 321, "tid": 322, "args": {"name": "python3"}},  # same name
        {"ph": "M", "name": "process_name", "pid": 0, "tid": 0, "args": {"name": "GPU 0"}},
    ]
    t: float | int = 0
    for i in range(n):
        t += rnd.choice([50, 12.5, 7.001])
        ev.append({"ph": "X", "cat": "cpu_op", "name": rnd.choice(["aten::mul", "ntt", "msm_g1"]), "pid": 321,
                   "tid": rnd.choice([321, 322]), "ts": t, "dur": rnd.choice([40, 40.5, 0]),
                   "args": {"External id": i, "batch": rnd.choice([1, True, 2.0, None])}})
        ev.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 321, "tid": 321,
                   "ts": t + 10, "dur": 5.0, "args": {"correlation": rnd.choice([i, i, True, "x"])}})
        ev.append({"ph": "X", "cat": rnd.choice(["kernel", "gpu_memcpy", "gpu_user_annotation"]),
                   "name": "vectorized_elementwise_kernel", "pid": 0, "tid": 7, "ts": t + 20.5, "dur": 2.25,
                   "args": {"device": rnd.choice([0, 1, True, "0", None]), "stream": rnd.choice([7, 8, None]),
                            "correlation": i, "grid": [128, 1, 1], "bytes": rnd.choice([4096, -1, 1.5]),
                            # Kineto's static kernel args, with values equal under == but of other types
                            # (shared only between rows whose args are exactly the same: ArgsSharer)
                            "External id": i, "registers per thread": rnd.choice([24, 24.0, True]),
                            "blocks per SM": rnd.choice([0.0, -0.0, 0.5]), "warps per SM": 2.0,
                            "block": rnd.choice([[128, 1, 1], [128.0, 1, 1], [128, 1, 1]])}})
        r = rnd.random()
        if not paired and r < 0.1:  # no B/E events: every batch may take the typed path
            ev.append({"ph": rnd.choice(["C", "s", "f"]), "name": "counter", "pid": 321, "tid": 321, "ts": t,
                       "args": {"v": 1}})
        elif r < 0.05:
            ev.append({"ph": "B", "name": "sync", "pid": 321, "tid": 321, "ts": t + 41})
        elif r < 0.1:
            ev.append({"ph": "E", "pid": 321, "tid": 321, "ts": t + 45, "args": {"end": 1}})
        elif r < 0.15:
            ev.append({"ph": "i", "name": "marker", "pid": 321, "tid": 321, "ts": t, "s": "t"})
        elif r < 0.2:
            ev.append({"ph": "X", "name": "no cat, no args", "pid": "worker", "tid": None, "ts": int(t)})
        elif r < 0.3:  # a CPU op carrying a correlation id: not a launch, must not become the kernel's parent
            ev.append({"ph": "X", "cat": "cpu_op", "name": "aten::copy_", "pid": 321, "tid": 321, "ts": t + 30,
                       "dur": 1, "args": {"correlation": i}})
        elif r < 0.32:
            ev.append({"ph": "X", "cat": "", "name": 5, "pid": 321, "tid": 321, "ts": t, "dur": 1, "args": {}})
    return {"schemaVersion": 1, "baseTimeNanoseconds": 1700000000000000000, "traceEvents": ev}


@pytest.mark.parametrize("reads, min_run", [(997, 1), (1 << 14, 64), (1 << 20, 64), (1 << 20, 1)])
def test_kineto_batches_same_as_per_event(tmp_path, monkeypatch, batches, reads, min_run):
    monkeypatch.setattr(scan, "READ_BYTES", reads)
    monkeypatch.setattr(chrome_events, "_MIN_RUN", min_run)
    for seed, doc in enumerate([KINETO, _kineto(400), _kineto(300, seed=7)]):
        p = tmp_path / f"k{seed}.json"
        p.write_text(json.dumps(doc, indent=1 if seed else None))
        fast = read_chrome(p)
        slow = _per_event(monkeypatch, lambda p=p: read_chrome(p))
        assert_same_timeline(fast, slow)
        assert [_exact(fast.attrs.get(r, {})) for r in range(fast.n)] == [
            _exact(slow.attrs.get(r, {})) for r in range(slow.n)]
        parsed = _per_event(monkeypatch, lambda p=p, d=doc, h=f"k{seed}": from_chrome(d, host=h, source=str(p)))
        assert_same_timeline(fast, parsed)
    assert any(batches)


def test_large_integer_times_stay_exact(tmp_path, monkeypatch, batches):
    doc = {"traceEvents": [{"ph": "X", "name": "a", "pid": 1, "tid": 1, "ts": 1_700_000_000_000_000 + i,
                            "dur": 3} for i in range(100)]
           + [{"ph": "X", "name": "b", "pid": 1, "tid": 1, "ts": 1_700_000_000_000_000.5, "dur": 1.25}]}
    p = tmp_path / "abs.json"
    p.write_text(json.dumps(doc))
    fast = read_chrome(p)
    assert_same_timeline(fast, _per_event(monkeypatch, lambda: read_chrome(p)))
    starts = set(fast.cols["start"].tolist())
    assert {1_700_000_000_000_000_000 + 1000 * i for i in range(100)} <= starts  # exact, not via doubles
    # Beyond 2**53 ns as doubles: the 100 integer times took the per-event path (the scanner may hand
    # the last event over alone; a float time alone is exact in a batch path).
    assert batches and not any(n >= 100 for _, n in accepted)


@pytest.mark.parametrize("bad, match", [
    ({"ts": "1"}, r"traceEvents\[7\] \('X' 'k'\): field 'ts' must be a number, got '1'"),
    ({"dur": None}, r"traceEvents\[7\] \('X' 'k'\): field 'dur' must be a number, got None"),
    ({"dur": -1}, r"traceEvents\[7\] \('k'\): negative 'dur'"),
    ({"ph": "B", "ts": "1"}, r"traceEvents\[7\] \('B' 'k'\): field 'ts' must be a number, got '1'"),
    ({"ph": "E", "ts": None}, r"traceEvents\[7\] \('E' 'k'\): field 'ts' must be a number, got None"),
])
def test_bad_events_keep_their_errors(tmp_path, bad, match):
    events = [{"ph": "X", "name": "k", "pid": 1, "tid": 1, "ts": i, "dur": 1} for i in range(12)]
    events[7].update(bad)
    p = tmp_path / "bad.json"
    p.write_text(json.dumps({"traceEvents": events}))
    with pytest.raises(ChromeFormatError, match=match):
        read_chrome(p)


def test_collector_state_restored(tmp_path):
    """read_chrome pauses the cyclic GC while it reads and leaves it as it found it, errors included."""
    import gc

    good = tmp_path / "k.json"
    good.write_text(json.dumps(KINETO))
    bad = tmp_path / "bad.json"
    bad.write_text('{"traceEvents": [{"ph": "X", "name": "a", "pid": 1, "tid": 1, "ts": "x"}]}')
    assert gc.isenabled()
    try:
        read_chrome(good)
        assert gc.isenabled()
        with pytest.raises(ChromeFormatError):
            read_chrome(bad)
        assert gc.isenabled()
        gc.disable()
        read_chrome(good)
        assert not gc.isenabled()
    finally:
        gc.enable()


@pytest.mark.parametrize("reads", [997, 1 << 14, 1 << 20])
def test_typed_batches_same_as_per_event(tmp_path, monkeypatch, batches, reads):
    """Batches without B/E events are decoded into Structs (``decode_foreign``) and give the same
    Timeline, attribute key order included, as the per-event path and as the parsed document."""
    monkeypatch.setattr(scan, "READ_BYTES", reads)
    for seed in (3, 11):
        doc = _kineto(500, seed=seed, paired=False)
        doc["traceEvents"].append({"ph": "X", "name": "no args", "cat": "cpu_op", "pid": 321, "tid": 321,
                                   "ts": 1, "dur": 1, "args": None})
        p = tmp_path / f"t{seed}.json"
        p.write_text(json.dumps(doc, indent=1))
        fast = read_chrome(p)
        slow = _per_event(monkeypatch, lambda p=p: read_chrome(p))
        assert_same_timeline(fast, slow)
        assert_same_timeline(fast, from_chrome(doc, host=f"t{seed}", source=str(p)))
        for r in range(fast.n):  # key order and value types too (== takes 1, 1.0 and True as equal)
            assert _exact(fast.attrs.get(r, {})) == _exact(slow.attrs.get(r, {}))
    assert any(path == "_add_foreign_typed" for path, _ in accepted)


def test_decode_foreign_falls_back_for_unknown_phases():
    from gputrace.timeline.formats.chrome.foreign import ForeignX, decode_foreign
    from gputrace.timeline.formats.chrome.typed import TypedBatch

    plain = decode_foreign(b'[{"ph":"X","name":"a","ts":1,"args":{"k":[1,2]}},{"ph":"C","name":"c"}]')
    assert isinstance(plain, TypedBatch) and type(plain.events[0]) is ForeignX
    assert plain.events[0].args == {"k": [1, 2]} and plain.events[0].dur == 0
    paired = decode_foreign(b'[{"ph":"B","name":"a","ts":1},{"ph":"E","ts":2,"args":{"x":1}}]')
    assert isinstance(paired, TypedBatch) and [type(ev).__name__ for ev in paired.events] == ["ForeignB", "ForeignE"]
    assert decode_foreign(b'[{"ph":"Z","name":"a"}]') == [{"ph": "Z", "name": "a"}]  # unknown ph: dicts
    assert decode_foreign(b'[{"name":"no ph"}]') == [{"name": "no ph"}]
    with pytest.raises(ValueError):
        decode_foreign(b'[{"ph":"X","name":"a",')


def _paired_doc(n: int, seed: int) -> dict:
    """B/E-dense: nested pairs, pairs left open across batches and at the end, E without B, E args
    merged over B args, GPU-category pairs, and X events between them."""
    rnd = random.Random(seed)
    ev: list[dict] = [{"ph": "M", "name": "thread_name", "pid": 1, "tid": 2, "args": {"name": "main"}}]
    t = 0.0
    for i in range(n):
        t += rnd.choice([3, 1.5, 0.25])
        tid = rnd.choice([2, 3])
        r = rnd.random()
        if r < 0.3:
            ev.append({"ph": "B", "name": rnd.choice(["sync", "step", "ntt"]), "cat": rnd.choice(["", "user"]),
                       "pid": 1, "tid": tid, "ts": t, "args": rnd.choice([None, {}, {"b": i}])})
        elif r < 0.6:
            ev.append({"ph": "E", "pid": 1, "tid": tid, "ts": t + rnd.choice([0, 2, 0.5]),
                       "args": rnd.choice([None, {"e": i}, {"b": -i}])})
        elif r < 0.65:
            ev.append({"ph": "B", "name": "copy", "cat": "gpu_memcpy", "pid": 0, "tid": 7, "ts": t,
                       "args": {"device": 0, "stream": 7, "correlation": i}})
        elif r < 0.7:
            ev.append({"ph": "E", "pid": 0, "tid": 7, "ts": t + 1})
        else:
            ev.append({"ph": "X", "cat": "cpu_op", "name": "op", "pid": 1, "tid": tid, "ts": t, "dur": 1.5,
                       "args": {"External id": i}})
    return {"traceEvents": ev}


@pytest.mark.parametrize("reads", [997, 1 << 14, 1 << 20])
def test_paired_batches_same_as_per_event(tmp_path, monkeypatch, batches, reads):
    """Typed batches with B/E events: rows in the per-event path's order, stacks carried across batches."""
    monkeypatch.setattr(scan, "READ_BYTES", reads)
    paired: list[bool] = []
    real = ForeignBatch._add_foreign_paired
    monkeypatch.setattr(ForeignBatch, "_add_foreign_paired",
                        lambda self, events: paired.append(real(self, events)) or paired[-1])
    for seed in (5, 6):
        doc = _paired_doc(3000, seed)
        p = tmp_path / f"be{seed}.json"
        p.write_text(json.dumps(doc, indent=1 if seed % 2 else None))
        stats: dict = {}
        fast = read_chrome(p)
        slow = _per_event(monkeypatch, lambda p=p: read_chrome(p))
        assert_same_timeline(fast, slow)
        for r in range(fast.n):  # key order and value types too (== takes 1, 1.0 and True as equal)
            assert _exact(fast.attrs.get(r, {})) == _exact(slow.attrs.get(r, {}))
        parsed = _per_event(monkeypatch, lambda d=doc, p=p: from_chrome(d, host=f"be{seed}", source=str(p),
                                                                         stats=stats))
        assert_same_timeline(fast, parsed)
        assert stats["skipped"] > 0 and any("unterminated" in a for a in fast.attrs.values())
    assert any(paired)  # the typed path took batches with B/E events


def test_event_index_counts_pairs_of_earlier_batches(tmp_path, monkeypatch):
    """Errors name the right event after typed batches with B/E events were taken."""
    monkeypatch.setattr(scan, "READ_BYTES", 997)
    events: list[dict] = []
    for i in range(200):
        events += [{"ph": "B", "name": "s", "pid": 1, "tid": 1, "ts": 3 * i},
                   {"ph": "X", "name": "k", "pid": 1, "tid": 1, "ts": 3 * i, "dur": 1},
                   {"ph": "E", "pid": 1, "tid": 1, "ts": 3 * i + 2}]
    events.append({"ph": "X", "name": "bad", "pid": 1, "tid": 1, "ts": "x", "dur": 1})
    p = tmp_path / "late.json"
    p.write_text(json.dumps({"traceEvents": events}))
    with pytest.raises(ChromeFormatError, match=r"traceEvents\[600\] \('X' 'bad'\)"):
        read_chrome(p)


@pytest.mark.parametrize("device", [True, False, -1, -3, 1 << 15, 70000, "0", 1.0, None])
def test_a_device_that_is_not_a_gpu_index_leaves_the_kernel_on_its_thread(tmp_path, monkeypatch, device):
    """Only an int in 0..32767 (the device column's range; -1 is a host lane) puts a kernel on a GPU
    lane; anything else keeps it on its thread's lane with its args, and every export reads back."""
    from gputrace.timeline.formats.otlp_jsonl.write import write_otlp_jsonl
    from gputrace.timeline.load import read_any

    ev = [{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": i, "dur": 1,
           "args": {"device": device if i % 2 else 0, "stream": 7, "correlation": i}} for i in range(200)]
    p = tmp_path / "k.json"
    p.write_text(json.dumps({"traceEvents": ev}))
    fast = read_chrome(p)
    assert_same_timeline(fast, _per_event(monkeypatch, lambda: read_chrome(p)))
    assert {ln.device for ln in fast.lanes} == {-1, 0}
    on_thread = [r for r in range(fast.n) if fast.lanes[fast.cols["lane"][r]].device == -1]
    assert len(on_thread) == 100 and all(fast.attrs[r]["device"] == device for r in on_thread)
    out = tmp_path / "k.jsonl"
    write_otlp_jsonl(fast, out)
    assert read_any([out]).n == fast.n
