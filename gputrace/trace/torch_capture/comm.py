"""torch.distributed collectives as spans, DDP's gradient all-reduces included (docs/record.md).

One span per collective call, named ``all_reduce``, ``broadcast``, ``all_gather``, ``reduce_scatter``,
``all_to_all``, ``barrier`` (and ``reduce``, ``gather``, ``scatter``), with ``gputrace.collective.*``
attributes: op, api, bytes, dtype, process group name / ranks / size, and ``seq``, the n-th collective of
that group in this process, so the n-th collective of a group can be matched across ranks by content.

How, and why this way (figures: benchmarks/bench_torch_capture.py, benchmarks/RESULTS.md):

* **Python collectives** (``dist.all_reduce`` ...): the functions of ``torch.distributed.distributed_c10d``
  are wrapped (and the same names in ``torch.distributed``), costing one wrapper per call (a few µs against
  a collective's tens of µs at least). A synchronous call is a ``with`` phase (its NCCL kernels are its
  children); an ``async_op=True`` call is a ``start_phase`` handle ended when the Work's future completes
  (``add_done_callback``, on the thread that completes it): the span runs from the call to completion, and
  ``gputrace.collective.call_end_ns`` says when the call returned. ``gputrace.collective.completion`` says which:
  ``sync`` (the call; with gloo it returns once the collective is done, with NCCL at enqueue:
  ``gputrace.collective.backend`` tells them apart), ``future`` (async, ended at completion), ``call`` (async
  without a future: ended at the call's return, before completion). Calls made inside a captured collective
  (``all_gather_object``'s own ``all_gather``) are not counted again.
* **DDP**: its bucket all-reduces run in C++ (the reducer) and never reach Python's ``dist.all_reduce``.
  ``DistributedDataParallel.forward`` is wrapped so that at a module's first forward, when the program has
  registered no communication hook of its own (nor a built-in one, nor mixed precision), a Python hook is
  registered that does what DDP's default does (divide the bucket by the group size, all-reduce it, sum)
  inside an ``all_reduce`` span ended by the future's completion. A hook the program registers itself
  (``register_comm_hook``, before or after that first forward: ours then hands every bucket to it; a
  built-in ALLREDUCE or FP16_COMPRESS registered after it becomes ours or torch's Python twin) runs inside a
  ``ddp.comm_hook`` span and its own collectives are captured as above. Cost: one Python call per bucket
  (25 MiB by default), not per parameter.
* Not chosen: torch's record-function observers are reachable from Python only through the profiler
  (Kineto), which records every aten op (1.097x a step on the H200, docs/record.md); NVTX emission
  (``emit_nvtx``) also ranges every op; c10d's ``_register_on_completion_hook`` exists for NCCL only.
  NCCL's own NVTX ranges (``ncclAllReduce`` ..., domain ``NCCL``) come through CUPTI's NVTX capture where
  NCCL was built with NVTX; the analysis recognises them by name.
* Completion: gloo completes a Work's future when the collective has finished; NCCL completes it at
  enqueue (the device work is then in the ``ncclDevKernel_*`` spans), so for NCCL the span is the host call.

Never breaks the program: bookkeeping that fails leaves that call unrecorded (one error in the resource,
``gputrace.torch_capture.error``) and the collective itself always runs.
"""

from __future__ import annotations

import functools
import importlib
import threading
import weakref
from collections.abc import Callable
from typing import Any

from gputrace.trace import clock, hotpath as _hp
from gputrace.trace.torch_capture.bookkeeping import (
    BUCKET,
    CALL_END,
    COLLECTIVES,
    COMPLETION,
    ArgSpec,
    GroupCache,
    GroupInfo,
    GroupSequences,
    collective_attrs,
    payload,
    ranks_text,
)
from gputrace.trace.torch_capture.status import note_error

#: Per thread: ``c`` is set while a captured collective call runs (its inner collectives are not counted).
_loc = threading.local()


def _first_value(fut: Any) -> Any:
    return fut.value()[0]


