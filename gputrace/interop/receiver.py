"""A local OTLP trace receiver: gRPC ``TraceService/Export`` and HTTP ``POST /v1/traces``.

Every accepted request becomes one OTLP JSON line (the file-exporter format gputrace reads: hex
ids, camelCase, integer enums, 64-bit numbers as strings), appended to ``out_path`` (unbuffered: in the
OS's hands) before the sender gets its response, so nothing received is lost when the viewer closes. A
line is written whole or not at all: when the write fails (a full disk), the file is cut back to its
length before the write and the sender is answered 503 (gRPC: ``UNAVAILABLE``), never success; one
receiver per file. The same lines are kept in a bounded in-memory queue that a viewer drains
(:meth:`OtlpReceiver.drain`); when undrained lines exceed ``max_buffer_bytes`` the oldest are dropped from
the queue (they stay in the file) and counted in :attr:`ReceiverStats.dropped_lines`.
``max_buffer_bytes=0`` keeps no queue at all, for a viewer that follows the file instead.

Addresses: loopback only (``127.0.0.1``, ``::1``, ``localhost``) unless ``allow_remote=True``; any
other address raises :class:`ReceiverAddressError` at construction. Port 0 binds an ephemeral
port (read :attr:`grpc_port` / :attr:`http_port` after :meth:`start`). Either address may be None
to leave that protocol off.

Retries: delivery from an OTLP sender is at-least-once (it sends a request again when it got no answer,
and the answer can be lost after the spans were stored: the sender hung up or its connection broke in
between). The receiver stores such a request once: it remembers a digest of the last ``dedup_window``
(default ``DEDUP_WINDOW``, 4096) requests it stored (``receiver_retries``: BLAKE2b-256 of the body after
gunzip, or of a gRPC request's deterministic serialization) and answers a byte-identical body again as it
did the first time (200, with the same ``partial_success`` if any) without storing it, counted in
:attr:`ReceiverStats.duplicates`. A body that differs in any byte (same span ids or not) is stored. Outside
the window a retry is stored again: one that arrives after ``dedup_window`` other requests were stored
since, or after a restart of the process (the window is not persisted); ``dedup_window=0`` turns it off.
A request whose store failed is not remembered, so its retry is stored. The check, the write and the
remembering happen under the file lock, so two connections delivering the same body at once store it once.

What is stored is validated first (``receiver_validate.clean_request``): only spans a strict read of
the file accepts (integer times in range, end not before start, hex ids of the right length, status
code 0-2, attribute nesting bounded) reach the file; the others are rejected and counted.

HTTP accepts ``application/x-protobuf`` and ``application/json`` bodies, optionally
``Content-Encoding: gzip``, and answers as the OTLP/HTTP spec says: 200 with an empty
``ExportTraceServiceResponse`` in the request's encoding when everything was stored, 200 with
``partial_success`` (``rejected_spans`` and the first problem) when some spans were rejected, 400 when
nothing could be stored (undecodable body, body shorter than its ``Content-Length``, every span
invalid, nesting deeper than a stored line may have), 404/405 for other paths/methods, 411 without a
length, 413 above ``max_request_bytes`` (also enforced after gunzip), 415 for other content types, 431 for
a head over 64 KiB, 503 with ``Retry-After`` when its connection pool is full. gRPC applies the same
validation (``INVALID_ARGUMENT`` when nothing can be stored, ``partial_success`` otherwise) and size
limit (``RESOURCE_EXHAUSTED`` above it).

Limits: listen backlog ``receiver_http_server.BACKLOG`` (512); an HTTP connection waits for its request head
without a worker (``receiver_http_server.HeaderWait``, at most ``timeout_s``), then is served by a pool of
``max_workers`` threads (default 32); at most ``max_workers + max_pending`` connections are open (then
503); a worker's connection has a ``timeout_s`` socket timeout (default 10 s) so a stalled client is
disconnected, a kept-alive one idles at most 2 s, and while connections wait every answer closes its
connection. A request whose sender left (HTTP: reset its connection; gRPC: cancelled) before it is stored
is not stored (``ReceiverStats.abandoned``); an HTTP sender that only half-closed (or closed: a FIN cannot
tell) is stored and answered, its retry recognised by the retry window. gRPC runs on 4
threads with at most ``max_workers`` concurrent calls (``RESOURCE_EXHAUSTED`` beyond). All of them append
under one lock.
:meth:`start` and :meth:`stop` are idempotent and may be called from any thread; :meth:`drain`,
:meth:`stats` and :meth:`wait_for` too. grpcio and opentelemetry-proto are imported on
:meth:`start`, so importing this module is cheap.
"""


