"""NVTX ranges emitted by phases, checked with a recording NVTX injection library (no Nsight needed).

The library (tests/nvtx_inject/nvtx_recorder.c) is built with gcc into a temp dir; each scenario runs in
a subprocess with NVTX_INJECTION64_PATH set before nvtx loads, and the recorded events are parsed here.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections import defaultdict
from pathlib import Path

import pytest

from gputrace.phases import phase_color

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from nvtx_inject.build import BuildError, build  # noqa: E402


@pytest.fixture(scope="module")
def injection_lib(tmp_path_factory):
    try:
        return build(tmp_path_factory.mktemp("nvtx"))
    except BuildError as e:  # pragma: no cover - the CI image has gcc and nvidia-nvtx
        pytest.fail(f"cannot build the NVTX recorder: {e}")


def run_traced(lib: Path, tmp_path: Path, code: str, extra_env: dict | None = None) -> list[list[str]]:
    log = tmp_path / "nvtx.log"
    env = dict(os.environ, NVTX_INJECTION64_PATH=str(lib), NVTX_RECORDER_OUT=str(log))
    env.pop("GPUTRACE_DISABLE", None)
    env.update(extra_env or {})
    # An exception on any thread fails the run (a worker's end() raising would otherwise go unnoticed).
    prelude = "import os, sys, threading\nthreading.excepthook = lambda a: (print(a, file=sys.stderr), os._exit(7))\n"
    r = subprocess.run([sys.executable, "-c", prelude + textwrap.dedent(code)], env=env, capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return [line.split("\t") for line in log.read_text().splitlines()]


def events(lines, kind):
    return [ln for ln in lines if ln[0] == kind]


def check_balanced(lines):
    """Per thread, pops never outnumber pushes and everything pushed is popped."""
    depth = defaultdict(int)
    for ln in lines:
        if ln[0] == "PUSH":
            depth[ln[1]] += 1
        elif ln[0] == "POP":
            depth[ln[1]] -= 1
            assert depth[ln[1]] >= 0, "pop without push"
    assert all(d == 0 for d in depth.values()), dict(depth)


def test_names_domain_colours_categories_payload(injection_lib, tmp_path):
    lines = run_traced(injection_lib, tmp_path, """
        import gputrace
        with gputrace.phase("prove", circuit=2):
            with gputrace.phase("ntt", device=1, bytes=4096):
                pass
            with gputrace.phase("my_custom_step", device=0):
                pass
    """)
    assert events(lines, "DOMAIN") == [["DOMAIN", "gputrace"]]
    cats = {c[3]: c[2] for c in events(lines, "CATEGORY") if c[1] == "gputrace"}
    pushes = events(lines, "PUSH")
    assert [p[3] for p in pushes] == ["prove", "ntt", "my_custom_step"]
    assert all(p[2] == "gputrace" for p in pushes)
    for p in pushes:
        assert p[4] == "1", "colour type must be ARGB"
        assert int(p[5], 16) == phase_color(p[3])
    prove, ntt, custom = pushes
    assert prove[6] == "0" and prove[8] == "-"  # host phase: no category, no payload
    assert ntt[6] == cats["gpu 1"] and ntt[8] == "4096"
    assert custom[6] == cats["gpu 0"]
    assert len(events(lines, "POP")) == 3
    check_balanced(lines)


def test_balanced_when_exceptions_raised(injection_lib, tmp_path):
    lines = run_traced(injection_lib, tmp_path, """
        import gputrace

        @gputrace.phase("synthesis")
        def bad():
            with gputrace.phase("ntt", device=0):
                raise KeyError("x")

        for _ in range(3):
            try:
                with gputrace.phase("prove"):
                    bad()
            except KeyError:
                pass
        try:
            with gputrace.phase("sync"):
                raise SystemExit(0) if False else RuntimeError("boom")
        except RuntimeError:
            pass
    """)
    pushes = events(lines, "PUSH")
    assert [p[3] for p in pushes] == ["prove", "synthesis", "ntt"] * 3 + ["sync"]
    assert len(events(lines, "POP")) == len(pushes)
    check_balanced(lines)


def test_cross_thread_start_end_and_threads(injection_lib, tmp_path):
    lines = run_traced(injection_lib, tmp_path, """
        import threading, gputrace
        handles = [gputrace.start_phase("h2d", device=0, bytes=10), gputrace.start_phase("d2h", device=1)]
        def worker(h):
            with gputrace.phase("msm_h", device=1):
                pass
            h.end()
        ts = [threading.Thread(target=worker, args=(h,)) for h in handles]
        for t in ts: t.start()
        for t in ts: t.join()
        assert handles[0].end() is False  # a second end is a no-op
    """)
    starts = events(lines, "START")
    ends = events(lines, "END")
    assert sorted(s[4] for s in starts) == ["d2h", "h2d"]
    assert sorted(s[3] for s in starts) == sorted(e[3] for e in ends)  # every range id ended exactly once
    start_tid = {s[3]: s[1] for s in starts}
    for e in ends:
        assert e[1] != start_tid[e[3]], "end must be recorded on the worker thread"
    h2d = next(s for s in starts if s[4] == "h2d")
    assert h2d[9] == "10" and int(h2d[6], 16) == phase_color("h2d")
    check_balanced(lines)
    assert len({p[1] for p in events(lines, "PUSH")}) == 2  # one msm_h per worker thread


def test_disabled_emits_nothing(injection_lib, tmp_path):
    lines = run_traced(injection_lib, tmp_path, """
        import gputrace
        with gputrace.phase("prove"):
            h = gputrace.start_phase("pin")
            h.end()
    """, {"GPUTRACE_DISABLE": "1"})
    assert not events(lines, "PUSH") and not events(lines, "START")


def test_no_tool_means_no_calls():
    # Without an injection library the nvtx package returns a dummy domain; the hot path then skips NVTX.
    code = "from gputrace.trace import nvtx_support as n; print(n.ENABLED)"
    env = {k: v for k, v in os.environ.items() if not k.startswith("NVTX_INJECTION")}
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert r.stdout.strip() == "False", r.stderr


def test_phase_refused_by_nvtx_leaves_the_thread_stack_as_it_was(injection_lib, tmp_path):
    # Building the NVTX attributes can raise (bytes= that is not a number: int() of the payload). The phase
    # had already been pushed on the thread's stack, so it stayed the parent of every later phase there.
    run_traced(injection_lib, tmp_path, """
        import gputrace
        from gputrace.trace import MemorySink, configure, current_context, shutdown

        mem = MemorySink()
        configure(sinks=[mem], collect_gpu_info=False)
        try:
            with gputrace.phase("ntt", bytes="many"):
                pass
        except ValueError:
            pass
        else:
            raise AssertionError("expected ValueError")
        assert current_context() is None, current_context()
        with gputrace.phase("prove"):
            pass
        shutdown()
        (sp,) = mem.spans
        assert sp["name"] == "prove" and sp["parent_span_id"] is None, sp
    """)
