#!/usr/bin/env bash
# One device call for issue 24 (carry .whl): why a launch costs 3-25x while CUPTI collects in a tight loop
# (chunks of 200 launches stall 100-180 ms): attach_cost.py under record with Python's GC on and off, with each
# generation's collections counted and timed per mode; plain runs the same; then the detach probe alone, with
# its exit status and faulthandler on.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 3
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 COLUMNS=160 PYTHONFAULTHANDLER=1
W=/tmp/gcd; mkdir -p $W
AC=benchmarks/real_programs/attach_cost.py
for g in on off; do
  timeout 40 python3 $AC --repeats 5 --gc $g > $W/plain-gc$g.log 2>&1; echo "plain gc=$g exit $?"
  timeout 90 python3 -m gputrace record --trace $W/r.jsonl -- python3 $AC --repeats 5 --gc $g > $W/rec-gc$g.log 2>&1
  echo "record gc=$g exit $?"; rm -f $W/r.jsonl
done
timeout 90 python3 -m gputrace record --trace $W/d.jsonl -- python3 $AC --repeats 3 --detach > $W/detach.log 2>&1
echo "detach exit $?"; rm -f $W/d.jsonl
for f in $W/*.log; do echo "== $f"; grep -E "ATTACH|GC |DETACH|Fatal|Error|error|File" $f | cut -c1-400; done
tar czf $OUT/gcd.tgz -C /tmp gcd
