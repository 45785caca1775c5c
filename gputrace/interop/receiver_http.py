"""The HTTP half of :class:`gputrace.interop.receiver.OtlpReceiver`: ``POST /v1/traces``.

Protobuf (``application/x-protobuf``) and JSON (``application/json``) bodies, optionally gzip;
status codes as documented in ``receiver`` (the OTLP/HTTP rules: 200 with ``partialSuccess`` when
some spans were rejected, 400 when nothing could be stored, 413/415/411 for size, type and length).

Server: ``Http`` accepts on one thread with a listen backlog of ``BACKLOG`` and hands each connection
to a bounded pool (``max_workers`` threads, at most ``max_pending`` connections waiting for one);
past that a connection is answered 503 with ``Retry-After`` (OTLP exporters retry it). Every
connection has a socket timeout (``timeout_s``, default 10 s): a client that stalls while sending
headers or a body is disconnected. A kept-alive connection may idle at most ``KEEPALIVE_IDLE_S``
between requests, and while connections wait for a worker every answer says ``Connection: close``,
so waiting senders are served in turn instead of starving behind kept-alive ones. Handlers only call
the receiver's thread-safe ``_ingest`` / ``_reject``.
"""

from __future__ import annotations

import socket
import threading
import zlib
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any, Callable

import orjson

from gputrace.interop.receiver_validate import RequestRejected, clean_request

__all__ = ["Http", "Http6", "make_handler", "json_request", "BACKLOG"]

#: listen() backlog: connections the kernel queues before the accept loop takes them.
BACKLOG = 512
#: Longest wait for the next request on a kept-alive connection (its worker is free for others after).
KEEPALIVE_IDLE_S = 2.0

_BUSY = (b"HTTP/1.1 503 Service Unavailable\r\nRetry-After: 1\r\nContent-Type: application/json\r\n"
         b"Content-Length: 52\r\nConnection: close\r\n\r\n"
         b'{"code":14,"message":"receiver busy: retry shortly"}')


def json_request(body: bytes) -> tuple[bytes, int, int, str]:
    """An OTLP/HTTP JSON body -> (line to store, spans kept, spans rejected, first problem).
    Raises ValueError if it is not a request or nothing in it can be stored."""
    try:
        d = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise ValueError(f"body is not JSON: {exc}") from None
    return clean_request(d)


class Http(HTTPServer):
    """HTTPServer with a real backlog, a bounded worker pool and per-connection timeouts (module doc)."""

    allow_reuse_address = True
    request_queue_size = BACKLOG

    def __init__(self, addr, handler, *, max_workers: int = 32, max_pending: int = 256) -> None:
        self._pool = ThreadPoolExecutor(max_workers, thread_name_prefix="gputrace-otlp-http")
        self._slots = threading.BoundedSemaphore(max_workers + max_pending)
        self._max_workers = max_workers
        self._connections = 0  # accepted and not finished (served or waiting); under _count_lock
        self._count_lock = threading.Lock()
        self.busy_refusals = 0
        super().__init__(addr, handler)  # binds: an OSError closes the server (and the pool) again

    def process_request(self, request, client_address) -> None:  # accept thread
        if not self._slots.acquire(blocking=False):
            self.busy_refusals += 1
            try:
                request.settimeout(1.0)
                request.sendall(_BUSY)
            except OSError:
                pass
            self.shutdown_request(request)
            return
        with self._count_lock:
            self._connections += 1
        try:
            self._pool.submit(self._serve, request, client_address)
        except RuntimeError:  # the pool is shut down: the server is closing
            self._done()
            self.shutdown_request(request)

    def _serve(self, request, client_address) -> None:  # pool thread
        try:
            self.finish_request(request, client_address)
        except Exception:  # noqa: BLE001 - a broken connection must not print a traceback into the TUI
            pass
        finally:
            self.shutdown_request(request)
            self._done()

    def _done(self) -> None:
        with self._count_lock:
            self._connections -= 1
        self._slots.release()

    def crowded(self) -> bool:
        """Connections are waiting for a worker (any thread)."""
        return self._connections > self._max_workers

    def handle_error(self, request, client_address) -> None:
        pass

    def server_close(self) -> None:
        super().server_close()
        self._pool.shutdown(wait=False, cancel_futures=True)


class Http6(Http):
    address_family = socket.AF_INET6


