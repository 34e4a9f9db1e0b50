"""all_reduce throughput: `dist.all_reduce` against raw mpi4py `comm.Allreduce(MPI.IN_PLACE, buf)`
on the same buffers in the same run.

Our call is nonblocking MPI (Iallreduce) plus a polling wait with a deadline, and, unless
turned off, a 16-byte all-reduce, started with the data, that checks the ranks agree on
shape, dtype and op; this bench shows what those cost. The first row is the per-message
latency (a one-element all-reduce, the mean of 200 back-to-back calls per sample); the others
are float32 buffers of 1 MB to 256 MB (SUM), a sample being the mean of back-to-back calls
that move at least 16 MB. Each variant is sampled `--repeat` times, interleaved, each sample
after a barrier; the median is reported. `ours/raw` is the throughput ratio (1.00x: as fast
as raw MPI; the target is >= 0.90x).

    python bench/bench_allreduce.py              # starts itself on 2 ranks through mpiexec
    mpiexec -n 4 python bench/bench_allreduce.py --quick
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

import numpy as np

import singa_tensor as st
import singa_tensor.distributed as dist
from singa_tensor.distributed.run import find_mpiexec

_CHILD = "SINGA_BENCH_ALLREDUCE_CHILD"


def _relaunch(argv: list[str]) -> int:
    mpiexec = find_mpiexec()
    if mpiexec is None:
        print("mpiexec not found: pip install mpi4py mpich", file=sys.stderr)
        return 1
    env = dict(os.environ, **{_CHILD: "1"})
    return subprocess.call([mpiexec, "-n", "2", sys.executable, __file__] + argv, env=env)


def _bench_size(MPI, world, comm, mb: int, repeat: int) -> tuple[float, float, float]:
    """Median seconds per call of raw Allreduce, dist.all_reduce, and dist.all_reduce
    unchecked."""
    n = world.Get_size()
    t = st.ones(mb * (1 << 20) // 4)
    buf = t.numpy()  # the same memory for both

    def raw():
        world.Allreduce(MPI.IN_PLACE, buf)

    def ours():
        dist.all_reduce(t)

    def ours_unchecked():
        comm.check = False
        try:
            dist.all_reduce(t)
        finally:
            comm.check = True

    for _ in range(2):  # warm-up: first touch, MPI's internal buffers
        raw()
        ours()
    variants = [(raw, []), (ours, []), (ours_unchecked, [])]
    # a sample is `calls` back-to-back all-reduces (at least 16 MB in all), as a training loop
    # makes them; one call after a barrier mostly measures how far apart the ranks left it
    calls = max(1, 16 // mb)
    for i in range(repeat):
        # rotate the order so that no variant always runs on a cold or warm cache
        for k in range(3):
            fn, into = variants[(i + k) % 3]
            buf[...] = 1
            world.Barrier()
            t0 = time.perf_counter()
            for _ in range(calls):
                fn()
            into.append((time.perf_counter() - t0) / calls)
            # every call summed the ranks' equal values: n to the number of calls
            want = np.float32(n) ** calls
            if buf[0] != want or buf[-1] != want:
                raise SystemExit(f"wrong result: {buf[0]}, {buf[-1]} != {n}**{calls}")
    return tuple(statistics.median(into) for _, into in variants)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeat", type=int, default=7)
    p.add_argument("--quick", action="store_true", help="3 repeats, sizes up to 64 MB")
    args = p.parse_args()
    from mpi4py import MPI

    world = MPI.COMM_WORLD
    if world.Get_size() == 1 and os.environ.get(_CHILD) is None:
        return _relaunch(sys.argv[1:])
    dist.init_process_group(backend="mpi")
    comm = dist.get_communicator()
    rank, n = dist.get_rank(), dist.get_world_size()
    repeat = 3 if args.quick else args.repeat
    sizes_mb = [1, 4, 16, 64] if args.quick else [1, 4, 16, 64, 256]

    if rank == 0:
        lib = MPI.Get_library_version().splitlines()[0].strip()
        print(f"all_reduce SUM float32 on {n} ranks, median of {repeat} "
              f"(mpi4py {__import__('mpi4py').__version__}, {lib})")
        print(f"{'size':>8} {'raw':>10} {'ours':>10} {'ours-nochk':>10} {'raw GB/s':>9} "
              f"{'ours/raw':>9} {'nochk/raw':>9}")
    # the per-message cost (latency): a one-element all-reduce, 200 calls per sample
    t = st.ones(1)
    buf = t.numpy()
    lat = {}
    for name, fn in (("raw", lambda: world.Allreduce(MPI.IN_PLACE, buf)),
                     ("ours", lambda: dist.all_reduce(t))):
        samples = []
        for _ in range(repeat):
            world.Barrier()
            t0 = time.perf_counter()
            for _ in range(200):
                fn()
            samples.append((time.perf_counter() - t0) / 200)
        lat[name] = statistics.median(samples)
    comm.check = False
    samples = []
    for _ in range(repeat):
        world.Barrier()
        t0 = time.perf_counter()
        for _ in range(200):
            dist.all_reduce(t)
        samples.append((time.perf_counter() - t0) / 200)
    comm.check = True
    lat["ours-nochk"] = statistics.median(samples)
    if rank == 0:
        print(f"{'4B':>8} {lat['raw'] * 1e6:>8.1f}us {lat['ours'] * 1e6:>8.1f}us "
              f"{lat['ours-nochk'] * 1e6:>8.1f}us   (latency: one element, 200 calls a sample)",
              flush=True)
    for mb in sizes_mb:
        raw, ours, nochk = _bench_size(MPI, world, comm, mb, repeat)
        if rank == 0:
            print(f"{mb:>6}MB {raw * 1e3:>8.2f}ms {ours * 1e3:>8.2f}ms {nochk * 1e3:>8.2f}ms "
                  f"{mb / 1024 / raw:>9.2f} {raw / ours:>8.2f}x {raw / nochk:>8.2f}x",
                  flush=True)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