from __future__ import annotations

import collections
import dataclasses
import errno
import io
import os
import threading
from pathlib import Path
from typing import Any

from gputrace.interop.receiver_address import (
    ListenFailed,
    ReceiverAddressError,
    bind_problem,
    listen_failed,
    parse_address,
)
from gputrace.interop.receiver_convert import request_to_dict, request_to_json
from gputrace.interop.receiver_http import Http, Http6, make_handler
from gputrace.interop.receiver_retries import RecentRequests, request_digest
from gputrace.interop.receiver_validate import clean_request

__all__ = ["DEDUP_WINDOW", "ListenFailed", "OtlpReceiver", "ReceiverAddressError", "ReceiverStats", "request_to_json",
           "parse_address", "request_to_dict"]


#: Stored requests remembered by default so that a sender's retry of one is not stored again (module doc).
DEDUP_WINDOW = 4096


@dataclasses.dataclass(frozen=True)
class ReceiverStats:
    """Counters since construction (a snapshot)."""

    requests: int = 0
    spans: int = 0
    bytes_written: int = 0
    buffered_lines: int = 0
    buffered_bytes: int = 0
    dropped_lines: int = 0  # dropped from the in-memory queue (still in the file)
    rejected: int = 0  # requests refused (bad body, too large, wrong type, nothing valid)
    rejected_spans: int = 0  # spans left out of otherwise stored requests (partial success)
    abandoned: int = 0  # valid requests not stored because their sender had left before the answer
    duplicates: int = 0  # retries of a request already stored (same body, within the window): answered, not stored


