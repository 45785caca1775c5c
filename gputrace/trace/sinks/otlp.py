"""``OtlpSink``: OTLP over gRPC or HTTP/protobuf through the OpenTelemetry SDK's span exporters.

Threading: ``export`` (exporter thread) only appends the batch to a bounded queue and returns. A worker
thread per sink (``gputrace-otlp-<protocol>``) builds SDK ``ReadableSpan`` objects and calls the SDK
exporter. A collector that is down or slow therefore never stalls the run: when the queue holds
``max_queue_spans`` spans, new batches are dropped and counted.

Counting: ``exported`` = spans in batches the collector accepted. ``retried`` = spans re-sent, both the
SDK exporter's own transient-error retries (it logs "Transient error ... retrying in"; a log filter on
the worker thread counts these and keeps them off the console) and this sink's re-queues after a failed
attempt (``max_retries`` per batch, backoff 0.5 s doubling). ``dropped`` = queue full, retries
exhausted, or still queued when ``close`` times out.

Configuration (argument, else environment, else default): ``protocol`` from
OTEL_EXPORTER_OTLP_TRACES_PROTOCOL / OTEL_EXPORTER_OTLP_PROTOCOL (``grpc`` or ``http/protobuf``; default
``grpc``); endpoint, headers, timeout and TLS settings are passed to the SDK exporter, which reads
OTEL_EXPORTER_OTLP_[TRACES_]ENDPOINT, _HEADERS, _TIMEOUT, _CERTIFICATE, _COMPRESSION itself. The OTel SDK is
imported here only, when a sink is created.
"""

from __future__ import annotations

import collections
import logging
import os
import threading
import time
from collections.abc import Mapping
from typing import Any

from gputrace import __version__
from gputrace.trace.sinks.base import Sink

_PROTOCOLS = {"grpc": "grpc", "http/protobuf": "http", "http": "http", "http/json": None}
_SDK_LOGGERS = (
    "opentelemetry.exporter.otlp.proto.grpc.exporter",
    "opentelemetry.exporter.otlp.proto.http.trace_exporter",
)


def resolve_protocol(protocol: str | None = None) -> str:
    """'grpc' or 'http' from the argument or OTEL_EXPORTER_OTLP_[TRACES_]PROTOCOL. Raises ValueError."""
    src = "protocol argument"
    if protocol is None:
        for var in ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"):
            if os.environ.get(var, "").strip():
                protocol, src = os.environ[var].strip(), var
                break
        else:
            protocol = "grpc"
    p = _PROTOCOLS.get(protocol.lower())
    if p is None:
        raise ValueError(
            f"{src}: unsupported OTLP protocol {protocol!r} (use 'grpc' or 'http/protobuf'; the Python SDK has "
            "no http/json exporter; write a JSON Lines file with trace_file= instead)"
        )
    return p


class _RetryCounter(logging.Filter):
    """Counts the SDK exporters' transient-error retries made on a sink's worker thread (and hides
    those log lines and the final failure line, which the run summary reports instead)."""

    def __init__(self) -> None:
        super().__init__()
        self.by_thread: dict[int, OtlpSink] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        sink = self.by_thread.get(threading.get_ident())
        if sink is None:
            return True
        msg = str(record.msg)
        try:
            text = record.getMessage()
        except Exception:  # noqa: BLE001 a broken log record keeps its format string
            text = msg
        if "retrying in" in msg:
            sink._sdk_retry()
            sink._last_transient = text.split(", retrying in")[0][:400]  # e.g. the refused connection
            return False
        if record.levelno >= logging.WARNING:
            if "hutdown" not in text:  # "Shutdown in progress" / "already shutdown": our close, not the cause
                sink._last_sdk_error = text[:400]
            return False
        return True


_counter = _RetryCounter()
for _name in _SDK_LOGGERS:
    logging.getLogger(_name).addFilter(_counter)


