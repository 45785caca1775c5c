"""The HTTP half of :class:`gputrace.interop.receiver.OtlpReceiver`: ``POST /v1/traces``.

Protobuf (``application/x-protobuf``) and JSON (``application/json``) bodies, optionally gzip;
status codes as documented in ``receiver`` (the OTLP/HTTP rules: 200 with ``partialSuccess`` when
some spans were rejected, 400 when nothing could be stored, 413/415/411 for size, type and length).

The server the handler runs in (accepting, request heads waited for without a worker, the bounded pool, the
503 and 431 answers) is ``receiver_http_server``; its names are re-exported here. Once a worker has a
connection, it has a socket timeout of ``timeout_s``: a client that stalls in its body is disconnected.
A kept-alive connection may idle at most ``KEEPALIVE_IDLE_S`` between requests, and while connections
wait for a worker every answer says ``Connection: close``, so waiting senders are served in turn
instead of starving behind kept-alive ones.

Stored only if still wanted: right before a request's spans are appended, the handler checks that the
client has not closed its side (a sender that gave up and left gets nothing stored, and is counted in
``abandoned``); the line is in the file before the answer is sent. A retry of a request already stored
(the same body after gunzip, within the receiver's window: ``receiver_retries``) is answered as the first
time and not stored again. Handlers run on the server's pool threads and only call the receiver's
thread-safe ``_ingest`` / ``_reject`` / ``_abandon`` / ``_reject_spans``; every refusal is an HTTP answer,
never an exception out of the handler.
"""

from __future__ import annotations

import io
import select
import socket
import zlib
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler
from typing import Any, ClassVar, cast

import orjson

from gputrace.interop.receiver_http_server import BACKLOG, MAX_HEAD_BYTES, HeaderWait, Http, Http6
from gputrace.interop.receiver_retries import request_digest
from gputrace.interop.receiver_validate import RequestRejected, clean_request

__all__ = ["Http", "Http6", "make_handler", "json_request", "BACKLOG", "HeaderWait", "KEEPALIVE_IDLE_S",
           "MAX_HEAD_BYTES"]


#: Longest wait for the next request on a kept-alive connection (its worker is free for others after).
KEEPALIVE_IDLE_S = 2.0


def json_request(body: bytes) -> tuple[bytes, int, int, str]:
    """An OTLP/HTTP JSON body -> (line to store, spans kept, spans rejected, first problem).
    Raises ValueError if it is not a request or nothing in it can be stored."""
    try:
        d = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise ValueError(f"body is not JSON: {exc}") from None
    return clean_request(d)


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
        """The client is gone for sure (its connection reset or in error): nothing it sent is stored. An end of
        stream alone (a FIN) is not leaving: HTTP lets a client half-close its side once its request is sent
        (``shutdown(SHUT_WR)``) and still read the answer, and a FIN cannot tell that from a close; such a
        request is stored and answered (a sender that had in fact closed and retries is recognised by the
        retry window and stored once). Peeks without consuming."""
        poll = select.poll()  # (a zero-timeout poll first: recv on a socket with a timeout would wait)
        poll.register(self.connection, select.POLLIN | select.POLLHUP | select.POLLERR)
        events = poll.poll(0)
        if not events:
            return False
        if events[0][1] & select.POLLERR:
            return True
        try:
            self.connection.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT)
        except (BlockingIOError, InterruptedError, TimeoutError):
            return False
        except OSError:  # reset by the peer
            return True
        return False

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
