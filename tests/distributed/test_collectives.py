"""Every collective, for every ReduceOp and dtype, blocking and async, against numpy; groups;
point to point; byte accounting. Each rank collects its failures and reports them, so one
spawn covers many checks."""

import pytest

import singa_tensor as st

from ..helpers import real_gpu
from .mpi_run import needs_mpi, run

pytestmark = needs_mpi

BODY = """
dev = sys.argv[1] if len(sys.argv) > 1 else "cpu"
dist.init_process_group(backend="nccl" if dev == "cuda" else "mpi", timeout=30)
r, n = dist.get_rank(), dist.get_world_size()
comm = dist.get_communicator()
fails = []
DTYPES = ["float32", "float64", "int32", "int64", "float16", "bfloat16", "bool"]
OPS = ["SUM", "AVG", "MAX", "MIN", "PRODUCT"]

def values(rank, dt):
    base = np.array([[1, 2, 3], [4, 5, 6]])
    if dt == "bool":
        return (base + rank) % 2 == 0
    return (base * (rank + 1)) % 5 + 1  # small integers: exact in every dtype

def make(a, dt):
    return st.tensor(a, dtype=getattr(st, dt), device=dev)

def host(t):
    t = t.detach().cpu()
    return (t.float() if t.dtype is st.bfloat16 else t).numpy().astype(np.float64)

def expect(op, dt, ranks=None):
    a = np.stack([values(q, dt) for q in (ranks or range(n))]).astype(np.float64)
    if dt == "bool":
        return (a.max(0) if op in ("SUM", "MAX") else a.min(0))
    return {"SUM": a.sum(0), "AVG": a.mean(0), "MAX": a.max(0), "MIN": a.min(0),
            "PRODUCT": a.prod(0)}[op]

def check(what, got, want):
    if not np.allclose(got, want, rtol=1e-2):
        fails.append(f"{what}: got {np.asarray(got).tolist()} want {np.asarray(want).tolist()}")

# all_reduce: every op x dtype, blocking, then all of them in flight at once
pending = []
for dt in DTYPES:
    for op in OPS:
        if op == "AVG" and dt in ("int32", "int64", "bool"):
            continue
        t = make(values(r, dt), dt)
        v0 = t._storage.version
        dist.all_reduce(t, op=getattr(dist.ReduceOp, op))
        check(f"all_reduce {op} {dt}", host(t), expect(op, dt))
        if t._storage.version == v0:
            fails.append(f"all_reduce {op} {dt}: version not bumped")
        u = make(values(r, dt), dt)
        pending.append((u, dist.all_reduce(u, op=getattr(dist.ReduceOp, op), async_op=True),
                        op, dt))
for u, w, op, dt in pending:
    if w.wait() is not True:
        fails.append("wait() should return True")
    check(f"async all_reduce {op} {dt}", host(u), expect(op, dt))
    if not w.is_completed():
        fails.append("is_completed after wait")

# non-contiguous, 0-d and empty tensors; a parameter (requires_grad)
t = make(values(r, "float32"), "float32").t()
dist.all_reduce(t)
check("transposed", host(t), expect("SUM", "float32").T)
t = st.tensor(float(r + 1), device=dev)
dist.all_reduce(t, op="max")
check("0-d", host(t), float(n))
t = st.zeros(0, device=dev)
dist.all_reduce(t)
p = st.full((3,), float(r), device=dev, requires_grad=True)
dist.broadcast(p, src=n - 1)
check("broadcast parameter", host(p), np.full(3, n - 1.0))

for dt in DTYPES:
    for src in range(n):
        t = make(values(r, dt), dt)
        w = dist.broadcast(t, src=src, async_op=(src % 2 == 1))
        if w is not None:
            w.wait()
        check(f"broadcast {dt} from {src}", host(t), values(src, dt).astype(np.float64))
    t = make(values(r, dt), dt)
    dist.reduce(t, dst=n - 1, op="max")
    check(f"reduce {dt}", host(t), expect("MAX", dt) if r == n - 1 else values(r, dt))
    outs = [make(np.zeros((2, 3)), dt) for _ in range(n)]
    dist.all_gather(outs, make(values(r, dt), dt))
    for q in range(n):
        check(f"all_gather {dt} [{q}]", host(outs[q]), values(q, dt).astype(np.float64))
    gl = [make(np.zeros((2, 3)), dt) for _ in range(n)] if r == 0 else None
    dist.gather(make(values(r, dt), dt), gl, dst=0)
    if r == 0:
        for q in range(n):
            check(f"gather {dt} [{q}]", host(gl[q]), values(q, dt).astype(np.float64))
    t = make(np.zeros((2, 3)), dt)
    sl = [make(values(q + 7, dt), dt) for q in range(n)] if r == 1 else None
    dist.scatter(t, sl, src=1)
    check(f"scatter {dt}", host(t), values(r + 7, dt).astype(np.float64))

for op in ("SUM", "AVG", "MIN"):
    out = make(np.zeros((2, 3)), "float32")
    ins = [make(values(r + q, "float32"), "float32") for q in range(n)]
    dist.reduce_scatter(out, ins, op=op)
    a = np.stack([values(q + r, "float32") for q in range(n)]).astype(np.float64)
    want = {"SUM": a.sum(0), "AVG": a.mean(0), "MIN": a.min(0)}[op]
    check(f"reduce_scatter {op}", host(out), want)

# point to point: a ring, tensors and numpy buffers
x = make(values(r, "float64"), "float64")
y = make(np.zeros((2, 3)), "float64")
ws = [dist.isend(x, dst=(r + 1) % n, tag=3), dist.irecv(y, src=(r - 1) % n, tag=3)]
for w in ws:
    w.wait()
check("isend/irecv", host(y), values((r - 1) % n, "float64"))
if r == 0:
    dist.send(make(values(5, "int64"), "int64"), dst=n - 1, tag=9)
elif r == n - 1:
    z = make(np.zeros((2, 3)), "int64")
    sender = dist.recv(z, tag=9)
    if sender != 0:
        fails.append(f"recv returned {sender}")
    check("recv any source", host(z), values(5, "int64"))
buf = np.full(4, float(r), np.float32)
got = np.zeros(4, np.float32)
ws = [comm.isend_array(buf, (r + 1) % n, 5), comm.irecv_array(got, (r - 1) % n, 5)]
for w in ws:
    w.wait()
check("isend_array", got, np.full(4, (r - 1) % n))

# buffers for DistOpt, and the bytes accounting (ring all-reduce: 2 (n - 1) / n of the payload)
h = np.full(1000, r + 1.0, np.float16)
before = comm.bytes_sent
comm.allreduce_array(h, dist.ReduceOp.AVG)
check("allreduce_array float16", h, np.full(1000, (n + 1) / 2))
if comm.bytes_sent - before != 2 * (n - 1) * 2000 // n:
    fails.append(f"bytes_sent grew by {comm.bytes_sent - before}")
a32 = np.arange(10, dtype=np.float32) * (r + 1)
comm.allreduce_array(a32, async_op=True).wait()
check("allreduce_array async", a32, np.arange(10) * n * (n + 1) / 2)

# groups (every rank creates each; non-members get rank -1 and no-op collectives)
if n == 4:
    even, odd = dist.new_group([0, 2]), dist.new_group([3, 1])
    mine, other = (even, odd) if r % 2 == 0 else (odd, even)
    if (dist.get_rank(mine), dist.get_rank(other)) != (mine.ranks.index(r), -1):
        fails.append(f"group ranks {dist.get_rank(mine)} {dist.get_rank(other)}")
    if dist.get_world_size(mine) != 2:
        fails.append("group size")
    t = make(values(r, "float32"), "float32")
    dist.all_reduce(t, group=mine)
    check("group all_reduce", host(t), expect("SUM", "float32", list(mine.ranks)))
    if dist.all_reduce(make(values(r, "float32"), "float32"), group=other) is not None:
        fails.append("non-member all_reduce should return None")
    t = make(values(r, "int32"), "int32")
    dist.broadcast(t, src=mine.ranks[1], group=mine)
    check("group broadcast", host(t), values(mine.ranks[1], "int32"))
    dist.barrier(mine)
    if r in odd.ranks:
        z = make(np.zeros((2, 3)), "float32")
        if r == 1:
            dist.send(make(values(11, "float32"), "float32"), dst=3, group=odd)
        else:
            if dist.recv(z, src=1, group=odd) != 1:
                fails.append("group recv sender")
            check("group send/recv", host(z), values(11, "float32"))
dist.barrier()
report({"fails": fails, "n": n, "local": dist.get_local_rank()})
dist.destroy_process_group()
"""


