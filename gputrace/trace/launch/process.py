"""One recorded process of a ``gputrace record`` launch: its recorder, root span, check-in and flushes.

Contract (the bootstrap calls ``start()`` once, at interpreter start-up, on the main thread):

* ``start()`` configures a recorder whose file sink writes this process's own segment in the launch's segment
  folder ``GPUTRACE_RECORD_TRACE`` (a new ``<pid>-<n>.jsonl`` per recorder: no other process writes it, so
  no other process's death can damage its lines; ``record`` joins the segments at the end:
  ``gputrace.trace.launch.tracefile``), with the resource attributes of this process:
  ``process.pid``, ``process.parent_pid``, ``host.name``, ``gputrace.run_id`` (the launch's), ``gputrace.rank``
  / ``gputrace.local_rank`` / ``gputrace.world_size`` (from ``RANK``, ``LOCAL_RANK``, ``WORLD_SIZE`` when
  they are integers), ``gputrace.clock.epoch_offset_ns`` and ``gputrace.clock.anchor_uncertainty_ns`` (the
  process's one ``time.time_ns`` anchor: ``gputrace.trace.clock``) and ``gputrace.launch.command``. CUDA
  activity as ``GPUTRACE_CUDA_ACTIVITY`` says, NVTX ranges of every domain as spans (``cuda_markers``).
* A root span named after the command line (``python train.py``, ``python -m pkg``, ``python -c``) is open
  on the main thread while the program runs, so its phases and CUDA work hang under it; it ends at exit
  (with the exception type of an uncaught error) or when SIGTERM or SIGHUP arrives
  (``gputrace.trace.signals``). A process whose root span is missing from the file ended without its final
  flush (``gputrace.analysis.processes`` says so in ``report`` and ``view``).
* The check-in file ``<GPUTRACE_RECORD_CHECKIN>/<pid>.json`` is written at start (``final`` false) and
  rewritten at every recorder stop with what went into the launch's file so far.
* A program that calls ``gputrace.configure()`` itself keeps writing into the launch's file too (the
  recorder's ``inherit`` hook adds this process's launch sink to its recorder).
* Forks: the child of an ``os.fork`` (multiprocessing ``fork``, a ``forkserver``'s children, DataLoader
  workers) starts its own recorder and root span (``fork: <parent's command>``), without CUDA activity
  (CUDA does not survive a fork). Multiprocessing children end with ``os._exit`` after
  ``multiprocessing.util._exit_function``: wrapped here so they flush first. Other ``os._exit`` calls and
  SIGKILL lose what was not drained yet (the exporter drains every 0.5 s).
* When the program imports torch, its forward / backward / optimizer.step / dataloader.next ranges and its
  torch.distributed collectives are recorded without user code (``gputrace.trace.torch_capture``; off with
  ``GPUTRACE_TORCH_CAPTURE=0``).
* Each recorded process (forks too) samples its threads' Python stacks at ``GPUTRACE_SAMPLE_HZ``
  (``gputrace.trace.stack_sampler``; 0: off), written by every drain in its root span's trace.
* The multiprocessing forkserver and resource tracker are helpers, not the user's work: they record
  nothing, but the forkserver keeps the fork hook so its children are recorded.
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import signal
import sys
from typing import Any

from gputrace.trace import clock, hotpath, recorder, records, stack_sampler, torch_capture
from gputrace.trace.launch import ENV_CHECKIN, ENV_RUN_ID, ENV_SERVICE, ENV_TRACE
from gputrace.trace.sinks.jsonl import JsonlFileSink, create_private

#: This process's launch state: its pid (a forked child sees its parent's until it begins), command label,
#: open root span, the uncaught exception (set by the excepthook) and the counts of its check-in file.
_state: dict[str, Any] = {"pid": None, "label": "", "root": None, "error": None, "counts": None}
_hooks_installed = False


class LaunchFileSink(JsonlFileSink):
    """This process's own segment of the launch's trace: a new ``<pid>-<n>.jsonl`` in the segment folder
    ``folder`` (``gputrace.otlp.segments``), written by this sink only. Raises OSError (the folder is gone)."""

    def __init__(self, folder: str) -> None:
        super().__init__(create_private(folder), append=True, private=True)


def command_label(argv: list[str]) -> tuple[str, str]:
    """(label, role) for an interpreter's ``sys.orig_argv``: ``python x.py`` / ``python -m mod`` / ``python -c``
    / ``python`` (interactive); role is ``program``, or ``forkserver`` / ``resource_tracker`` /
    ``spawn`` for multiprocessing's own processes."""
    args = argv[1:]
    i = 0
    while i < len(args):
        a = args[i]
        if a == "-c":
            code = args[i + 1] if i + 1 < len(args) else ""
            if "multiprocessing.forkserver" in code:
                return "multiprocessing forkserver", "forkserver"
            if "multiprocessing.resource_tracker" in code:
                return "multiprocessing resource tracker", "resource_tracker"
            if "--multiprocessing-fork" in args[i + 2:] or "spawn_main" in code:
                return "multiprocessing spawn", "spawn"
            return "python -c", "program"
        if a == "-m":
            return f"python -m {args[i + 1] if i + 1 < len(args) else ''}".rstrip(), "program"
        if a in ("-W", "-X", "--check-hash-based-pycs"):
            i += 2
            continue
        if a.startswith("-") and a != "-":
            i += 1
            continue
        return f"python {os.path.basename(a)}", "program"
    return "python", "program"


