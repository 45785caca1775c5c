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


def run(args) -> int:
    from gputrace.prover.keys import KeyError_
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
    return 0 if bad == 0 else 1
