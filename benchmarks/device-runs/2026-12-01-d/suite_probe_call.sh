#!/usr/bin/env bash
# Device call 2 of 2026-12-01-d (nvidia-h200, carry .whl): the whole GPU suite after the CUPTI flush change of
# 2026-12-01-c (which ran only test_cupti.py and test_record_control.py on it), then kernel_probe.py: does the CUPTI
# configuration change nll_loss_forward's measured duration? Prediction: if the gap between record (11.5-11.6 us)
# and Kineto (12.1-12.2 us) comes from what each enables, the probe's 'record' and 'kineto' sets reproduce it
# (ratio kineto/record ~1.05); if it comes from the rest of torch.profiler (its CPU-side recording and external
# correlation around each op), all three sets read about the same. Leaves $OUT/suite-probe.tgz.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 3
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 COLUMNS=160
W=/tmp/suite-probe; mkdir -p $W
T0=$(date +%s); el() { echo "--- $* ($(( $(date +%s) - T0 )) s)"; }
el "probe"
W=$W bash benchmarks/device-runs/2026-12-01-d/probe_call_part.sh
el "gpu suite"
timeout 330 python3 -m pytest -q -m gpu tests/gpu -p no:cacheprovider > $W/gpu_pytest.txt 2>&1; echo "pytest exit $?"
tail -5 $W/gpu_pytest.txt | cut -c1-300
el "pack"
tar czf $OUT/suite-probe.tgz -C /tmp suite-probe
