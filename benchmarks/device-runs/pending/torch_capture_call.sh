#!/usr/bin/env bash
# One device call for issue 32 part 2 (nvidia-h200-x2, carry .whl): the torch capture on an unmodified DDP job
# with NCCL (one GPU per rank; rank 1 sleeps 50 ms before each step), its spans per rank (all_reduce buckets
# with bytes / seq matching across ranks, NCCL's own NVTX ranges if NCCL has them, NCCL kernels), the report's
# collectives and straggler against the ranks' own backward times, the same job with --no-torch-capture (same
# params_sum), and bench_torch_capture.py on the device host's quiet CPUs. Leaves $OUT/torchcap.tgz.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 3
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 COLUMNS=160
W=/tmp/torchcap; mkdir -p $W
nvidia-smi -L | tee $W/gpus.txt
if command -v torchrun >/dev/null 2>&1; then TORCHRUN=(torchrun); else TORCHRUN=(python3 -m torch.distributed.run); fi
PROG=tests/data/torch_programs/ddp_train.py
timeout 180 python3 -m gputrace record --trace $W/nccl.jsonl -- "${TORCHRUN[@]}" --standalone --nproc-per-node 2 \
    $PROG --nccl --steps 20 --late-ms 50 2>&1 | grep -v '^W' | tee $W/nccl-record.log | tail -4
timeout 180 python3 -m gputrace record --no-torch-capture --trace $W/nccl-off.jsonl -- "${TORCHRUN[@]}" --standalone \
    --nproc-per-node 2 $PROG --nccl --steps 20 --late-ms 50 2>&1 | grep -v '^W' | tee $W/nccl-off.log | tail -4
timeout 120 python3 -m gputrace report $W/nccl.jsonl > $W/nccl-report.txt 2>&1; echo "report exit $?"
timeout 120 python3 -m gputrace report --json $W/nccl.jsonl > $W/nccl-report.json 2> $W/nccl-report.err
head -40 $W/nccl-report.txt | cut -c1-220
python3 - $W/nccl.jsonl <<'PY' | tee $W/nccl-spans.txt
import collections, json, sys
by = collections.defaultdict(collections.Counter); buckets = collections.defaultdict(dict); res_err = set()
for line in open(sys.argv[1]):
    for rs in json.loads(line)["resourceSpans"]:
        ra = {a["key"]: next(iter(a["value"].values())) for a in rs["resource"]["attributes"]}
        if "gputrace.torch_capture.error" in ra: res_err.add(ra["gputrace.torch_capture.error"])
        rank = ra.get("gputrace.rank")
        for ss in rs["scopeSpans"]:
            for sp in ss["spans"]:
                at = {a["key"]: next(iter(a["value"].values())) for a in sp.get("attributes", [])}
                n = sp["name"]
                by[rank]["nccl kernel" if n.startswith(("ncclDevKernel", "ncclKernel")) else n] += 1
                if n == "all_reduce":
                    buckets[rank][(at.get("gputrace.collective.group"), at.get("gputrace.collective.seq"))] = (
                        at.get("gputrace.collective.bytes"), at.get("gputrace.collective.completion"))
for rank, c in sorted(by.items(), key=str):
    print("rank", rank, {k: v for k, v in c.most_common() if k in ("forward", "backward", "optimizer.step",
          "dataloader.next", "all_reduce", "nccl kernel") or k.startswith("nccl")})
r = [k for k in buckets if k is not None]
print("bucket all_reduce (group, seq) -> bytes equal across ranks:", len(r) == 2 and buckets[r[0]] == buckets[r[1]],
      "n =", [len(buckets[k]) for k in r])
print("torch_capture errors:", res_err or "none")
PY
grep -h '^DDP' $W/nccl-record.log $W/nccl-off.log
timeout 240 python3 benchmarks/bench_torch_capture.py --repeats 11 2>&1 | grep -v USDT | tee $W/bench.txt
gzip -f $W/*.jsonl; tar czf $OUT/torchcap.tgz -C /tmp torchcap