def _end_when_done(h: Any, fut: Any) -> None:
    """End the handle ``h`` when ``fut`` completes (now, if it has): one Python callback on the thread that
    completes it (gloo's worker; it waits for the GIL, so the end may be late by up to the interpreter's
    switch interval while the program's threads run Python)."""
    h.extra[CALL_END] = _hp.now_ns() + clock.EPOCH_OFFSET_NS
    h.extra[COMPLETION] = "future"

    def done(f: Any) -> None:
        try:
            f.value()
        except Exception as e:  # noqa: BLE001 - the collective failed: the span says so
            h.end(error=e)
            return
        h.end()

    try:
        fut.add_done_callback(done)
    except Exception as e:  # noqa: BLE001 - no callbacks on this future: the span ends at the call
        h.extra[COMPLETION] = "call"
        h.end()
        note_error("collectives.future", e)


def _start(op: str, attrs: dict) -> Any:
    """A ``start_phase`` handle with ``attrs`` as its attributes (no keyword dict copied)."""
    h = _hp.start_phase(op)
    h.extra = attrs
    return h


class Collectives:
    """The capture of one process's collectives (see the module contract)."""

    def __init__(self, torch: Any) -> None:
        dist = importlib.import_module("torch.distributed")
        self.dist = dist
        self.c10d = dist.distributed_c10d
        self._is_compiling = torch.compiler.is_compiling
        self.seq = GroupSequences()
        self.groups = GroupCache(self._describe)
        self.originals: dict[str, Callable[..., Any]] = {}
        self._undo: list[Callable[[], None]] = []

    # -- process groups ----------------------------------------------------------------------------
    def _describe(self, g: Any) -> GroupInfo:
        name = getattr(g, "group_name", None)
        if not name:
            name = self.c10d._get_process_group_name(g)
        ranks = self.dist.get_process_group_ranks(g)
        try:
            backend = str(self.dist.get_backend(g)).lower()
        except Exception:  # noqa: BLE001 - a group torch cannot name the backend of: the span has none
            backend = ""
        return GroupInfo(str(name), ranks_text(ranks), int(g.size()), backend)

    def _group(self, g: Any) -> GroupInfo:
        if g is None:
            g = self.c10d._get_default_group()
        return self.groups.get(g)

    def _attrs(self, op: str, api: str, group: Any, data: Any, is_async: bool) -> dict | None:
        """The span's attributes, or None (bookkeeping failed: the call runs unrecorded, error noted)."""
        try:
            if group is None and not self.dist.is_initialized():
                return None  # the program's own mistake: torch raises it, nothing to note here
            info = self._group(group)
            nbytes, dtype = payload(data) if data is not None else (None, None)
            return collective_attrs(op, api, info, self.seq.next(info.name), nbytes, dtype, is_async)
        except Exception as e:  # noqa: BLE001 - e.g. no default group yet: torch raises its own error below
            note_error("collectives", e)
            return None

    # -- torch.distributed functions ---------------------------------------------------------------
    def install(self) -> None:
        for fname, (op, data_param) in COLLECTIVES.items():
            orig = getattr(self.c10d, fname, None)
            if orig is None or getattr(orig, "_gputrace", False):
                continue
            w = self._wrap(fname, op, data_param, orig)
            self.originals[fname] = orig
            setattr(self.c10d, fname, w)
            same = getattr(self.dist, fname, None) is orig
            if same:
                setattr(self.dist, fname, w)
            self._undo.append(functools.partial(self._restore, fname, orig, same))

    def _restore(self, fname: str, orig: Any, in_dist: bool) -> None:
        setattr(self.c10d, fname, orig)
        if in_dist:
            setattr(self.dist, fname, orig)

    def _wrap(self, fname: str, op: str, data_param: str | None, orig: Callable[..., Any]) -> Callable[..., Any]:
        spec = ArgSpec(orig)
        api = f"torch.distributed.{fname}"
        is_compiling = self._is_compiling
        attrs_of = self._attrs

        @functools.wraps(orig)
        def collective(*args, **kwargs):
            if is_compiling() or getattr(_loc, "c", False):  # (Dynamo: nothing of ours to trace)
                return orig(*args, **kwargs)
            is_async = bool(spec.get(args, kwargs, "async_op"))
            data = spec.get(args, kwargs, data_param) if data_param else None
            attrs = attrs_of(op, api, spec.get(args, kwargs, "group"), data, is_async)
            if attrs is None:
                return orig(*args, **kwargs)
            _loc.c = True
            try:
                if not is_async:
                    attrs[COMPLETION] = "sync"
                    p = _hp.phase(op)
                    p.extra = attrs
                    p.__enter__()
                    try:
                        out = orig(*args, **kwargs)
                    except BaseException as e:
                        p.__exit__(type(e), e, e.__traceback__)
                        raise
                    p.__exit__(None, None, None)
                    return out
                h = _start(op, attrs)
                try:
                    work = orig(*args, **kwargs)
                except BaseException as e:
                    h.end(error=e)
                    raise
                fut = None
                try:
                    fut = work.get_future() if work is not None else None
                except Exception:  # noqa: BLE001, S110 - a backend without futures: ends at the call
                    pass
                if fut is None:
                    attrs[COMPLETION] = "call"
                    h.end()
                else:
                    _end_when_done(h, fut)
                return work
            finally:
                _loc.c = False

        collective._gputrace = True  # type: ignore[attr-defined]
        return collective

    # -- DDP ---------------------------------------------------------------------------------------
    def install_ddp(self) -> None:
        ddp = importlib.import_module("torch.nn.parallel.distributed").DistributedDataParallel
        orig_forward = ddp.forward
        orig_register = ddp.register_comm_hook
        orig_builtin = getattr(ddp, "_register_builtin_comm_hook", None)
        is_compiling = self._is_compiling
        own_hook = self.bucket_hook
        # DDP takes one communication hook per module, for good. Ours is registered at the first forward, but
        # torch lets a program register its own until the first backward: ours is therefore a trampoline to
        # the program's hook once it has one (the module is held weakly: the reducer, which holds the hook, is
        # held by the module).

        def first_forward(m: Any) -> None:
            d = m.__dict__
            d["_gputrace_comm"] = True
            try:
                if (getattr(m, "_comm_hooks", None) or d.get("_gputrace_builtin")
                        or getattr(m, "mixed_precision", None) is not None):
                    return  # the program's own hook (captured by register_comm_hook below) or DDP's own
                wm = weakref.ref(m)

                def hook(state, bucket):
                    mod = wm()
                    user = mod.__dict__.get("_gputrace_user_hook") if mod is not None else None
                    if user is not None:
                        return user[1](user[0], bucket)
                    return own_hook(state, bucket)

                hook.__qualname__ = "gputrace.torch_capture.allreduce"
                orig_register(m, m.process_group, hook)
                d["_gputrace_own_hook"] = True
                # Not in DDP's own list: its Python reducer (compiled autograd) calls those hooks per
                # parameter, and without one it does DDP's default; the list stays the program's.
                listed = getattr(m, "_comm_hooks", None)
                if listed and listed[-1][0] is hook:
                    listed.pop()
            except Exception as e:  # noqa: BLE001 - DDP goes on with its default all-reduce, unrecorded
                note_error("ddp", e)

        @functools.wraps(orig_forward)
        def forward(m, *args, **kwargs):
            if not m.__dict__.get("_gputrace_comm") and not is_compiling():
                first_forward(m)
            return orig_forward(m, *args, **kwargs)

        def take_over(m: Any, state: Any, hook: Any, name: str) -> None:
            """The program registers ``hook`` after ours: our trampoline calls it from now on, and DDP's own
            bookkeeping of a registration is done as ``register_comm_hook`` would."""
            m._check_comm_hook(hook)
            m.__dict__["_gputrace_user_hook"] = (state, _user_hook(hook))
            try:
                m._comm_hooks.append((hook, state))
                m.logger._set_comm_hook_name(name)
            except Exception as e:  # noqa: BLE001 - only DDP's logging of the hook's name
                note_error("ddp.register_comm_hook", e)

        def ours_only(m: Any) -> bool:
            """Our hook is registered and the program has not registered one since (a second registration
            goes to torch, which refuses it as it would without gputrace)."""
            d = m.__dict__
            if d.get("_gputrace_own_hook") and not d.get("_gputrace_taken"):
                d["_gputrace_taken"] = True
                return True
            return False

        @functools.wraps(orig_register)
        def register_comm_hook(m, state, hook):
            if ours_only(m):
                return take_over(m, state, hook, getattr(hook, "__qualname__", "?"))
            return orig_register(m, state, _user_hook(hook))

        ddp.forward = forward
        ddp.register_comm_hook = register_comm_hook
        undo = [("forward", orig_forward), ("register_comm_hook", orig_register)]
        if orig_builtin is not None:
            @functools.wraps(orig_builtin)
            def _register_builtin_comm_hook(m, comm_hook_type):
                d = m.__dict__
                d["_gputrace_builtin"] = True
                if ours_only(m):
                    kind = str(comm_hook_type)
                    if kind.endswith("ALLREDUCE"):
                        return None  # what our hook already does
                    if kind.endswith("FP16_COMPRESS"):
                        hooks = importlib.import_module("torch.distributed.algorithms.ddp_comm_hooks.default_hooks")
                        return take_over(m, m.process_group, hooks.fp16_compress_hook, kind)
                    d["_gputrace_taken"] = False  # (another kind: torch's own answer, below)
                return orig_builtin(m, comm_hook_type)

            ddp._register_builtin_comm_hook = _register_builtin_comm_hook
            undo.append(("_register_builtin_comm_hook", orig_builtin))

        def restore() -> None:
            for name, fn in undo:
                setattr(ddp, name, fn)

        self._undo.append(restore)

    # No annotations on the hook: DDP's _check_comm_hook rejects a ``bucket`` or return annotation other
    # than GradBucket / Future (and this module's annotations are strings).
    def bucket_hook(self, state, bucket):
        """DDP's default gradient all-reduce (divide by the group size, then sum) inside an ``all_reduce``
        span that ends when the bucket's all-reduce completes."""
        all_reduce = self.originals.get("all_reduce") or self.c10d.all_reduce
        group = state if state is not None else self.c10d._get_default_group()
        t = bucket.buffer()
        attrs = self._attrs("all_reduce", "ddp.bucket", group, t, True)
        if attrs is None:
            t.div_(group.size())
            return all_reduce(t, group=group, async_op=True).get_future().then(_first_value)
        try:
            attrs[BUCKET] = int(bucket.index())
        except Exception:  # noqa: BLE001, S110 - no bucket index in this torch: the span has none
            pass
        h = _start("all_reduce", attrs)
        try:
            t.div_(attrs["gputrace.collective.group_size"])
            fut = all_reduce(t, group=group, async_op=True).get_future()
        except BaseException as e:
            h.end(error=e)
            raise
        attrs[CALL_END] = _hp.now_ns() + clock.EPOCH_OFFSET_NS
        attrs[COMPLETION] = "future"

        def done(f):
            # DDP needs the bucket's tensor from a ``then`` callback anyway: ending the span there costs no
            # second Python callback (each one takes the GIL on the thread that completes the future).
            try:
                out = f.value()[0]
            except BaseException as e:
                h.end(error=e)
                raise
            h.end()
            return out

        return fut.then(done)

    def uninstall(self) -> None:
        for f in reversed(self._undo):
            f()
        self._undo = []


def _user_hook(hook: Callable[..., Any]) -> Callable[..., Any]:
    """A program's own DDP communication hook inside a ``ddp.comm_hook`` span (its collectives are captured
    on their own), ending when the future it returns completes."""

    @functools.wraps(hook)
    def comm_hook(state, bucket):
        h = _start("ddp.comm_hook", {"gputrace.collective.hook": getattr(hook, "__qualname__", "?")})
        try:
            fut = hook(state, bucket)
        except BaseException as e:
            h.end(error=e)
            raise
        _end_when_done(h, fut)
        return fut

    return comm_hook
