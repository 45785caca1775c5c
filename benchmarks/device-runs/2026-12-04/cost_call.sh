#!/usr/bin/env bash
# Device call F2 of 2026-12-04 (nvidia-h200, carry .whl .nsys-libs): issue 33's whole-process cost after the
# exporter caches (kernel names, int lists), with the stack sampler and torch capture on by default (issue 32).
# Prediction: record's median on the launch-bound CNN step drops from ~1.4x (call 2: median step 3.72 vs 2.78 ms)
# toward ~1.2x, still above nsys: the exporter's per-span Python work is a direct tax on a GIL-bound step.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 3
mkdir -p /tmp/nsyslibs && for f in .nsys-libs/*.deb; do dpkg -x "$f" /tmp/nsyslibs; done
export LD_LIBRARY_PATH=/tmp/nsyslibs/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 COLUMNS=160 PATH=/tmp/site/bin:$PATH
export NSYS=$(command -v nsys || find /opt/nvidia -type f -name nsys 2>/dev/null | head -1); echo "nsys: $NSYS"
W=/tmp/cost; mkdir -p $W
T0=$(date +%s); el() { echo "--- $* ($(( $(date +%s) - T0 )) s)"; }
P=benchmarks/real_programs
el "where the slow steps go: GC pauses and thread CPU, plain and under record"
python3 $P/cnn_step.py --steps 2000 --thread-cpu --gc-stats > $W/gc_plain.txt 2>&1
python3 -m gputrace record --trace /tmp/gc.jsonl -- python3 $P/cnn_step.py --steps 2000 --thread-cpu --gc-stats > $W/gc_record.txt 2>&1
grep -h "GC\|SLOWEST\|CNN" $W/gc_plain.txt $W/gc_record.txt; rm -f /tmp/gc.jsonl*
el "launch-bound CNN, 9 rounds"
timeout 400 python3 $P/bench_whole_process.py --rounds 9 --modes plain,record,nsys,profiler -- --steps 300 --warmup 30 2>&1 | tee $W/whole_cnn.txt | tail -8
el "matmul-bound, 5 rounds"
timeout 120 python3 $P/bench_whole_process.py --rounds 5 --modes plain,record -- --model matmul --steps 300 --warmup 10 2>&1 | tee $W/whole_matmul.txt | tail -4
el "pack"
tar czf $OUT/cost.tgz -C /tmp cost
