"""torch ops and collectives without user code: what ``gputrace record`` captures when a program imports
torch (docs/record.md, "torch ops and collectives without user code"; attributes: docs/trace-format.md).

Contract:

* gputrace never imports torch. ``install_when_imported()`` (called by ``gputrace.trace.launch.process``
  at start-up) puts a finder first on ``sys.meta_path`` that only answers for ``torch``: it lets the real
  finder find it and runs ``install()`` right after ``torch/__init__`` has executed (torch has imported
  ``torch.nn``, ``torch.optim``, ``torch.utils.data`` and ``torch.distributed`` by then), then leaves
  ``sys.meta_path``. A program that never imports torch pays one dictionary-free name test per import.
* ``install()`` installs each part on its own (``steps``: forward / backward / optimizer.step /
  dataloader.next ranges; ``comm``: collectives and DDP); a part whose torch API differs is skipped and
  named, with the error, in the resource attribute ``gputrace.torch_capture.error`` (``status``); the
  program always runs. ``gputrace.torch_capture`` lists the parts installed.
* Switches (environment, inherited by every process of a launch): ``GPUTRACE_TORCH_CAPTURE=0`` turns the
  capture off (``gputrace record --no-torch-capture`` sets it); ``GPUTRACE_TORCH_CAPTURE_DEPTH=N`` also
  records module calls nested up to depth N (default 0: the outermost call only).
* Forked children (DataLoader workers) inherit what the parent installed; each recorder records its own.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from gputrace.trace import hotpath
from gputrace.trace.torch_capture import status

ENV = "GPUTRACE_TORCH_CAPTURE"
ENV_DEPTH = "GPUTRACE_TORCH_CAPTURE_DEPTH"

#: What ``install()`` did in this process: the parts' objects and undo functions (tests uninstall).
installed: dict[str, Any] = {}


def enabled(environ: Any = None) -> bool:
    """Whether the capture is on (``GPUTRACE_TORCH_CAPTURE`` unset, or not 0/false/no/off)."""
    v = (environ if environ is not None else os.environ).get(ENV, "1").strip().lower()
    return v not in ("0", "false", "no", "off")


def max_depth(environ: Any = None) -> int:
    """``GPUTRACE_TORCH_CAPTURE_DEPTH`` as a non-negative int (0 when unset or not a number)."""
    try:
        return max(0, int((environ if environ is not None else os.environ).get(ENV_DEPTH, "0")))
    except ValueError:
        return 0


# The finder and loader are plain classes (the import system needs only find_spec / create_module /
# exec_module): importing importlib.abc would import importlib.resources into every recorded process.
class _Loader:
    """torch's own loader, then ``install()``."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def create_module(self, spec: Any) -> Any:
        return self.inner.create_module(spec)

    def exec_module(self, module: Any) -> None:
        # torch sees its own loader (importlib.resources, inspect); only this call goes through us.
        module.__loader__ = self.inner
        if getattr(module, "__spec__", None) is not None:
            module.__spec__.loader = self.inner
        self.inner.exec_module(module)
        _remove_finder()
        install()


class TorchFinder:
    """First on ``sys.meta_path`` until torch is imported; answers only for ``torch``."""

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        if name != "torch":
            return None
        for finder in list(sys.meta_path):
            if finder is self or isinstance(finder, TorchFinder):
                continue
            find = getattr(finder, "find_spec", None)
            if find is None:
                continue
            spec = find(name, path, target)
            if spec is not None:
                if spec.loader is None or not hasattr(spec.loader, "exec_module"):
                    return None  # (a namespace or legacy loader: let the import go on without us)
                spec.loader = _Loader(spec.loader)
                return spec
        return None


def _remove_finder() -> None:
    sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, TorchFinder)]


def install_when_imported() -> None:
    """Install now if torch is already imported, else when it is (see the module contract). Idempotent."""
    if not enabled() or installed:
        return
    if "torch" in sys.modules:
        install()
        return
    if not any(isinstance(f, TorchFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, TorchFinder())


def install() -> None:
    """Install every part of the capture into the imported torch (once per process). Never raises."""
    if installed or not enabled() or hotpath.DISABLED:
        return  # (GPUTRACE_DISABLE: phases are no-ops, so the wrappers would only cost)
    torch = sys.modules.get("torch")
    if torch is None:
        return
    installed["torch"] = torch
    parts: list[str] = []

    def part(name: str, fn: Any) -> None:
        try:
            installed[name] = fn()
            parts.append(name)
        except Exception as e:  # noqa: BLE001 - a torch whose API differs: that part is skipped, named
            status.note_error(name, e)

    try:
        from gputrace.trace.torch_capture import comm, steps
    except Exception as e:  # noqa: BLE001 - never break the program
        status.note_error("import", e)
        return

    def modules() -> Any:
        m = steps.ModuleRanges(torch, max_depth=max_depth())
        m.install()
        return m

    part("modules", modules)
    part("backward", lambda: steps.wrap_backward(torch, installed.get("modules")))
    part("optimizer", lambda: steps.wrap_optimizer(torch))
    part("dataloader", lambda: steps.wrap_dataloader(torch))

    def collectives() -> Any:
        if not torch.distributed.is_available():
            raise RuntimeError("torch.distributed is not available in this build")
        c = comm.Collectives(torch)
        c.install()
        return c

    part("collectives", collectives)
    if "collectives" in installed:
        part("ddp", lambda: installed["collectives"].install_ddp() or installed["collectives"])
    status.note_installed(parts)


def uninstall() -> None:
    """Undo ``install()`` (tests): torch's functions and classes as they were."""
    m = installed.pop("modules", None)
    if m is not None:
        m.uninstall()
    for name in ("backward", "optimizer", "dataloader"):
        undo = installed.pop(name, None)
        if undo is not None:
            undo()
    c = installed.pop("collectives", None)
    installed.pop("ddp", None)
    if c is not None:
        c.uninstall()
    installed.clear()
