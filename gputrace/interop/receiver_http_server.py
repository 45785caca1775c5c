"""The connection side of the receiver's HTTP half: accepting, waiting for request heads, a bounded worker pool.

``Http`` accepts on one thread with a listen backlog of ``BACKLOG``. A new connection first waits, without a
worker, in one selector thread (``HeaderWait``) until its request head (up to the blank line) has arrived; only
then is it handed to a bounded pool of ``max_workers`` threads, which run the handler class it was given (for
OTLP: ``receiver_http.make_handler``). So connections that send nothing, or stall mid-head, never hold a worker:
a valid sender behind hundreds of them is served at once. A head must arrive within ``head_timeout_s`` (the
receiver's ``timeout_s``, default 10 s) and be at most ``MAX_HEAD_BYTES`` (else 431); at most
``max_workers + max_pending`` connections are open at once, past that a connection is answered 503 with
``Retry-After`` (OTLP exporters retry it). A pool thread's handler reads the head bytes already taken from its
connection with :meth:`Http.take_head` and asks :meth:`Http.crowded` whether to close the connection after its
answer.

Threads: ``process_request`` runs on the accept thread, ``HeaderWait``'s callbacks on its selector thread,
``_serve`` on a pool thread. Nothing here raises into them: a broken connection is closed, never printed
(``handle_error`` is silent: a traceback would land in the TUI). Constructing ``Http`` raises OSError when the
address cannot be bound (the pool is shut down again); ``server_close`` ends the head thread and the pool.
"""

from __future__ import annotations

import selectors
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from http.server import HTTPServer

__all__ = ["BACKLOG", "MAX_HEAD_BYTES", "HeaderWait", "Http", "Http6"]


#: listen() backlog: connections the kernel queues before the accept loop takes them.
BACKLOG = 512


#: Largest request head (request line and headers) accepted; a longer one is answered 431.
MAX_HEAD_BYTES = 64 << 10


_BUSY = (b"HTTP/1.1 503 Service Unavailable\r\nRetry-After: 1\r\nContent-Type: application/json\r\n"
         b"Content-Length: 52\r\nConnection: close\r\n\r\n"
         b'{"code":14,"message":"receiver busy: retry shortly"}')


_TOO_LARGE_HEAD = (b"HTTP/1.1 431 Request Header Fields Too Large\r\nContent-Type: application/json\r\n"
                   b"Content-Length: 44\r\nConnection: close\r\n\r\n"
                   b'{"code":3,"message":"request head too large"}')


def _send_best_effort(sock, data: bytes) -> None:
    """Send a short answer to a connection about to be closed: at most a second, errors ignored (the peer may be
    gone; the connection is closed next either way)."""
    try:
        sock.settimeout(1.0)
        sock.sendall(data)
    except OSError:
        pass


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
