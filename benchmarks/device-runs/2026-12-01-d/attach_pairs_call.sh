#!/usr/bin/env bash
# One device call for issue 24 (nvidia-h200, carry .whl): the attached-but-paused part of record's cost, measured
# with an interval: 8 process pairs of attach_cost.py (plain against recorded, order alternating), pairs in
# different machine states left out, the step fraction for train_step.py's 44 kernels + 3 copies and 7 NVTX
# ranges in a 7.2 ms step (2026-12-01-c figures). Leaves $OUT/attach-pairs.tgz.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 3
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 COLUMNS=160
W=/tmp/attach-pairs; mkdir -p $W
timeout 400 python3 benchmarks/real_programs/bench_attach_cost.py --pairs 8 --repeats 5 --launches-per-step 47 \
    --ranges-per-step 7 --step-ms 7.2 --work $W/work --json $W/attach.json 2>&1 | tee $W/attach.log | tail -12
tar czf $OUT/attach-pairs.tgz -C /tmp attach-pairs
