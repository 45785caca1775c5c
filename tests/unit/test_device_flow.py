"""The stream flow of the device workers (``device_flow.py``) without a GPU: a test double with the CUDA backend's
layout and a separate witness lane proves through it; the trace shows where each piece ran; plans that arrive
late are generated in later chunks; a failed key upload fails the run. The same flow on the H200:
``tests/gpu/test_pipeline_batch.py``."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from test_prover_backend import DeviceWorkBackend

import gputrace
from gputrace.prover import pipeline
from gputrace.prover.backends.base import LaneInfo
from gputrace.prover.options import ProveOptions
from gputrace.prover.pipeline import run_prove
from gputrace.prover.witness_plan import make_plan


class StreamDouble(DeviceWorkBackend):
    """``DeviceWorkBackend`` with a witness lane of its own and a log of the calls that order the two lanes."""

    name = "streamdouble"

    def __init__(self, devices: int) -> None:
        super().__init__(devices)
        self.log: list[tuple] = []
        self.calls: list[str] = []  # "queued" / "sync": how each MSM and batch addition was asked for
        self.host_masks = 0

    def witness_lane(self, device):
        return LaneInfo(device=-1, lane=f"thread:witness-{device}", stream=None, index=device)

    def device_witness(self, plans, domain_size, device, lane=None, per_circuit=False):
        started = sum(1 for e in self.log if e[0] == "wait" and e[1] == device)  # circuits begun on this device
        self.log.append(("witness", device, lane.lane, tuple(p.circuit for p in plans), per_circuit, started))
        return super().device_witness(plans, domain_size, device, lane, per_circuit)

    def split_tail(self, z, num_inputs, lane=None):
        self.log.append(("split", z.device, lane.lane))
        return super().split_tail(z, num_inputs, lane)

    def record_event(self, lane):
        self.log.append(("record", lane.index, lane.lane))
        return ("event", lane.index, len(self.log))

    def wait_event(self, lane, event):
        self.log.append(("wait", lane.index, lane.lane, event))

    def batch_add_g1(self, bases, select, *, lane=None):
        if not getattr(self._local, "in_indices", False):
            self.host_masks += 1
        return super().batch_add_g1(bases, select, lane=lane)

    _local = threading.local()

    def msm_g1(self, bases, scalars, *, plan=None, lane=None):
        self.calls.append("queued" if getattr(self._local, "queued", False) else "sync")
        return super().msm_g1(bases, scalars, plan=plan, lane=lane)

    def msm_g2(self, bases, scalars, *, lane=None):
        self.calls.append("queued" if getattr(self._local, "queued", False) else "sync")
        return super().msm_g2(bases, scalars, lane=lane)

    def _queued(self, call, *args, **kw):
        self._local.queued = True
        try:
            return call(*args, **kw)
        finally:
            self._local.queued = False

    def msm_g1_queued(self, bases, scalars, *, plan=None, lane=None):
        return self._queued(super().msm_g1_queued, bases, scalars, plan=plan, lane=lane)

    def msm_g2_queued(self, bases, scalars, *, lane=None):
        return self._queued(super().msm_g2_queued, bases, scalars, lane=lane)

    def batch_add_queued(self, bases, indices, *, bound, lane=None):
        self._local.queued = True
        try:
            self.calls.append("queued")
            return super().batch_add_queued(bases, indices, bound=bound, lane=lane)
        finally:
            self._local.queued = False

    def batch_add_indices(self, bases, indices, *, bound, lane=None):
        if not getattr(self._local, "queued", False):
            self.calls.append("sync")
        self.log.append(("indices", bases.name, bound, int(indices.shape[0])))
        self._local.in_indices = True  # the base class adds them through batch_add_g1 of a mask
        try:
            return super().batch_add_indices(bases, indices, bound=bound, lane=lane)
        finally:
            self._local.in_indices = False


def _run(tmp_path_factory, be, flow="stream", b_g2="device", batch=2, opts=frozenset({"d4", "a4"})):
    sink = gputrace.MemorySink()
    gputrace.configure(sinks=[sink], collect_gpu_info=False)
    try:
        res = run_prove(ProveOptions(challenges=2, depth=3, batch=batch, backend_object=be, opts=opts,
                                     synthesis="device", b_g2=b_g2, device_flow=flow,
                                     out_dir=Path(tmp_path_factory.mktemp("flow")),
                                     key_dir=tmp_path_factory.getbasetemp() / "flow-keys", configure_tracer=False))
    finally:
        gputrace.shutdown()
    return res, sink.spans


@pytest.mark.parametrize("flow", ["stream", "stream-sync"])
@pytest.mark.parametrize("b_g2", ["device", "host"])
@pytest.mark.slow
def test_stream_flow_proves_and_the_trace_says_where(tmp_path_factory, b_g2, flow):
    be = StreamDouble(2)
    res, spans = _run(tmp_path_factory, be, b_g2=b_g2, flow=flow)
    assert res.verified == [True] * 4 and res.config["device_flow"] == flow
    by = {}
    for sp in spans:
        by.setdefault(sp["name"], []).append(sp)
    # witnesses on the witness lane, per-circuit blocks; their tails split there too
    assert {sp["attributes"]["gputrace.lane"] for sp in by["synthesis"]} <= {"thread:witness-0", "thread:witness-1"}
    wit = [e for e in be.log if e[0] == "witness"]
    assert all(e[4] for e in wit) and sorted(c for e in wit for c in e[3]) == [0, 1, 2, 3]
    assert all(e[2].startswith("thread:witness-") for e in be.log if e[0] == "split")
    # each device's lane waits for an event of its witness lane before proving each circuit
    for d in (0, 1):
        waits = [e for e in be.log if e[0] == "wait" and e[1] == d]
        assert len(waits) == 2 and all(e[2] == f"thread:cpu-worker-{d}" and e[3][1] == d for e in waits)
    assert be.host_masks == 0  # the ones come as device indices (batch_add_indices), not host masks
    assert sorted({e[1] for e in be.log if e[0] == "indices"}) == ["a", "b_g1", "l"]
    # the keys load inside prove, one span per query on a loading thread per device
    prove_id = by["prove"][0]["span_id"]
    loads = by["load_bases"]
    assert all(sp["parent_span_id"] == prove_id for sp in loads)
    # with b_g2 on the host, its G2 query is decoded once, as the first job of the b_g2 pool (docs/prover.md)
    decodes = [sp for sp in loads if sp["attributes"]["gputrace.lane"].startswith("thread:b_g2-pool")]
    assert [sp["attributes"]["query"] for sp in decodes] == (["b_g2"] if b_g2 == "host" else [])
    assert sorted((sp["attributes"]["query"], sp["attributes"]["gputrace.lane"]) for sp in loads
                  if sp not in decodes) == sorted(
        (q, f"thread:load_bases-{d}") for d in (0, 1) for q in ("h", "a", "b_g1", "l") + (("b_g2",) if b_g2 == "device" else ()))
    assert {sp["attributes"]["gputrace.lane"] for sp in by["assemble"]} == {"thread:assemble-0", "thread:assemble-1"}
    copies = [sp for sp in by.get("d2h", []) if sp["attributes"].get("what") == "assignment"]
    assert len(copies) == (4 if b_g2 == "host" else 0)  # z comes back only for the host's G2 MSM
    waits_for = {sp["attributes"].get("waits_for") for sp in by.get("sync", [])}
    assert ("b_g2" in waits_for) == (b_g2 == "host")
    # the queued flow: the results of each circuit come back once, waited for on the helper thread
    collected = [sp for sp in by.get("sync", []) if sp["attributes"].get("waits_for") == "results"]
    assert len(collected) == (4 if flow == "stream" else 0)
    assert all(sp["attributes"]["gputrace.lane"].startswith("thread:assemble-") for sp in collected)
    assert sorted(be.calls) == sorted((["queued"] if flow == "stream" else ["sync"]) * 4 * 8
                                      if b_g2 == "device" else (["queued"] if flow == "stream" else ["sync"]) * 4 * 7)


@pytest.mark.slow
def test_batch_flow_still_selectable(tmp_path_factory):
    be = StreamDouble(1)
    res, spans = _run(tmp_path_factory, be, flow="batch")
    assert res.verified == [True] * 2 and res.config["device_flow"] == "batch"
    assert [e[4] for e in be.log if e[0] == "witness"] == [False]  # one batch block, [a.., b.., c..]
    assert not any(e[0] == "split" for e in be.log) and be.host_masks == 3 * 2  # host masks, as before
    assert all(sp["parent_span_id"] is None or sp["name"] != "load_bases" for sp in spans)


_GATE: list = [None]  # a file path; set before run_prove, so the forked plan processes see it


def _late_plan(shape, seed, circuit):  # module level: pickled by reference into the plan processes
    if circuit > 0:  # made only after circuit 0's b_g2 has run
        while not os.path.exists(_GATE[0]):
            time.sleep(0.05)
        time.sleep(0.2)
    return make_plan(shape, seed, circuit)


@pytest.mark.slow
def test_late_plans_go_in_later_chunks(tmp_path_factory, tmp_path, monkeypatch):
    monkeypatch.setattr(pipeline, "make_plan", _late_plan)
    _GATE[0] = str(tmp_path / "gate")

    class Gated(StreamDouble):
        def msm_g2(self, bases, scalars, *, lane=None):
            out = super().msm_g2(bases, scalars, lane=lane)
            Path(_GATE[0]).touch()
            return out

    be = Gated(1)
    res, spans = _run(tmp_path_factory, be, batch=3)
    assert res.verified == [True] * 3
    chunks = [e[3] for e in be.log if e[0] == "witness"]
    assert chunks[0] == (0,) and sorted(c for ch in chunks for c in ch) == [0, 1, 2], chunks
    assert any(sp["name"] == "sync" and sp["attributes"].get("waits_for") == "witness_plan" for sp in spans)


@pytest.mark.slow
def test_a_failed_key_upload_fails_the_run(tmp_path_factory):
    class Failing(StreamDouble):
        def load_bases(self, name, points, device, affine_limbs=None):
            if name == "b_g1":
                raise RuntimeError("upload of b_g1 failed")
            return super().load_bases(name, points, device, affine_limbs)

    with pytest.raises(RuntimeError, match="upload of b_g1 failed"):
        _run(tmp_path_factory, Failing(1))


def test_bad_flow_is_refused(tmp_path):
    with pytest.raises(ValueError, match="device_flow must be"):
        run_prove(ProveOptions(challenges=1, depth=2, backend_object=StreamDouble(1), synthesis="device",
                               device_flow="fast", out_dir=tmp_path, configure_tracer=False))


@pytest.mark.slow  # a proof through the real pipeline, its plans checked per call (about 6 s here)
def test_stream_flow_d4_plans_match_the_host_rule(tmp_path_factory, monkeypatch):
    """With D4 the tail MSMs get the plans the host rule gives for the zeroed tails (here checked per call)."""
    from gputrace.prover.msm_plan import plan_msm

    seen = []
    be = StreamDouble(1)
    real = be.msm_g1

    def msm_g1(bases, scalars, *, plan=None, lane=None):
        data = np.asarray(scalars.data if hasattr(scalars, "data") else scalars).reshape(-1, 4)
        if bases.name in ("l", "a", "b_g1"):
            seen.append((bases.name, plan, plan_msm(data)))
        return real(bases, scalars, plan=plan, lane=lane)

    monkeypatch.setattr(be, "msm_g1", msm_g1)
    res, _ = _run(tmp_path_factory, be, batch=1)
    assert res.verified == [True] and len(seen) == 3
    assert all(plan == want for _, plan, want in seen), seen


@pytest.mark.slow
def test_witnesses_made_at_most_ahead_circuits_ahead(tmp_path_factory, monkeypatch):
    """A large batch does not generate every witness at once: at most MAX_AHEAD circuits from the one being
    proven (device memory), each chunk within that window, every circuit once."""
    from gputrace.prover import device_flow

    monkeypatch.setattr(device_flow, "MAX_AHEAD", 2)
    be = StreamDouble(1)
    res, _ = _run(tmp_path_factory, be, batch=5)
    assert res.verified == [True] * 5
    chunks = [(e[3], e[5]) for e in be.log if e[0] == "witness"]
    assert sorted(c for ch, _ in chunks for c in ch) == [0, 1, 2, 3, 4], chunks
    assert all(max(ch) < started + 2 and len(ch) <= 2 for ch, started in chunks), chunks


#: Each case proves a batch of three through the real pipeline (3-5 s here): the fast lane keeps ``b1`` (pins,
#: unpins and key staging), the others run in the whole suite (CONTRIBUTING.md: the real prover beyond one
#: small proof is slow).
SWITCHES = ["b1"] + [pytest.param(s, marks=pytest.mark.slow)
                     for s in ("pageable", "reload", "g2end", "syncmsm", "windows", "null")]


@pytest.mark.parametrize("switch", SWITCHES)
def test_regression_switches_act_on_the_stream_flow(tmp_path_factory, switch):
    """Each regression switch of the queued stream flow still verifies, and leaves the trace its code path makes
    (docs/prover.md, "Regression switches"); ``null`` leaves the trace of a run without switches."""
    be = StreamDouble(1)
    res, spans = _run(tmp_path_factory, be, batch=3, opts=frozenset({switch}))
    assert res.verified == [True] * 3 and res.config[switch] is True
    by: dict = {}
    for sp in spans:
        by.setdefault(sp["name"], []).append(sp["attributes"])
    assert be.key_staging == (switch != "pageable")
    pins, unpins = by.get("pin", []), by.get("unpin", [])
    assert (len(pins), len(unpins)) == ((3, 3) if switch == "b1" else (0, 0))
    if switch == "b1":
        assert all(a["gputrace.bytes"] > 0 for a in pins) and sorted(a["gputrace.circuit"] for a in unpins) == [0, 1, 2]
    reloads = [a for a in by["load_bases"] if a.get("reload")]
    assert all("gputrace.circuit" not in a for a in reloads)  # one load_bases instance per run, as without reload
    assert sorted((a["for_circuit"], a["query"]) for a in reloads) == (
        sorted((c, q) for c in (1, 2) for q in ("h", "a", "b_g1", "l", "b_g2")) if switch == "reload" else [])
    batched = [a for a in by["b_g2"] if a.get("batched")]
    assert len(batched) == (3 if switch == "g2end" else 0) and len(by["b_g2"]) == 3
    msm_syncs = [a for a in by.get("sync", []) if a.get("waits_for") == "msm"]
    assert len(msm_syncs) == (3 * 5 if switch == "syncmsm" else 0)  # four G1 MSMs and b_g2 per circuit
    if switch == "g2end":  # the G2 MSMs come after every circuit's G1 work, each read back at once
        assert be.calls[-3:] == ["sync"] * 3


@pytest.mark.slow  # three runs of the prover (about 8 s here)
def test_null_switch_changes_no_span(tmp_path_factory, monkeypatch):
    """``null`` is a control: the same phases, in the same numbers, as a run without it. The witness plans are
    made before the batch starts, so the flow's timing-dependent spans (a ``sync`` waiting for a plan still being
    made, and the extra ``synthesis`` batch it splits off) are the same in both runs whatever the key load costs."""
    from gputrace.prover import pipeline

    real = pipeline._start_plans

    def plans_ready(*a, **kw):
        pool, futures = real(*a, **kw)
        for f in futures:
            f.result()
        return pool, futures

    monkeypatch.setattr(pipeline, "_start_plans", plans_ready)

    def names(opts):
        _, spans = _run(tmp_path_factory, StreamDouble(1), batch=2, opts=opts)
        out: dict = {}
        for sp in spans:
            out[sp["name"]] = out.get(sp["name"], 0) + 1
        return out

    names(frozenset())  # the keys made first when this test runs alone, so both runs below load them
    assert names(frozenset({"null"})) == names(frozenset())


def test_windows_switch_plans_by_the_seed_rule(tmp_path_factory, monkeypatch):
    """``windows``: the tail MSMs get the seed's first D4 window rule (log2(count) - 3, up to 16), not D4's."""
    from gputrace.prover.msm_plan import seed_window_plan
    from gputrace.prover.tail_split import plans_from_stats

    assert [seed_window_plan(1 << k).window for k in (4, 10, 19, 20, 24)] == [4, 7, 16, 16, 16]
    assert seed_window_plan(0).window == 4
    stats = [1 << 20, 127 << 20, 0, (1 << 20) - 5, 127 * ((1 << 20) - 5), 0, 9, 9]
    assert [p.window for p in plans_from_stats(stats, "seed")] == [16, 16]
    assert [p.window for p in plans_from_stats(stats)] == [15, 15]  # D4's rule: the engine's window
    with pytest.raises(ValueError, match="plan rule"):
        plans_from_stats(stats, "other")
    seen = []
    be = StreamDouble(1)
    orig = be.msm_g1_queued

    def spy(bases, scalars, *, plan=None, lane=None):
        seen.append(None if plan is None else plan.window)
        return orig(bases, scalars, plan=plan, lane=lane)

    monkeypatch.setattr(be, "msm_g1_queued", spy)
    res, _ = _run(tmp_path_factory, be, batch=1, opts=frozenset({"windows"}))
    assert res.verified == [True]
    n_tail = len([w for w in seen if w is not None])
    assert n_tail == 3 and seen[0] is None  # msm_h keeps the engine's window; a, b_g1, l get the seed rule
