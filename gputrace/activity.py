"""gputrace's semantic conventions for GPU activity spans (kernels, copies, memsets, syncs).

One vocabulary for every source: the CUPTI collector (``gputrace.source = "cupti"``) and the
Nsight Systems importer (``"nsys"``) both emit exactly these names, so the analysis, the TUI and
``compare`` never care where a kernel came from. docs/trace-format.md ("GPU activity") is the
reference; this module is the code form (names, vocabularies, and the normalisers that map
CUPTI enum names, nsys enum names and nsys labels onto the vocabulary).

Stdlib only; pure functions, any thread. Normalisers never raise: an unknown label maps to the
vocabulary's "unknown" value.
"""

from __future__ import annotations

import re

# ---- attribute names -----------------------------------------------------------------------
ACTIVITY = "gputrace.activity"  # "kernel" / "memcpy" / "memset" / "sync"
SOURCE = "gputrace.source"  # "cupti" / "nsys" / "kineto"
ROLE = "gputrace.role"  # rows that are not phases: "api" (CUDA API call), "op" (framework operator), "profiler"
#: True on the span of an interval CUDA activity collection was paused (``gputrace.trace.record_control``; name
#: ``PAUSED``, lane ``thread:`` + ``PAUSED``): not a phase, and no activity was recorded in it (docs/record.md).
PAUSED = "gputrace.record.paused"
KERNEL_NAME = "cuda.kernel.name"  # demangled full name (the span name is the short name)
GRID, BLOCK = "cuda.grid", "cuda.block"  # [x, y, z]
REGISTERS = "cuda.registers_per_thread"
SHARED_STATIC, SHARED_DYNAMIC = "cuda.shared_memory.static", "cuda.shared_memory.dynamic"
#: Static plus dynamic shared memory, where a source gives only the sum (Kineto's "shared memory").
SHARED_TOTAL = "cuda.shared_memory.total"
STREAM = "cuda.stream"
CORRELATION = "cuda.correlation_id"
API = "cuda.api"
LAUNCH_API_START = "cuda.launch.api_start_ns"
MEMCPY_KIND, MEMCPY_SRC, MEMCPY_DST = "cuda.memcpy.kind", "cuda.memcpy.src_kind", "cuda.memcpy.dst_kind"
MEMSET_KIND = "cuda.memset.kind"
SYNC_TYPE, SYNC_STREAM, SYNC_EVENT = "cuda.sync.type", "cuda.sync.stream", "cuda.sync.event"

# ---- vocabularies --------------------------------------------------------------------------
ACTIVITIES = ("kernel", "memcpy", "memset", "sync")
SOURCES = ("cupti", "nsys", "kineto")
ROLES = ("api", "op", "profiler")
#: Lane-name prefix of CUDA API-call lanes (``api:NAME`` beside the thread lane ``thread:NAME``): a row
#: there is an API call, not a phase, whatever its attributes.
API_LANE_PREFIX = "api:"
#: Lane-name prefix of the lane ``annotations:stream N`` beside a GPU stream's lane ``stream:N``: the profiler's
#: device-side copy of the host's annotation ranges on that stream (Kineto's ``gpu_user_annotation``), kept
#: out of every analysis by their ``gputrace.role = "profiler"``.
ANNOTATION_LANE_PREFIX = "annotations:stream "
MEMORY_KINDS = ("PAGEABLE", "PINNED", "DEVICE", "ARRAY", "MANAGED", "DEVICE_STATIC", "MANAGED_STATIC", "UNKNOWN")
COPY_KINDS = ("HtoD", "DtoH", "DtoD", "HtoH", "PtoP", "unknown")
SYNC_TYPES = ("stream", "event", "context", "stream_wait_event", "poll", "unknown")
MEMSET_NAME = "[CUDA memset]"

