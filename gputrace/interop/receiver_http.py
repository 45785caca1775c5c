"""The HTTP half of :class:`gputrace.interop.receiver.OtlpReceiver`: ``POST /v1/traces``.

Protobuf (``application/x-protobuf``) and JSON (``application/json``) bodies, optionally gzip;
status codes as documented in ``receiver``. Handlers run on ``ThreadingHTTPServer``'s per-connection
threads and only call the receiver's thread-safe ``_ingest`` / ``_reject``.
"""

from __future__ import annotations

import socket
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable

import orjson

__all__ = ["Http", "Http6", "make_handler", "json_request"]

_ID_FIELDS = (("traceId", 16), ("spanId", 8), ("parentSpanId", 8))


def json_request(body: bytes) -> tuple[bytes, int]:
    """An OTLP/HTTP JSON body -> (compact line, span count). Raises ValueError if it is not one."""
    try:
        d = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise ValueError(f"body is not JSON: {exc}") from None
    if not isinstance(d, dict) or not isinstance(d.get("resourceSpans", []), list):
        raise ValueError("body is not an ExportTraceServiceRequest (no 'resourceSpans' list)")
    n = 0
    for i, rs in enumerate(d.get("resourceSpans", [])):
        if not isinstance(rs, dict):
            raise ValueError(f"resourceSpans[{i}] is not an object")
        scope_spans = rs.get("scopeSpans", [])
        if not isinstance(scope_spans, list):  # (iterating null or a number raised TypeError: no answer)
            raise ValueError(f"resourceSpans[{i}].scopeSpans is not a list")
        for j, ss in enumerate(scope_spans):
            spans = ss.get("spans", []) if isinstance(ss, dict) else None
            if not isinstance(spans, list):
                raise ValueError(f"resourceSpans[{i}].scopeSpans[{j}].spans is not a list")
            for k, span in enumerate(spans):
                for key, nbytes in _ID_FIELDS:
                    v = span.get(key) if isinstance(span, dict) else None
                    if v in (None, "") and key == "parentSpanId":
                        continue
                    if not (isinstance(v, str) and len(v) == 2 * nbytes and all(ch in "0123456789abcdefABCDEF" for ch in v)):
                        raise ValueError(f"resourceSpans[{i}].scopeSpans[{j}].spans[{k}].{key}: expected {2 * nbytes} hex characters, got {v!r}")
                n += 1
    return orjson.dumps(d), n


class Http(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True


class Http6(Http):
    address_family = socket.AF_INET6


def make_handler(receiver: Any, pb2: Any, request_to_json: Callable) -> type[BaseHTTPRequestHandler]:
    """A handler class bound to ``receiver`` (an ``OtlpReceiver``), the protobuf module and the
    protobuf -> JSON line converter."""
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        server_version = "gputrace-otlp"

        def log_message(self, format: str, *args) -> None:  # noqa: A002 - quiet: no stderr noise in the TUI
            pass

        def _send(self, code: int, body: bytes, ctype: str) -> None:
            self.send_response(code)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _error(self, code: int, msg: str, proto: bool) -> None:
            receiver._reject()
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
                return self._error(404, f"unknown path {self.path}; OTLP traces go to /v1/traces", proto)
            length = self.headers.get("Content-Length")
            if length is None or not length.isdigit():
                return self._error(411, "Content-Length required", proto)
            if int(length) > receiver.max_request_bytes:
                return self._error(413, f"request larger than {receiver.max_request_bytes} bytes", proto)
            body = self.rfile.read(int(length))
            if (self.headers.get("Content-Encoding") or "").lower() == "gzip":
                d = zlib.decompressobj(16 + zlib.MAX_WBITS)
                try:
                    body = d.decompress(body, receiver.max_request_bytes + 1)
                except zlib.error as exc:
                    return self._error(400, f"bad gzip body: {exc}", proto)
                if len(body) > receiver.max_request_bytes or d.unconsumed_tail:
                    return self._error(413, f"request larger than {receiver.max_request_bytes} bytes after gunzip", proto)
            if proto:
                try:
                    line, n = request_to_json(pb2.ExportTraceServiceRequest.FromString(body))
                except Exception as exc:  # noqa: BLE001 - DecodeError or a bad id length; report any as 400
                    return self._error(400, f"bad protobuf body: {exc}", proto)
            elif ctype == "application/json":
                try:
                    line, n = json_request(body)
                except ValueError as exc:
                    return self._error(400, str(exc), proto)
            else:
                return self._error(415, f"unsupported Content-Type {ctype!r}; use application/x-protobuf or application/json", False)
            try:
                receiver._ingest(line, n)
            except OSError as exc:
                return self._error(503, str(exc), proto)
            if proto:
                self._send(200, pb2.ExportTraceServiceResponse().SerializeToString(), "application/x-protobuf")
            else:
                self._send(200, b"{}", "application/json")

    return Handler
