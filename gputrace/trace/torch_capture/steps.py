"""The ranges that name a training step's parts: ``forward``, ``backward``, ``optimizer.step``,
``dataloader.next`` (docs/record.md, "torch ops and collectives without user code").

Contract:

* Every range is a gputrace phase (``hotpath.phase``, entered and exited on the calling thread, so CUDA work
  launched inside it is its child and NVTX sees it), closed in every case: an exception leaves the range with
  error status and propagates unchanged; ``StopIteration`` at the end of a DataLoader is not an error.
* ``forward``: the outermost module call of each thread (depth 0; ``ModuleRanges(max_depth=N)`` also records
  calls nested up to depth N, named after their class). How, and why so (measured in
  benchmarks/bench_torch_capture.py): global module hooks make *every* module call take
  ``Module._call_impl``'s slow path (+2.4 µs per call on the CI box, against +0.4 µs for a wrapper of
  ``Module.__call__``), so they only *learn* which classes are called at depth 0: once two ``backward`` calls
  have ended (one step seen whole) or 64 depth-0 calls were made, they are removed and only those classes get
  a wrapper of their ``__call__`` (set on the class, never on an instance: a ``torch.save(model)`` pickle
  stays loadable without gputrace). A class first called at depth 0 after that is not seen (documented).
  With ``max_depth > 0`` the global hooks stay (the user asked for every level).
* ``backward``: ``torch.autograd.backward`` (``Tensor.backward`` calls it through the module attribute).
* ``optimizer.step``: every optimizer class's ``step`` is wrapped once, when its first instance is made
  (``Optimizer.__init__`` is wrapped; the wrapper keeps torch's ``hooked`` mark so torch does not wrap it
  again). Wrapping rather than the global step pre/post hooks: a step that raises skips the post hook, which
  would leave the range open under every later phase of its thread.
* ``dataloader.next``: ``_BaseDataLoaderIter.__next__`` (every DataLoader iterator's ``next``).
* Inside ``torch.compile``d code (``torch.compiler.is_compiling()``) nothing is recorded, so Dynamo traces
  no gputrace code.

Runs on the program's threads; imports torch only through the module objects the installer hands in.
"""

from __future__ import annotations

import functools
import importlib
import sys
import threading
from collections.abc import Callable
from typing import Any

from gputrace.trace import hotpath as _hp
from gputrace.trace.torch_capture.bookkeeping import DEPTH, MODULE, OPTIMIZER
from gputrace.trace.torch_capture.status import note_error

#: Per thread: ``d``, the depth of module calls in progress; ``mods``, the open forward ranges (learning).
_loc = threading.local()
_MISSING = object()
#: (attribute name, class) -> the span attributes naming it, one shared read-only dict per class: a phase
#: given them as ``extra`` costs no keyword dict on the caller's thread.
_class_attrs: dict[tuple[str, type], dict[str, Any]] = {}


def class_attrs(key: str, cls: type) -> dict[str, Any]:
    a = _class_attrs.get((key, cls))
    if a is None:
        a = _class_attrs[(key, cls)] = {key: cls.__name__}
    return a


