"""OTLP export through the SDK exporters to real receivers started here on 127.0.0.1.

gRPC: a grpcio TraceService server. HTTP: an http.server /v1/traces endpoint decoding protobuf.
Also: collector down (nothing listening) and slow collector (handler sleeps) never stall the run, the
file sink keeps everything, and the summary counts exported/retried/dropped.
"""

from __future__ import annotations

import http.server
import json
import socket
import threading
import time
from concurrent import futures

import grpc
import pytest
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc

import gputrace
from gputrace.trace import MemorySink, configure, phase, shutdown
from gputrace.trace.sinks.otlp import OtlpSink, resolve_protocol


class _Receiver:
    def __init__(self):
        self.requests: list = []
        self.headers: list[dict] = []
        self.delay_s = 0.0
        self.lock = threading.Lock()

    def record(self, req, headers):
        with self.lock:
            self.requests.append(req)
            self.headers.append(headers)

    def spans(self):
        with self.lock:
            reqs = list(self.requests)
        out = []
        for req in reqs:
            for rs in req.resource_spans:
                res = {kv.key: kv.value for kv in rs.resource.attributes}
                for ss in rs.scope_spans:
                    for sp in ss.spans:
                        out.append((res, ss.scope, sp))
        return out


@pytest.fixture
def grpc_receiver():
    rec = _Receiver()

    class Servicer(trace_service_pb2_grpc.TraceServiceServicer):
        def Export(self, request, context):
            if rec.delay_s:
                time.sleep(rec.delay_s)
            rec.record(request, dict(context.invocation_metadata()))
            return trace_service_pb2.ExportTraceServiceResponse()

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(Servicer(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    rec.endpoint = f"http://127.0.0.1:{port}"
    yield rec
    server.stop(grace=None)


@pytest.fixture
def http_receiver():
    rec = _Receiver()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self):
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            if rec.delay_s:
                time.sleep(rec.delay_s)
            if self.path != "/v1/traces":
                self.send_response(404)
                self.end_headers()
                return
            req = trace_service_pb2.ExportTraceServiceRequest()
            req.ParseFromString(body)
            rec.record(req, {k.lower(): v for k, v in self.headers.items()})
            out = trace_service_pb2.ExportTraceServiceResponse().SerializeToString()
            try:
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)
            except (BrokenPipeError, ConnectionResetError):
                pass

        def log_message(self, *a):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    t = threading.Thread(target=server.serve_forever, daemon=True)
    t.start()
    rec.endpoint = f"http://127.0.0.1:{server.server_address[1]}"
    yield rec
    server.shutdown()
    server.server_close()


def _workload():
    with phase("prove", circuit=4, batch=2):
        with phase("ntt", device=1, bytes=1 << 20, note="x"):
            pass
        try:
            with phase("msm_h", device=1):
                raise ValueError("bad point")
        except ValueError:
            pass


def _check_arrived(rec: _Receiver, run_id: str):
    got = rec.spans()
    assert len(got) == 3
    by = {sp.name: (res, scope, sp) for res, scope, sp in got}
    res, scope, prove = by["prove"]
    assert res["service.name"].string_value == "prover"
    assert res["gputrace.run_id"].string_value == run_id
    assert res["gputrace.config.pin"].bool_value is True
    assert res["process.pid"].int_value > 0
    assert scope.name == "gputrace" and scope.version == gputrace.__version__
    _, _, ntt = by["ntt"]
    _, _, msm = by["msm_h"]
    assert ntt.parent_span_id == prove.span_id and ntt.trace_id == prove.trace_id
    assert len(prove.trace_id) == 16 and len(prove.span_id) == 8
    attrs = {kv.key: kv.value for kv in ntt.attributes}
    assert attrs["gputrace.device"].int_value == 1
    assert attrs["gputrace.bytes"].int_value == 1 << 20
    assert attrs["gputrace.kind"].string_value == "gpu"
    assert attrs["note"].string_value == "x"
    assert ntt.start_time_unix_nano <= ntt.end_time_unix_nano
    assert prove.start_time_unix_nano <= ntt.start_time_unix_nano
    assert msm.status.code == 2 and "bad point" in msm.status.message
    assert {kv.key: kv.value for kv in msm.attributes}["exception.type"].string_value == "ValueError"


@pytest.mark.parametrize("protocol", ["grpc", "http/protobuf"])
@pytest.mark.slow
def test_spans_attributes_resource_arrive(protocol, grpc_receiver, http_receiver):
    rec = grpc_receiver if protocol == "grpc" else http_receiver
    r = configure(otlp={"protocol": protocol, "endpoint": rec.endpoint, "timeout_s": 5},
                  service_name="prover", config={"pin": True}, collect_gpu_info=False)
    _workload()
    s = shutdown()
    _check_arrived(rec, r.run_id)
    sink = s.sinks[0]
    assert (sink.exported, sink.dropped) == (3, 0)


def test_env_vars_select_protocol_endpoint_headers(http_receiver, monkeypatch):
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", http_receiver.endpoint)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_HEADERS", "x-team-token=s3cret,x-run=ab")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "5")
    r = configure(otlp=True, service_name="prover", config={"pin": True}, collect_gpu_info=False)
    _workload()
    s = shutdown()
    assert s.sinks[0].name.startswith("otlp-http")
    _check_arrived(http_receiver, r.run_id)
    assert http_receiver.headers[0]["x-team-token"] == "s3cret"
    assert http_receiver.headers[0]["x-run"] == "ab"


