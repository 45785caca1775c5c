"""Where the receiver listens: ``HOST:PORT`` parsing, the loopback rule, and bind failures in words.

:func:`parse_address` turns ``"host:port"`` / ``"[v6]:port"`` into ``(host, port)`` and raises
:class:`ReceiverAddressError` (a ValueError) for a malformed address, or for one that is not loopback
(``127.0.0.1``, ``::1``, ``localhost``: every address the name resolves to) unless ``allow_remote``; a host name
is resolved with ``getaddrinfo`` (a name that does not resolve is not loopback). :func:`bind_problem` probes a
port as a listener would bind it and returns (never raises) a :class:`ListenFailed` saying in one plain sentence
why it cannot be bound, or None; :func:`listen_failed` words an ``OSError`` from a bind the same way. Any thread;
no state.
"""

from __future__ import annotations

import errno
import ipaddress
import socket

__all__ = ["ListenFailed", "ReceiverAddressError", "bind_problem", "listen_failed", "parse_address"]


class ReceiverAddressError(ValueError):
    """An address that is malformed, or not loopback while ``allow_remote`` is False."""


class ListenFailed(OSError):
    """A port could not be bound; ``str()`` is one plain sentence (``port 4317 (OTLP/gRPC) is already in
    use by another program``), without errno text or gRPC's log hints."""

    def __str__(self) -> str:
        return str(self.strerror)


def bind_problem(host: str, port: int, what: str) -> ListenFailed | None:
    """Try to bind ``host:port`` as a listener would (SO_REUSEADDR, as gRPC and ``Http`` set it), so a
    busy port is reported in words before gRPC's C core logs its own line about it. Port 0: None."""
    if port == 0:
        return None
    fam = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        with socket.socket(fam, socket.SOCK_STREAM) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            probe.bind((host, port))
    except OSError as exc:
        return listen_failed(exc, port, what)
    return None


def listen_failed(exc: OSError, port: int, what: str) -> ListenFailed:
    if exc.errno == errno.EADDRINUSE:
        why = f"port {port} ({what}) is already in use by another program"
    elif exc.errno in (errno.EACCES, errno.EPERM):
        why = f"port {port} ({what}) needs privileges (ports below 1024 do): choose a higher port"
    elif exc.errno == errno.EADDRNOTAVAIL:
        why = f"the address for {what} is not one of this machine's"
    else:
        why = f"port {port} ({what}): {(exc.strerror or str(exc)).rstrip('.').lower()}"
    return ListenFailed(exc.errno or 0, why)


def parse_address(addr: str, allow_remote: bool = False) -> tuple[str, int]:
    """``"host:port"`` / ``"[v6]:port"`` -> (host, port); refuses non-loopback unless allowed."""
    if not isinstance(addr, str) or ":" not in addr:
        raise ReceiverAddressError(f"address {addr!r}: expected HOST:PORT (e.g. 127.0.0.1:4317)")
    host, _, port_s = addr.rpartition(":")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    try:
        port = int(port_s)
    except ValueError:
        raise ReceiverAddressError(f"address {addr!r}: port {port_s!r} is not a number") from None
    if not 0 <= port <= 65535 or not host:
        raise ReceiverAddressError(f"address {addr!r}: expected HOST:PORT with port 0-65535")
    if not allow_remote and not _is_loopback(host):
        raise ReceiverAddressError(
            f"address {addr!r} is not loopback; the receiver accepts unauthenticated data, so it listens on "
            "this machine only (127.0.0.1, ::1 or localhost). To receive from elsewhere, forward a port to it "
            "(e.g. ssh -L) or put an OpenTelemetry Collector in front; the Python API takes allow_remote=True")
    return host, port


def _is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(host, None)
    except socket.gaierror:
        return False
    return bool(infos) and all(ipaddress.ip_address(i[4][0]).is_loopback for i in infos)