class OtlpReceiver:
    """OTLP gRPC + HTTP receiver writing OTLP JSONL (see the module docstring for the contract)."""

    def __init__(
        self,
        grpc_addr: str | None = "127.0.0.1:4317",
        http_addr: str | None = "127.0.0.1:4318",
        out_path: str | Path = "runs/live.jsonl",
        max_buffer_bytes: int = 64 << 20,
        *,
        allow_remote: bool = False,
        max_request_bytes: int = 32 << 20,
        timeout_s: float = 10.0,
        max_workers: int = 32,
        max_pending: int = 256,
        dedup_window: int = DEDUP_WINDOW,
    ) -> None:
        if grpc_addr is None and http_addr is None:
            raise ReceiverAddressError("both grpc_addr and http_addr are None: nothing to listen on")
        self._grpc_hp = parse_address(grpc_addr, allow_remote) if grpc_addr is not None else None
        self._http_hp = parse_address(http_addr, allow_remote) if http_addr is not None else None
        self.out_path = Path(out_path)
        self.max_buffer_bytes = int(max_buffer_bytes)
        self.max_request_bytes = int(max_request_bytes)
        self.timeout_s = float(timeout_s)
        self.max_workers = max(1, int(max_workers))
        self.max_pending = max(0, int(max_pending))
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._state_lock = threading.Lock()
        self._queue: collections.deque[bytes] = collections.deque()
        self._queued_bytes = 0
        self._counts = dict(requests=0, spans=0, bytes_written=0, dropped_lines=0, rejected=0, rejected_spans=0,
                            abandoned=0, duplicates=0)
        self._recent = RecentRequests(dedup_window)  # digests of stored requests; under _lock
        self._torn = False  # the file ends in a torn line a failed write could not cut off; under _lock
        self._file: io.FileIO | None = None
        self._grpc_server: Any = None  # a grpc.Server once started (grpcio ships no annotations)
        self._http_server: Http | None = None
        self._http_thread: threading.Thread | None = None
        self.grpc_port: int | None = None
        self.http_port: int | None = None

    # ---- lifecycle --------------------------------------------------------------------------
    def start(self) -> OtlpReceiver:
        """Bind and serve (returns self). Idempotent. Raises OSError if a port cannot be bound
        (everything started so far is stopped again)."""
        with self._state_lock:
            if self._file is not None:
                return self
            self.out_path.parent.mkdir(parents=True, exist_ok=True)
            self._file = open(self.out_path, "ab", buffering=0)  # (each line one write, no buffer to flush)
            try:
                if self._grpc_hp is not None:
                    self._start_grpc(*self._grpc_hp)
                if self._http_hp is not None:
                    self._start_http(*self._http_hp)
            except BaseException:
                self._stop_locked()
                raise
            return self

    def stop(self) -> None:
        """Stop serving and close the file. Idempotent; in-flight requests get up to 1 s."""
        with self._state_lock:
            self._stop_locked()

    def _stop_locked(self) -> None:
        if self._grpc_server is not None:
            self._grpc_server.stop(grace=1.0).wait(5.0)
            self._grpc_server = None
        if self._http_server is not None:
            self._http_server.shutdown()
            self._http_server.server_close()
            self._http_server = None
        if self._http_thread is not None:
            self._http_thread.join(5.0)
            self._http_thread = None
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None
            self._cond.notify_all()

    def __enter__(self) -> OtlpReceiver:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    @property
    def running(self) -> bool:
        return self._file is not None

    @property
    def grpc_endpoint(self) -> str | None:
        """``host:port`` for an OTLP gRPC exporter (after start)."""
        if self._grpc_hp is None or self.grpc_port is None:
            return None
        h = self._grpc_hp[0]
        return f"[{h}]:{self.grpc_port}" if ":" in h else f"{h}:{self.grpc_port}"

    @property
    def http_endpoint(self) -> str | None:
        """``http://host:port/v1/traces`` for an OTLP HTTP exporter (after start)."""
        if self._http_hp is None or self.http_port is None:
            return None
        h = self._http_hp[0]
        return f"http://[{h}]:{self.http_port}/v1/traces" if ":" in h else f"http://{h}:{self.http_port}/v1/traces"

    def _start_grpc(self, host: str, port: int) -> None:
        from concurrent import futures

        problem = bind_problem(host, port, "OTLP/gRPC")
        if problem is not None:
            raise problem
        # gRPC's C core logs bind failures to stderr itself (over the TUI); the error raised says it once.
        os.environ.setdefault("GRPC_VERBOSITY", "NONE")
        import grpc
        from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc

        receiver = self

        class _TraceService(trace_service_pb2_grpc.TraceServiceServicer):
            def Export(self, request, context):  # noqa: N802 - gRPC method name
                try:
                    line, n, rejected, why = clean_request(request_to_dict(request))
                except ValueError as exc:  # RequestRejected, or an id of the wrong length
                    receiver._reject()
                    context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
                if not context.is_active():  # the caller cancelled or its deadline passed: store nothing
                    receiver._abandon(n)
                    context.abort(grpc.StatusCode.CANCELLED, "the caller left before the answer")
                stored = False
                if n:
                    digest = request_digest(b"proto", request.SerializeToString(deterministic=True))
                    try:
                        stored = receiver._ingest(line, n, digest)
                    except OSError as exc:  # nothing written (a full disk, stopping): the sender may retry
                        context.abort(grpc.StatusCode.UNAVAILABLE, f"not stored: {exc}")
                resp = trace_service_pb2.ExportTraceServiceResponse()
                if rejected:
                    if stored:  # (a retry's rejected spans were counted the first time)
                        receiver._reject_spans(rejected)
                    resp.partial_success.rejected_spans = rejected
                    resp.partial_success.error_message = why
                return resp

        server = grpc.server(
            futures.ThreadPoolExecutor(max_workers=4, thread_name_prefix="gputrace-otlp-grpc"),
            # so_reuseport=0: gRPC would otherwise share a port already in use (e.g. with a running
            # collector) and split the traffic silently; binding must fail instead.
            options=[("grpc.max_receive_message_length", self.max_request_bytes), ("grpc.so_reuseport", 0)],
            maximum_concurrent_rpcs=self.max_workers + self.max_pending,
        )
        trace_service_pb2_grpc.add_TraceServiceServicer_to_server(_TraceService(), server)
        target = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        try:
            bound = server.add_insecure_port(target)
        except RuntimeError:  # grpcio raises RuntimeError when it cannot bind (a race with the probe)
            raise ListenFailed(errno.EADDRINUSE, f"port {port} (OTLP/gRPC) cannot be bound") from None
        if not bound:
            raise ListenFailed(errno.EADDRINUSE, f"port {port} (OTLP/gRPC) cannot be bound")
        server.start()
        self._grpc_server = server
        self.grpc_port = bound

    def _start_http(self, host: str, port: int) -> None:
        from opentelemetry.proto.collector.trace.v1 import trace_service_pb2

        cls = Http6 if ":" in host else Http
        try:
            server = cls((host, port), make_handler(self, trace_service_pb2, request_to_dict, self.timeout_s),
                         max_workers=self.max_workers, max_pending=self.max_pending, head_timeout_s=self.timeout_s)
        except OSError as exc:
            raise listen_failed(exc, port, "OTLP/HTTP") from None
        self._http_server = server
        self.http_port = server.server_address[1]
        self._http_thread = threading.Thread(target=server.serve_forever, args=(0.05,), name="gputrace-otlp-http",
                                             daemon=True)
        self._http_thread.start()

    # ---- data -------------------------------------------------------------------------------
    def _ingest(self, line: bytes, spans: int, digest: bytes | None = None) -> bool:
        """Append one request line to the file and the queue; True when stored, False when ``digest`` (see
        ``receiver_retries.request_digest``; None: not remembered) is that of a request stored within the
        window, which is then not stored again. Raises OSError with nothing written and nothing remembered
        when the line cannot be written. Any handler thread."""
        with self._lock:
            f = self._file
            if f is None:
                raise OSError("receiver is stopped")
            c = self._counts
            if digest is not None and self._recent.seen(digest):
                c["duplicates"] += 1
                return False
            self._append(f, line + b"\n")
            if digest is not None:
                self._recent.remember(digest)
            c["requests"] += 1
            c["spans"] += spans
            c["bytes_written"] += len(line) + 1
            if self.max_buffer_bytes > 0:
                self._queue.append(line)
                self._queued_bytes += len(line)
            while self._queued_bytes > self.max_buffer_bytes and self._queue:
                self._queued_bytes -= len(self._queue.popleft())
                c["dropped_lines"] += 1
            self._cond.notify_all()
            return True

    def _append(self, f: io.FileIO, data: bytes) -> None:
        """Write all of ``data`` at the end of ``f`` (unbuffered), or raise OSError with the file cut back to
        its length before (a short write, then ENOSPC, leaves no partial line that the next one would be
        glued to). If even the cut fails, the next line starts on a line of its own. Under ``_lock``."""
        if self._torn:
            data = b"\n" + data
        start = os.fstat(f.fileno()).st_size
        view = memoryview(data)
        try:
            while view:
                n = f.write(view)
                if not n:
                    raise OSError(errno.EIO, "the trace file took no bytes")
                view = view[n:]
        except OSError:
            try:
                os.ftruncate(f.fileno(), start)
            except OSError:
                self._torn = True
            raise
        self._torn = False

    def _reject(self) -> None:
        """Count one refused request. Any handler thread."""
        with self._lock:
            self._counts["rejected"] += 1

    def _abandon(self, spans: int) -> None:
        """Count one valid request not stored because its sender left first. Any handler thread."""
        with self._lock:
            self._counts["abandoned"] += 1

    def _reject_spans(self, n: int) -> None:
        """Count spans left out of a stored request. Any handler thread."""
        with self._lock:
            self._counts["rejected_spans"] += n

    def drain(self) -> list[bytes]:
        """Take every line received since the last drain (oldest first; no trailing newlines)."""
        with self._lock:
            out = list(self._queue)
            self._queue.clear()
            self._queued_bytes = 0
            return out

    def stats(self) -> ReceiverStats:
        with self._lock:
            return ReceiverStats(buffered_lines=len(self._queue), buffered_bytes=self._queued_bytes, **self._counts)

    def wait_for(self, spans: int, timeout: float = 5.0) -> bool:
        """Block until at least ``spans`` spans were received in total; False on timeout."""
        with self._cond:
            return self._cond.wait_for(lambda: self._counts["spans"] >= spans, timeout)
