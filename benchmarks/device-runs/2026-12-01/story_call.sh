#!/usr/bin/env bash
# one device call: the seed story factorial at 2^22, batch 4; results copied to $OUT
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 3
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw --format=csv | tee $OUT/gpu.txt
start=$(date +%s)
timeout -s INT -k 20 500 bash examples/seed_story/gpu_story.sh /tmp/story 22 4 340 2>&1 | tee $OUT/story.log
echo "story wall $(( $(date +%s) - start )) s" | tee -a $OUT/story.log
for f in ab.txt ab.log replicates.md replicates.json; do cp /tmp/story/$f $OUT/ 2>/dev/null; done
sz=$(stat -c %s /tmp/story/traces.tgz 2>/dev/null || echo 0)
if [ "$sz" -gt 0 ] && [ "$sz" -lt 16000000 ]; then cp /tmp/story/traces.tgz $OUT/; else echo "traces.tgz $sz bytes, not copied"; ls -la /tmp/story/experiment | head; fi
