"""The live OTLP receiver (gputrace.interop.receiver), fed by the real OpenTelemetry SDK exporters."""

from __future__ import annotations

import gzip
import threading
import urllib.error
import urllib.request

import orjson
import pytest

from gputrace.interop.receiver import OtlpReceiver, ReceiverAddressError, parse_address
from gputrace.timeline import Lane, read_trace

pytest.importorskip("grpc")
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter  # noqa: E402
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpExporter  # noqa: E402
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2  # noqa: E402
from opentelemetry.sdk.resources import Resource  # noqa: E402
from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402


@pytest.fixture
def receiver(tmp_path):
    r = OtlpReceiver("127.0.0.1:0", "127.0.0.1:0", tmp_path / "live.jsonl", max_buffer_bytes=1 << 20)
    r.start()
    yield r
    r.stop()


def _emit(exporter, host: str, pid: int) -> dict:
    """Record prove > ntt (GPU 0, stream 3) with the SDK and export; returns span ids by name."""
    provider = TracerProvider(resource=Resource.create({"service.name": "prover", "host.name": host, "process.pid": pid}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("test")
    ids = {}
    with tracer.start_as_current_span("prove") as root:
        root.set_attribute("gputrace.lane", "thread:main")
        with tracer.start_as_current_span("ntt") as child:
            child.set_attribute("gputrace.device", 0)
            child.set_attribute("gputrace.lane", "stream:3")
            child.set_attribute("gputrace.bytes", 4096)
            ids["ntt"] = child.get_span_context()
        ids["prove"] = root.get_span_context()
    provider.shutdown()
    return ids


def _check_file(path, ids, host, pid):
    lines = path.read_bytes().splitlines()
    assert lines, "nothing written"
    spans = {}
    for line in lines:
        for rs in orjson.loads(line)["resourceSpans"]:
            for ss in rs["scopeSpans"]:
                for s in ss["spans"]:
                    spans[s["name"]] = s
    # Hex ids, as the file-exporter spec says (protobuf JSON would give base64).
    assert spans["ntt"]["traceId"] == format(ids["ntt"].trace_id, "032x")
    assert spans["ntt"]["spanId"] == format(ids["ntt"].span_id, "016x")
    assert spans["ntt"]["parentSpanId"] == format(ids["prove"].span_id, "016x")
    assert spans["ntt"]["startTimeUnixNano"].isdigit() and isinstance(spans["ntt"]["kind"], int)
    tl = read_trace(path)
    names = {tl.name_of(r): r for r in range(tl.n)}
    assert tl.lanes[tl.lane[names["ntt"]]] == Lane(host, pid, 0, "stream:3")
    assert tl.parent[names["ntt"]] == names["prove"] and tl.nbytes[names["ntt"]] == 4096


def test_grpc_exporter_spans_reach_the_file(receiver):
    ids = _emit(GrpcExporter(endpoint=receiver.grpc_endpoint, insecure=True), "gpuhost1", 11)
    assert receiver.wait_for(2, timeout=10)
    _check_file(receiver.out_path, ids, "gpuhost1", 11)
    st = receiver.stats()
    assert st.spans == 2 and st.requests == 2 and st.rejected == 0
    drained = receiver.drain()
    assert len(drained) == 2 and receiver.drain() == []


def test_http_exporter_spans_reach_the_file(receiver):
    ids = _emit(HttpExporter(endpoint=receiver.http_endpoint), "gpuhost2", 22)
    assert receiver.wait_for(2, timeout=10)
    _check_file(receiver.out_path, ids, "gpuhost2", 22)


def test_gzip_compressed_exporters(receiver):
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import Compression as GrpcCompression
    from opentelemetry.exporter.otlp.proto.http import Compression as HttpCompression

    _emit(GrpcExporter(endpoint=receiver.grpc_endpoint, insecure=True, compression=GrpcCompression.Gzip), "g", 1)
    _emit(HttpExporter(endpoint=receiver.http_endpoint, compression=HttpCompression.Gzip), "h", 2)
    assert receiver.wait_for(4, timeout=10)
    assert {ln.host for ln in read_trace(receiver.out_path).lanes} == {"g", "h"}
    assert receiver.stats().rejected == 0


def test_many_processes_at_once(receiver):
    def work(i):
        exp = GrpcExporter(endpoint=receiver.grpc_endpoint, insecure=True) if i % 2 else HttpExporter(endpoint=receiver.http_endpoint)
        _emit(exp, f"h{i}", 100 + i)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert receiver.wait_for(12, timeout=10)
    tl = read_trace(receiver.out_path)
    assert tl.n == 12 and len({ln.host for ln in tl.lanes}) == 6
    # Every line is a whole request: concurrent appends never interleave.
    for line in receiver.out_path.read_bytes().splitlines():
        orjson.loads(line)


def _post(url, body, ctype, headers=None):
    req = urllib.request.Request(url, data=body, method="POST", headers={"Content-Type": ctype, **(headers or {})})
    try:
        with urllib.request.urlopen(req, timeout=5) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


JSON_REQ = {"resourceSpans": [{"resource": {"attributes": [{"key": "host.name", "value": {"stringValue": "j"}}]},
                               "scopeSpans": [{"spans": [{"traceId": "0af7651916cd43dd8448eb211c80319c",
                                                          "spanId": "b7ad6b7169203331", "name": "msm_h", "kind": 1,
                                                          "startTimeUnixNano": "1000", "endTimeUnixNano": "2000"}]}]}]}


def _json_req(i: int) -> bytes:
    """JSON_REQ with span id number ``i`` (> 0; same length): another request, not a retry of the first."""
    return orjson.dumps(JSON_REQ).replace(b"b7ad6b7169203331", f"{i:016x}".encode())


def test_http_json_and_gzip_bodies(receiver):
    code, body = _post(receiver.http_endpoint, orjson.dumps(JSON_REQ), "application/json")
    assert code == 200 and orjson.loads(body) == {}
    code, _ = _post(receiver.http_endpoint, gzip.compress(_json_req(2)), "application/json", {"Content-Encoding": "gzip"})
    assert code == 200
    assert receiver.stats().spans == 2
    tl = read_trace(receiver.out_path)
    assert [tl.name_of(r) for r in range(tl.n)] == ["msm_h", "msm_h"]


def test_http_refusals(receiver):
    url = receiver.http_endpoint
    bad_ids = orjson.loads(orjson.dumps(JSON_REQ))
    bad_ids["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["spanId"] = "t61rcWkgMzE="  # base64, not hex
    code, body = _post(url, orjson.dumps(bad_ids), "application/json")
    assert code == 400 and b"spanId" in body
    assert _post(url, b"not json", "application/json")[0] == 400
    code, body = _post(url, b'{"resourceSpans":[{"scopeSpans":null}]}', "application/json")
    assert code == 400 and b"scopeSpans" in body
    assert _post(url, b"\xff\xff\xff", "application/x-protobuf")[0] == 400
    assert _post(url, b"x", "text/plain")[0] == 415
    assert _post(url.replace("/v1/traces", "/v1/logs"), b"{}", "application/json")[0] == 404
    small = OtlpReceiver(None, "127.0.0.1:0", receiver.out_path.with_name("small.jsonl"), max_request_bytes=100).start()
    try:
        assert _post(small.http_endpoint, orjson.dumps(JSON_REQ) + b" " * 200, "application/json")[0] == 413
        bomb = gzip.compress(b" " * 10_000)  # small on the wire, too big unpacked
        assert _post(small.http_endpoint, bomb, "application/json", {"Content-Encoding": "gzip"})[0] == 413
        assert small.stats().rejected == 2
    finally:
        small.stop()
    assert receiver.stats().rejected == 6 and receiver.stats().spans == 0


def test_protobuf_http_body_answers_protobuf(receiver):
    req = trace_service_pb2.ExportTraceServiceRequest()
    span = req.resource_spans.add().scope_spans.add().spans.add()
    span.trace_id = bytes(range(16))
    span.span_id = bytes(range(8))
    span.name = "d2h"
    span.start_time_unix_nano, span.end_time_unix_nano = 5, 9
    code, body = _post(receiver.http_endpoint, req.SerializeToString(), "application/x-protobuf")
    assert code == 200
    trace_service_pb2.ExportTraceServiceResponse.FromString(body)
    line = orjson.loads(receiver.out_path.read_bytes().splitlines()[-1])
    s = line["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    assert s["traceId"] == bytes(range(16)).hex() and s["spanId"] == bytes(range(8)).hex()
    assert s["startTimeUnixNano"] == "5"
    span.span_id = b"\x01\x02\x03"  # not 8 bytes: refused, nothing written
    code, _ = _post(receiver.http_endpoint, req.SerializeToString(), "application/x-protobuf")
    assert code == 400 and receiver.stats().rejected == 1 and receiver.stats().requests == 1


def test_grpc_bad_ids_are_invalid_argument(receiver):
    import grpc
    from opentelemetry.proto.collector.trace.v1 import trace_service_pb2_grpc

    req = trace_service_pb2.ExportTraceServiceRequest()
    span = req.resource_spans.add().scope_spans.add().spans.add()
    span.trace_id, span.span_id, span.name = bytes(16), b"\x01", "x"
    with grpc.insecure_channel(receiver.grpc_endpoint) as ch:
        stub = trace_service_pb2_grpc.TraceServiceStub(ch)
        with pytest.raises(grpc.RpcError) as ei:
            stub.Export(req, timeout=5)
    assert ei.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert receiver.stats().rejected == 1 and receiver.stats().requests == 0


def test_buffer_is_bounded_and_file_keeps_everything(tmp_path):
    line_len = len(orjson.dumps(JSON_REQ))
    r = OtlpReceiver(None, "127.0.0.1:0", tmp_path / "b.jsonl", max_buffer_bytes=3 * line_len).start()
    try:
        for i in range(10):
            assert _post(r.http_endpoint, _json_req(i + 1), "application/json")[0] == 200
        st = r.stats()
        assert st.buffered_lines == 3 and st.dropped_lines == 7 and st.buffered_bytes <= 3 * line_len
        assert len(r.drain()) == 3
    finally:
        r.stop()
    assert len((tmp_path / "b.jsonl").read_bytes().splitlines()) == 10
    # 0: no queue at all (a viewer that follows the file), nothing counted as dropped.
    with OtlpReceiver(None, "127.0.0.1:0", tmp_path / "c.jsonl", max_buffer_bytes=0) as r0:
        assert _post(r0.http_endpoint, orjson.dumps(JSON_REQ), "application/json")[0] == 200
        st = r0.stats()
        assert st.buffered_lines == 0 and st.dropped_lines == 0 and st.spans == 1 and r0.drain() == []


def test_start_stop_idempotent_and_file_survives(tmp_path):
    path = tmp_path / "sub" / "x.jsonl"
    r = OtlpReceiver("127.0.0.1:0", "127.0.0.1:0", path)
    assert r.start() is r and r.start() is r and r.running
    port = r.http_port
    _post(r.http_endpoint, orjson.dumps(JSON_REQ), "application/json")
    r.stop()
    r.stop()
    assert not r.running and path.read_bytes().count(b"\n") == 1
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/traces", data=b"{}", timeout=2)
    # Restarting appends to the same file.
    with OtlpReceiver(None, "127.0.0.1:0", path) as r2:
        _post(r2.http_endpoint, orjson.dumps(JSON_REQ), "application/json")
    assert path.read_bytes().count(b"\n") == 2


def test_loopback_only_unless_asked():
    for addr in ("127.0.0.1:4317", "localhost:4317", "[::1]:4317", "127.0.0.2:0"):
        parse_address(addr)
    for addr in ("0.0.0.0:4317", "10.1.2.3:4317", "[::]:4317"):
        with pytest.raises(ReceiverAddressError, match="not loopback"):
            OtlpReceiver(addr, None, "x.jsonl")
        assert parse_address(addr, allow_remote=True)[1] == 4317
    for addr in ("4317", "127.0.0.1:http", "127.0.0.1:70000", ":4317"):
        with pytest.raises(ReceiverAddressError):
            parse_address(addr)
    with pytest.raises(ReceiverAddressError, match="nothing to listen on"):
        OtlpReceiver(None, None, "x.jsonl")


def test_port_in_use_is_an_oserror(tmp_path, receiver):
    other = OtlpReceiver(None, f"127.0.0.1:{receiver.http_port}", tmp_path / "o.jsonl")
    with pytest.raises(OSError):
        other.start()
    assert not other.running
    # gRPC too: no silent port sharing (SO_REUSEPORT) with whoever holds it.
    other = OtlpReceiver(f"127.0.0.1:{receiver.grpc_port}", None, tmp_path / "o.jsonl")
    with pytest.raises(OSError, match="gRPC"):
        other.start()
    assert not other.running


def test_import_is_light():
    import subprocess
    import sys

    code = "import sys, gputrace.interop.receiver; print([m for m in sys.modules if m.startswith(('grpc', 'opentelemetry', 'google'))])"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
