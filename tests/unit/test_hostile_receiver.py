"""The OTLP receiver against bad, partial, stalled and crowded clients: OTLP/HTTP status codes and
partial success, validation before storing, per-connection timeouts, a bounded pool, a real backlog."""

from __future__ import annotations

import socket
import threading
import time
import urllib.error
import urllib.request

import orjson
import pytest

from gputrace.interop.receiver import OtlpReceiver, ReceiverAddressError, parse_address
from gputrace.timeline import read_trace

pytest.importorskip("grpc")


def _span(i, start="1000", end="2000", **kw):
    return {"traceId": "ab" * 16, "spanId": f"{i + 1:016x}", "name": f"s{i}", "kind": 1,
            "startTimeUnixNano": start, "endTimeUnixNano": end, **kw}


def _body(spans):
    return orjson.dumps({"resourceSpans": [{"resource": {"attributes": [
        {"key": "service.name", "value": {"stringValue": "t"}}]}, "scopeSpans": [{"spans": spans}]}]})


def _post(url, body, ctype="application/json"):
    req = urllib.request.Request(url, data=body, headers={"Content-Type": ctype}, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


@pytest.fixture
def receiver(tmp_path):
    r = OtlpReceiver(None, "127.0.0.1:0", tmp_path / "live.jsonl", max_buffer_bytes=1 << 20, timeout_s=0.5,
                     max_workers=4, max_pending=8)
    r.start()
    yield r
    r.stop()


def _raw(port, data: bytes, half_close=True, wait=5.0) -> bytes:
    s = socket.create_connection(("127.0.0.1", port), timeout=wait)
    try:
        s.sendall(data)
        if half_close:
            s.shutdown(socket.SHUT_WR)
        out = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                return out
            out += chunk
    finally:
        s.close()


def test_body_shorter_than_content_length_is_400_and_not_stored(receiver):
    body = _body([_span(0)])
    head = (f"POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body) + 100}\r\n\r\n").encode()
    out = _raw(receiver.http_port, head + body)
    assert out.startswith(b"HTTP/1.1 400"), out[:200]
    assert b"shorter than its Content-Length" in out
    assert receiver.stats().spans == 0 and receiver.out_path.read_bytes() == b""


@pytest.mark.parametrize("bad", [
    {"startTimeUnixNano": "1.5"},
    {"startTimeUnixNano": 1.5},
    {"endTimeUnixNano": "soon"},
    {"endTimeUnixNano": "500"},  # before its start
    {"startTimeUnixNano": str(1 << 64), "endTimeUnixNano": str(1 << 64)},
    {"name": 12},
    {"status": {"code": 7}},
    {"attributes": "x"},
])
def test_invalid_spans_are_rejected_with_partial_success(receiver, bad):
    spans = [_span(0), {**_span(1), **bad}, _span(2)]
    code, out = _post(receiver.http_endpoint, _body(spans))
    assert code == 200, out
    ps = orjson.loads(out)["partialSuccess"]
    assert int(ps["rejectedSpans"]) == 1 and "spans[1]" in ps["errorMessage"]
    tl = read_trace(receiver.out_path)  # strict read of what was stored
    assert sorted(tl.name_of(r) for r in range(tl.n)) == ["s0", "s2"]
    st = receiver.stats()
    assert st.spans == 2 and st.rejected_spans == 1


def test_every_span_invalid_is_400_and_nothing_stored(receiver):
    code, out = _post(receiver.http_endpoint, _body([{**_span(0), "startTimeUnixNano": "x"}]))
    assert code == 400 and b"rejected" in out
    assert receiver.out_path.read_bytes() == b""


def test_a_stalled_connection_is_closed(receiver):
    s = socket.create_connection(("127.0.0.1", receiver.http_port), timeout=10)
    try:
        s.sendall(b"POST /v1/traces HTTP/1.1\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{")
        t0 = time.monotonic()
        while s.recv(65536):  # the server may answer; then it must close
            pass
        assert time.monotonic() - t0 < 5.0
    finally:
        s.close()


def test_pool_is_bounded_and_busy_is_503(tmp_path):
    r = OtlpReceiver(None, "127.0.0.1:0", tmp_path / "busy.jsonl", timeout_s=5.0, max_workers=2, max_pending=0)
    r.start()
    stalled = [socket.create_connection(("127.0.0.1", r.http_port)) for _ in range(2)]
    try:
        time.sleep(0.2)  # both taken by the two workers
        out = _raw(r.http_port, b"GET / HTTP/1.1\r\n\r\n", half_close=False)
        assert out.startswith(b"HTTP/1.1 503") and b"Retry-After" in out
        assert len(r._http_server._pool._threads) <= 2 and r._http_server.busy_refusals == 1
    finally:
        for s in stalled:
            s.close()
        r.stop()


def test_many_concurrent_clients_are_all_answered(tmp_path):
    r = OtlpReceiver(None, "127.0.0.1:0", tmp_path / "many.jsonl", max_buffer_bytes=0)
    r.start()
    n = 200
    codes = [None] * n
    go = threading.Event()

    def client(i):
        go.wait()
        try:
            codes[i] = _post(r.http_endpoint, _body([_span(i)]))[0]
        except OSError as e:  # a reset connection
            codes[i] = repr(e)

    ts = [threading.Thread(target=client, args=(i,)) for i in range(n)]
    for t in ts:
        t.start()
    go.set()
    for t in ts:
        t.join(60)
    r.stop()
    assert codes == [200] * n
    assert read_trace(r.out_path).n == n


def test_grpc_partial_success_and_all_invalid(tmp_path):
    import grpc
    from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc
    from opentelemetry.proto.trace.v1 import trace_pb2

    r = OtlpReceiver("127.0.0.1:0", None, tmp_path / "g.jsonl")
    r.start()
    try:
        def req(spans):
            return trace_service_pb2.ExportTraceServiceRequest(resource_spans=[trace_pb2.ResourceSpans(
                scope_spans=[trace_pb2.ScopeSpans(spans=spans)])])

        def sp(i, s, e):
            return trace_pb2.Span(trace_id=b"\xab" * 16, span_id=(i + 1).to_bytes(8, "big"), name=f"g{i}",
                                  start_time_unix_nano=s, end_time_unix_nano=e)

        with grpc.insecure_channel(r.grpc_endpoint) as ch:
            stub = trace_service_pb2_grpc.TraceServiceStub(ch)
            resp = stub.Export(req([sp(0, 10, 20), sp(1, 30, 5)]), timeout=10)
            assert resp.partial_success.rejected_spans == 1 and "endTimeUnixNano" in resp.partial_success.error_message
            with pytest.raises(grpc.RpcError) as e:
                stub.Export(req([sp(2, 30, 5)]), timeout=10)
            assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    finally:
        r.stop()
    tl = read_trace(r.out_path)
    assert [tl.name_of(i) for i in range(tl.n)] == ["g0"]


def test_non_loopback_refusal_names_no_missing_option():
    with pytest.raises(ReceiverAddressError) as e:
        parse_address("0.0.0.0:4318")
    assert "--listen-remote" not in str(e.value) and "ssh" in str(e.value)


def test_a_kept_alive_sender_does_not_starve_a_waiting_one(tmp_path):
    import http.client

    r = OtlpReceiver(None, "127.0.0.1:0", tmp_path / "fair.jsonl", max_buffer_bytes=0, timeout_s=10.0,
                     max_workers=1, max_pending=8)
    r.start()
    stop = threading.Event()
    body = _body([_span(0)])

    def chatty():  # one persistent connection, a request every 50 ms: it would hold the only worker
        conn = http.client.HTTPConnection("127.0.0.1", r.http_port, timeout=10)
        while not stop.is_set():
            conn.request("POST", "/v1/traces", body, {"Content-Type": "application/json"})
            conn.getresponse().read()
            time.sleep(0.05)
        conn.close()

    t = threading.Thread(target=chatty)
    t.start()
    try:
        time.sleep(0.3)
        t0 = time.monotonic()
        code, _ = _post(r.http_endpoint, _body([_span(1)]))
        waited = time.monotonic() - t0
        assert code == 200 and waited < 1.5, waited  # served in turn, not after the chatty sender stops
    finally:
        stop.set()
        t.join(10)
        r.stop()
