"""Recording every Python process of a launch (``gputrace record -- COMMAND ...``).

How it works (docs/record.md, "How a launch is recorded"):

* ``gputrace record`` (``gputrace.commands.record``) runs COMMAND unchanged, in its own process group, with
  an environment that puts a folder holding only ``sitecustomize.py`` (a copy of ``bootstrap.py``) first on
  ``PYTHONPATH`` and names the run in the ``GPUTRACE_RECORD_*`` variables below. Every Python interpreter
  in the tree (the script, ``-m``/``-c``, console scripts such as ``torchrun``, a shell script's
  ``python``, spawn/forkserver children, ``subprocess`` children) imports it at start-up.
* The bootstrap chains to any other ``sitecustomize`` on the path, then calls ``process.start()``: the
  process configures a recorder that appends to the launch's one trace file (``O_APPEND`` whole lines:
  ``gputrace.trace.sinks.jsonl``), opens a root span named after its command line, and leaves
  ``<pid>.json`` in the check-in folder (its span counts, rewritten at every recorder stop).
* A forked child (``os.fork``, multiprocessing ``fork``, the children of a ``forkserver``, DataLoader
  workers) gets a fresh recorder from an ``os.register_at_fork`` hook; multiprocessing children, which end
  with ``os._exit``, flush through a wrapper around ``multiprocessing.util._exit_function``.

Stdlib only at import: the bootstrap imports this package in every Python process of the launch.
"""

from __future__ import annotations

#: The one trace file every process of the launch appends to.
ENV_TRACE = "GPUTRACE_RECORD_TRACE"
#: A folder where each recorded process writes ``<pid>.json`` (what it recorded); ``record`` reads them.
ENV_CHECKIN = "GPUTRACE_RECORD_CHECKIN"
#: The launch's run id: ``gputrace.run_id`` of every process, so readers show the launch as one run.
ENV_RUN_ID = "GPUTRACE_RECORD_RUN_ID"
#: ``service.name`` of every process (default: each process's command, e.g. ``python train.py``).
ENV_SERVICE = "GPUTRACE_RECORD_SERVICE"
#: The folder that holds the ``gputrace`` package, for interpreters that cannot import it otherwise.
ENV_ROOT = "GPUTRACE_RECORD_ROOT"
