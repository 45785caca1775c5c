"""The no-op phase used when tracing is disabled (``GPUTRACE_DISABLE=1``, or ``configure()`` finding it set).

Contract: ``NOOP`` is one shared, stateless object, safe on every thread. ``with NOOP:`` runs no Python
frame and lets exceptions propagate; as a decorator it returns the function unchanged; ``set()`` and
``end()`` do nothing (``end()`` returns False). Nothing here raises, records, or emits NVTX. The factories
``_disabled_phase``/``_disabled_start_phase``/``_disabled_current_context`` are what ``gputrace.trace.hotpath``
binds ``phase``/``start_phase``/``current_context`` to (at import, or in ``hotpath.disable()``);
``env_disabled()`` reads the environment variable. Split out of ``hotpath`` unchanged.
"""

from __future__ import annotations

import itertools
import os

__all__ = ["NOOP", "env_disabled"]


class _NoopPhase(itertools.repeat):
    """The shared no-op returned when GPUTRACE_DISABLE=1. Stateless, so one instance serves every thread.

    ``__enter__``/``__exit__`` are C slot wrappers, so ``with`` runs no Python frame (measured -76 ns per
    phase against a Python ``__enter__``/``__exit__`` pair): ``repeat.__iter__`` returns the object itself,
    and ``object.__init__`` accepts and ignores extra arguments when the type defines ``__new__`` but not
    ``__init__`` (as ``itertools.repeat`` subclasses do), returning None, so exceptions propagate. The
    instance repeats nothing (``times=0``) if anyone iterates it.
    """

    __slots__ = ()
    __enter__ = itertools.repeat.__iter__
    __exit__ = object.__init__

    def __call__(self, fn):
        return fn

    def set(self, key, value):
        return self

    def end(self, error=None):
        return False


NOOP = _NoopPhase(None, 0)


def _disabled_phase(name, *, device=None, bytes=None, stream=None, **kw):
    # The three named parameters of phase() and nothing more: keyword arguments that bind to named
    # parameters need no kwargs-dict entries (with device= and bytes=: 427 ns against 584 ns for
    # (name, **kw)), while every extra unused default costs ~30 ns on a bare call (all eight named:
    # 560 ns bare, against 454 ns here and 372 ns for (name, **kw)).
    return NOOP


def _disabled_start_phase(name, **kw):
    return NOOP


def _disabled_current_context():
    return None


def env_disabled() -> bool:
    """True when GPUTRACE_DISABLE is set to something other than '', 0, false, no, off."""
    return os.environ.get("GPUTRACE_DISABLE", "").strip().lower() not in ("", "0", "false", "no", "off")
