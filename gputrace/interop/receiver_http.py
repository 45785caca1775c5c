"""The HTTP half of :class:`gputrace.interop.receiver.OtlpReceiver`: ``POST /v1/traces``.

Protobuf (``application/x-protobuf``) and JSON (``application/json``) bodies, optionally gzip;
status codes as documented in ``receiver`` (the OTLP/HTTP rules: 200 with ``partialSuccess`` when
some spans were rejected, 400 when nothing could be stored, 413/415/411 for size, type and length).

Server: ``Http`` accepts on one thread with a listen backlog of ``BACKLOG``. A new connection first
waits, without a worker, in one selector thread (``HeaderWait``) until its request head (up to the
blank line) has arrived; only then is it handed to a bounded pool of ``max_workers`` threads. So
connections that send nothing, or stall mid-head, never hold a worker: a valid sender behind hundreds
of them is served at once. A head must arrive within ``timeout_s`` (default 10 s) and be at most
``MAX_HEAD_BYTES`` (else 431); at most ``max_workers + max_pending`` connections are open at once, past
that a connection is answered 503 with ``Retry-After`` (OTLP exporters retry it). Once a worker has it,
the connection has a socket timeout of ``timeout_s``: a client that stalls in its body is disconnected.
A kept-alive connection may idle at most ``KEEPALIVE_IDLE_S`` between requests, and while connections
wait for a worker every answer says ``Connection: close``, so waiting senders are served in turn
instead of starving behind kept-alive ones.

Stored only if still wanted: right before a request's spans are appended, the handler checks that the
client has not closed its side (a sender that gave up and left gets nothing stored, and is counted in
``abandoned``); the line is in the file before the answer is sent. A retry of a request already stored
(the same body after gunzip, within the receiver's window: ``receiver_retries``) is answered as the first
time and not stored again. Handlers only call the receiver's thread-safe ``_ingest`` / ``_reject`` /
``_abandon`` / ``_reject_spans``.
"""

from __future__ import annotations

import io
import select
import selectors
import socket
import threading
import time
import zlib
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any, ClassVar, cast

import orjson

from gputrace.interop.receiver_retries import request_digest
from gputrace.interop.receiver_validate import RequestRejected, clean_request

__all__ = ["Http", "Http6", "make_handler", "json_request", "BACKLOG"]

#: listen() backlog: connections the kernel queues before the accept loop takes them.
BACKLOG = 512
#: Longest wait for the next request on a kept-alive connection (its worker is free for others after).
KEEPALIVE_IDLE_S = 2.0
#: Largest request head (request line and headers) accepted; a longer one is answered 431.
MAX_HEAD_BYTES = 64 << 10

_BUSY = (b"HTTP/1.1 503 Service Unavailable\r\nRetry-After: 1\r\nContent-Type: application/json\r\n"
         b"Content-Length: 52\r\nConnection: close\r\n\r\n"
         b'{"code":14,"message":"receiver busy: retry shortly"}')
_TOO_LARGE_HEAD = (b"HTTP/1.1 431 Request Header Fields Too Large\r\nContent-Type: application/json\r\n"
                   b"Content-Length: 44\r\nConnection: close\r\n\r\n"
                   b'{"code":3,"message":"request head too large"}')


def json_request(body: bytes) -> tuple[bytes, int, int, str]:
    """An OTLP/HTTP JSON body -> (line to store, spans kept, spans rejected, first problem).
    Raises ValueError if it is not a request or nothing in it can be stored."""
    try:
        d = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise ValueError(f"body is not JSON: {exc}") from None
    return clean_request(d)



def _send_best_effort(sock, data: bytes) -> None:
    """Send a short answer to a connection about to be closed: at most a second, errors ignored (the peer may be
    gone; the connection is closed next either way)."""
    try:
        sock.settimeout(1.0)
        sock.sendall(data)
    except OSError:
        pass