def ranged(fn: Callable[..., Any], name: str, attrs: Callable[[tuple], dict | None] | None = None,
           stop_ok: bool = False, skip: Callable[[], bool] | None = None) -> Callable[..., Any]:
    """``fn`` run inside a phase ``name`` (attributes from ``attrs(args)``); ``stop_ok``: a
    ``StopIteration`` ends the range normally (iterator exhaustion); ``skip()`` true: no range (torch's
    ``is_compiling``: Dynamo then traces ``fn`` itself, not gputrace's code)."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        if skip is not None and skip():
            return fn(*args, **kwargs)
        p = _hp.phase(name)
        if attrs is not None:
            p.extra = attrs(args)  # (read-only, possibly shared: the attributes, without a keyword dict)
        p.__enter__()
        try:
            out = fn(*args, **kwargs)
        except StopIteration:
            if not stop_ok:
                p.__exit__(StopIteration, None, None)
                raise
            p.extra = {**(p.extra or {}), "gputrace.torch.end_of_data": True}
            p.__exit__(None, None, None)
            raise
        except BaseException as e:
            p.__exit__(type(e), e, e.__traceback__)
            raise
        p.__exit__(None, None, None)
        return out

    wrapper._gputrace = True  # type: ignore[attr-defined]
    return wrapper


class ModuleRanges:
    """``forward`` ranges of module calls (see the module contract). ``install()`` once; ``uninstall()``
    puts torch back as it was (tests)."""

    def __init__(self, torch: Any, max_depth: int = 0, learn_calls: int = 64, learn_backwards: int = 2) -> None:
        self._mm = importlib.import_module("torch.nn.modules.module")
        self._is_compiling = torch.compiler.is_compiling
        self.max_depth = max(0, int(max_depth))
        self.learn_calls = learn_calls
        self.learn_backwards = learn_backwards
        self.roots: dict[type, None] = {}  # classes seen at depth 0, in order
        self.root_calls = 0
        self.open_roots = 0  # outermost calls in progress, all threads (narrowing waits for none)
        self.backwards = 0
        self.narrowed = False
        self._handles: list[Any] = []
        self._patched: list[tuple[type, Any]] = []  # (class, its own __call__ before, or _MISSING)

    # -- learning: global hooks ------------------------------------------------------------------
    def install(self) -> None:
        mm = self._mm
        self._handles = [mm.register_module_forward_pre_hook(self._pre),
                         mm.register_module_forward_hook(self._post, always_call=True)]

    def _pre(self, mod, args) -> None:
        if self._is_compiling():
            return
        d = getattr(_loc, "d", 0)
        _loc.d = d + 1
        if d > self.max_depth:
            return
        cls = type(mod)
        if d == 0:
            self.roots[cls] = None
            self.root_calls += 1
            self.open_roots += 1
            p = _hp.phase("forward")
            p.extra = class_attrs(MODULE, cls)
        else:
            p = _hp.phase(cls.__name__)
            p.extra = {MODULE: cls.__name__, DEPTH: d}
        p.__enter__()
        mods = getattr(_loc, "mods", None)
        if mods is None:
            mods = _loc.mods = []
        mods.append(p)

    def _post(self, mod, args, out) -> None:
        if self._is_compiling():
            return
        d = getattr(_loc, "d", 1) - 1
        _loc.d = max(d, 0)
        if d > self.max_depth or d < 0:
            return
        mods = getattr(_loc, "mods", None)
        if not mods:
            return
        p = mods.pop()
        # Called from _call_impl's except branch when forward raised: that exception is being handled, and
        # the output is still None.
        et, ev, tb = sys.exc_info() if out is None else (None, None, None)
        p.__exit__(et, ev, tb)
        if d == 0:
            self.open_roots -= 1
            if (ev is None and self.max_depth == 0 and not self.narrowed and self.open_roots <= 0
                    and (self.backwards >= self.learn_backwards or self.root_calls >= self.learn_calls)):
                # Not from the except branch (it iterates the live hook dict), nor while another thread is
                # inside an outermost call (its post hook would be gone and its range left open).
                self.narrow()

    def backward_done(self) -> None:
        """A ``backward`` call ended (the learning phase counts them)."""
        self.backwards += 1

    # -- steady state: wrappers of the depth-0 classes --------------------------------------------
    def narrow(self) -> None:
        """Remove the global hooks; wrap ``__call__`` of each class seen at depth 0."""
        self.narrowed = True
        for h in self._handles:
            h.remove()
        self._handles = []
        for cls in list(self.roots):
            own = cls.__dict__.get("__call__", _MISSING)
            call = cls.__call__
            if getattr(call, "_gputrace", False):
                continue
            cls.__call__ = self._outermost(call)  # type: ignore[method-assign]
            self._patched.append((cls, own))

    def _outermost(self, call: Callable[..., Any]) -> Callable[..., Any]:
        is_compiling = self._is_compiling
        phase = _hp.phase  # (bound once: GPUTRACE_DISABLE is decided before torch is imported)

        @functools.wraps(call)
        def __call__(mod, *args, **kwargs):
            if is_compiling():
                return call(mod, *args, **kwargs)
            d = getattr(_loc, "d", 0)
            if d:
                _loc.d = d + 1
                try:
                    return call(mod, *args, **kwargs)
                finally:
                    _loc.d = d
            _loc.d = 1
            p = phase("forward")
            p.extra = class_attrs(MODULE, type(mod))
            p.__enter__()
            try:
                out = call(mod, *args, **kwargs)
            except BaseException as e:
                _loc.d = 0
                p.__exit__(type(e), e, e.__traceback__)
                raise
            _loc.d = 0
            p.__exit__(None, None, None)
            return out

        __call__._gputrace = True  # type: ignore[attr-defined]
        return __call__

    def uninstall(self) -> None:
        for h in self._handles:
            h.remove()
        self._handles = []
        for cls, own in reversed(self._patched):
            if own is _MISSING:
                del cls.__call__
            else:
                cls.__call__ = own
        self._patched = []


def wrap_backward(torch: Any, modules: ModuleRanges | None) -> Callable[[], None]:
    """``torch.autograd.backward`` inside a ``backward`` range; returns the undo."""
    ag = torch.autograd
    orig = ag.backward
    inner = ranged(orig, "backward", skip=torch.compiler.is_compiling)

    @functools.wraps(orig)
    def backward(*args, **kwargs):
        try:
            return inner(*args, **kwargs)
        finally:
            if modules is not None:
                modules.backward_done()

    backward._gputrace = True  # type: ignore[attr-defined]
    ag.backward = backward

    def undo() -> None:
        ag.backward = orig

    return undo


def _optimizer_attrs(args: tuple) -> dict | None:
    return class_attrs(OPTIMIZER, type(args[0])) if args else None


def wrap_optimizer(torch: Any) -> Callable[[], None]:
    """Every optimizer class's ``step`` inside an ``optimizer.step`` range, wrapped when the class's first
    instance is made; returns the undo (for tests: the wrapped classes get their step back)."""
    opt_cls = torch.optim.Optimizer
    orig_init = opt_cls.__init__
    wrapped: list[tuple[type, Any]] = []

    def wrap_step(cls: type) -> None:
        step = getattr(cls, "step", None)
        if step is None or getattr(step, "_gputrace", False):
            return
        # (functools.wraps keeps torch's `hooked` mark)
        w = ranged(step, "optimizer.step", _optimizer_attrs, skip=torch.compiler.is_compiling)
        wrapped.append((cls, cls.__dict__.get("step", _MISSING)))
        cls.step = w  # type: ignore[attr-defined]

    @functools.wraps(orig_init)
    def __init__(self, *args, **kwargs):
        orig_init(self, *args, **kwargs)
        try:
            wrap_step(type(self))
        except Exception as e:  # noqa: BLE001 - the program's optimizer must work unrecorded
            note_error("optimizer", e)

    __init__._gputrace = True  # type: ignore[attr-defined]
    opt_cls.__init__ = __init__

    def undo() -> None:
        opt_cls.__init__ = orig_init
        for cls, own in reversed(wrapped):
            if own is _MISSING:
                del cls.step
            else:
                cls.step = own

    return undo


def wrap_dataloader(torch: Any) -> Callable[[], None]:
    """``_BaseDataLoaderIter.__next__`` inside a ``dataloader.next`` range; returns the undo."""
    base = importlib.import_module("torch.utils.data.dataloader")._BaseDataLoaderIter
    orig = base.__dict__["__next__"]
    base.__next__ = ranged(orig, "dataloader.next", stop_ok=True, skip=torch.compiler.is_compiling)

    def undo() -> None:
        base.__next__ = orig

    return undo

