"""DistOpt step time and bytes on the wire: the MLP 784-512-512-10, batch 64 per rank, SGD.

Each world size runs the same script: a local step (backward + SGD, no communication), then
DistOpt's four modes (full all-reduce, float16 on the wire, sparse top-k 1%, partial), DDP with
Adam unsharded and with ZeroRedundancyOptimizer (its optimizer state bytes on rank 0 printed
after the table), and on one rank the full mode's bucketed path, which a world of one otherwise
skips. Rows give the median step time in ms and the bytes this rank sent per step; `vs local` is
the step time over the local step's in the same run, and the last table compares the 2-rank full
step with the 1-rank one (weak scaling: the same per-rank batch and one thread per rank, so
1.00x is perfect overlap).

    python bench/bench_distopt.py                  # runs 1 rank, then 2 ranks, and compares
    python -m singa_tensor.distributed.run -n 2 bench/bench_distopt.py
    mpiexec -n 2 python bench/bench_distopt.py --steps 10
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np

import singa_tensor as st
import singa_tensor.distributed as dist
import singa_tensor.nn.functional as F
from singa_tensor import nn, optim

_CHILD = "SINGA_BENCH_DISTOPT_CHILD"


def _model() -> nn.Module:
    st.manual_seed(0)
    return nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(),
                         nn.Linear(512, 10))


def _measure(args) -> dict:
    dist.init_process_group()
    rank, ws = dist.get_rank(), dist.get_world_size()
    rng = np.random.default_rng(rank)
    x = st.tensor(rng.standard_normal((args.batch, 784)).astype(np.float32))
    y = st.tensor(rng.integers(0, 10, args.batch).astype(np.int64))

    def loss_of(m):
        return F.cross_entropy(m(x), y)

    def timed(step) -> float:
        for _ in range(args.warmup):
            step()
        times = []
        for _ in range(args.steps):
            dist.barrier()
            t0 = time.perf_counter()
            step()
            times.append(time.perf_counter() - t0)
        return statistics.median(times) * 1e3

    rows = {}
    m = _model()
    opt = optim.SGD(list(m.parameters()), lr=0.01)

    def local():
        opt.zero_grad()
        loss_of(m).backward()
        opt.step()

    # the process's first steps pay for page faults, the allocator's first buffers and thread
    # start-up; without this the first row timed (local) came out several times too slow
    for _ in range(10):
        local()
    rows["local (no comm)"] = (timed(local), 0)
    modes = {
        "full": lambda o, m: o.backward_and_update(loss_of(m)),
        "half": lambda o, m: o.backward_and_update_half(loss_of(m)),
        "sparse top-k 1%": lambda o, m: o.backward_and_sparse_update(loss_of(m), spars=0.01,
                                                                     topK=True),
        "partial": lambda o, m: o.backward_and_partial_update(loss_of(m)),
    }
    for name, fn in modes.items():
        m = _model()
        o = optim.DistOpt(optim.SGD(list(m.parameters()), lr=0.01))
        ms = timed(lambda o=o, m=m, fn=fn: fn(o, m))
        rows[name] = (ms, o.last_bytes_sent)
    # DDP with Adam, unsharded and with ZeRO's sharded state: the gradients' all-reduce, plus
    # for ZeRO the broadcast of each owner's updated parameters
    from singa_tensor.distributed.optim import ZeroRedundancyOptimizer, state_bytes
    from singa_tensor.nn.parallel import DistributedDataParallel

    state = {}
    for name, sharded in (("DDP, Adam", False), ("DDP, ZeRO Adam", True)):
        m = _model()
        ddp = DistributedDataParallel(m)
        o = (ZeroRedundancyOptimizer(m.parameters(), optim.Adam, lr=1e-3) if sharded
             else optim.Adam(m.parameters(), lr=1e-3))

        def ddp_step(o=o, ddp=ddp):
            o.zero_grad()
            loss_of(ddp).backward()
            o.step()

        ms = timed(ddp_step)
        rows[name] = (ms, ddp.last_bytes_sent + getattr(o, "last_bytes_sent", 0))
        state[name] = o.local_state_bytes() if sharded else state_bytes(o)
    if ws == 1:
        # A world of one skips the buckets in the full mode (the average of one gradient is
        # itself). This row times the bucketed path anyway (gradient hooks, packing, the
        # all-reduce calls, which return at once, dividing, unpacking), so that the 2-rank
        # full step minus this one is communication alone (bench/scaling_model.py uses it).
        m = _model()
        o = optim.DistOpt(optim.SGD(list(m.parameters()), lr=0.01))
        buckets = o._plan(o._threshold("bench", None), None)

        def bucketed(o=o, m=m, buckets=buckets):
            o._overlapped_backward(loss_of(m), buckets, *o._dense_launch(buckets))

        rows["full, bucketed"] = (timed(bucketed), 0)
    return {"world": ws, "rows": rows, "state_bytes": state}


def _print(result: dict) -> None:
    rows = result["rows"]
    base = rows["local (no comm)"][0]
    print(f"\nDistOpt on {result['world']} rank(s), MLP 784-512-512-10, batch 64 per rank")
    print(f"{'mode':<18}{'ms/step':>10}{'vs local':>10}{'bytes/step':>14}")
    # bytes/step: what this rank sent (DDP's all-reduce input, plus ZeRO's broadcasts)
    for name, (ms, nbytes) in rows.items():
        print(f"{name:<18}{ms:>10.2f}{ms / base:>9.2f}x{nbytes:>14,}")
    for name, nbytes in result.get("state_bytes", {}).items():
        print(f"optimizer state on rank 0, {name}: {nbytes:,} bytes")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--json", action="store_true", help="print one JSON line (rank 0)")
    args = ap.parse_args()
    under_mpi = any(k in os.environ for k in ("PMI_RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK"))
    if under_mpi or os.environ.get(_CHILD):
        result = _measure(args)
        if dist.get_rank() == 0:
            print(json.dumps(result) if args.json else "", flush=True)
            if not args.json:
                _print(result)
        return 0
    from singa_tensor.distributed.run import find_mpiexec

    mpiexec = find_mpiexec()
    if mpiexec is None:
        print("mpiexec not found: pip install mpi4py mpich", file=sys.stderr)
        return 1
    results = {}
    for n in (1, 2):
        # one thread per rank in both runs, so that each rank has a core of its own and the
        # 2-rank step over the 1-rank step measures communication, not a halved thread count
        env = dict(os.environ, **{_CHILD: "1", "OMP_NUM_THREADS": "1",
                                  "OPENBLAS_NUM_THREADS": "1"})
        cmd = [mpiexec, "-n", str(n), sys.executable, __file__, "--json",
               "--steps", str(args.steps), "--warmup", str(args.warmup),
               "--batch", str(args.batch)]
        out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
        if out.returncode != 0:
            print(out.stdout, out.stderr, file=sys.stderr)
            return out.returncode
        line = [ln for ln in out.stdout.splitlines() if ln.startswith("{")][-1]
        results[n] = json.loads(line)
        _print(results[n])
    one, two = results[1]["rows"]["full"][0], results[2]["rows"]["full"][0]
    bucketed = results[1]["rows"]["full, bucketed"][0]
    print(f"\nfull DistOpt step, 2 ranks vs 1 rank: {two:.2f} ms vs {one:.2f} ms "
          f"({two / one:.2f}x; 1.00x is perfect weak scaling); vs the 1-rank bucketed path "
          f"{bucketed:.2f} ms: {two / bucketed:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
