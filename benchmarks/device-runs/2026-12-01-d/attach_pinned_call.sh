#!/usr/bin/env bash
# Device call 4 of 2026-12-01-d (nvidia-h200, carry .whl): call 3's attach pairs left 5 of 8 out as "different
# state", and in 6 of 8 pairs the recorded process was the slow one (NVTX 460-600 ns against 265-305 ns). Here
# every process's timing thread runs on one CPU (--pin 3). Prediction: if the slow state is where the scheduler
# puts the process, pinned pairs agree on NVTX (most pairs kept) and the launch delta sits near the kept pairs'
# 0.9-2.0 us; if being recorded itself slows the thread, the paused NVTX stays ~200 ns above plain when pinned.
# Leaves $OUT/attach-pinned.tgz.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 3
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 COLUMNS=160
W=/tmp/attach-pinned; mkdir -p $W
nproc; python3 -c "import os; print('cpus', sorted(os.sched_getaffinity(0)))"
timeout 330 python3 benchmarks/real_programs/bench_attach_cost.py --pairs 8 --repeats 3 --pin 3 --launches-per-step 47 \
    --ranges-per-step 7 --step-ms 7.2 --work $W/work --json $W/attach.json 2>&1 | tee $W/attach.log | tail -12
tar czf $OUT/attach-pinned.tgz -C /tmp attach-pinned
