#!/usr/bin/env bash
# One device call for issue 24 (carry .whl): (1) where the launch stalls under collection come from:
# attach_cost.py --variants under record (on, paused, exporter held at its lock, counting-only CUPTI completion
# callback); (2) the in-process on/off bench again, now with the time-weighted ratio and the runs pooled.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 3
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 COLUMNS=160
W=/tmp/var; mkdir -p $W
T0=$(date +%s); el() { echo "--- $* ($(( $(date +%s) - T0 )) s)"; }
AC=benchmarks/real_programs/attach_cost.py
el "variants"
timeout 120 python3 -m gputrace record --trace $W/v.jsonl -- python3 $AC --repeats 5 --variants > $W/variants.log 2>&1
echo "variants exit $?"; grep -E "ATTACH|GC |FASTCB|Error|error" $W/variants.log | cut -c1-330; rm -f $W/v.jsonl
el "in-process bench"
timeout 260 python3 benchmarks/real_programs/bench_record_overhead.py --steps 30 --repeats 1 --inprocess \
    --inprocess-runs 4 --inprocess-steps 600 --toggle-blocks 10 --budget-s 230 --work $W/bro --json $W/bench.json \
    > $W/bench.log 2>&1; echo "bench exit $?"; tail -16 $W/bench.log | cut -c1-400
el "pack"
rm -rf $W/bro/*.jsonl; tar czf $OUT/var.tgz -C /tmp var
