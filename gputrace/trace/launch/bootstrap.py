"""``gputrace record``'s bootstrap: copied as ``sitecustomize.py`` into a folder first on ``PYTHONPATH``.

Runs at the start of every Python interpreter of a recorded launch (``site`` imports it). Contract:

* Chains first: the next ``sitecustomize`` on ``sys.path`` (a virtualenv's, a distribution's) is imported
  as if this one were not there, and this folder leaves ``sys.path`` (the program never sees it).
* Then, when ``GPUTRACE_RECORD_TRACE`` is set, starts recording this process
  (``gputrace.trace.launch.process.start``). It never stops the program: if gputrace cannot be imported or
  started here (another interpreter without numpy, say), one line says so on stderr and the program runs
  unrecorded.

Stdlib only, and no names left behind but ``sitecustomize`` itself.
"""

import os
import sys


def _chain() -> None:
    here = os.path.dirname(os.path.abspath(__file__))
    ours = sys.modules.pop("sitecustomize", None)
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    try:
        import sitecustomize  # noqa: F401  (the next one on the path, if any)
    except ImportError as e:
        if e.name != "sitecustomize":
            print(f"gputrace record: the program's sitecustomize failed: {type(e).__name__}: {e}", file=sys.stderr)
    finally:
        if ours is not None:
            sys.modules["sitecustomize"] = ours


def _start() -> None:
    if not os.environ.get("GPUTRACE_RECORD_TRACE"):
        return
    try:
        try:
            from gputrace.trace.launch import process
        except ImportError:
            root = os.environ.get("GPUTRACE_RECORD_ROOT")
            if not root:
                raise
            sys.path.append(root)
            from gputrace.trace.launch import process
        process.start()
    except Exception as e:  # noqa: BLE001 reported on one line; the program must run unrecorded
        print(f"gputrace record: not recording {sys.executable} (pid {os.getpid()}): {type(e).__name__}: {e}",
              file=sys.stderr)


if __name__ == "sitecustomize":  # (imported as gputrace.trace.launch.bootstrap, e.g. by a checker: nothing runs)
    _chain()
    _start()
