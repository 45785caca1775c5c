#!/usr/bin/env bash
# One device call for issue 24 (carry .whl): (1) the whole GPU test suite after the prover/tracer module splits;
# (2) where the cost of being recorded sits, per CUDA launch and NVTX range (attach_cost.py): not recorded,
# recorded paused, recorded on, detached (cupti.finalize) and attached again; record --no-cuda-activity; and the
# on-mode with a 0.5 ms GIL switch interval.
# Leaves $OUT/attach.tgz (logs).
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 3
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 COLUMNS=160
W=/tmp/attach; mkdir -p $W
T0=$(date +%s); el() { echo "--- $* ($(( $(date +%s) - T0 )) s)"; }
GPU_TESTS_S=${GPU_TESTS_S:-330}
el "gpu tests (whole suite)"
timeout $GPU_TESTS_S python3 -m pytest -q -m gpu tests/gpu -p no:cacheprovider 2>&1 | tail -12 | tee $W/gpu_pytest.txt
el "attach cost"
AC=benchmarks/real_programs/attach_cost.py
for i in 1 2; do
  timeout 40 python3 $AC --repeats 7 > $W/plain$i.log 2>&1
  timeout 60 python3 -m gputrace record --trace $W/a$i.jsonl -- python3 $AC --repeats 7 --detach > $W/rec$i.log 2>&1
  rm -f $W/a$i.jsonl
done
timeout 40 python3 -m gputrace record --no-cuda-activity --trace $W/n.jsonl -- python3 $AC --repeats 7 > $W/nocupti.log 2>&1
timeout 60 python3 -m gputrace record --trace $W/s.jsonl -- python3 $AC --repeats 7 --switch-interval-ms 0.5 > $W/switch.log 2>&1
rm -f $W/*.jsonl
for f in $W/plain*.log $W/rec*.log $W/nocupti.log $W/switch.log; do echo "== $f"; grep -E "ATTACH|DETACH|Error|error" $f; done
el "pack"
tar czf $OUT/attach.tgz -C /tmp attach; ls -la $OUT
