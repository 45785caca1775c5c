#!/usr/bin/env bash
# Device call F3 of 2026-12-04 (nvidia-h200, carry .whl): the 250-350 ms steps under record (call F2: 8 of 2000
# steps above 245 ms, GC pauses at most 3.4 ms, so not the GC). Prediction: a step stalls while CUPTI's worker thread
# converts one whole 2 MiB buffer in _completed (about 15k records); with smaller buffers the longest step should
# shrink about in proportion (256 KiB: ~40 ms) and the mean approach the median.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 3
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
P=benchmarks/real_programs
python3 $P/cnn_step.py --steps 1500 --gc-stats | grep "SLOWEST\|CNN"
for kb in 2048 256 64; do echo "== buffer ${kb} KiB"
  GPUTRACE_CUPTI_BUFFER_KB=$kb python3 -m gputrace record --trace /tmp/b$kb.jsonl -- python3 $P/cnn_step.py --steps 1500 --gc-stats 2>&1 | grep "SLOWEST\|CNN\|^trace"
  rm -rf /tmp/b$kb.jsonl*; done
python3 $P/cnn_step.py --steps 1500 --gc-stats | grep "SLOWEST\|CNN"
