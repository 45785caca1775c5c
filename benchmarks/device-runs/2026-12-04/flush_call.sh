#!/usr/bin/env bash
# Device call F4 of 2026-12-04 (nvidia-h200, carry .whl): F3 refuted the buffer-size cause (64 KiB to 2 MiB: the
# same 200-300 ms steps). Prediction now: the stalls are CUPTI's periodic flush (every 500 ms: about 10 in 1500
# steps of 3.5 ms, as seen) blocking the launching thread while _completed converts what it flushed; with the flush
# period left to CUPTI (0) the long steps should go, or move to buffer completions.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 3
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
P=benchmarks/real_programs
for ms in 0 500 0; do echo "== flush ${ms} ms"
  GPUTRACE_CUPTI_FLUSH_MS=$ms timeout 40 python3 -m gputrace record --trace /tmp/f$ms.jsonl -- python3 $P/cnn_step.py --steps 1500 --gc-stats 2>&1 | grep "SLOWEST\|CNN\|^trace"
  rm -rf /tmp/f$ms.jsonl*; done