def _int_env(name: str) -> int | None:
    try:
        return int(os.environ[name])
    except (KeyError, ValueError):
        return None


def _resource(label: str) -> dict:
    res: dict[str, Any] = {
        "process.parent_pid": os.getppid(),
        "gputrace.launch.command": label,
        "gputrace.clock.epoch_offset_ns": clock.EPOCH_OFFSET_NS,
        "gputrace.clock.anchor_uncertainty_ns": clock.ANCHOR_UNCERTAINTY_NS,
    }
    run_id = os.environ.get(ENV_RUN_ID)
    if run_id:
        res["gputrace.run_id"] = run_id
    for env, key in (("RANK", "gputrace.rank"), ("LOCAL_RANK", "gputrace.local_rank"),
                     ("WORLD_SIZE", "gputrace.world_size")):
        v = _int_env(env)
        if v is not None:
            res[key] = v
    return res


def _inherit() -> tuple[list, dict]:
    """recorder.inherit: a program's own configure() also writes into the launch's trace (a new segment of
    this process). Never raises: once ``record`` has joined the segments (this process outlived the launch)
    the folder is gone and the program's recorder goes on without the launch's sink."""
    try:
        return [LaunchFileSink(os.environ[ENV_TRACE])], _resource(_state["label"])
    except OSError:
        return [], _resource(_state["label"])


def _on_stop(rec, summary) -> None:
    """recorder.on_stop: add what this recorder put in the launch's file to the counts; rewrite the check-in."""
    c = _state["counts"]
    if c is None or _state["pid"] != os.getpid():
        return
    batches = rec.sample_batches  # (written as spans: counted as samples, not as spans)
    for s in rec.sinks:
        if isinstance(s, LaunchFileSink):
            ss = s.summary()
            c["spans"] += max(ss.exported - batches, 0)
            batches = 0
            c["samples"] += rec.samples_written
            c["dropped"] += ss.dropped
            c["sink_errors"].extend(ss.errors)
    c["dropped"] += summary.spans_dropped
    c["activity_spans"] += rec.activity_spans
    if rec.cupti is not None or rec.cuda_activity_error is not None:
        c["cuda_activity_asked"] = True
        c["cuda_activity_error"] = c["cuda_activity_error"] or rec.cuda_activity_error
    c["final"] = True
    _checkin()


def _checkin() -> None:
    folder = os.environ.get(ENV_CHECKIN)
    if not folder or _state["counts"] is None:
        return
    path = os.path.join(folder, f"{os.getpid()}.json")
    tmp = f"{path}.tmp"
    try:
        with open(tmp, "w") as f:
            json.dump(_state["counts"], f)
        os.replace(tmp, path)
    except OSError:
        pass  # the folder is gone (record ended first): nothing to tell


