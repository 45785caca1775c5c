"""The documented collector path, client side: a gputrace-instrumented process configured only through
OTEL_EXPORTER_OTLP_* (as in docs/interop.md) exports to a local OTLP receiver, gRPC and HTTP."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from gputrace.interop.receiver import OtlpReceiver
from gputrace.timeline import read_trace

ROOT = Path(__file__).resolve().parents[2]

CLIENT = textwrap.dedent("""
    import gputrace
    gputrace.configure(otlp=True, service_name="prover")
    with gputrace.phase("prove", batch=0):
        with gputrace.phase("synthesis", circuit=1):
            pass
        with gputrace.phase("msm_h", device=0, bytes=4096):
            pass
    s = gputrace.shutdown()
    print("exported", s)
""")


@pytest.mark.parametrize("protocol", ["grpc", "http/protobuf"])
def test_prover_env_config_reaches_receiver(tmp_path, protocol):
    with OtlpReceiver("127.0.0.1:0", "127.0.0.1:0", tmp_path / "live.jsonl") as rx:
        endpoint = f"http://127.0.0.1:{rx.grpc_port if protocol == 'grpc' else rx.http_port}"
        env = {**os.environ, "OTEL_EXPORTER_OTLP_ENDPOINT": endpoint, "OTEL_EXPORTER_OTLP_PROTOCOL": protocol,
               "PYTHONPATH": str(ROOT)}
        r = subprocess.run([sys.executable, "-c", CLIENT], env=env, capture_output=True, text=True, timeout=60, cwd=ROOT)
        assert r.returncode == 0, r.stderr[-2000:]
        assert rx.wait_for(3, timeout=10), (rx.stats(), r.stdout, r.stderr[-1000:])
    tl = read_trace(tmp_path / "live.jsonl")
    names = {tl.name_of(i): i for i in range(tl.n)}
    assert set(names) == {"prove", "synthesis", "msm_h"}
    assert tl.parent[names["msm_h"]] == names["prove"]
    assert tl.nbytes[names["msm_h"]] == 4096 and tl.lanes[tl.lane[names["msm_h"]]].device == 0
    assert tl.resources[tl.resource[names["prove"]]]["service.name"] == "prover"
