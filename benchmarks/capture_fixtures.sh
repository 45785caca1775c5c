#!/bin/bash
# Device-side driver of benchmarks/capture_fixtures.py: writes the gzipped fixtures of tests/data/foreign/
# into $OUT. Run from the repo root on a GPU machine with PyTorch, with the Debian packages libdw1 and
# libelf1 (`apt-get download libdw1 libelf1`) in $DEBS: the QdstrmImporter of the Nsight Systems CLI that
# Nsight Compute ships needs libdw.so.1 and libelf.so.1 (docs/nsight.md, "Where nsys is").
set -x
export PYTHONUNBUFFERED=1 NSYS_NVTX_PROFILER_REGISTER_ONLY=0
DEBS=${DEBS:-.debs}; OUT=${OUT:-fixtures-out}; mkdir -p "$OUT"
W=/tmp/cap; mkdir -p $W /tmp/el
for f in "$DEBS"/*.deb; do dpkg -x "$f" /tmp/el; done
LIBS=$(dirname "$(find /tmp/el -name libdw.so.1 | head -1)")
python3 -c 'import torch;print(torch.__version__, torch.version.cuda, torch.cuda.get_device_name())'
python3 benchmarks/capture_fixtures.py train --out $W || echo TRAIN_FAIL
python3 benchmarks/capture_fixtures.py dist --out $W || echo DIST_FAIL
NSYS=$(ls -d /opt/nvidia/nsight-systems/*/bin/nsys /opt/nvidia/nsight-compute/*/host/target-linux-x64/nsys 2>/dev/null | tail -1)
IMP=$(ls "$(dirname "$(dirname "$NSYS")")"/*/QdstrmImporter 2>/dev/null | head -1)
LD_LIBRARY_PATH=$LIBS timeout 150 "$NSYS" profile -t cuda,nvtx -s none --cpuctxsw=none --force-overwrite=true \
  -o $W/train_nsys python3 benchmarks/capture_fixtures.py train --nvtx-only
if [ ! -f $W/train_nsys.nsys-rep ] && [ -f $W/train_nsys.qdstrm ]; then
  LD_LIBRARY_PATH=$LIBS timeout 120 "$IMP" -i $W/train_nsys.qdstrm
fi
LD_LIBRARY_PATH=$LIBS timeout 120 "$NSYS" export --type sqlite --force-overwrite=true -o $W/train_nsys.sqlite $W/train_nsys.nsys-rep
for f in train_kineto.json dist_rank0.json dist_rank1.json train_nsys.sqlite; do
  [ -f $W/$f ] && gzip -9 -c $W/$f > "$OUT/$f.gz"
done
ls -la "$OUT"
