#!/usr/bin/env bash
# One device call for issue 24 (carry .whl and .nsys-libs):
#   (1) GPU tests of the code this session changed (CUPTI conversion, staged key upload, pipeline);
#   (2) record overhead on train_step.py, paired design (bench_record_overhead.py);
#   (3) one program three ways: gputrace record (CUPTI), torch.profiler (Kineto), nsys (SQLite export), then
#       agreement.py on each pair.
# Leaves in $OUT: real.tgz (logs, bench.json, the three traces gzipped, agreement tables).
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 3
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 COLUMNS=160
W=/tmp/real; mkdir -p $W
T0=$(date +%s); el() { echo "--- $* ($(( $(date +%s) - T0 )) s)"; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv | tee $W/gpu.txt
el "gpu tests"
timeout 170 python3 -m pytest -q -m gpu -x tests/gpu/test_cupti.py tests/gpu/test_cuda_backend.py \
    tests/gpu/test_pipeline_batch.py 2>&1 | tail -15 | tee $W/gpu_pytest.txt
el "record overhead"
timeout 200 python3 benchmarks/real_programs/bench_record_overhead.py --steps 100 --repeats 8 --budget-s 180 \
    --work $W/bench --json $W/bench.json > $W/bench.log 2>&1; echo "bench exit $?"; tail -12 $W/bench.log
el "three ways"
mkdir -p /tmp/nsyslibs && for f in .nsys-libs/*.deb; do dpkg -x "$f" /tmp/nsyslibs; done
NSYS=$(command -v nsys || find /opt/nvidia -type f -name nsys -path '*/bin/*' 2>/dev/null | head -1)
echo "nsys: $NSYS"
P=benchmarks/real_programs/train_step.py
timeout 60 python3 -m gputrace record --trace $W/rec.jsonl -- python3 $P --steps 20 > $W/rec.log 2>&1; echo "record exit $?"
timeout 60 python3 $P --steps 20 --profile $W/kin.json > $W/kin.log 2>&1; echo "kineto exit $?"
LD_LIBRARY_PATH=/tmp/nsyslibs/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-} timeout 120 "$NSYS" profile -t cuda,nvtx \
    --export sqlite -o $W/ns --force-overwrite true python3 $P --steps 20 > $W/nsys.log 2>&1; echo "nsys exit $?"
ls -la $W
A=benchmarks/real_programs/agreement.py
timeout 60 python3 $A --pair $W/rec.jsonl $W/kin.json --labels record kineto --skip 5 2 --count 18 > $W/agree-rec-kin.md 2>&1
timeout 60 python3 $A --pair $W/rec.jsonl $W/ns.sqlite --labels record nsys --skip 5 5 --count 18 > $W/agree-rec-nsys.md 2>&1
timeout 60 python3 $A --pair $W/kin.json $W/ns.sqlite --labels kineto nsys --skip 2 5 --count 18 > $W/agree-kin-nsys.md 2>&1
for f in $W/agree-*.md; do echo "== $f"; head -8 $f; done
el "pack"
gzip -f $W/rec.jsonl $W/kin.json $W/ns.sqlite 2>/dev/null; rm -rf $W/bench/*.jsonl $W/ns.nsys-rep
tar czf $OUT/real.tgz -C /tmp real; ls -la $OUT