def _begin(label: str, cuda_activity: bool | None) -> None:
    """Configure this process's recorder and open its root span (main thread, or a fork's only thread). A
    SIGTERM meanwhile (a multiprocessing pool terminated while its worker starts) is acted on once the root
    span is open, so the process still leaves its root span and a final check-in. (Blocked rather than
    deferred: until ``configure()`` installs the handler, SIGTERM would still have its default action. Threads
    started meanwhile, the exporter, keep it blocked, so it is always delivered to this thread.)"""
    blocked = {signal.SIGTERM, signal.SIGHUP}
    old = signal.pthread_sigmask(signal.SIG_BLOCK, blocked)
    try:
        _begin_now(label, cuda_activity)
    finally:
        if blocked - set(old):
            signal.pthread_sigmask(signal.SIG_UNBLOCK, blocked - set(old))  # a pending one is acted on now


def _begin_now(label: str, cuda_activity: bool | None) -> None:
    _state.update(pid=os.getpid(), label=label, root=None, error=None,
                  counts={"label": label, "pid": os.getpid(), "spans": 0, "samples": 0, "dropped": 0,
                          "activity_spans": 0,
                          "cuda_activity_asked": False, "cuda_activity_error": None, "sink_errors": [],
                          "final": False})
    _checkin()
    # record's closing line says whether CUDA activity was collected (and why not): no warning per process.
    logging.getLogger("gputrace.trace").setLevel(logging.ERROR)
    recorder.inherit = None  # (our own configure: the sink is given explicitly)
    rec = recorder.configure(
        sinks=[LaunchFileSink(os.environ[ENV_TRACE])],
        service_name=os.environ.get(ENV_SERVICE) or label,
        resource=_resource(label),
        cuda_activity=cuda_activity,
        cuda_markers=True,
        collect_gpu_info=bool(cuda_activity if cuda_activity is not None else recorder.env_flag(
            recorder.CUDA_ACTIVITY_ENV)),
    )
    recorder.inherit = _inherit
    recorder.on_stop = _on_stop
    root = hotpath.phase(label, kind="host")
    root.__enter__()  # closed by _finish (exit), or by the SIGTERM handler with the other open phases
    _state["root"] = root
    _start_sampler(rec, root)
    if rec.join is not None:
        # CUDA work outside any phase or NVTX range carries the root's external id: register the root's ids
        # now (its span is exported only at the end) so that work is not held back until then.
        with rec._drain_lock:
            tid, sid = records._ids_of(root, rec.ids)
            start = root.t0 + rec.epoch_offset_ns
            rec.join.root = (tid, sid, start)
            if root.xid:
                rec.join.register_phase(root.xid, tid, sid, start)


def _start_sampler(rec, root) -> None:
    """Python stack samples of every thread at ``GPUTRACE_SAMPLE_HZ`` (0: none), written by every drain in the
    root span's trace (``gputrace.trace.stack_sampler``). A bad rate is said once on stderr; the program runs
    on."""
    try:
        hz = stack_sampler.env_hz()
    except ValueError as e:
        print(f"gputrace record: no stack samples: {e}", file=sys.stderr)
        return
    if hz <= 0 or not rec.record:
        return
    with rec._drain_lock:
        rec.sample_parent = records._ids_of(root, rec.ids)
        rec.sampler = stack_sampler.StackSampler(hz).start()


def _finish() -> None:
    """atexit (and multiprocessing's exit function): end the root span, shut the recorder down."""
    root = _state["root"]
    if root is None or _state["pid"] != os.getpid():
        return
    _state["root"] = None
    err = _state["error"]
    if getattr(root, "t1", None) is None:  # (not closed by the SIGTERM handler)
        if recorder.get_recorder() is None:
            # The program shut its own recorder down: one more, only to write the root span (it keeps the
            # ids its children were exported with by the earlier recorders).
            label = _state["label"]
            recorder.inherit = None
            try:
                sink = LaunchFileSink(os.environ[ENV_TRACE])
            except OSError:  # (record already joined the segments: nowhere to write)
                return
            recorder.configure(sinks=[sink],
                               service_name=os.environ.get(ENV_SERVICE) or label, resource=_resource(label),
                               cuda_activity=False, collect_gpu_info=False)
        root.__exit__(type(err) if err is not None else None, err, None)
    recorder.shutdown()


