"""What each row of a Kineto trace is: Kineto's categories, the role each gives a row (phase, CUDA API call,
framework operator, profiler bookkeeping, device activity), the CUDA API calls that are host waits, and the
classification pass that also joins a launch's ``correlation`` id to its API call (``row_roles``).

The mapping itself is ``kineto_mapping``; the rules of what each role becomes are in ``kineto``'s docstring.
Pure; any thread.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gputrace.timeline.model import Timeline
from gputrace.timeline.row_attrs import TemplateAttrs

__all__ = ["API", "DEVICE", "DEVICE_CATS", "KINETO_SYNC_APIS", "OP", "PHASE", "PROFILER", "is_kineto", "row_roles"]

DEVICE_CATS = {"kernel", "gpu_memcpy", "gpu_memset"}
_API_CATS = {"cuda_runtime", "cuda_driver"}
_PHASE_CATS = {"user_annotation"}
_OP_CATS = {"cpu_op", "python_function", "cpu_instant_event"}
#: The profiler's own rows: its ``Trace`` span, buffer requests, the device-side copy of annotations.
_PROFILER_CATS = {"Trace", "overhead", "gpu_user_annotation"}
#: Categories only Kineto writes: any one of them makes a Chrome trace a Kineto trace (see is_kineto).
_KINETO_CATS = frozenset(DEVICE_CATS | _API_CATS | _PHASE_CATS | _OP_CATS | {"gpu_user_annotation"})
#: CUDA API calls that block the calling thread until the device catches up -> sync type.
KINETO_SYNC_APIS = {
    "cudaStreamSynchronize": "stream", "cuStreamSynchronize": "stream",
    "cudaDeviceSynchronize": "context", "cuCtxSynchronize": "context",
    "cudaEventSynchronize": "event", "cuEventSynchronize": "event",
}

#: Row roles (``row_roles``): what each becomes.
PHASE, API, OP, PROFILER, DEVICE = 0, 1, 2, 3, 4

_ROLE_CODE = {**dict.fromkeys(DEVICE_CATS, DEVICE), **dict.fromkeys(_API_CATS, API), **dict.fromkeys(_OP_CATS, OP),
              **dict.fromkeys(_PROFILER_CATS, PROFILER)}  # else PHASE


def is_kineto(tl: Timeline) -> bool:
    """Whether ``tl`` (a Chrome trace read by the reader) holds a row of a category only Kineto writes
    (device, CUDA API, ``user_annotation``, operator rows): a CPU-only profile counts, having annotations
    and operators but no device row."""
    for a in tl.attrs.values():
        if a.get("chrome.cat") in _KINETO_CATS:
            return True
    return False


def row_roles(attrs_in: Mapping[int, Any], n: int) -> tuple[list[int], dict[int, int]]:
    """(role of each of the ``n`` rows by its ``chrome.cat``: ``PHASE`` / ``API`` / ``OP`` / ``PROFILER`` /
    ``DEVICE``, rows without attributes being phases; Kineto ``correlation`` id -> row of the API call that
    carries it, the last such row winning). ``attrs_in`` (row < ``n`` -> dict or ``TemplateAttrs``, as the
    reader gives them) is not modified."""
    role_l = [0] * n
    corr_api: dict[int, int] = {}
    rcode = _ROLE_CODE.get
    for r, a in attrs_in.items():
        # (a shared template holds the category: reading it there skips the Mapping's per-key lookup)
        ro = rcode(str((a.shared if type(a) is TemplateAttrs else a).get("chrome.cat")), 0)
        if ro:
            role_l[r] = ro
            if ro == API:
                cr = a.get("correlation")
                if type(cr) is int:
                    corr_api[cr] = r
    return role_l, corr_api
