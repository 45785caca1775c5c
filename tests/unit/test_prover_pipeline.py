"""The traced pipeline: every phase present, nested under one ``prove`` root, on the right lane;
switch combinations still give verifying proofs and are recorded as resource attributes."""

import threading

import pytest

import gputrace
from gputrace.prover.options import OPT_NAMES, ProveOptions, parse_opts, parse_size
from gputrace.prover.pipeline import run_prove

DEVICE_PHASES = {"h2d", "ntt", "intt_abc", "coset_ntt", "h_eval", "intt_h", "msm_h", "batch_add", "msm_l",
                 "msm_a", "msm_b_g1", "sync", "assemble"}
PER_CIRCUIT = {"synthesis", "msm_h", "batch_add", "msm_l", "msm_a", "msm_b_g1", "b_g2", "sync", "assemble"}


@pytest.fixture(scope="module")
def key_dir(tmp_path_factory):
    return tmp_path_factory.getbasetemp() / "prover-keys"


def _run(tmp_path, key_dir, opts, batch=2, devices=2, **kw):
    sink = gputrace.MemorySink()
    gputrace.configure(sinks=[sink], config={"test": "pipeline"}, collect_gpu_info=False)
    try:
        res = run_prove(ProveOptions(challenges=1, depth=2, batch=batch, devices=devices, opts=opts,
                                     out_dir=tmp_path, key_dir=key_dir, configure_tracer=False, **kw))
    finally:
        gputrace.shutdown()
    return res, sink.spans


@pytest.mark.slow
def test_every_phase_present_nested_and_on_its_lane(tmp_path, key_dir):
    res, spans = _run(tmp_path, key_dir, frozenset(OPT_NAMES))
    assert res.verified == [True] * 4
    by_id = {s["span_id"]: s for s in spans}
    roots = [s for s in spans if s["name"] == "prove"]
    assert len(roots) == 1
    root = roots[0]
    names = {s["name"] for s in spans}
    assert DEVICE_PHASES | {"synthesis", "b_g2", "pin", "unpin"} <= names
    for s in spans:
        a = s["attributes"]
        if s["name"] in ("setup", "verify", "prove", "load_bases"):
            continue
        # walk up to the root: every phase of the batch sits under the one prove span
        p = s
        while p["parent_span_id"] is not None:
            p = by_id[p["parent_span_id"]]
        if p["name"] == "setup":  # key generation / loading steps nest under setup, outside the prove root
            assert s["name"].startswith(("setup_", "key_")), s["name"]
            continue
        assert p is root, s["name"]
        if s["name"] in DEVICE_PHASES | {"pin", "unpin"}:
            assert a["gputrace.device"] == -1
            assert a["gputrace.lane"].startswith("thread:cpu-worker-")
            assert a["gputrace.kind"] in ("host", "pin", "sync")  # CPU lanes never claim to be GPU work
        if s["name"] in ("intt_abc", "coset_ntt", "h_eval", "intt_h"):
            assert by_id[s["parent_span_id"]]["name"] == "ntt"
            assert by_id[s["parent_span_id"]]["attributes"]["gputrace.lane"] == a["gputrace.lane"]
        elif s["name"] != "prove":
            assert s["parent_span_id"] == root["span_id"], s["name"]
        if s["name"] == "b_g2":
            assert a["gputrace.lane"].startswith("thread:b_g2-pool-")
        if s["name"] == "synthesis":
            assert a["gputrace.lane"].startswith("thread:synth-")
        assert s["start_ns"] <= s["end_ns"]
    for name in PER_CIRCUIT:
        assert sorted(s["attributes"]["gputrace.circuit"] for s in spans if s["name"] == name) == [0, 1, 2, 3], name
    lanes = {s["attributes"]["gputrace.lane"] for s in spans if s["name"] == "msm_h"}
    assert lanes == {"thread:cpu-worker-0", "thread:cpu-worker-1"}
    pin = [s for s in spans if s["name"] == "pin"]
    assert len(pin) == 2 and all(s["attributes"]["gputrace.bytes"] > 0 for s in pin)
    assert res.phase_seconds[("msm_h", "cpu:0")] > 0


def test_switches_off_means_no_pin_phases(tmp_path, key_dir):
    res, spans = _run(tmp_path, key_dir, frozenset(), batch=1, devices=1)
    assert res.verified == [True]
    names = {s["name"] for s in spans}
    assert "pin" not in names and "unpin" not in names
    assert res.config["b1"] is False and res.config["backend"] == "cpu"


