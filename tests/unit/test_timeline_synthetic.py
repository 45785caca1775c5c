"""Synthetic prover-like traces: deterministic, exact sizes, realistic structure."""

from __future__ import annotations

import gzip

import numpy as np

from gputrace.phases import PHASES
from gputrace.timeline import read_trace
from gputrace.testing.synthetic import SyntheticSpec, synthetic_timeline, write_synthetic


def test_deterministic_by_seed(tmp_path):
    a, b, c = tmp_path / "a.jsonl", tmp_path / "b.jsonl", tmp_path / "c.jsonl"
    write_synthetic(a, seed=5, hosts=2)
    write_synthetic(b, seed=5, hosts=2)
    write_synthetic(c, seed=6, hosts=2)
    assert a.read_bytes() == b.read_bytes()
    assert a.read_bytes() != c.read_bytes()


def test_target_spans_is_exact_and_gzip_by_name(tmp_path):
    p = tmp_path / "t.jsonl.gz"
    st = write_synthetic(p, target_spans=1234, hosts=3, gpus=2, spans_per_line=100)
    assert st.spans == 1234
    assert gzip.open(p).read().count(b"\n") == st.lines
    tl = read_trace(p)
    assert tl.n == 1234 and (tl.parent >= -1).all()
    # Cutting mid-batch never leaves a child whose parent is missing.
    assert ((tl.parent >= 0) | (tl.phase == tl.phase_id("prove"))).all()


def test_structure_is_prover_like():
    spec = SyntheticSpec(hosts=2, gpus=4, streams=2, circuits=8, batches=2)
    tl = synthetic_timeline(spec)
    assert set(tl.phases) <= set(PHASES)
    assert set(tl.phases) == set(PHASES) - set()  # every vocabulary phase appears
    hosts = {ln.host for ln in tl.lanes}
    assert hosts == {"host0", "host1"}
    gpu_lanes = [ln for ln in tl.lanes if ln.device >= 0]
    assert len(gpu_lanes) == 2 * 4 * 2 and all(ln.name.startswith("stream:") for ln in gpu_lanes)
    assert (tl.depth.max(), int((tl.phase == tl.phase_id("prove")).sum())) == (2, 4)
    gpu = tl.gpu_start >= 0
    # Device times lie inside the host span and exist exactly on GPU lanes.
    assert (tl.gpu_start[gpu] >= tl.start[gpu]).all() and (tl.gpu_end[gpu] <= tl.end[gpu]).all()
    on_gpu_lane = np.array([tl.lanes[k].device >= 0 for k in tl.lane])
    assert np.array_equal(gpu, on_gpu_lane)
    # Spans on one stream never overlap unless nested (a stream is sequential).
    for k, ln in tl.iter_lanes():
        if ln.device < 0:
            continue
        sl = tl.lane_slice(k)
        top = tl.depth[sl] == 1
        s, e = tl.start[sl][top], tl.end[sl][top]
        assert (s[1:] >= e[:-1]).all()
    # GPUs idle during synthesis: the first GPU span of batch 1 starts after batch 1's synthesis ends.
    b1 = tl.batch == 1
    syn_end = tl.end[b1 & (tl.phase == tl.phase_id("synthesis")) & (tl.resource == 0)].max()
    assert tl.start[b1 & (tl.device >= 0) & (tl.resource == 0)].min() > syn_end


def test_phase_scale_and_pin_overhead_change_durations():
    base = synthetic_timeline(hosts=1, gpus=1, circuits=2, batches=2, seed=1)
    slow = synthetic_timeline(hosts=1, gpus=1, circuits=2, batches=2, seed=1,
                              phase_scale={"msm_h": 2.0}, pin_overhead_ms=50.0)

    def mean(tl, name):
        return tl.duration()[tl.phase == tl.phase_id(name)].mean()

    assert 1.8 < mean(slow, "msm_h") / mean(base, "msm_h") < 2.2
    assert mean(slow, "pin") - mean(base, "pin") > 40e6
    assert abs(mean(slow, "msm_l") / mean(base, "msm_l") - 1) < 0.1