# CUPTI and nsys spell copy directions HTOD, HTOA, ATOD, ... (A = CUDA array, which lives on the
# device); nsys labels spell them "Host-to-Device". Arrays fold onto the device side.
_COPY = {
    "HTOD": "HtoD", "HTOA": "HtoD", "DTOH": "DtoH", "ATOH": "DtoH", "DTOD": "DtoD", "DTOA": "DtoD", "ATOD": "DtoD",
    "ATOA": "DtoD", "HTOH": "HtoH", "PTOP": "PtoP", "HOSTTODEVICE": "HtoD", "DEVICETOHOST": "DtoH",
    "DEVICETODEVICE": "DtoD", "HOSTTOHOST": "HtoH", "PEERTOPEER": "PtoP", "HOSTTOARRAY": "HtoD",
    "ARRAYTOHOST": "DtoH", "ARRAYTODEVICE": "DtoD", "DEVICETOARRAY": "DtoD", "ARRAYTOARRAY": "DtoD",
}
_MEM_ALIASES = {"PAGE_LOCKED": "PINNED", "PINNED_PAGE_LOCKED": "PINNED", "STATIC_DEVICE": "DEVICE_STATIC",
                "STATIC_MANAGED": "MANAGED_STATIC"}
_SYNC = {
    "STREAM_SYNCHRONIZE": "stream", "EVENT_SYNCHRONIZE": "event", "CONTEXT_SYNCHRONIZE": "context",
    "STREAM_WAIT_EVENT": "stream_wait_event", "STREAM": "stream", "EVENT": "event", "CONTEXT": "context",
}


def _tail(label: object, marker: str) -> str:
    """Upper-case ``label`` with any enum prefix up to ``marker`` removed, separators as ``_``."""
    s = re.sub(r"[\s\-]+", "_", str(label).strip()).upper()
    i = s.rfind(marker)
    return s[i + len(marker):] if i >= 0 else s


def memory_kind(label: object) -> str:
    """'CUPTI_ACTIVITY_MEMORY_KIND_PINNED', 'CUDA_MEMOPR_MEMORY_KIND_PAGEABLE', 'Pageable', 'Device Static'
    -> 'PINNED', 'PAGEABLE', 'PAGEABLE', 'DEVICE_STATIC'. Unknown labels -> 'UNKNOWN'."""
    if label is None:
        return "UNKNOWN"
    s = _tail(label, "KIND_")
    s = _MEM_ALIASES.get(s, s)
    if s not in MEMORY_KINDS and "(" in str(label):  # nsys labels such as "Pinned (page-locked)"
        s = _tail(str(label).split("(")[0], "KIND_").strip("_")
    return s if s in MEMORY_KINDS else "UNKNOWN"


def copy_kind(label: object) -> str:
    """'CUPTI_ACTIVITY_MEMCPY_KIND_HTOD', 'CUDA_MEMCPY_KIND_DTOH', 'Host-to-Device', 'HtoD' -> 'HtoD', 'DtoH', ...
    Copies to or from CUDA arrays fold onto the device side (HTOA -> HtoD). Unknown -> 'unknown'."""
    if label is None:
        return "unknown"
    s = _tail(label, "KIND_").replace("_", "")
    return _COPY.get(s, "unknown")


def sync_type(label: object) -> str:
    """'CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE' -> 'stream', ..._EVENT_SYNCHRONIZE -> 'event',
    ..._CONTEXT_SYNCHRONIZE -> 'context', ..._STREAM_WAIT_EVENT -> 'stream_wait_event'; else 'unknown'."""
    if label is None:
        return "unknown"
    s = _tail(label, "TYPE_")
    if s.lower() in SYNC_TYPES:
        return s.lower()
    return _SYNC.get(s, "unknown")


def memcpy_name(kind: str) -> str:
    """Span name of a copy: '[CUDA memcpy HtoD]'."""
    return f"[CUDA memcpy {kind}]"


#: CUDA API calls (runtime and driver, any ``_vNNNN`` suffix Nsight appends) -> the sync kind they are. A poll
#: (``cudaEventQuery``, ``cudaStreamQuery``) returns at once whatever the device is doing: CUPTI records an event
#: sync for it, but the host never blocks in it. ``cudaStreamWaitEvent`` makes a stream wait on the device; the
#: host does not wait either.
_API_SYNC = {
    "cudaStreamSynchronize": "stream", "cuStreamSynchronize": "stream",
    "cudaEventSynchronize": "event", "cuEventSynchronize": "event",
    "cudaDeviceSynchronize": "context", "cuCtxSynchronize": "context", "cudaThreadSynchronize": "context",
    "cudaStreamWaitEvent": "stream_wait_event", "cuStreamWaitEvent": "stream_wait_event",
    "cudaEventQuery": "poll", "cuEventQuery": "poll", "cudaStreamQuery": "poll", "cuStreamQuery": "poll",
}
#: Sync kinds in which the host thread blocks until the device catches up (what a sync wait counts).
BLOCKING_SYNC_TYPES = ("stream", "event", "context", "unknown")