def test_grpc_headers_from_env(grpc_receiver, monkeypatch):
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "grpc")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", grpc_receiver.endpoint)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_HEADERS", "x-team-token=abc")
    configure(otlp=True, collect_gpu_info=False)
    with phase("prove"):
        pass
    shutdown()
    assert len(grpc_receiver.spans()) == 1
    assert grpc_receiver.headers[0]["x-team-token"] == "abc"


def test_protocol_resolution(monkeypatch):
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_PROTOCOL", raising=False)
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", raising=False)
    assert resolve_protocol() == "grpc"
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
    assert resolve_protocol() == "http"
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "grpc")
    assert resolve_protocol() == "grpc"
    with pytest.raises(ValueError, match="OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"):
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "carrier-pigeon")
        resolve_protocol()


def _free_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there afterwards
    return port


def _timed_workload(n: int) -> float:
    t0 = time.perf_counter()
    for i in range(n):
        with phase("ntt", device=0, circuit=i):
            pass
        if i % 1000 == 0:
            time.sleep(0.01)  # let the exporter drain a few times during the run
    return time.perf_counter() - t0


@pytest.mark.parametrize("protocol", ["grpc", "http/protobuf"])
@pytest.mark.slow
def test_collector_down_does_not_stall(protocol, tmp_path):
    path = tmp_path / "run.jsonl"
    port = _free_port()
    mem = MemorySink()
    configure(trace_file=path, sinks=[mem], collect_gpu_info=False, flush_interval_s=0.05,
              otlp={"protocol": protocol, "endpoint": f"http://127.0.0.1:{port}", "timeout_s": 0.5,
                    "max_queue_spans": 2000, "batch_size": 500, "close_timeout_s": 1.0})
    elapsed = _timed_workload(5000)
    t0 = time.perf_counter()
    s = shutdown()
    shutdown_s = time.perf_counter() - t0
    assert elapsed < 5.0  # 5000 phases take milliseconds; a blocking export would take seconds
    assert shutdown_s < 5.0
    assert s.spans_recorded == 5000 and len(mem.spans) == 5000
    lines = path.read_text().splitlines()
    assert sum(len(json.loads(ln)["resourceSpans"][0]["scopeSpans"][0]["spans"]) for ln in lines) == 5000
    otlp = next(x for x in s.sinks if x.name.startswith("otlp"))
    assert otlp.exported == 0
    assert otlp.dropped == 5000  # every span accounted for: queue full, retries exhausted or left at close
    assert otlp.retried > 0
    assert otlp.errors
    assert "otlp" in str(s)


@pytest.mark.slow
def test_slow_collector_does_not_stall(grpc_receiver, tmp_path):
    grpc_receiver.delay_s = 1.5  # longer than the exporter's timeout: every attempt times out
    path = tmp_path / "run.jsonl"
    configure(trace_file=path, collect_gpu_info=False, flush_interval_s=0.05,
              otlp={"protocol": "grpc", "endpoint": grpc_receiver.endpoint, "timeout_s": 0.3,
                    "max_queue_spans": 1000, "batch_size": 250, "max_retries": 1, "close_timeout_s": 1.0})
    elapsed = _timed_workload(4000)
    time.sleep(1.0)  # the run goes on for a while: attempts time out and get retried meanwhile
    t0 = time.perf_counter()
    s = shutdown()
    assert elapsed < 5.0 and time.perf_counter() - t0 < 6.0
    assert s.sink(f"file:{path}").exported == 4000
    otlp = next(x for x in s.sinks if x.name.startswith("otlp"))
    assert otlp.exported + otlp.dropped == 4000  # none lost silently
    assert otlp.dropped > 0 and otlp.retried > 0


@pytest.mark.slow
def test_slow_but_within_timeout_delivers_everything(http_receiver):
    http_receiver.delay_s = 0.2
    configure(otlp={"protocol": "http/protobuf", "endpoint": http_receiver.endpoint, "timeout_s": 5,
                    "batch_size": 100}, collect_gpu_info=False, flush_interval_s=0.05)
    elapsed = _timed_workload(1000)
    s = shutdown()
    assert elapsed < 3.0
    assert s.sinks[0].exported == 1000 and s.sinks[0].dropped == 0
    assert len(http_receiver.spans()) == 1000


def test_custom_exporter_failures_are_retried_then_counted():
    from opentelemetry.sdk.trace.export import SpanExportResult

    class Flaky:
        def __init__(self):
            self.calls = 0

        def export(self, spans):
            self.calls += 1
            return SpanExportResult.FAILURE if self.calls % 2 else SpanExportResult.SUCCESS

        def shutdown(self):
            pass

    exp = Flaky()
    sink = OtlpSink(exporter=exp, batch_size=10, max_retries=1)
    configure(sinks=[sink], collect_gpu_info=False, flush_interval_s=0.05)
    for _ in range(30):
        with phase("ntt"):
            pass
    s = shutdown()
    st = s.sinks[0]
    assert st.exported == 30 and st.dropped == 0 and st.retried >= 10