class _Prefixed(io.RawIOBase):
    """A connection's input: the bytes ``HeaderWait`` already read, then the socket's reader."""

    def __init__(self, prefix: bytes, inner: io.BufferedIOBase) -> None:
        self._prefix = memoryview(prefix)
        self._inner = inner

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:
        if len(self._prefix):
            n = min(len(b), len(self._prefix))
            b[:n] = self._prefix[:n]
            self._prefix = self._prefix[n:]
            return n
        return self._inner.readinto1(b)  # one socket read at most: never waits for more than is asked


class HeaderWait:
    """One thread and a selector holding every connection whose request head has not fully arrived.

    ``add(sock, addr)`` (accept thread) registers a connection; when its head is complete (``\\r\\n\\r\\n``
    seen) ``ready(sock, addr, bytes_read)`` is called on this thread and the socket is no longer watched;
    a connection that closes, errs, exceeds ``MAX_HEAD_BYTES`` (answered 431) or has not completed its head
    within ``timeout_s`` of being accepted is closed and ``dropped(sock)`` is called. ``close()`` drops
    every waiting connection and ends the thread."""

    def __init__(self, timeout_s: float, ready, dropped) -> None:
        self._timeout = timeout_s
        self._ready, self._dropped = ready, dropped
        self._sel = selectors.DefaultSelector()
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)  # a full wake-up pipe means it is woken already: never wait on it
        self._sel.register(self._wake_r, selectors.EVENT_READ)
        self._new: list[tuple[socket.socket, object]] = []
        self._lock = threading.Lock()
        self._waiting: dict[socket.socket, tuple[bytearray, float, object]] = {}
        self._closed = False
        self._thread = threading.Thread(target=self._run, name="gputrace-otlp-http-heads", daemon=True)
        self._thread.start()

    def add(self, sock: socket.socket, addr) -> None:
        with self._lock:
            if self._closed:
                raise RuntimeError("closed")
            self._new.append((sock, addr))
        self._wake()

    def _wake(self) -> None:
        try:
            self._wake_w.send(b"x")
        except OSError:  # the wake-up pipe is full (it is woken already) or closed
            pass

    def close(self) -> None:
        with self._lock:
            self._closed = True
        self._wake()
        self._thread.join(5.0)

    def _drop(self, sock: socket.socket, answer: bytes = b"") -> None:
        self._waiting.pop(sock, None)
        try:
            self._sel.unregister(sock)
        except (KeyError, ValueError):
            pass
        if answer:
            _send_best_effort(sock, answer)
        self._dropped(sock)

    def _run(self) -> None:
        try:
            while True:
                with self._lock:
                    closed, new, self._new = self._closed, self._new, []
                now = time.monotonic()
                for sock, addr in new:
                    sock.setblocking(False)
                    self._waiting[sock] = (bytearray(), now + self._timeout, addr)
                    self._sel.register(sock, selectors.EVENT_READ)
                if closed:
                    for sock in list(self._waiting):
                        self._drop(sock)
                    return
                for key, _ in self._sel.select(timeout=0.1):
                    if key.fileobj is self._wake_r:
                        try:
                            while self._wake_r.recv(4096):
                                pass
                        except OSError:
                            pass
                        continue
                    self._read(key.fileobj)  # type: ignore[arg-type]  # (a registered client socket)
                now = time.monotonic()
                for sock in [s for s, (_, deadline, _) in self._waiting.items() if deadline <= now]:
                    self._drop(sock)  # no complete head in time: closed without a word, as a timeout is
        finally:
            self._sel.close()
            self._wake_r.close()
            self._wake_w.close()

    def _read(self, sock: socket.socket) -> None:
        buf, _, addr = self._waiting[sock]
        try:
            chunk = sock.recv(65536)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            return self._drop(sock)
        if not chunk:
            return self._drop(sock)
        buf += chunk
        if b"\r\n\r\n" in buf:
            self._waiting.pop(sock)
            self._sel.unregister(sock)
            sock.setblocking(True)
            self._ready(sock, addr, bytes(buf))
        elif len(buf) > MAX_HEAD_BYTES:
            self._drop(sock, _TOO_LARGE_HEAD)


