"""A busy port is one clean line: no gRPC C-core log line, the reason said once."""

from __future__ import annotations

import socket
import subprocess
import sys

import pytest

from gputrace.interop.receiver import ListenFailed, OtlpReceiver

pytest.importorskip("grpc")


@pytest.fixture
def busy_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen()
    yield s.getsockname()[1]
    s.close()


@pytest.mark.parametrize("proto", ["grpc", "http"])
def test_busy_port_is_a_plain_sentence(tmp_path, busy_port, proto):
    addr = f"127.0.0.1:{busy_port}"
    r = OtlpReceiver(addr if proto == "grpc" else None, addr if proto == "http" else None, tmp_path / "o.jsonl")
    with pytest.raises(ListenFailed) as e:
        r.start()
    what = "OTLP/gRPC" if proto == "grpc" else "OTLP/HTTP"
    assert str(e.value) == f"port {busy_port} ({what}) is already in use by another program"
    assert not r.running


def test_view_listen_on_a_busy_port_prints_one_line(tmp_path, busy_port):
    r = subprocess.run([sys.executable, "-m", "gputrace", "view", "--listen", f"127.0.0.1:{busy_port}",
                        "--out", str(tmp_path / "live.jsonl")], capture_output=True, text=True, timeout=60)
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1, r.stderr
    assert lines[0] == (f"gputrace view: cannot listen on 127.0.0.1:{busy_port}: port {busy_port} (OTLP/gRPC) "
                        "is already in use by another program")