def _check(out, n):
    assert sorted(out) == list(range(n))
    for r in range(n):
        assert out[r]["n"] == n
        assert out[r]["fails"] == [], f"rank {r}: " + "\n".join(out[r]["fails"][:20])
    assert sorted(out[r]["local"] for r in range(n)) == list(range(n))


def test_collectives_two_ranks():
    out, _ = run(2, BODY, timeout=60)
    _check(out, 2)


def test_collectives_four_ranks_and_groups():
    out, _ = run(4, BODY, timeout=90)
    _check(out, 4)


@pytest.mark.skipif(not real_gpu(), reason="no CUDA device: NCCL backend not run")
def test_collectives_nccl():  # pragma: no cover - needs GPUs
    import cupy

    n = min(2, cupy.cuda.runtime.getDeviceCount())
    out, _ = run(n, BODY, timeout=120, args=["cuda"])
    _check(out, n)


def _nccl_usable() -> bool:
    if not real_gpu():
        return False
    try:
        from cupy.cuda import nccl  # noqa: F401
    except ImportError:
        return False
    return True


@pytest.mark.skipif(not _nccl_usable(), reason="no CUDA device with NCCL: NCCL backend not run")
def test_nccl_calls_on_one_gpu():  # pragma: no cover - needs a GPU
    # One GPU cannot host two NCCL ranks, and the collectives skip the wire on one rank, so
    # this drives the backend's own calls through a world of one: every NCCL collective, every
    # dtype and op, the event-polled Work and the device staging
    import numpy as np

    import singa_tensor.distributed as dist
    from singa_tensor.distributed import ReduceOp

    dist.init_process_group(backend="nccl", timeout=30)
    comm = dist.get_communicator()
    assert comm.backend == "nccl" and comm.size == 1
    base = np.array([[1, 2, 3], [4, 5, 6]])
    for dt in ("float32", "float64", "int32", "int64", "float16", "bfloat16", "bool"):
        dtype = getattr(st, dt)
        a = base % 2 == 0 if dt == "bool" else base
        for op in ReduceOp:
            if op is ReduceOp.AVG and dt in ("int32", "int64", "bool"):
                continue
            t = st.tensor(a, dtype=dtype, device="cuda")
            buf, back = comm._stage(t, True)
            assert comm._on_gpu(buf)
            assert comm._allreduce("all_reduce", buf, op, dtype).wait() is True
            if back is not None:
                back()
            assert t.cpu().float().tolist() == st.tensor(a, dtype=dtype).float().tolist(), \
                (dt, op)
        t = st.tensor(a, dtype=dtype, device="cuda")
        buf, _ = comm._stage(t, True)
        comm._bcast("broadcast", buf, 0).wait()
        comm._reduce("reduce", buf, ReduceOp.MAX, 0, dtype).wait()
        recv = comm._empty(buf, (1,) + tuple(buf.shape))
        comm._allgather("all_gather", buf, recv).wait()
        assert (recv[0] == buf).all()
        out = comm._empty(buf, tuple(buf.shape))
        comm._reduce_scatter("reduce_scatter", recv, out, ReduceOp.SUM, dtype).wait()
        assert (out == buf).all()
        assert t.cpu().float().tolist() == st.tensor(a, dtype=dtype).float().tolist(), dt
    import cupy

    arr = cupy.arange(6, dtype=cupy.float32)
    comm.allreduce_array(arr, op="avg")
    assert arr.tolist() == list(range(6))
    dist.destroy_process_group()