@pytest.mark.parametrize("opts", ["a1", "a2", "a4", "b1", "d4", "a1,a2", "a4,d4", "all"])
@pytest.mark.slow
def test_switch_combinations_verify(tmp_path, key_dir, opts):
    res = run_prove(ProveOptions(challenges=1, depth=2, batch=2, devices=1, opts=parse_opts(opts),
                                 out_dir=tmp_path, key_dir=key_dir, configure_tracer=False))
    assert res.verified == [True, True]
    assert all(res.config[k] == (k in parse_opts(opts)) for k in OPT_NAMES)


@pytest.mark.slow
def test_switches_recorded_in_trace_file(tmp_path, key_dir):
    trace = tmp_path / "run.jsonl"
    res = run_prove(ProveOptions(challenges=2, depth=3, batch=1, devices=1, opts=parse_opts("a1,d4"),
                                 out_dir=tmp_path, key_dir=key_dir, trace=trace))
    assert res.verified == [True]
    text = trace.read_text()
    assert '"gputrace.config.a1","value":{"boolValue":true}' in text.replace(" ", "")
    assert '"gputrace.config.b1","value":{"boolValue":false}' in text.replace(" ", "")
    assert '"name":"msm_b_g1"' in text.replace(" ", "")


def test_bad_options():
    with pytest.raises(ValueError, match="unknown switch 'a3'"):
        parse_opts("a1,a3")
    assert parse_opts("ALL") == frozenset(OPT_NAMES) and parse_opts("none") == frozenset()
    assert parse_size("2^12") == 4096 and parse_size("2**3") == 8 and parse_size("100") == 100
    with pytest.raises(ValueError, match="2\\^N"):
        parse_size("lots")
    with pytest.raises(ValueError, match="--batch"):
        run_prove(ProveOptions(batch=0, configure_tracer=False))
    with pytest.raises(ValueError, match="together"):
        run_prove(ProveOptions(challenges=2, configure_tracer=False))


@pytest.mark.parametrize("batch,workers,challenges", [(1, 1, 1), (2, 2, 1), (1, 3, 3)])  # in-thread, processes, parts
@pytest.mark.slow
def test_unsatisfiable_witness_is_a_clear_error(tmp_path, key_dir, monkeypatch, batch, workers, challenges):
    from gputrace.prover import witness
    from gputrace.prover.field import R
    from gputrace.prover.r1cs import UnsatisfiedConstraint

    real = witness.make_instance

    def corrupt(shape, seed):
        inst = real(shape, seed)
        inst.paths[0][2][0] = (inst.paths[0][2][0] + 1) % R  # a wrong sibling at level 0
        return inst

    monkeypatch.setattr(witness, "make_instance", corrupt)
    with pytest.raises(UnsatisfiedConstraint, match=r"constraint \d+ \('ch0\.root'\) is not satisfied"):
        run_prove(ProveOptions(challenges=challenges, depth=2, batch=batch, devices=1, out_dir=tmp_path,
                               key_dir=key_dir, configure_tracer=False, synthesis_workers=workers))


@pytest.mark.parametrize("batch,workers,parts", [(1, 4, 3), (2, 4, 2), (3, 4, 1)])
@pytest.mark.slow
def test_synthesis_split_into_parts_verifies(tmp_path, key_dir, batch, workers, parts):
    """More synthesis processes than circuits: each circuit is cut into challenge ranges (at most K = 3)."""
    sink = gputrace.MemorySink()
    gputrace.configure(sinks=[sink], collect_gpu_info=False)
    try:
        res = run_prove(ProveOptions(challenges=3, depth=2, batch=batch, devices=1, out_dir=tmp_path,
                                     key_dir=key_dir, configure_tracer=False, synthesis_workers=workers))
    finally:
        gputrace.shutdown()
    assert res.verified == [True] * batch
    synth = [s["attributes"] for s in sink.spans if s["name"] == "synthesis"]
    assert [a["parts"] for a in synth] == [parts] * batch


def test_config_for_matches_what_run_records(tmp_path, key_dir):
    from gputrace.prover import config_for

    o = ProveOptions(challenges=1, depth=2, batch=1, devices=1, opts=parse_opts("b1,d4"), backend="cpu",
                     out_dir=tmp_path, key_dir=key_dir, configure_tracer=False)
    cfg = config_for(o)
    assert cfg["b1"] and cfg["d4"] and not cfg["a1"] and cfg["depth"] == 2
    assert dict(run_prove(o).config) == cfg


