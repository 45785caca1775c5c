"""Retries: a sender that never learns its request was stored sends it again, and it is stored once.

OTLP senders retry on any failure, including an answer that never arrived (they hung up, or the connection
broke, between the receiver storing the spans and answering). The receiver remembers a digest of each
recently stored request body; the same body again is answered as before and not stored again. Bodies that
differ in any byte are stored; a request whose store failed is not remembered, so its retry is stored."""

from __future__ import annotations

import errno
import gzip
import socket
import struct
import urllib.error
import urllib.request

import orjson
import pytest

from gputrace.interop.receiver import OtlpReceiver
from gputrace.timeline import read_trace

pytest.importorskip("grpc")


def _span(i: int, name: str | None = None, end: int = 2000) -> dict:
    return {"traceId": "ab" * 16, "spanId": f"{i + 1:016x}", "name": name or f"s{i}", "kind": 1,
            "startTimeUnixNano": "1000", "endTimeUnixNano": str(end)}


def _body(*spans: dict) -> bytes:
    return orjson.dumps({"resourceSpans": [{"resource": {"attributes": []}, "scopeSpans": [{"spans": list(spans)}]}]})


def _head(body: bytes, extra: str = "") -> bytes:
    return (f"POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n{extra}"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode()


def _post(url: str, body: bytes, headers: dict | None = None) -> tuple[int, bytes]:
    req = urllib.request.Request(url, data=body, method="POST",
                                 headers={"Content-Type": "application/json", **(headers or {})})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def _send_and_hang_up(receiver: OtlpReceiver, body: bytes, spans_before: int, n: int, extra: str = "") -> None:
    """Sends one request, waits until the receiver has stored it, then closes without reading the answer:
    the sender cannot tell its request from a lost one and will retry it."""
    with socket.create_connection(("127.0.0.1", receiver.http_port), timeout=5) as s:
        s.sendall(_head(body, extra) + body)
        assert receiver.wait_for(spans_before + n, timeout=10)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # closes with a reset, unread


def _names(path) -> list[str]:
    tl = read_trace(path)
    return sorted(tl.name_of(i) for i in range(tl.n))


@pytest.fixture
def receiver(tmp_path):
    r = OtlpReceiver(None, "127.0.0.1:0", tmp_path / "live.jsonl", max_buffer_bytes=1 << 20, timeout_s=2.0)
    r.start()
    yield r
    r.stop()


def test_a_retry_after_a_lost_answer_is_stored_once(receiver):
    body = _body(*(_span(i) for i in range(5)))
    _send_and_hang_up(receiver, body, 0, 5)
    code, answer = _post(receiver.http_endpoint, body)  # the exporter's retry: the very same bytes
    assert (code, answer) == (200, b"{}")  # success, as the first attempt would have been answered
    assert len(receiver.out_path.read_bytes().splitlines()) == 1
    assert _names(receiver.out_path) == [f"s{i}" for i in range(5)]
    st = receiver.stats()
    assert (st.requests, st.spans, st.duplicates) == (1, 5, 1)
    assert len(receiver.drain()) == 1  # the viewer's queue gets it once too


def test_a_gzip_retry_is_recognised_after_gunzip(receiver):
    body = _body(_span(0), _span(1))
    _send_and_hang_up(receiver, gzip.compress(body, mtime=1), 0, 2, "Content-Encoding: gzip\r\n")
    # the retry compresses again (another gzip header time): the same request once unpacked
    code, _ = _post(receiver.http_endpoint, gzip.compress(body, mtime=2), {"Content-Encoding": "gzip"})
    assert code == 200 and _names(receiver.out_path) == ["s0", "s1"]
    assert receiver.stats().duplicates == 1


def test_a_retried_partial_success_gets_the_same_answer(receiver):
    bad = {**_span(1), "endTimeUnixNano": "10"}  # ends before it starts: rejected
    body = _body(_span(0), bad)
    first = _post(receiver.http_endpoint, body)
    again = _post(receiver.http_endpoint, body)
    assert first == again and first[0] == 200 and orjson.loads(first[1])["partialSuccess"]["rejectedSpans"] == "1"
    st = receiver.stats()
    assert (st.spans, st.rejected_spans, st.duplicates) == (1, 1, 1)  # the rejected span is counted once too
    assert _names(receiver.out_path) == ["s0"]


def test_same_span_ids_in_different_bodies_are_both_stored(receiver):
    # Only a byte-identical body is a retry: a request that differs anywhere (a name, an end time, a
    # field order) is new spans, even with the same ids, and is stored.
    bodies = [_body(_span(0), _span(1)), _body(_span(0, "renamed"), _span(1)), _body(_span(0), _span(1, end=2001)),
              orjson.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [_span(0), _span(1)]}],
                                               "resource": {"attributes": []}}]})]
    for b in bodies:
        assert _post(receiver.http_endpoint, b)[0] == 200
    assert len(receiver.out_path.read_bytes().splitlines()) == 4
    st = receiver.stats()
    assert (st.requests, st.spans, st.duplicates) == (4, 8, 0)