class OtlpSink(Sink):
    """Export spans with ``OTLPSpanExporter`` (gRPC or HTTP) from a worker thread with a bounded queue.

    ``exporter``: an already built SDK ``SpanExporter`` (tests); otherwise one is made from ``protocol``,
    ``endpoint``, ``headers``, ``timeout_s`` (None = SDK/environment defaults). Raises ValueError for an
    unknown protocol.
    """

    def __init__(
        self,
        protocol: str | None = None,
        endpoint: str | None = None,
        headers: Mapping[str, str] | None = None,
        timeout_s: float | None = None,
        *,
        insecure: bool | None = None,
        max_queue_spans: int = 1 << 16,
        batch_size: int = 512,
        max_retries: int = 2,
        close_timeout_s: float = 5.0,
        exporter: Any = None,
    ) -> None:
        super().__init__()
        self.protocol = resolve_protocol(protocol) if exporter is None else (protocol or "custom")
        self.endpoint = endpoint
        self.name = f"otlp-{self.protocol}" + (f":{endpoint}" if endpoint else "")
        self.max_queue_spans = int(max_queue_spans)
        self.batch_size = max(1, int(batch_size))
        self.max_retries = max(0, int(max_retries))
        self.close_timeout_s = float(close_timeout_s)
        if exporter is None:
            exporter = self._make_exporter(endpoint, headers, timeout_s, insecure)
        self._exporter = exporter
        self._queue: collections.deque = collections.deque()  # (spans, attempt, not_before)
        self._queued = 0
        self._inflight = 0
        self._cv = threading.Condition()
        self._closing = False
        self._closed = False
        self._abandoned = False
        self._last_sdk_error: str | None = None
        self._last_transient: str | None = None  # the last "Transient error ... retrying" reason
        self._exporter_shut = False
        self._sdk_retries_in_batch = 0
        self._sdk_resource: Any = None  # the SDK's Resource and InstrumentationScope, built by start()
        self._scope: Any = None
        self._worker = threading.Thread(target=self._run, name=f"gputrace-otlp-{self.protocol}", daemon=True)

    def _make_exporter(self, endpoint, headers, timeout_s, insecure):
        kw: dict[str, Any] = {}
        if endpoint is not None:
            bare = "://" in endpoint and endpoint.split("://", 1)[1].rstrip("/").count("/") == 0
            if self.protocol == "http" and bare:
                endpoint = endpoint.rstrip("/") + "/v1/traces"  # a base URL, as in OTEL_EXPORTER_OTLP_ENDPOINT
            kw["endpoint"] = endpoint
        if headers is not None:
            kw["headers"] = dict(headers)
        if timeout_s is not None:
            kw["timeout"] = float(timeout_s)
        if self.protocol == "grpc":
            from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

            if headers is not None:
                kw["headers"] = tuple(dict(headers).items())
            if insecure is not None:
                kw["insecure"] = insecure
            return OTLPSpanExporter(**kw)
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpSpanExporter

        return HttpSpanExporter(**kw)

    # -- Sink API (exporter thread) ----------------------------------------------------------------
    def start(self, resource: Mapping[str, Any]) -> None:
        super().start(resource)
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import ReadableSpan
        from opentelemetry.sdk.util.instrumentation import InstrumentationScope
        from opentelemetry.trace import SpanContext, SpanKind, Status, StatusCode, TraceFlags

        self._sdk = (ReadableSpan, SpanContext, SpanKind, Status, StatusCode, TraceFlags)
        self._sdk_resource = Resource({k: _otel_value(v) for k, v in self.resource.items()})
        self._scope = InstrumentationScope("gputrace", __version__)
        self._worker.start()

    def export(self, spans: list[dict]) -> None:
        with self._cv:
            if self._closing:
                self.stats.add(dropped=len(spans), error="OTLP sink closed")
                return
            for i in range(0, len(spans), self.batch_size):
                chunk = spans[i : i + self.batch_size]
                if self._queued + len(chunk) > self.max_queue_spans:
                    self.stats.add(dropped=len(chunk), error="queue full (collector slow or down)")
                    continue
                self._queue.append((chunk, 0, 0.0))
                self._queued += len(chunk)
            self._cv.notify()

    def close(self, timeout_s: float | None = None) -> None:
        """Send what is queued for up to ``timeout_s`` (default ``close_timeout_s``); count the rest as
        dropped; shut the exporter down. Returns within ``timeout_s`` (plus a few ms) whatever the
        collector does: the last quarter (at most 0.5 s) is kept for shutting the exporter down, and a
        worker still blocked in the network after that is abandoned (its batch counted as dropped)."""
        if self._closed:
            return
        self._closed = True
        if timeout_s is None:
            timeout_s = self.close_timeout_s
        t0 = time.monotonic()
        deadline = t0 + timeout_s
        drain_until = deadline - min(0.5, timeout_s / 4)
        with self._cv:
            self._closing = True
            self._cv.notify_all()
            while (self._queue or self._inflight) and self._worker.is_alive():
                left = drain_until - time.monotonic()
                if left <= 0:
                    break
                self._cv.wait(left)
            left_over = sum(len(b[0]) for b in self._queue)
            self._queue.clear()
            self._queued = self._inflight
        if left_over:
            self.stats.add(dropped=left_over, error="still queued at shutdown")
        self._exporter_shut = True
        try:
            self._exporter.shutdown()  # aborts an SDK retry backoff in progress
        except Exception as e:  # noqa: BLE001 recorded in the sink's stats
            self.stats.add(error=f"exporter shutdown: {e}")
        self._worker.join(timeout=max(0.0, deadline - time.monotonic()))
        if self._worker.is_alive():  # an export call still blocked in the network: count it as lost
            with self._cv:
                if self._inflight:
                    self.stats.add(dropped=self._inflight, error="export still in flight at shutdown")
                    self._inflight = 0
                self._abandoned = True

    # -- worker thread -----------------------------------------------------------------------------
    def _sdk_retry(self) -> None:
        self._sdk_retries_in_batch += 1

    def _run(self) -> None:
        _counter.by_thread[threading.get_ident()] = self
        try:
            while True:
                with self._cv:
                    while True:
                        if self._queue:
                            spans, attempt, not_before = self._queue[0]
                            wait = not_before - time.monotonic()
                            if wait <= 0 or self._closing:
                                self._queue.popleft()  # its slots stay reserved until _send is done
                                self._inflight = len(spans)
                                break
                            self._cv.wait(wait)
                        elif self._closing:
                            return
                        else:
                            self._cv.wait()
                requeued = self._send(spans, attempt)
                with self._cv:
                    if not requeued:
                        self._queued -= len(spans)
                    self._inflight = 0
                    self._cv.notify_all()
        finally:
            _counter.by_thread.pop(threading.get_ident(), None)

    def _send(self, spans: list[dict], attempt: int) -> bool:
        """One export attempt; returns True when the batch went back on the queue for a retry (it keeps
        its reserved queue slots, so a retry is never crowded out by newer batches)."""
        from opentelemetry.sdk.trace.export import SpanExportResult

        self._sdk_retries_in_batch = 0
        self._last_sdk_error = None
        if self._exporter_shut:  # close() shut the exporter down: an export now would only say so
            with self._cv:
                if not self._abandoned:
                    self.stats.add(dropped=len(spans),
                                   error=None if self.stats.errors else "not sent before the sink closed")
            return False
        try:
            readable = [self._readable(s) for s in spans]
        except Exception as e:  # noqa: BLE001 recorded in the sink's stats
            self.stats.add(dropped=len(spans), error=f"building SDK spans: {type(e).__name__}: {e}")
            return False
        try:
            result = self._exporter.export(readable)
            ok = result == SpanExportResult.SUCCESS
            err = self._last_sdk_error or self._last_transient or ("export failed" if not ok else None)
        except Exception as e:  # noqa: BLE001 recorded in the sink's stats
            ok, err = False, f"{type(e).__name__}: {e}"
        n = len(spans)
        retried = self._sdk_retries_in_batch * n
        with self._cv:
            if self._abandoned:  # close() gave up on this batch and already counted it as dropped
                return False
            if ok:
                self.stats.add(exported=n, retried=retried)
                return False
            if attempt < self.max_retries:  # also while closing: close() bounds the total time
                self._queue.appendleft((spans, attempt + 1, time.monotonic() + 0.5 * 2**attempt))
                self.stats.add(retried=retried + n, error=err)
                return True
            self.stats.add(retried=retried, dropped=n, error=err)
            return False

    def _readable(self, s: dict):
        ReadableSpan, SpanContext, SpanKind, Status, StatusCode, TraceFlags = self._sdk
        flags = TraceFlags(TraceFlags.SAMPLED)
        ctx = SpanContext(s["trace_id"], s["span_id"], is_remote=False, trace_flags=flags)
        psid = s.get("parent_span_id")
        parent = SpanContext(s["trace_id"], psid, is_remote=False, trace_flags=flags) if psid else None
        code = s.get("status_code", 0)
        status = Status(StatusCode.ERROR, s.get("status_message") or None) if code == 2 else Status(StatusCode.UNSET)
        attrs = s.get("attributes") or {}
        return ReadableSpan(
            name=s["name"],
            context=ctx,
            parent=parent,
            resource=self._sdk_resource,
            attributes={k: _otel_value(v) for k, v in attrs.items()},
            kind=SpanKind.INTERNAL,
            status=status,
            start_time=int(s["start_ns"]),
            end_time=int(s["end_ns"]),
            instrumentation_scope=self._scope,
        )


def _otel_value(v):
    """Coerce to an OTel attribute value (str/bool/int/float or a homogeneous sequence of them)."""
    if isinstance(v, (str, bool, int, float)):
        return v
    if isinstance(v, (list, tuple)) and all(isinstance(x, (str, bool, int, float)) for x in v):
        return list(v)
    return str(v)


def otlp_sink_from(spec: Any) -> OtlpSink:
    """``configure(otlp=...)`` -> OtlpSink: True (all from OTEL_* env), 'grpc'/'http'/'http/protobuf',
    an endpoint URL (protocol from env or default), or a mapping of ``OtlpSink`` keyword arguments."""
    if spec is True:
        return OtlpSink()
    if isinstance(spec, str):
        if spec.lower() in _PROTOCOLS:
            return OtlpSink(protocol=spec)
        if "://" in spec:
            return OtlpSink(endpoint=spec)
        raise ValueError(f"otlp: expected True, 'grpc', 'http/protobuf', an endpoint URL or a dict, got {spec!r}")
    if isinstance(spec, Mapping):
        return OtlpSink(**spec)
    raise ValueError(f"otlp: expected True, 'grpc', 'http/protobuf', an endpoint URL or a dict, got {spec!r}")