class Http(HTTPServer):
    """HTTPServer with a real backlog, connections that wait for their head without a worker, a bounded
    worker pool and per-connection timeouts (module doc)."""

    allow_reuse_address = True
    request_queue_size = BACKLOG

    def __init__(self, addr, handler, *, max_workers: int = 32, max_pending: int = 256,
                 head_timeout_s: float = 10.0) -> None:
        self._pool = ThreadPoolExecutor(max_workers, thread_name_prefix="gputrace-otlp-http")
        self._slots = threading.BoundedSemaphore(max_workers + max_pending)
        self._max_workers = max_workers
        self._connections = 0  # handed to the pool and not finished (served or waiting); under _count_lock
        self._count_lock = threading.Lock()
        self._local = threading.local()  # the head bytes of the connection this pool thread serves
        self._heads: HeaderWait | None = None
        self.busy_refusals = 0
        super().__init__(addr, handler)  # binds: an OSError closes the server (and the pool) again
        self._heads = HeaderWait(head_timeout_s, self._head_ready, self._head_dropped)

    def process_request(self, request, client_address) -> None:  # accept thread
        if not self._slots.acquire(blocking=False):
            self.busy_refusals += 1
            _send_best_effort(request, _BUSY)
            self.shutdown_request(request)
            return
        try:
            assert self._heads is not None  # (set once bound; the accept loop starts after)
            self._heads.add(request, client_address)
        except RuntimeError:  # closing
            self._head_dropped(request)

    def _head_ready(self, request, client_address, head: bytes) -> None:  # HeaderWait thread
        with self._count_lock:
            self._connections += 1
        try:
            self._pool.submit(self._serve, request, client_address, head)
        except RuntimeError:  # the pool is shut down: the server is closing
            self._done()
            self.shutdown_request(request)

    def _head_dropped(self, request) -> None:  # HeaderWait thread (or accept thread while closing)
        self.shutdown_request(request)
        self._slots.release()

    def take_head(self) -> bytes:
        """The bytes already read from the connection this pool thread is serving (its request head)."""
        head, self._local.head = getattr(self._local, "head", b""), b""
        return head

    def _serve(self, request, client_address, head: bytes) -> None:  # pool thread
        try:
            self._local.head = head
            self.finish_request(request, client_address)
        except Exception:  # noqa: BLE001 - a broken connection must not print a traceback into the TUI
            pass
        finally:
            self._local.head = b""
            self.shutdown_request(request)
            with self._count_lock:
                self._connections -= 1
            self._done()

    def _done(self) -> None:
        self._slots.release()

    def crowded(self) -> bool:
        """Connections with a complete head are waiting for a worker (any thread)."""
        return self._connections > self._max_workers

    def handle_error(self, request, client_address) -> None:
        pass

    def server_close(self) -> None:
        super().server_close()
        if self._heads is not None:
            self._heads.close()
        self._pool.shutdown(wait=False, cancel_futures=True)


class Http6(Http):
    address_family = socket.AF_INET6


def make_handler(receiver: Any, pb2: Any, request_to_json: Callable, timeout_s: float = 10.0,
                 idle_s: float = KEEPALIVE_IDLE_S) -> type[BaseHTTPRequestHandler]:
    """A handler class bound to ``receiver`` (an ``OtlpReceiver``), the protobuf module and the
    protobuf -> request dict converter; ``timeout_s`` is every connection's socket timeout."""
    class Handler(_OtlpHandler):
        pass

    Handler.receiver, Handler.pb2, Handler.timeout, Handler.idle_s = receiver, pb2, timeout_s, idle_s
    Handler.request_to_json = staticmethod(request_to_json)  # (a plain function: called without self)
    return Handler


