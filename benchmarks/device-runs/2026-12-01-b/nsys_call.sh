#!/usr/bin/env bash
# One device call for issue 24 (carry .whl and .nsys-libs): train_step.py under nsys (Nsight Systems from the
# Nsight Compute bundle; its importer needs libdw.so.1 / libelf.so.1, carried as Debian packages), then the
# three pairs with agreement.py against the record and torch.profiler traces of the same program made in this
# call.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 3
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 COLUMNS=160
W=/tmp/ns3; mkdir -p $W
T0=$(date +%s); el() { echo "--- $* ($(( $(date +%s) - T0 )) s)"; }
mkdir -p /tmp/nsyslibs && for f in .nsys-libs/*.deb; do dpkg -x "$f" /tmp/nsyslibs; done
export LD_LIBRARY_PATH=/tmp/nsyslibs/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
NSYS=$(command -v nsys || find /opt/nvidia -type f -name nsys 2>/dev/null | head -1)
echo "nsys: $NSYS"; "$NSYS" --version 2>&1 | head -2
P=benchmarks/real_programs/train_step.py
el "nsys"
timeout 150 "$NSYS" profile -t cuda,nvtx --export sqlite -o $W/ns --force-overwrite true python3 $P --steps 20 \
    > $W/nsys.log 2>&1; echo "nsys exit $?"; tail -5 $W/nsys.log
if [ ! -s $W/ns.sqlite ] && [ -s $W/ns.nsys-rep ]; then
  timeout 60 "$NSYS" export --type sqlite -o $W/ns.sqlite $W/ns.nsys-rep >> $W/nsys.log 2>&1; echo "export exit $?"; fi
if [ ! -s $W/ns.sqlite ]; then ls -la $W; IMP=$(find /opt/nvidia -name QdstrmImporter -type f | head -1)
  echo "importer $IMP"; ldd "$IMP" 2>&1 | grep -i "not found"; fi
el "record and kineto"
timeout 60 python3 -m gputrace record --trace $W/rec.jsonl -- python3 $P --steps 20 > $W/rec.log 2>&1; echo "record exit $?"
timeout 60 python3 $P --steps 20 --profile $W/kin.json > $W/kin.log 2>&1; echo "kineto exit $?"
A=benchmarks/real_programs/agreement.py
timeout 60 python3 $A --pair $W/rec.jsonl $W/ns.sqlite --labels record nsys --skip 5 5 --count 18 > $W/agree-rec-nsys.md 2>&1
timeout 60 python3 $A --pair $W/kin.json $W/ns.sqlite --labels kineto nsys --skip 2 5 --count 18 > $W/agree-kin-nsys.md 2>&1
timeout 60 python3 $A --pair $W/rec.jsonl $W/kin.json --labels record kineto --skip 5 2 --count 18 > $W/agree-rec-kin.md 2>&1
for f in $W/agree-*.md; do echo "== $f"; sed -n 3,9p $f; done
el "pack"
gzip -f $W/rec.jsonl $W/kin.json $W/ns.sqlite 2>/dev/null; rm -rf $W/bench/*.jsonl $W/ns.nsys-rep $W/ns.qdstrm
tar czf $OUT/ns3.tgz -C /tmp ns3; ls -la $OUT