def make_handler(receiver: Any, pb2: Any, request_to_json: Callable, timeout_s: float = 10.0,
                 idle_s: float = KEEPALIVE_IDLE_S) -> type[BaseHTTPRequestHandler]:
    """A handler class bound to ``receiver`` (an ``OtlpReceiver``), the protobuf module and the
    protobuf -> request dict converter; ``timeout_s`` is every connection's socket timeout."""
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        server_version = "gputrace-otlp"
        timeout = timeout_s  # StreamRequestHandler.setup: settimeout on the connection
        _served = 0

        def handle_one_request(self) -> None:
            if self._served:  # waiting for the next request on a kept-alive connection
                self.connection.settimeout(min(idle_s, timeout_s))
            super().handle_one_request()
            self._served += 1

        def parse_request(self) -> bool:  # the request line has arrived: the full timeout again
            self.connection.settimeout(timeout_s)
            return super().parse_request()

        def log_message(self, format: str, *args) -> None:  # noqa: A002 - quiet: no stderr noise in the TUI
            pass

        def _send(self, code: int, body: bytes, ctype: str) -> None:
            self.send_response(code)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            if self.close_connection or self.server.crowded():  # others wait for this worker
                self.send_header("Connection", "close")  # (also sets close_connection)
            self.end_headers()
            self.wfile.write(body)

        def _error(self, code: int, msg: str, proto: bool) -> None:
            receiver._reject()
            self.close_connection = True  # (before _send: the answer says Connection: close)
            if proto:
                from google.rpc import status_pb2

                self._send(code, status_pb2.Status(code=3, message=msg).SerializeToString(), "application/x-protobuf")
            else:
                self._send(code, orjson.dumps({"code": 3, "message": msg}), "application/json")
            self.close_connection = True

        def do_GET(self) -> None:  # noqa: N802
            self._error(405 if self.path.split("?")[0] == "/v1/traces" else 404, "use POST /v1/traces", False)

        def do_POST(self) -> None:  # noqa: N802
            ctype = (self.headers.get("Content-Type") or "").split(";")[0].strip().lower()
            proto = ctype == "application/x-protobuf"
            if self.path.split("?")[0] != "/v1/traces":
                return self._error(404, f"unknown path {self.path[:200]}; OTLP traces go to /v1/traces", proto)
            length = self.headers.get("Content-Length")
            if length is None or not length.isdigit():
                return self._error(411, "Content-Length required", proto)
            if int(length) > receiver.max_request_bytes:
                return self._error(413, f"request larger than {receiver.max_request_bytes} bytes", proto)
            body = self.rfile.read(int(length))  # (a stalled sender times out: the connection closes)
            if len(body) < int(length):
                return self._error(400, f"body shorter than its Content-Length ({len(body)} of {length} bytes)", proto)
            if (self.headers.get("Content-Encoding") or "").lower() == "gzip":
                d = zlib.decompressobj(16 + zlib.MAX_WBITS)
                try:
                    body = d.decompress(body, receiver.max_request_bytes + 1)
                except zlib.error as exc:
                    return self._error(400, f"bad gzip body: {exc}", proto)
                if len(body) > receiver.max_request_bytes or d.unconsumed_tail:
                    return self._error(413, f"request larger than {receiver.max_request_bytes} bytes after gunzip", proto)
                if not d.eof:
                    return self._error(400, "bad gzip body: truncated", proto)
            if proto:
                try:
                    req = pb2.ExportTraceServiceRequest.FromString(body)
                except Exception as exc:  # noqa: BLE001 - DecodeError: report any as 400
                    return self._error(400, f"bad protobuf body: {exc}", proto)
                try:
                    line, n, rejected, why = clean_request(request_to_json(req))
                except ValueError as exc:  # RequestRejected, or a bad id length
                    return self._error(400, str(exc), proto)
            elif ctype == "application/json":
                try:
                    line, n, rejected, why = json_request(body)
                except (ValueError, RequestRejected) as exc:
                    return self._error(400, str(exc), proto)
            else:
                return self._error(415, f"unsupported Content-Type {ctype[:100]!r}; use application/x-protobuf or application/json", False)
            if n:
                try:
                    receiver._ingest(line, n)
                except OSError as exc:
                    return self._error(503, str(exc), proto)
            if rejected:
                receiver._reject_spans(rejected)
            if proto:
                resp = pb2.ExportTraceServiceResponse()
                if rejected:
                    resp.partial_success.rejected_spans = rejected
                    resp.partial_success.error_message = why
                self._send(200, resp.SerializeToString(), "application/x-protobuf")
            else:
                body = orjson.dumps({"partialSuccess": {"rejectedSpans": str(rejected), "errorMessage": why}}) if rejected else b"{}"
                self._send(200, body, "application/json")

    return Handler