class _FailingFile:
    """The receiver's file, failing as a full disk does: the first ``fail`` appends write half the bytes,
    then raise ENOSPC."""

    def __init__(self, inner, fail: int = 1) -> None:
        self._inner, self._fail, self._half_done = inner, fail, False

    def write(self, data) -> int:
        if self._fail:
            if not self._half_done:
                self._half_done = True
                return self._inner.write(bytes(data)[: len(data) // 2])
            self._fail -= 1
            self._half_done = False
            raise OSError(errno.ENOSPC, "No space left on device")
        return self._inner.write(data)

    def __getattr__(self, name):
        return getattr(self._inner, name)


def test_a_failed_store_is_not_remembered_and_its_retry_is_stored_once(receiver):
    receiver._file = _FailingFile(receiver._file)
    body = _body(*(_span(i) for i in range(3)))
    code, answer = _post(receiver.http_endpoint, body)
    assert code == 503 and b"No space left" in answer  # not reported as written
    assert receiver.out_path.read_bytes() == b""  # and the torn half line is gone
    assert receiver.stats().spans == 0
    assert _post(receiver.http_endpoint, body)[0] == 200  # the retry is stored: the failure was not remembered
    _send_and_hang_up(receiver, _body(_span(9)), 3, 1)
    assert _post(receiver.http_endpoint, body)[0] == 200  # its answer lost and sent once more: not stored again
    assert _names(receiver.out_path) == ["s0", "s1", "s2", "s9"]
    st = receiver.stats()
    assert (st.requests, st.spans, st.duplicates) == (2, 4, 1)


def test_the_window_is_bounded(tmp_path):
    with OtlpReceiver(None, "127.0.0.1:0", tmp_path / "w.jsonl", dedup_window=3) as r:
        bodies = [_body(_span(i)) for i in range(5)]
        for b in bodies:
            assert _post(r.http_endpoint, b)[0] == 200
        assert len(r._recent) == 3  # the three most recent, no more
        assert _post(r.http_endpoint, bodies[4])[0] == 200  # inside the window: not stored again
        assert _post(r.http_endpoint, bodies[0])[0] == 200  # fell out of it: stored again (documented)
        assert len(r._recent) == 3
        assert _names(r.out_path) == ["s0", "s0", "s1", "s2", "s3", "s4"]
        assert r.stats().duplicates == 1
    with OtlpReceiver(None, "127.0.0.1:0", tmp_path / "off.jsonl", dedup_window=0) as r:  # 0: no window
        b = _body(_span(0))
        assert _post(r.http_endpoint, b)[0] == 200 and _post(r.http_endpoint, b)[0] == 200
        assert _names(r.out_path) == ["s0", "s0"] and len(r._recent) == 0


def test_a_grpc_retry_is_stored_once(tmp_path):
    import grpc
    from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc

    req = trace_service_pb2.ExportTraceServiceRequest()
    spans = req.resource_spans.add().scope_spans.add().spans
    for i in range(3):
        sp = spans.add()
        sp.trace_id, sp.span_id, sp.name = bytes(range(16)), bytes([i + 1] * 8), f"g{i}"
        sp.start_time_unix_nano, sp.end_time_unix_nano = 5, 9
    other = trace_service_pb2.ExportTraceServiceRequest()
    other.CopyFrom(req)
    other.resource_spans[0].scope_spans[0].spans[0].end_time_unix_nano = 10  # same ids, another span
    with OtlpReceiver("127.0.0.1:0", None, tmp_path / "g.jsonl") as r, grpc.insecure_channel(r.grpc_endpoint) as ch:
        export = trace_service_pb2_grpc.TraceServiceStub(ch).Export
        for q in (req, req, other):  # the second: a retry whose first answer was lost
            export(q, timeout=10)
        assert _names(r.out_path) == ["g0", "g0", "g1", "g1", "g2", "g2"]
        st = r.stats()
        assert (st.requests, st.spans, st.duplicates) == (2, 6, 1)


def test_a_grpc_store_that_fails_is_unavailable_and_its_retry_is_stored(tmp_path):
    import grpc
    from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc

    req = trace_service_pb2.ExportTraceServiceRequest()
    sp = req.resource_spans.add().scope_spans.add().spans.add()
    sp.trace_id, sp.span_id, sp.name = bytes(range(16)), b"\1" * 8, "g"
    sp.start_time_unix_nano, sp.end_time_unix_nano = 5, 9
    with OtlpReceiver("127.0.0.1:0", None, tmp_path / "g.jsonl") as r, grpc.insecure_channel(r.grpc_endpoint) as ch:
        r._file = _FailingFile(r._file)
        export = trace_service_pb2_grpc.TraceServiceStub(ch).Export
        with pytest.raises(grpc.RpcError) as failed:
            export(req, timeout=10)
        assert failed.value.code() == grpc.StatusCode.UNAVAILABLE  # a code OTLP senders retry
        assert r.out_path.read_bytes() == b"" and r.stats().spans == 0
        export(req, timeout=10)
        export(req, timeout=10)
        assert _names(r.out_path) == ["g"] and r.stats().duplicates == 1


def test_the_same_body_on_several_connections_at_once_is_stored_once(tmp_path):
    import threading

    body = _body(*(_span(i) for i in range(4)))
    with OtlpReceiver(None, "127.0.0.1:0", tmp_path / "c.jsonl", max_workers=8) as r:
        go = threading.Barrier(8)
        codes: list[int] = []

        def send() -> None:
            go.wait()
            codes.append(_post(r.http_endpoint, body)[0])

        threads = [threading.Thread(target=send) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(20)
        assert codes == [200] * 8
        assert _names(r.out_path) == ["s0", "s1", "s2", "s3"]
        st = r.stats()
        assert (st.requests, st.duplicates) == (1, 7)
