#!/usr/bin/env bash
# One device call for issue 24 (carry .whl): (1) GPU tests of record_control pause/resume and of the CUPTI
# collector split; (2) the in-process on/off measurement of collection (train_step.py --toggle-blocks) under
# record, then bench_record_overhead.py --inprocess; (3) the attached-while-paused cost per CUDA launch and
# per NVTX range (attach_cost.py: plain x3 processes, record x3); (4) run-to-run spread of per-kernel times:
# train_step.py twice under record and twice under torch.profiler, agreement.py on each pair.
# Leaves $OUT/toggle.tgz (logs, JSON, agreement tables, the small traces gzipped).
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 3
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 COLUMNS=160
W=/tmp/toggle; mkdir -p $W
T0=$(date +%s); el() { echo "--- $* ($(( $(date +%s) - T0 )) s)"; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv | tee $W/gpu.txt
P=benchmarks/real_programs/train_step.py
el "gpu tests"
timeout 150 python3 -m pytest -q -m gpu tests/gpu/test_record_control.py tests/gpu/test_cupti.py \
    tests/gpu/test_cuda_backend.py tests/gpu/test_pipeline_batch.py 2>&1 | tail -15 | tee $W/gpu_pytest.txt
el "toggle smoke"
timeout 90 python3 -m gputrace record --trace $W/smoke.jsonl -- python3 $P --steps 60 --toggle-blocks 5 > $W/smoke.log 2>&1
echo "smoke exit $?"; grep -E "TOGGLE|STEPS|Error|error" $W/smoke.log | tail -5
timeout 60 python3 -m gputrace report $W/smoke.jsonl > $W/smoke-report.txt 2>&1; echo "report exit $?"; head -30 $W/smoke-report.txt
el "attach cost"
for i in 1 2 3; do
  timeout 60 python3 benchmarks/real_programs/attach_cost.py --repeats 11 >> $W/attach.log 2>&1
  timeout 90 python3 -m gputrace record --trace $W/attach$i.jsonl -- python3 benchmarks/real_programs/attach_cost.py \
      --repeats 11 >> $W/attach.log 2>&1; rm -f $W/attach$i.jsonl
done; grep ATTACH $W/attach.log
el "in-process bench"
timeout 230 python3 benchmarks/real_programs/bench_record_overhead.py --steps 30 --repeats 1 --inprocess \
    --inprocess-runs 3 --inprocess-steps 600 --toggle-blocks 10 --budget-s 200 --work $W/bro --json $W/bench.json \
    > $W/bench.log 2>&1; echo "bench exit $?"; tail -14 $W/bench.log
el "per-kernel spread"
for i in 1 2; do
  timeout 60 python3 -m gputrace record --trace $W/rec$i.jsonl -- python3 $P --steps 20 > $W/rec$i.log 2>&1; echo "record$i exit $?"
  timeout 60 python3 $P --steps 20 --profile $W/kin$i.json > $W/kin$i.log 2>&1; echo "kineto$i exit $?"
done
A=benchmarks/real_programs/agreement.py
timeout 60 python3 $A --pair $W/rec1.jsonl $W/rec2.jsonl --labels record1 record2 --skip 5 5 --count 18 > $W/agree-rec-rec.md 2>&1
timeout 60 python3 $A --pair $W/kin1.json $W/kin2.json --labels kineto1 kineto2 --skip 2 2 --count 18 > $W/agree-kin-kin.md 2>&1
timeout 60 python3 $A --pair $W/rec1.jsonl $W/kin1.json --labels record1 kineto1 --skip 5 2 --count 18 > $W/agree-rec-kin.md 2>&1
for f in $W/agree-*.md; do echo "== $f"; cat $f | head -30; done
el "pack"
gzip -f $W/*.jsonl $W/*.json 2>/dev/null; rm -rf $W/bro/*.jsonl
tar czf $OUT/toggle.tgz -C /tmp toggle; ls -la $OUT
