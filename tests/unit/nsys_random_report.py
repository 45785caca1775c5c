"""A random Nsight Systems SQLite report with every table the importer reads (for tests comparing whole
Timelines: importer changes, the import's cache entry)."""

from __future__ import annotations

import random
import sqlite3

from tests.unit.test_activity_equivalence import SYNC_SCHEMA
from tests.unit.test_nsys import EVENT_TYPES, MEM_KIND, MEMCPY_OPER, SCHEMA


def random_report(path, seed: int = 3, n: int = 3000):
    """An Nsight export of ``n`` random API calls (and their kernels, memcpys, memsets, syncs) and NVTX
    ranges over two processes and six threads: NULLs, failed calls, unmatched and missing correlation
    ids, every table the importer reads."""
    rnd = random.Random(seed)
    con = sqlite3.connect(path)
    con.executescript(SCHEMA)
    con.executescript(SYNC_SCHEMA)
    strings = {1: "MainThread", 2: "worker", 3: "cudaLaunchKernel_v7000", 4: "cudaMemcpyAsync_v3020",
               5: "cudaStreamSynchronize_v3020", 6: "void ntt_kernel<256>(Fr*, int)", 7: "ntt_kernel",
               8: "user range", 9: "python3", 10: "void msm(int)", 11: "msm", 12: "cudaMemsetAsync", 13: "cudaHostRegister",
               14: "cudaEventSynchronize"}
    con.executemany("INSERT INTO StringIds VALUES (?,?)", strings.items())
    pids = [4321, 999]
    gtids = [(p << 24) | (p + k) for p in pids for k in range(3)]
    con.executemany("INSERT INTO ThreadNames VALUES (?,?,?)", [(1 + (i % 2), 0, g) for i, g in enumerate(gtids)])
    con.executemany("INSERT INTO PROCESSES VALUES (?,?,?)", [(p << 24, p, "python3") for p in pids])
    con.executemany("INSERT INTO ENUM_NSYS_EVENT_TYPE VALUES (?,?,?)", [(i, n_, n_) for i, n_ in EVENT_TYPES])
    con.executemany("INSERT INTO ENUM_CUDA_MEMCPY_OPER VALUES (?,?,?)", MEMCPY_OPER)
    con.executemany("INSERT INTO ENUM_CUDA_MEM_KIND VALUES (?,?,?)", MEM_KIND)
    con.execute("INSERT INTO ENUM_CUPTI_SYNC_TYPE VALUES (1,'CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE','s'),"
                "(2,'CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE','e')")
    con.execute("INSERT INTO TARGET_INFO_SESSION_START_TIME VALUES (1764000000000000000,'','')")
    nv = [(0, None, 75, None, None, "gputrace", gtids[0], None, 1, None, None), (0, None, 33, 1, None, "gpu 1", gtids[0], None, 1, None, None)]
    for _ in range(n // 20):
        g = rnd.choice(gtids)
        s = rnd.randrange(0, n * 1000)
        e = s + rnd.randrange(0, 50000)
        nv.append((s, e, rnd.choice([59, 60]), rnd.choice([None, 1]), rnd.choice([None, 0xff00ff]), rnd.choice(["ntt", "msm_h", None, "x"]),
                   g, 8, rnd.choice([0, 1]), None, rnd.choice([None, 7])))
    con.executemany("INSERT INTO NVTX_EVENTS (start,end,eventType,category,color,text,globalTid,textId,domainId,uint64Value,int64Value) VALUES (?,?,?,?,?,?,?,?,?,?,?)", nv)
    rt, kr, mc, ms, sy = [], [], [], [], []
    for c in range(n):
        g = rnd.choice(gtids)
        s = rnd.randrange(0, n * 1000)
        e = s + rnd.randrange(0, 3000)
        what = rnd.random()
        corr = c if rnd.random() > 0.05 else None
        nid = 3 if what < 0.6 else 4 if what < 0.75 else 12 if what < 0.85 else 5 if what < 0.95 else 13
        if rnd.random() < 0.1:
            nid = 14
        rt.append((s, e, 1, g, corr if rnd.random() > 0.03 else c + 10**6, nid, rnd.choice([0] * 20 + [2]), 0))
        gp = g & ~0xFFFFFF
        ks, ke = e + rnd.randrange(0, 500), e + rnd.randrange(500, 5000)
        kc = corr if rnd.random() > 0.05 else rnd.choice([None, 10**7 + c])
        if nid == 3:
            kr.append((ks, ke, rnd.choice([0, 1]), 1, rnd.choice([7, 8, 9]), kc, gp, rnd.choice([6, 10]), rnd.choice([7, 11]), 40,
                       rnd.choice([1024, 2048]), 1, 1, 256, 1, 1, rnd.choice([0, 48]), 0))
        elif nid == 4:
            mc.append((ks, ke, 0, 1, 7, kc, gp, rnd.choice([4096, None]) or 4096, rnd.choice([1, 2, 0]), rnd.choice([0, 1, 2, None]), rnd.choice([2, 0])))
        elif nid == 12:
            ms.append((ks, ke, 1, 1, 9, kc, gp, 0, 4096, None, rnd.choice([0, 2])))
        elif nid in (5, 14):
            sy.append((s + 5, e, rnd.choice([0, 1]), 1, rnd.choice([7, 0xFFFFFFFF]), kc, gp, rnd.choice([1, 2]), rnd.choice([3, 0xFFFFFFFF]), None))
    con.executemany("INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (?,?,?,?,?,?,?,?)", rt)
    con.executemany("INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL (start,end,deviceId,contextId,streamId,correlationId,globalPid,"
        "demangledName,shortName,registersPerThread,gridX,gridY,gridZ,blockX,blockY,blockZ,staticSharedMemory,"
        "dynamicSharedMemory) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)", kr)
    con.executemany("INSERT INTO CUPTI_ACTIVITY_KIND_MEMCPY (start,end,deviceId,contextId,streamId,correlationId,globalPid,"
        "bytes,copyKind,srcKind,dstKind) VALUES (?,?,?,?,?,?,?,?,?,?,?)", mc)
    con.executemany("INSERT INTO CUPTI_ACTIVITY_KIND_MEMSET VALUES (?,?,?,?,NULL,?,?,?,?,?,?,?)", ms)
    con.executemany("INSERT INTO CUPTI_ACTIVITY_KIND_SYNCHRONIZATION VALUES (?,?,?,?,NULL,?,?,?,?,?,?)", sy)
    con.commit()
    con.close()
    return path