def test_no_synthesis_process_beyond_the_challenges(tmp_path, key_dir, monkeypatch):
    """--synthesis-workers 16 on a K = 3 circuit: 3 parts, so 3 processes are forked, not 16."""
    from gputrace.prover import batch_run

    started = []
    real = batch_run._synthesis_processes

    def spy(n):
        started.append(n)
        return real(n)

    monkeypatch.setattr(batch_run, "_synthesis_processes", spy)
    res = run_prove(ProveOptions(challenges=3, depth=2, batch=1, devices=1, out_dir=tmp_path, key_dir=key_dir,
                                 configure_tracer=False, synthesis_workers=16))
    assert res.verified == [True] and started == [3]


def test_impossible_batch_and_device_counts_are_refused(monkeypatch, tmp_path):
    """--batch 100000 or --devices 100000 used to start proving for hours; now a ValueError naming the flag,
    before any key, output or trace is made."""
    from gputrace.prover import host_msm
    from gputrace.prover.backends import make_backend
    from gputrace.prover.backends.base import BackendUnavailable, check_gpu_count
    from gputrace.prover.options import MAX_BATCH, check_counts, check_cpu_lanes

    monkeypatch.setattr(host_msm, "cpu_threads", lambda: 2)
    check_counts(MAX_BATCH, 1)
    check_cpu_lanes(8)  # 4 lanes per CPU
    with pytest.raises(ValueError, match=r"^--devices: the CPU backend runs at most 8 worker lanes .*got 9$"):
        check_cpu_lanes(9)
    for batch in (0, MAX_BATCH + 1, 100_000):
        with pytest.raises(ValueError, match=rf"^--batch: .*between 1 and {MAX_BATCH}, got {batch}$"):
            check_counts(batch, 1)
    with pytest.raises(ValueError, match="^--devices must be >= 1"):
        check_counts(1, 0)
    with pytest.raises(ValueError, match="^--devices: the CPU backend"):
        check_counts(1, 100_000, "cpu")
    check_counts(1, 100_000, "cuda")  # bounded by the GPUs present, when the backend starts
    with pytest.raises(ValueError, match="^--devices: the CPU backend"):
        make_backend("cpu", 100_000)
    with pytest.raises(BackendUnavailable, match="^--devices: asked for 100000 GPUs, only 1 visible$"):
        check_gpu_count(100_000, 1)
    with pytest.raises(BackendUnavailable, match="no CUDA device"):
        check_gpu_count(1, 0)
    check_gpu_count(2, 2)
    out = tmp_path / "out"
    for kw, flag in ((dict(batch=100_000), "--batch"), (dict(devices=100_000, backend="cpu"), "--devices"),
                     (dict(devices=100_000, backend="auto"), "--devices")):
        with pytest.raises(ValueError, match=f"^{flag}"):
            run_prove(ProveOptions(constraints=64, out_dir=out, configure_tracer=False, **kw))
    assert not out.exists()


def test_host_b_g2_bases_decode_once_while_synthesis_runs(tmp_path, key_dir, monkeypatch):
    """A cached key's b_g2 query (lazy ``PointRows``) is decoded once, and started before the circuit's synthesis
    ends (first on the b_g2 pool, while the circuits synthesize), not inside the first b_g2 after it."""
    from gputrace.prover import batch_run, fixed_base, host_msm

    opts = dict(challenges=3, depth=2, batch=1, devices=1, key_dir=key_dir, configure_tracer=False,
                synthesis_workers=1, backend="cpu")
    run_prove(ProveOptions(out_dir=tmp_path / "first", **opts))  # the key made (or found) and cached
    from gputrace.prover.keygen import cache as keycache

    keycache.drop_resident()  # read pk.npz again, as a fresh process does (a resident key is decoded already)
    monkeypatch.setattr(host_msm, "MIN_PART", 2)  # the b_g2 split into parts, as at 2^20
    monkeypatch.setattr(batch_run, "cpu_threads", lambda: 4)
    real_decode, real_synth = fixed_base.decode_g2, batch_run.synthesize_witness
    decodes, started, waited = [], threading.Event(), []

    def decode(buf):
        if len(buf) > 192 * 4:  # the b_g2 query (the key's fixed G2 points are a few)
            decodes.append(threading.current_thread().name)
            started.set()
        return real_decode(buf)

    def synth(*a, **kw):  # the synthesis ends only once the decode has started (or after 20 s: the test fails)
        waited.append(started.wait(timeout=20))
        return real_synth(*a, **kw)

    monkeypatch.setattr(fixed_base, "decode_g2", decode)
    monkeypatch.setattr(batch_run, "synthesize_witness", synth)
    res = run_prove(ProveOptions(out_dir=tmp_path / "second", **opts))
    assert res.key_cached and res.verified == [True]
    assert waited == [True] and len(decodes) == 1 and decodes[0].startswith("b_g2-pool")
    assert ("load_bases", "host") in res.phase_seconds  # the decode is a phase of its own in the trace