def _excepthook(et, ev, tb) -> None:
    _state["error"] = ev
    if isinstance(ev, ModuleNotFoundError) and (ev.name or "").split(".")[0] in ("cupy", "cupyx"):
        print(f"gputrace record: {_state['label']} needs CuPy, which is not installed here ({ev}); the host trace "
              "was written. Install the GPU extra: pip install -e '.[gpu]'", file=sys.stderr)
        return
    _prev_excepthook(et, ev, tb)


_prev_excepthook = sys.excepthook


#: The forking thread's signal mask before ``_before_fork`` blocked SIGTERM (see there).
_fork_mask: set = set()


def _before_fork() -> None:
    """SIGTERM stays blocked across ``fork()``: CPython clears the signals that tripped in the child before
    its at-fork hooks run, so a SIGTERM arriving right at the fork (a pool terminated while its last worker is
    being forked) would be lost and the worker would never end. Blocked, it stays pending until the child has
    its recorder, then acts (``_after_fork_in_child``)."""
    global _fork_mask
    _fork_mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})


def _unblock_after_fork() -> None:
    if signal.SIGTERM not in _fork_mask:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})


def _after_fork_in_child() -> None:
    try:
        _begin_forked()
    finally:
        _unblock_after_fork()


def _begin_forked() -> None:
    if _state["pid"] is None and not _hooks_installed:
        return
    _wrap_multiprocessing_exit()
    parent = _state["label"] or "python"
    try:
        _begin(parent if parent.startswith("fork: ") else f"fork: {parent}", cuda_activity=False)
    except Exception as e:  # noqa: BLE001 reported on one line; the child must run unrecorded
        print(f"gputrace record: not recording forked pid {os.getpid()}: {type(e).__name__}: {e}", file=sys.stderr)


def _wrap_multiprocessing_exit() -> None:
    """Multiprocessing children end in ``os._exit`` right after ``util._exit_function()``: flush there."""
    util: Any = sys.modules.get("multiprocessing.util")
    if util is None or util._exit_function is _wrapped.get(id(util)):
        return
    orig = util._exit_function

    def _exit_function(*args, **kwargs):
        try:
            return orig(*args, **kwargs)
        finally:
            _finish()

    _wrapped[id(util)] = _exit_function
    util._exit_function = _exit_function


#: id(multiprocessing.util) -> our wrapper of its _exit_function (wrapped once)
_wrapped: dict[int, Any] = {}


def _install_hooks() -> None:
    global _hooks_installed, _prev_excepthook
    if _hooks_installed:
        return
    _hooks_installed = True
    # Registered after the recorder's and the file sink's own fork hooks (imported above), so they run first.
    os.register_at_fork(before=_before_fork, after_in_parent=_unblock_after_fork,
                        after_in_child=_after_fork_in_child)
    atexit.register(_finish)
    _prev_excepthook = sys.excepthook
    sys.excepthook = _excepthook


def start() -> None:
    """Record this process (see the module contract). Idempotent. Raises OSError if the trace file cannot
    be opened."""
    if not os.environ.get(ENV_TRACE) or _state["pid"] == os.getpid():
        return
    label, role = command_label(list(getattr(sys, "orig_argv", sys.argv)))
    if role in ("forkserver", "resource_tracker"):
        if role == "forkserver":
            _state["label"] = "multiprocessing forkserver"
            _install_hooks()
        return
    _begin(label, cuda_activity=None)
    _install_hooks()
    try:
        torch_capture.install_when_imported()
    except Exception as e:  # noqa: BLE001 - the program runs without the torch capture
        torch_capture.status.note_error("import hook", e)
