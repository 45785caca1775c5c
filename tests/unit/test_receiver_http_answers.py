"""The OTLP/HTTP handler's answers that the exporter-driven tests do not reach: GET (405/404), a missing or bad
Content-Length (411), bad and truncated gzip (400), refusals of protobuf requests answered as a protobuf ``Status``,
protobuf partial success, and two requests on one kept-alive connection. Raw sockets, so the exact status line,
content type and ``Connection`` header are seen."""

from __future__ import annotations

import gzip
import socket

import orjson
import pytest

from gputrace.interop.receiver import OtlpReceiver

pytest.importorskip("grpc")
from google.rpc import status_pb2  # noqa: E402
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2  # noqa: E402


@pytest.fixture
def receiver(tmp_path):
    r = OtlpReceiver(None, "127.0.0.1:0", tmp_path / "live.jsonl", max_buffer_bytes=1 << 20, timeout_s=1.0)
    r.start()
    yield r
    r.stop()


def _span(i: int, **kw) -> dict:
    return {"traceId": "ab" * 16, "spanId": f"{i + 1:016x}", "name": f"s{i}", "kind": 1,
            "startTimeUnixNano": "1000", "endTimeUnixNano": "2000", **kw}


def _json(*spans: dict) -> bytes:
    return orjson.dumps({"resourceSpans": [{"scopeSpans": [{"spans": list(spans)}]}]})


def _post(body: bytes, ctype: str = "application/json", path: str = "/v1/traces", extra: str = "",
          length: bool = True, conn: str = "close") -> bytes:
    cl = f"Content-Length: {len(body)}\r\n" if length else ""
    return (f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: {ctype}\r\n{cl}{extra}Connection: {conn}\r\n\r\n"
            ).encode() + body


def _exchange(port: int, data: bytes) -> list[tuple[str, dict[str, str], bytes]]:
    """Sends ``data`` and reads until the server closes; the answers as (status line, headers, body)."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(data)
        raw = b""
        while chunk := s.recv(65536):
            raw += chunk
    out = []
    while raw:
        head, _, raw = raw.partition(b"\r\n\r\n")
        status, *lines = head.decode("latin-1").split("\r\n")
        headers = {k.lower(): v for k, v in (ln.split(": ", 1) for ln in lines)}
        n = int(headers["content-length"])
        out.append((status, headers, raw[:n]))
        raw = raw[n:]
    return out


def _one(receiver, data: bytes) -> tuple[str, dict[str, str], bytes]:
    (answer,) = _exchange(receiver.http_port, data)
    return answer


def _pb_request(n: int, bad: int | None = None) -> bytes:
    req = trace_service_pb2.ExportTraceServiceRequest()
    spans = req.resource_spans.add().scope_spans.add().spans
    for i in range(n):
        sp = spans.add()
        sp.trace_id, sp.span_id, sp.name = bytes(range(16)), bytes([i + 1] * 8), f"p{i}"
        sp.start_time_unix_nano, sp.end_time_unix_nano = (9, 5) if i == bad else (5, 9)
    return req.SerializeToString()


@pytest.mark.parametrize(("path", "code"), [("/v1/traces", "405"), ("/v1/traces?x=1", "405"), ("/other", "404")])
def test_get_is_refused(receiver, path, code):
    status, headers, body = _one(receiver, f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    assert status.split()[1] == code and headers["connection"] == "close"
    assert orjson.loads(body) == {"code": 3, "message": "use POST /v1/traces"}
    assert receiver.stats().rejected == 1


@pytest.mark.parametrize("extra", ["", "Content-Length: abc\r\n"])
def test_missing_or_bad_content_length_is_411(receiver, extra):
    status, headers, body = _one(receiver, _post(b"", extra=extra, length=False))
    assert status.startswith("HTTP/1.1 411") and headers["connection"] == "close"
    assert orjson.loads(body)["message"] == "Content-Length required"


@pytest.mark.parametrize(("payload", "why"), [(b"not gzip at all", b"bad gzip body: "),
                                              (gzip.compress(_json(_span(0)))[:-12], b"bad gzip body: truncated")])
def test_bad_gzip_is_400_and_nothing_stored(receiver, payload, why):
    status, _, body = _one(receiver, _post(payload, extra="Content-Encoding: gzip\r\n"))
    assert status.startswith("HTTP/1.1 400") and why in body
    assert receiver.stats().spans == 0 and receiver.out_path.read_bytes() == b""


def test_protobuf_refusals_answer_a_protobuf_status(receiver):
    status, headers, body = _one(receiver, _post(_pb_request(1), "application/x-protobuf", path="/nope"))
    assert status.startswith("HTTP/1.1 404") and headers["content-type"] == "application/x-protobuf"
    st = status_pb2.Status.FromString(body)
    assert st.code == 3 and "unknown path /nope" in st.message
    status, _, body = _one(receiver, _post(b"\xff\xff\xff", "application/x-protobuf"))
    assert status.startswith("HTTP/1.1 400") and status_pb2.Status.FromString(body).message.startswith("bad protobuf")


def test_protobuf_partial_success(receiver):
    status, headers, body = _one(receiver, _post(_pb_request(3, bad=1), "application/x-protobuf"))
    assert status.startswith("HTTP/1.1 200") and headers["content-type"] == "application/x-protobuf"
    ps = trace_service_pb2.ExportTraceServiceResponse.FromString(body).partial_success
    assert ps.rejected_spans == 1 and "spans[1]" in ps.error_message
    st = receiver.stats()
    assert st.spans == 2 and st.rejected_spans == 1 and st.rejected == 0


def test_two_requests_on_one_kept_alive_connection(receiver):
    answers = _exchange(receiver.http_port, _post(_json(_span(0)), conn="keep-alive")
                        + _post(_json(_span(1)), conn="keep-alive"))  # then idle: the server closes
    assert [(s, b) for s, _, b in answers] == [("HTTP/1.1 200 OK", b"{}")] * 2
    assert all("connection" not in h for _, h, _ in answers)
    assert receiver.stats().spans == 2
