"""``gputrace verify --vk vk.json PROOF...``: Groth16 verification by pairings."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def register(sub) -> argparse.ArgumentParser:
    p = sub.add_parser("verify", help="verify Groth16 proof files against a verifying key",
                       description="Verify proof-<circuit>.json files (BLS12-381 Groth16) against vk.json.")
    p.add_argument("--vk", required=True, type=Path, help="verifying key (vk.json)")
    p.add_argument("proofs", nargs="+", type=Path, metavar="PROOF", help="proof JSON files")
    p.set_defaults(func=run)
    return p


def _test_key_note(vk_path) -> str:
    """The key's own warning when ``vk.json`` says it is a TEST key (made from a seed), else ''."""
    import json

    from gputrace.textsafe import visible

    try:
        doc = json.loads(Path(vk_path).read_text())
    except (OSError, ValueError, RecursionError):
        return ""
    if isinstance(doc, dict) and doc.get("test_key"):
        return visible(doc.get("warning") or "a TEST key made from a seed: anyone can forge proofs for it")
    return ""


def run(args) -> int:
    from gputrace.prover.keygen.keys import KeyError_
    from gputrace.prover.verify_files import verify_files
    from gputrace.textsafe import visible

    try:
        verdicts = verify_files(args.vk, args.proofs)
    except KeyError_ as exc:
        print(f"error: {visible(exc)}", file=sys.stderr)
        return 2
    bad = 0
    for v in verdicts:
        if v.ok:
            print(f"ok      {visible(v.path)}")
        else:
            bad += 1
            print(f"FAILED  {visible(v.path)}: {visible(v.error)}")
    print(f"{len(verdicts) - bad}/{len(verdicts)} proofs verified")
    note = _test_key_note(args.vk)
    if note:
        print(f"warning: {args.vk}: {note}", file=sys.stderr)
    return 0 if bad == 0 else 1
