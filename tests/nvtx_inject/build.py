"""Build the NVTX recording injection library (tests and benchmarks).

``build(out_dir) -> Path`` compiles ``nvtx_recorder.c`` with gcc against the NVTX v3 headers of the
``nvidia-nvtx`` wheel and returns the path of ``libnvtx_recorder.so``. Raises ``BuildError`` (with the
compiler's output) when gcc or the headers are missing. Run as a script to build into a directory:
``python tests/nvtx_inject/build.py OUT_DIR``.
"""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
SOURCE = HERE / "nvtx_recorder.c"


class BuildError(RuntimeError):
    pass


def nvtx_include_dir() -> Path:
    """The directory holding ``nvtx3/nvToolsExt.h`` from the nvidia-nvtx wheel."""
    spec = importlib.util.find_spec("nvidia")
    roots = list(spec.submodule_search_locations or []) if spec else []
    for root in roots:
        for hdr in sorted(Path(root).glob("**/include/nvtx3/nvToolsExt.h")):
            return hdr.parent.parent
    raise BuildError("NVTX headers not found: install the 'nvidia-nvtx' wheel (pip install nvidia-nvtx)")


def build(out_dir: str | Path) -> Path:
    gcc = shutil.which("gcc") or shutil.which("cc")
    if gcc is None:
        raise BuildError("gcc not found")
    out = Path(out_dir) / "libnvtx_recorder.so"
    cmd = [gcc, "-O2", "-shared", "-fPIC", "-Wall", "-Wno-unused-function",
           f"-I{nvtx_include_dir()}", str(SOURCE), "-o", str(out), "-lpthread"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise BuildError(f"{' '.join(cmd)}\n{r.stdout}{r.stderr}")
    return out


if __name__ == "__main__":
    print(build(sys.argv[1] if len(sys.argv) > 1 else "."))
