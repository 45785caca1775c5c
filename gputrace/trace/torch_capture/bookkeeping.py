"""The torch capture's bookkeeping, without torch: collective payloads, process-group identity, per-group
sequence numbers, argument lookup and the span attributes (docs/trace-format.md, "torch capture").

Contract: pure functions and small thread-safe records over duck-typed objects (anything with ``numel()``
and ``element_size()`` is a tensor here; a process group is whatever the caller's ``describe`` callable
can name), so the tests need no torch. Nothing here raises for an unexpected argument shape: an unknown
payload is ``(None, None)`` and the span simply carries no size.
"""

from __future__ import annotations

import inspect
import itertools
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

#: Span attribute names (namespace ``gputrace.collective.``; docs/trace-format.md).
OP = "gputrace.collective.op"
API = "gputrace.collective.api"
BYTES = "gputrace.collective.bytes"
DTYPE = "gputrace.collective.dtype"
GROUP = "gputrace.collective.group"
GROUP_RANKS = "gputrace.collective.group_ranks"
GROUP_SIZE = "gputrace.collective.group_size"
SEQ = "gputrace.collective.seq"
ASYNC = "gputrace.collective.async"
BACKEND = "gputrace.collective.backend"
COMPLETION = "gputrace.collective.completion"
CALL_END = "gputrace.collective.call_end_ns"
BUCKET = "gputrace.collective.bucket"
#: Attributes of the step ranges (``forward``, ``backward``, ``optimizer.step``, ``dataloader.next``).
MODULE = "gputrace.torch.module"
DEPTH = "gputrace.torch.depth"
OPTIMIZER = "gputrace.torch.optimizer"

#: torch.distributed function -> (span name, the parameter holding this rank's input data or None).
#: Span names are exactly those ``gputrace.analysis.collectives.is_collective_name`` accepts for the six
#: families; reduce/gather/scatter keep their own names.
COLLECTIVES: dict[str, tuple[str, str | None]] = {
    "all_reduce": ("all_reduce", "tensor"),
    "broadcast": ("broadcast", "tensor"),
    "broadcast_object_list": ("broadcast", None),
    "all_gather": ("all_gather", "tensor"),
    "all_gather_into_tensor": ("all_gather", "input_tensor"),
    "all_gather_object": ("all_gather", None),
    "reduce_scatter": ("reduce_scatter", "input_list"),
    "reduce_scatter_tensor": ("reduce_scatter", "input"),
    "all_to_all": ("all_to_all", "input_tensor_list"),
    "all_to_all_single": ("all_to_all", "input"),
    "barrier": ("barrier", None),
    "monitored_barrier": ("barrier", None),
    "reduce": ("reduce", "tensor"),
    "gather": ("gather", "tensor"),
    "scatter": ("scatter", "scatter_list"),
}


def dtype_name(dtype: Any) -> str:
    """``torch.float32`` -> ``float32`` (any object: its ``str`` without a ``torch.`` prefix)."""
    s = str(dtype)
    return s[6:] if s.startswith("torch.") else s


_dtype_names: dict[Any, str] = {}


def _dtype_of(t: Any) -> str:
    d = getattr(t, "dtype", "?")
    try:
        name = _dtype_names.get(d)
    except TypeError:  # an unhashable dtype
        return dtype_name(d)
    if name is None:
        name = dtype_name(d)
        if len(_dtype_names) < 256:
            _dtype_names[d] = name
    return name


def payload(value: Any) -> tuple[int | None, str | None]:
    """(bytes, dtype) of a collective's input: a tensor (``numel() * element_size()``), or a list/tuple of
    tensors (bytes summed; dtype of the first, or ``mixed``). ``(None, None)`` for anything else (an object
    collective, ``None``)."""
    try:
        if isinstance(value, (list, tuple)):
            if not value:
                return None, None
            total, dtypes = 0, set()
            for t in value:
                total += int(t.numel()) * int(t.element_size())
                dtypes.add(_dtype_of(t))
            return total, (dtypes.pop() if len(dtypes) == 1 else "mixed")
        return int(value.numel()) * int(value.element_size()), _dtype_of(value)
    except Exception:  # noqa: BLE001 - not tensors, or a tensor subclass whose numel raises: no size
        return None, None


