"""Ctrl-C during ``gputrace prove``, as a terminal sends it: SIGINT to the whole process group.

Every process must end, with exit status 130 and the one line ``interrupted`` (no KeyboardInterrupt traceback
from the command or from its worker processes), whenever the interrupt comes: while keys are generated, during
synthesis, during the NTTs and MSMs, and when a second Ctrl-C follows the first.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from tests.cli.processes import group_alive

pytestmark = [pytest.mark.slow, pytest.mark.skipif(sys.platform == "win32", reason="POSIX process groups")]

SIZE = 1 << 12
#: 6 proofs of 2^12 on 2 devices: a run of ~5.6 s on the 2-core box (2026-12-01), NTTs from ~1.5 s and MSMs from
#: ~3.5 s after the start, so each delay below lands in its phase. (A batch of 2 had come to end in 2.1 s once key
#: loading got faster, and three of the four cases skipped as "finished before the interrupt".)
BATCH = 6


@pytest.fixture(scope="module")
def key_dir(tmp_path_factory):
    from gputrace.prover.circuit import shape_for_constraints
    from gputrace.prover.keygen.cache import get_keys

    d = tmp_path_factory.mktemp("interrupt-keys")
    get_keys(shape_for_constraints(SIZE), d)
    return d


def _interrupted(out, key_dir, delays: tuple[float, ...]) -> tuple[subprocess.CompletedProcess, bool]:
    """Run prove in a new session, send SIGINT to its group after each of ``delays`` (seconds, cumulative);
    the finished process and whether any process of its group outlived it by more than 5 s."""
    cmd = [sys.executable, "-m", "gputrace", "prove", "--constraints", str(SIZE), "--batch", str(BATCH),
           "--devices", "2",
           "--out", str(out), "--key-dir", str(key_dir), "--trace", str(out / "run.jsonl")]
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        for d in delays:
            time.sleep(d)
            try:
                os.killpg(p.pid, signal.SIGINT)
            except ProcessLookupError:  # (the whole group already ended: after the first of two, say)
                break
        stdout, stderr = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.communicate()
    deadline = time.monotonic() + 5  # (a loaded 2-core box: killed workers can take a moment to exit)
    left = bool(group_alive(p.pid))
    while left and time.monotonic() < deadline:
        time.sleep(0.05)
        left = bool(group_alive(p.pid))
    if left:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:  # (the last one ended between the check and the kill)
            pass
    return subprocess.CompletedProcess(cmd, p.returncode, stdout, stderr), left


@pytest.mark.parametrize("delays", [(1.3,), (2.5,), (3.6,), (2.5, 0.05)],
                         ids=["synthesis", "ntt", "msm", "twice"])
def test_ctrl_c_ends_every_process_with_130_and_one_line(tmp_path, key_dir, delays):
    r, left = _interrupted(tmp_path, key_dir, delays)
    if r.returncode == 0:
        pytest.skip("the run finished before the interrupt (a very fast machine)")
    assert (r.returncode, r.stderr) == (130, "interrupted\n")
    assert not left, "a process of the run outlived it"


def test_ctrl_c_during_key_generation(tmp_path):
    r, left = _interrupted(tmp_path, tmp_path / "keys", (1.5,))
    if r.returncode == 0:
        pytest.skip("the run finished before the interrupt (a very fast machine)")
    assert (r.returncode, r.stderr) == (130, "interrupted\n")
    assert not left
