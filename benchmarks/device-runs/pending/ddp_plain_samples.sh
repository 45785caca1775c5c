#!/usr/bin/env bash
# One device call for issue 32 part 1 (nvidia-h200, carry .whl if the device lacks wheels): the unmodified DDP
# job (ddp_plain.py: gloo, 2 ranks on GPU 0, DataLoader workers, rank 1 late by 50 ms in load_batch) under
# record -- torchrun, with the stack sampler at its default rate, then the same job with GPUTRACE_SAMPLE_HZ=0.
# Expected: the report's gpu-idle-host finding names `ddp_plain.py:LINE in load_batch (rank 1)` (LINE: the
# `time.sleep(late_s)` line) and the Host samples table lists it first for rank 1; the DDP_PLAIN truth lines of
# the two runs (step_median_ms) differ by noise only. Leaves $OUT/ddp_plain.tgz.
set -u
if ls .whl/*.whl >/dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 3
fi
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 COLUMNS=200
W=/tmp/ddp_plain; mkdir -p $W
nvidia-smi -L | tee $W/gpus.txt
if command -v torchrun >/dev/null 2>&1; then TORCHRUN=(torchrun); else TORCHRUN=(python3 -m torch.distributed.run); fi
P=benchmarks/real_programs/ddp_plain.py
grep -n "time.sleep(late_s)" $P | tail -1 | tee $W/sleep-line.txt
timeout 180 python3 -m gputrace record --trace $W/ddp.jsonl -- "${TORCHRUN[@]}" --standalone --nproc-per-node 2 $P \
    2>&1 | tee $W/record.log | grep -v '^W1' | tail -6
timeout 120 python3 -m gputrace report $W/ddp.jsonl > $W/report.txt 2>&1; echo "report exit $?"
timeout 120 python3 -m gputrace report --json $W/ddp.jsonl > $W/report.json 2> $W/report.err
head -20 $W/report.txt | cut -c1-220
grep -A14 "Host samples" $W/report.txt | cut -c1-220
GPUTRACE_SAMPLE_HZ=0 timeout 180 python3 -m gputrace record --trace $W/ddp-off.jsonl -- "${TORCHRUN[@]}" --standalone \
    --nproc-per-node 2 $P 2>&1 | tee $W/record-off.log | grep DDP_PLAIN
gzip -f $W/ddp.jsonl $W/ddp-off.jsonl; tar czf $OUT/ddp_plain.tgz -C /tmp ddp_plain
