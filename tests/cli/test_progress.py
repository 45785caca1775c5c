"""`gputrace.commands._progress.stage`: progress lines for long CLI steps."""

import io
import time

import pytest

from gputrace.commands._progress import stage


def test_stage_prints_start_heartbeats_and_done():
    out = io.StringIO()
    with stage("export", "writing jaeger", show=True, every=0.05, out=out):
        time.sleep(0.18)
    lines = out.getvalue().splitlines()
    assert lines[0] == "gputrace export: writing jaeger…"
    assert len([ln for ln in lines if ln.startswith("gputrace export: writing jaeger… ")]) >= 2
    assert lines[-1].startswith("gputrace export: writing jaeger: done in ")


def test_stage_quiet_for_small_inputs_and_no_done_line_on_error():
    out = io.StringIO()
    with stage("export", "x", show=False, out=out):
        pass
    assert out.getvalue() == ""
    with pytest.raises(OSError):
        with stage("export", "x", show=True, every=10, out=out):
            raise OSError("disk full")
    assert "done" not in out.getvalue()