def ranks_text(ranks: Sequence[int]) -> str:
    """Global ranks as a compact text, runs joined: ``[0, 1, 2, 3, 8, 10, 11]`` -> ``"0-3,8,10-11"``
    (a group of 1024 ranks stays one short attribute)."""
    out: list[str] = []
    rs = sorted({int(r) for r in ranks})
    i = 0
    while i < len(rs):
        j = i
        while j + 1 < len(rs) and rs[j + 1] == rs[j] + 1:
            j += 1
        out.append(str(rs[i]) if i == j else f"{rs[i]}-{rs[j]}")
        i = j + 1
    return ",".join(out)


@dataclass(frozen=True)
class GroupInfo:
    """A process group as the spans name it: ``name`` (torch's group name: the same on every rank, since
    every rank creates its groups in the same order), its global ``ranks`` (``ranks_text``), ``size`` and
    ``backend`` (``gloo``, ``nccl``, ...; empty when unknown)."""

    name: str
    ranks: str
    size: int
    backend: str = ""


class GroupSequences:
    """Per process group, the number of collectives captured so far: ``next(name)`` returns 0, 1, 2, ...
    for each group on its own. Thread-safe (a collective may start on an autograd thread): each group's
    counter is an ``itertools.count``, whose ``next`` is atomic under the GIL."""

    def __init__(self) -> None:
        self._counters: dict[str, Any] = {}
        self._lock = threading.Lock()

    def next(self, group: str) -> int:
        c = self._counters.get(group)
        if c is None:
            with self._lock:
                c = self._counters.setdefault(group, itertools.count())
        return next(c)


class GroupCache:
    """``GroupInfo`` per process-group object, computed once by ``describe(group)``; the group object is
    kept alive with its entry so its ``id`` is never reused while cached. Thread-safe enough: two threads
    describing the same new group both compute an equal record."""

    def __init__(self, describe: Callable[[Any], GroupInfo]) -> None:
        self._describe = describe
        self._cache: dict[int, tuple[Any, GroupInfo]] = {}

    def get(self, group: Any) -> GroupInfo:
        hit = self._cache.get(id(group))
        if hit is not None and hit[0] is group:
            return hit[1]
        info = self._describe(group)
        self._cache[id(group)] = (group, info)
        return info


class ArgSpec:
    """Where a function's named parameters sit, from its signature, so a wrapper reads ``group=`` or
    ``async_op=`` from ``(args, kwargs)`` without binding the signature per call (~10 µs)."""

    def __init__(self, fn: Callable[..., Any]) -> None:
        self.pos: dict[str, int] = {}
        self.defaults: dict[str, Any] = {}
        for i, (name, p) in enumerate(inspect.signature(fn).parameters.items()):
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
                self.pos[name] = i
            if p.default is not p.empty:
                self.defaults[name] = p.default

    def get(self, args: Sequence[Any], kwargs: Mapping[str, Any], name: str) -> Any:
        """The value passed for ``name`` (keyword or position), else its default, else None."""
        if name in kwargs:
            return kwargs[name]
        i = self.pos.get(name)
        if i is not None and i < len(args):
            return args[i]
        return self.defaults.get(name)


def collective_attrs(op: str, api: str, group: GroupInfo, seq: int, nbytes: int | None, dtype: str | None,
                     is_async: bool) -> dict[str, Any]:
    """The ``gputrace.collective.*`` attributes of one collective span (docs/trace-format.md)."""
    a: dict[str, Any] = {OP: op, API: api, GROUP: group.name, GROUP_RANKS: group.ranks, GROUP_SIZE: group.size,
                         SEQ: seq, ASYNC: is_async}
    if group.backend:
        a[BACKEND] = group.backend
    if nbytes is not None:
        a[BYTES] = nbytes
    if dtype is not None:
        a[DTYPE] = dtype
    return a
