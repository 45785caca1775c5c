#!/usr/bin/env bash
# One device call for issue 24 (nvidia-h200, carry .whl): record's collection cost against torch.profiler's,
# both in-process (on/off blocks of train_step.py steps), interleaved runs, pooled, with the interval of their
# ratio. Leaves $OUT/prof.tgz.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 3
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 COLUMNS=160
W=/tmp/prof; mkdir -p $W
timeout 560 python3 benchmarks/real_programs/bench_record_overhead.py --repeats 1 --inprocess-profiler \
    --inprocess-runs 4 --inprocess-steps 600 --toggle-blocks 10 --budget-s 480 --timeout 200 --work $W/bro \
    --json $W/bench.json > $W/bench.log 2>&1; echo "bench exit $?"; tail -30 $W/bench.log | cut -c1-400
rm -rf $W/bro/*.jsonl; tar czf $OUT/prof.tgz -C /tmp prof