class _OtlpHandler(BaseHTTPRequestHandler):
    """``POST /v1/traces`` (module doc); ``make_handler`` binds a subclass to its receiver. Runs on a pool thread
    of ``Http``, one connection per instance. A POST goes through named steps, each answering the request
    itself (and returning None) when it refuses it: ``_read_body`` (length, size, gzip), ``_decode`` (protobuf
    or JSON into a line to store), ``_store`` (unless the client left, or a retry of a request stored already),
    ``_answer`` (200, with ``partialSuccess`` when spans were rejected). Every refusal goes through ``_error``,
    which counts it and closes the connection."""

    protocol_version = "HTTP/1.1"
    server_version = "gputrace-otlp"
    timeout: ClassVar[float]  # StreamRequestHandler.setup: settimeout on the connection (make_handler's timeout_s)
    receiver: Any  # the OtlpReceiver: only its thread-safe _ingest / _reject / _reject_spans / _abandon are called
    pb2: Any  # the trace_service_pb2 module
    request_to_json: Callable[[Any], Any]  # ExportTraceServiceRequest -> OTLP/JSON request dict
    idle_s: float  # longest idle wait for the next request on a kept-alive connection (capped at timeout)
    _served = 0

    def setup(self) -> None:  # the head HeaderWait read comes first, then the socket
        super().setup()
        head = cast(Http, self.server).take_head()
        if head:
            self.rfile = io.BufferedReader(_Prefixed(head, self.rfile))

    def _client_left(self) -> bool:
        """The client closed its side (gave up): nothing it sent is stored. Peeks without consuming."""
        poll = select.poll()  # (a zero-timeout poll first: recv on a socket with a timeout would wait)
        poll.register(self.connection, select.POLLIN | select.POLLRDHUP | select.POLLHUP | select.POLLERR)
        events = poll.poll(0)
        if not events:
            return False
        if events[0][1] & (select.POLLHUP | select.POLLERR):
            return True
        try:
            return self.connection.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
        except (BlockingIOError, InterruptedError, TimeoutError):
            return False
        except OSError:  # reset by the peer
            return True

    def handle_one_request(self) -> None:
        if self._served:  # waiting for the next request on a kept-alive connection
            self.connection.settimeout(min(self.idle_s, self.timeout))
        super().handle_one_request()
        self._served += 1

    def parse_request(self) -> bool:  # the request line has arrived: the full timeout again
        self.connection.settimeout(self.timeout)
        return super().parse_request()

    def log_message(self, format: str, *args) -> None:  # noqa: A002 - quiet: no stderr noise in the TUI
        pass

    def _send(self, code: int, body: bytes, ctype: str) -> None:
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        if self.close_connection or cast(Http, self.server).crowded():  # others wait for this worker
            self.send_header("Connection", "close")  # (also sets close_connection)
        self.end_headers()
        self.wfile.write(body)

    def _error(self, code: int, msg: str, proto: bool) -> None:
        """Counts a refused request and answers ``code`` with an OTLP ``Status`` (code 3) saying ``msg``, as
        protobuf when ``proto`` else JSON; the connection is closed after."""
        self.receiver._reject()
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
            self._error(404, f"unknown path {self.path[:200]}; OTLP traces go to /v1/traces", proto)
            return
        body = self._read_body(proto)
        if body is None:
            return
        decoded = self._decode(body, ctype, proto)
        if decoded is None:
            return
        line, n, rejected, why = decoded
        if self._store(line, n, rejected, proto, request_digest(b"proto" if proto else b"json", body)):
            self._answer(rejected, why, proto)

    def _read_body(self, proto: bool) -> bytes | None:
        """The request body, gunzipped when its ``Content-Encoding`` is gzip; None once the request has been
        refused: no or a bad ``Content-Length`` (411), larger than the receiver's ``max_request_bytes`` before
        or after gunzip (413), shorter than its ``Content-Length``, a bad or truncated gzip stream (400). A
        sender that stalls mid-body times out (the socket's timeout): the connection closes."""
        max_bytes = self.receiver.max_request_bytes
        length = self.headers.get("Content-Length")
        if length is None or not length.isdigit():
            self._error(411, "Content-Length required", proto)
            return None
        if int(length) > max_bytes:
            self._error(413, f"request larger than {max_bytes} bytes", proto)
            return None
        body = self.rfile.read(int(length))  # (a stalled sender times out: the connection closes)
        if len(body) < int(length):
            self._error(400, f"body shorter than its Content-Length ({len(body)} of {length} bytes)", proto)
            return None
        if (self.headers.get("Content-Encoding") or "").lower() == "gzip":
            d = zlib.decompressobj(16 + zlib.MAX_WBITS)
            try:
                body = d.decompress(body, max_bytes + 1)
            except zlib.error as exc:
                self._error(400, f"bad gzip body: {exc}", proto)
                return None
            if len(body) > max_bytes or d.unconsumed_tail:
                self._error(413, f"request larger than {max_bytes} bytes after gunzip", proto)
                return None
            if not d.eof:
                self._error(400, "bad gzip body: truncated", proto)
                return None
        return body

    def _decode(self, body: bytes, ctype: str, proto: bool) -> tuple[bytes, int, int, str] | None:
        """``body`` of content type ``ctype`` -> (line to store, spans kept, spans rejected, first problem), as
        ``clean_request`` gives them; None once the request has been refused: a bad protobuf or JSON body or
        one with nothing valid to store (400), a content type other than protobuf or JSON (415)."""
        if proto:
            try:
                req = self.pb2.ExportTraceServiceRequest.FromString(body)
            except Exception as exc:  # noqa: BLE001 - DecodeError: report any as 400
                self._error(400, f"bad protobuf body: {exc}", proto)
                return None
            try:
                return clean_request(self.request_to_json(req))
            except ValueError as exc:  # RequestRejected, or a bad id length
                self._error(400, str(exc), proto)
                return None
        if ctype == "application/json":
            try:
                return json_request(body)
            except (ValueError, RequestRejected) as exc:
                self._error(400, str(exc), proto)
                return None
        self._error(415, f"unsupported Content-Type {ctype[:100]!r}; use application/x-protobuf or "
                         "application/json", False)
        return None

    def _store(self, line: bytes, n: int, rejected: int, proto: bool, digest: bytes) -> bool:
        """Stores ``line`` (``n`` spans; ``rejected`` more left out) unless the client has left or ``digest`` (of
        the body) is that of a request already stored; True when the request is to be answered 200 (a retry:
        as the first time). A client that left gets nothing stored (counted as abandoned) and its connection
        closed; a failed write (nothing written, nothing remembered) is answered 503, which senders retry."""
        if self._client_left():  # it gave up (timed out, cancelled): store nothing it was not told of
            self.receiver._abandon(n)
            self.close_connection = True
            return False
        if n:
            try:
                stored = self.receiver._ingest(line, n, digest)
            except OSError as exc:
                self._error(503, f"not stored: {exc}", proto)
                return False
            if not stored:  # a retry: its rejected spans were counted the first time
                return True
        if rejected:
            self.receiver._reject_spans(rejected)
        return True

    def _answer(self, rejected: int, why: str, proto: bool) -> None:
        """200 with an ``ExportTraceServiceResponse`` (protobuf when ``proto``, else JSON), carrying
        ``partialSuccess`` (the rejected span count and ``why``) when spans were rejected."""
        if proto:
            resp = self.pb2.ExportTraceServiceResponse()
            if rejected:
                resp.partial_success.rejected_spans = rejected
                resp.partial_success.error_message = why
            self._send(200, resp.SerializeToString(), "application/x-protobuf")
        else:
            body = (orjson.dumps({"partialSuccess": {"rejectedSpans": str(rejected), "errorMessage": why}})
                    if rejected else b"{}")
            self._send(200, body, "application/json")
