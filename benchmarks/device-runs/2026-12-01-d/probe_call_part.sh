#!/usr/bin/env bash
# Fragment of a device call (nvidia-h200): does the CUPTI configuration change a kernel's measured duration?
# kernel_probe.py runs train_step.py's steps under its own minimal cupti-python consumer with CONCURRENT_KERNEL
# alone, with gputrace record's kinds + API filter, and with torch.profiler's (Kineto's) kinds, each set in 2
# fresh processes (order reversed in the second round); nll_loss_forward's median per set and its ratio to the
# kernel-only set come last. Meant to be pasted into (or sourced from) a call that already installed the wheels
# and exported PYTHONPATH as the other scripts here do; on its own it sets W and PYTHONPATH if unset. Leaves
# $W/probe.log (and $OUT/probe.log when OUT is set).
set -u
export PYTHONPATH=${PYTHONPATH:-/tmp/site:$PWD} PYTHONUNBUFFERED=1 COLUMNS=160
W=${W:-/tmp/probe}; mkdir -p $W
timeout 150 python3 benchmarks/real_programs/kernel_probe.py --modes kernel,record,kineto --repeats 2 --steps 200 \
    > $W/probe.log 2>&1; echo "probe exit $?"
grep -E '^(PROBE|NLL|== )' $W/probe.log | cut -c1-300; tail -20 $W/probe.log | cut -c1-300
if [ -n "${OUT:-}" ]; then cp $W/probe.log $OUT/probe.log; fi
