#!/usr/bin/env bash
# Device call 3 of 2026-12-01-d (nvidia-h200, carry .whl): the attached-but-paused cost with an interval
# (attach_pairs_call.sh), then what in a recorded process makes nll_loss_forward read 11.5-11.6 us when the probe
# with record's kinds reads 11.78 us (call 2): collection started before the CUDA context (+early) and NVTX routed
# through CUPTI (+inject), each alone and together; and record and torch.profiler on 200 steps of train_step.py
# (agreement.py). Prediction: one of +early/+inject moves the probe's nll median to ~11.5 us; record at 200 steps
# still ~11.5 us and Kineto ~12.1 us. Leaves $OUT/attach-pairs.tgz and $OUT/probe2.tgz.
set -u
bash benchmarks/device-runs/2026-12-01-d/attach_pairs_call.sh
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 COLUMNS=160
W=/tmp/probe2; mkdir -p $W
timeout 200 python3 benchmarks/real_programs/kernel_probe.py --modes record,record+early,record+inject,record+early+inject \
    --repeats 2 --steps 200 > $W/probe.log 2>&1; echo "probe exit $?"; grep -E '^(PROBE|NLL)' $W/probe.log | cut -c1-200
P=benchmarks/real_programs/train_step.py
timeout 60 python3 -m gputrace record --trace $W/rec.jsonl -- python3 $P --steps 200 > $W/rec.log 2>&1; echo "record exit $?"
timeout 60 python3 $P --steps 200 --profile $W/kin.json > $W/kin.log 2>&1; echo "kineto exit $?"
timeout 60 python3 benchmarks/real_programs/agreement.py --pair $W/rec.jsonl $W/kin.json --labels record kineto \
    --skip 5 2 --count 195 > $W/agree.md 2>&1; sed -n 3,8p $W/agree.md; grep -E "nll|of 13" $W/agree.md | cut -c1-200
rm -f $W/rec.jsonl $W/kin.json; tar czf $OUT/probe2.tgz -C /tmp probe2
