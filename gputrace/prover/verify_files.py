"""``verify_files``: check proof files against a ``vk.json`` (what ``gputrace verify`` runs)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .keygen.keys import KeyError_, load_vk
from .verify import DegenerateKeyError, InputCountError, check_vk, read_proof, verify


@dataclass
class FileVerdict:
    path: Path
    ok: bool
    error: str | None = None


def verify_files(vk_path: Path, proof_paths: list[Path]) -> list[FileVerdict]:
    """One verdict per proof file. A bad or degenerate ``vk.json`` raises ``keys.KeyError_`` (naming file
    and field); a bad proof file or a wrong input count is reported in its verdict, not raised."""
    from gputrace.json_depth import too_deep

    try:
        try:
            if too_deep(Path(vk_path).read_bytes()):  # (json could overflow the C stack: refuse first)
                raise RecursionError
        except OSError:
            pass  # load_vk names the problem
        vk, _ = load_vk(Path(vk_path))
        check_vk(vk)
    except RecursionError:
        raise KeyError_(f"{vk_path}: not a verifying key (JSON nested too deeply)") from None
    except DegenerateKeyError as exc:
        raise KeyError_(f"{vk_path}: {exc}") from None
    out = []
    for p in proof_paths:
        p = Path(p)
        try:
            proof, inputs = read_proof(p)
            ok = verify(vk, proof, inputs)
            out.append(FileVerdict(p, ok, None if ok else "pairing check failed"))
        except (ValueError, InputCountError) as exc:
            out.append(FileVerdict(p, False, str(exc) if str(exc).startswith(str(p)) else f"{p}: {exc}"))
    return out