def sync_type_of_api(api: object) -> str | None:
    """The sync kind of a CUDA API call by its name (``cudaStreamSynchronize_v3020`` -> ``stream``,
    ``cudaEventQuery`` -> ``poll``), None for a call that is not a synchronisation."""
    if not isinstance(api, str):
        return None
    name = api.split("_v", 1)[0] if "_v" in api else api
    return _API_SYNC.get(name)


def sync_name(kind: str) -> str:
    """Span name of a synchronization: '[CUDA sync stream]', '[CUDA sync event]', '[CUDA sync context]'."""
    return f"[CUDA sync {kind}]"


def short_kernel_name(full: str) -> str:
    """The short name of a demangled kernel name: 'void ns::ntt<256>(Fr*, int)' -> 'ntt'.

    Drops the parameter list, template arguments, the return type and namespaces (bracket depth
    is tracked, so 'f<(a>b)>' does not confuse it). A name that is not demangled is returned as is.
    """
    s = full.strip().replace("(anonymous namespace)", "{anonymous}")  # a namespace, not a parameter list
    angle = paren = 0
    cut, tmpl = len(s), -1  # tmpl: where the last top-level template argument list opened
    for i, ch in enumerate(s):
        if paren == 0 and ch == "<":
            if angle == 0:
                tmpl = i
            angle += 1
        elif paren == 0 and ch == ">":
            angle = max(angle - 1, 0)
        elif ch == "(":
            if angle == 0 and paren == 0:
                cut = i  # the parameter list: the first '(' outside templates
                break
            paren += 1
        elif ch == ")":
            paren = max(paren - 1, 0)
    s = s[:cut].rstrip()
    if s.endswith(">") and 0 <= tmpl < len(s):
        s = s[:tmpl].rstrip()
    s = s.rsplit(" ", 1)[-1]
    s = s.rsplit("::", 1)[-1]
    return s or full


def api_lane_name(thread_lane: str) -> str:
    """The name of the lane of a thread's CUDA API calls beside its lane ``thread_lane``: ``api:NAME`` for
    ``thread:NAME`` (another lane name keeps its whole name after ``api:``)."""
    return API_LANE_PREFIX + (thread_lane[len("thread:"):] if thread_lane.startswith("thread:") else thread_lane)


# ---- host stack samples (gputrace.trace.stack_sampler; docs/trace-format.md, "Host stack samples") ------------
#: Name of a batch of Python stack samples (one span per recorder drain) and of its lane (``thread:`` + it).
SAMPLES_SPAN = "gputrace.samples"
SAMPLES_HZ = "gputrace.samples.hz"  # the rate (samples per second per thread)
SAMPLES_DT = "gputrace.samples.dt_ns"  # int array: each sample's time minus the previous one's (the first: span start)
SAMPLES_THREAD = "gputrace.samples.thread"  # int array: index into the thread table, per sample
SAMPLES_STACK = "gputrace.samples.stack"  # int array: index into the stack table, per sample
SAMPLES_THREAD_IDS = "gputrace.samples.thread_ids"  # int array: thread table, ident
SAMPLES_THREAD_NAMES = "gputrace.samples.thread_names"  # string array: thread table, name
SAMPLES_STACK_LEN = "gputrace.samples.stack_len"  # int array: stack table, frames per stack
SAMPLES_STACK_FRAMES = "gputrace.samples.stack_frames"  # int array: the stacks' frame indices, innermost first
SAMPLES_FILES = "gputrace.samples.files"  # string array: file table
SAMPLES_FILE_KIND = "gputrace.samples.file_kind"  # int array per file: 0 user, 1 library, 2 stdlib, 3 internal
SAMPLES_FRAME_FILE = "gputrace.samples.frame_file"  # int array: frame table, file index
SAMPLES_FRAME_LINE = "gputrace.samples.frame_line"  # int array: frame table, line
SAMPLES_FRAME_FUNC = "gputrace.samples.frame_func"  # string array: frame table, function (qualified name)
SAMPLES_DROPPED = "gputrace.samples.dropped"  # int: samples dropped since the previous batch (memory bound)
FILE_USER, FILE_LIBRARY, FILE_STDLIB, FILE_INTERNAL = 0, 1, 2, 3
