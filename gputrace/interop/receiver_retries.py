"""Retried requests: the receiver stores a request once even when its sender sends it again.

OTLP delivery is at-least-once: a sender that gets no answer (it hung up, its deadline passed, the connection
broke) cannot tell a request that was stored from one that was lost, and sends the same request again. The
receiver remembers :func:`request_digest` of the last ``capacity`` requests it stored (:class:`RecentRequests`)
and answers the same body again as it answered it the first time, without storing it again.

Only byte-identical bodies match: BLAKE2b-256 of the body (after gunzip for HTTP; for gRPC, the request's
deterministic protobuf serialization) and its encoding, so a request that differs in any byte, same span ids
or not, is stored. Pure; :class:`RecentRequests` is not locked itself: its owner calls it under the lock that
also guards the write, so "seen?", "store" and "remember" are one step for concurrent senders.
"""

from __future__ import annotations

import collections
import hashlib

__all__ = ["RecentRequests", "request_digest"]


def request_digest(encoding: bytes, body: bytes) -> bytes:
    """The key a stored request is remembered by: BLAKE2b-256 of ``encoding`` (``b"proto"`` for protobuf,
    HTTP or gRPC; ``b"json"``) and the request's uncompressed ``body``."""
    h = hashlib.blake2b(encoding + b"\0", digest_size=32)
    h.update(body)
    return h.digest()


class RecentRequests:
    """The digests of the last ``capacity`` requests stored (least recently seen forgotten first);
    ``capacity`` 0 remembers nothing."""

    def __init__(self, capacity: int) -> None:
        self.capacity = max(0, int(capacity))
        self._digests: collections.OrderedDict[bytes, None] = collections.OrderedDict()

    def seen(self, digest: bytes) -> bool:
        """True when ``digest`` is remembered (it becomes the most recently seen)."""
        if digest not in self._digests:
            return False
        self._digests.move_to_end(digest)
        return True

    def remember(self, digest: bytes) -> None:
        """Remember a request that was stored; forgets the least recently seen beyond ``capacity``."""
        if not self.capacity:
            return
        self._digests[digest] = None
        self._digests.move_to_end(digest)
        while len(self._digests) > self.capacity:
            self._digests.popitem(last=False)

    def __len__(self) -> int:
        return len(self._digests)
