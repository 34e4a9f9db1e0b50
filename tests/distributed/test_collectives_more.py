"""The rest of torch.distributed's calls on 2 and 4 ranks: all_to_all(_single) with uneven
splits, all_gather_into_tensor, reduce_scatter_tensor, batch_isend_irecv, the object
collectives, monitored_barrier, get_backend and friends; their error paths; the refusal of a
torchrun-style launch and init_process_group's PyTorch arguments."""

import os
import subprocess
import sys
import time

import pytest

import singa_tensor as st
import singa_tensor.distributed as dist

from .mpi_run import needs_mpi, run

BODY = """
dist.init_process_group(backend="mpi", timeout=30)
r, n = dist.get_rank(), dist.get_world_size()
fails = []

def check(what, got, want):
    if not np.array_equal(np.asarray(got, np.float64), np.asarray(want, np.float64)):
        fails.append(f"{what}: got {np.asarray(got).tolist()} want {np.asarray(want).tolist()}")

def rows(src, dst, count):  # what rank src sends rank dst: count rows of 2 columns
    # small integers: exact in bfloat16 too
    return np.full((count, 2), 32 * src + 4 * dst, np.float64) + np.arange(count)[:, None]

# all_to_all_single, uneven: rank s sends s + d + 1 rows to rank d (0 rows from 0 to 0 on
# purpose for n == 4: one empty split)
def count(s, d):
    return 0 if (s, d) == (0, 0) and n == 4 else s + d + 1
for dt in ("float32", "int64", "bfloat16", "bool"):
    ins = [count(r, d) for d in range(n)]
    outs = [count(s, r) for s in range(n)]
    src = np.concatenate([rows(r, d, c) for d, c in enumerate(ins)])
    want = np.concatenate([rows(s, r, c) for s, c in enumerate(outs)])
    if dt == "bool":
        src, want = src % 2 == 0, want % 2 == 0
    out = st.zeros((sum(outs), 2), dtype=getattr(st, dt))
    w = dist.all_to_all_single(out, st.tensor(src, dtype=getattr(st, dt)), outs, ins,
                               async_op=(dt == "int64"))
    if dt == "int64":
        w.wait()
    check(f"all_to_all_single {dt}", out.float().numpy(), want)
# even splits, a non-contiguous output written back
out = st.zeros(2, 2 * n).t()
dist.all_to_all_single(out, st.tensor(np.arange(2 * n * 2).reshape(2 * n, 2) + 100.0 * r,
                                      dtype=st.float32))
want = np.concatenate([np.arange(2 * n * 2).reshape(2 * n, 2)[2 * r:2 * r + 2] + 100.0 * s
                       for s in range(n)])
check("all_to_all_single even, transposed output", out.numpy(), want)

# all_to_all: per-pair sizes and shapes differ
outs = [st.zeros(s + 1, 2) for s in range(n)]
ins = [st.tensor(rows(r, d, r + 1)).float().reshape(-1) for d in range(n)]
w = dist.all_to_all(outs, ins, async_op=True)
w.wait()
for s in range(n):
    check(f"all_to_all from {s}", outs[s].numpy(), rows(s, r, s + 1))

# all_gather_into_tensor: concatenated and stacked outputs
x = st.tensor(rows(r, 0, 2)).float()
cat = st.zeros(2 * n, 2)
dist.all_gather_into_tensor(cat, x)
check("all_gather_into_tensor cat", cat.numpy(), np.concatenate([rows(s, 0, 2) for s in range(n)]))
stk = st.zeros(n, 2, 2, dtype=st.float16)
dist.all_gather_into_tensor(stk, x.to(st.float16), async_op=True).wait()
check("all_gather_into_tensor stacked", stk.float().numpy(), np.stack([rows(s, 0, 2)
                                                                    for s in range(n)]))

# reduce_scatter_tensor: SUM, AVG, MAX
big = np.arange(n * 3, dtype=np.float64).reshape(n, 3) * (r + 1)
for op, fn in (("SUM", lambda a: a.sum(0)), ("AVG", lambda a: a.mean(0)),
               ("MAX", lambda a: a.max(0))):
    out = st.zeros(3, dtype=st.float64)
    dist.reduce_scatter_tensor(out, st.tensor(big.reshape(-1)), op=getattr(dist.ReduceOp, op))
    allr = np.stack([np.arange(n * 3).reshape(n, 3)[r] * (q + 1) for q in range(n)])
    check(f"reduce_scatter_tensor {op}", out.numpy(), fn(allr))
out = st.zeros(1, 3, dtype=st.int32)
dist.reduce_scatter_tensor(out, st.ones(n, 1, 3, dtype=st.int32), async_op=True).wait()
check("reduce_scatter_tensor stacked", out.numpy(), np.full((1, 3), n))

# batch_isend_irecv: a ring in both directions, receives listed first
left, right = (r - 1) % n, (r + 1) % n
a, b = st.zeros(3), st.zeros(2, dtype=st.int64)
works = dist.batch_isend_irecv([
    dist.P2POp(dist.irecv, a, left, tag=1), dist.P2POp(dist.irecv, b, right, tag=2),
    dist.P2POp(dist.isend, st.full((3,), float(r)), right, tag=1),
    dist.P2POp(dist.isend, st.full((2,), r * 10, dtype=st.int64), left, tag=2)])
if len(works) != 4:
    fails.append(f"batch_isend_irecv returned {len(works)} works")
for w in works:
    w.wait()
check("batch recv from left", a.numpy(), np.full(3, left))
check("batch recv from right", b.numpy(), np.full(2, right * 10))

# object collectives with nested values
def payload(q):
    return {"rank": q, "nested": [(q, None, True), {"s": "é" * q, b"k": 2.5 + q * 1j}],
            "t": st.full((2,), float(q), dtype=st.bfloat16), "a": np.arange(q + 1)}

def same(x, y):
    if isinstance(x, st.Tensor):
        return isinstance(y, st.Tensor) and x.dtype is y.dtype and \\
            x.float().tolist() == y.float().tolist()
    if isinstance(x, np.ndarray):
        return isinstance(y, np.ndarray) and x.dtype == y.dtype and np.array_equal(x, y)
    if isinstance(x, dict):
        return type(y) is dict and x.keys() == y.keys() and all(same(x[k], y[k]) for k in x)
    if isinstance(x, (list, tuple)):
        return type(x) is type(y) and len(x) == len(y) and all(map(same, x, y))
    return type(x) is type(y) and x == y

objs = [payload(r), "x" * r] if r == n - 1 else [None, None]
dist.broadcast_object_list(objs, src=n - 1)
if not same(objs, [payload(n - 1), "x" * (n - 1)]):
    fails.append(f"broadcast_object_list: {objs}")
got = [None] * n
dist.all_gather_object(got, payload(r))
if not all(same(got[q], payload(q)) for q in range(n)):
    fails.append(f"all_gather_object: {got}")
got = [None] * n if r == 1 else None
dist.gather_object(payload(r), got, dst=1)
if r == 1 and not all(same(got[q], payload(q)) for q in range(n)):
    fails.append(f"gather_object: {got}")
out = [None]
dist.scatter_object_list(out, [payload(q) for q in range(n)] if r == 0 else None, src=0)
if not same(out[0], payload(r)):
    fails.append(f"scatter_object_list: {out}")

# a refused type: TypeError on its rank, DistributedError naming it elsewhere; group usable
class Opaque:
    pass

def refusal(key, fn, bad_rank):
    try:
        fn()
        fails.append(f"{key}: no error")
    except TypeError as e:
        if r != bad_rank or "Opaque" not in str(e) or not str(e).startswith(key):
            fails.append(f"{key}: TypeError on rank {r}: {e}")
    except dist.DistributedError as e:
        if r == bad_rank or f"rank {bad_rank} could not send" not in str(e) or \\
                not str(e).startswith(key):
            fails.append(f"{key}: DistributedError on rank {r}: {e}")
bad = n - 1
refusal("broadcast_object_list", lambda: dist.broadcast_object_list(
    [1, Opaque()] if r == bad else [None, None], src=bad), bad)
refusal("all_gather_object", lambda: dist.all_gather_object(
    [None] * n, [Opaque()] if r == bad else [1]), bad)
refusal("gather_object", lambda: dist.gather_object(
    {"x": Opaque()} if r == bad else 1, [None] * n if r == 0 else None, dst=0), bad)
refusal("scatter_object_list", lambda: dist.scatter_object_list(
    [None], [1] * (n - 1) + [Opaque()] if r == 0 else None, src=0), 0)
got = [None] * n
dist.all_gather_object(got, r)
check("all_gather_object after refusals", got, list(range(n)))

# queries
if dist.get_backend() != "mpi" or dist.get_process_group_ranks(None) != list(range(n)):
    fails.append(f"get_backend {dist.get_backend()} / ranks {dist.get_process_group_ranks(None)}")
if not (dist.is_available() and dist.is_mpi_available()):
    fails.append("is_available")
dist.monitored_barrier(timeout=20)
dist.monitored_barrier(timeout=20, wait_all_ranks=True)

# groups: the same calls inside [0, 2] and [1, 3]; non-members do nothing
if n == 4:
    even, odd = dist.new_group([0, 2]), dist.new_group([3, 1])
    mine, other = (even, odd) if r % 2 == 0 else (odd, even)
    if dist.get_process_group_ranks(odd) != [1, 3] or dist.get_backend(mine) != "mpi":
        fails.append(f"group ranks {dist.get_process_group_ranks(odd)}")
    out = st.zeros(3)
    me = mine.ranks.index(r)
    dist.all_to_all_single(out, st.tensor([r, r, r + 0.5]), [1 + me, 2 - me], [1 + me, 2 - me],
                           group=mine)
    pr = mine.ranks[1 - me]
    want = [r, pr, pr] if me == 0 else [pr, pr + 0.5, r + 0.5]
    check("group all_to_all_single", out.numpy(), want)
    if dist.all_to_all_single(st.zeros(2), st.zeros(2), group=other) is not None:
        fails.append("non-member all_to_all_single should return None")
    cat = st.zeros(2)
    dist.all_gather_into_tensor(cat, st.tensor([float(r)]), group=mine)
    check("group all_gather_into_tensor", cat.numpy(), list(mine.ranks))
    got = [None, None]
    dist.all_gather_object(got, {"r": r}, group=mine)
    if got != [{"r": q} for q in mine.ranks]:
        fails.append(f"group all_gather_object {got}")
    objs = [r] if r == mine.ranks[1] else [None]
    dist.broadcast_object_list(objs, src=mine.ranks[1], group=mine)
    check("group broadcast_object_list", objs, [mine.ranks[1]])
    t = st.zeros(1)
    peer = mine.ranks[1 - me]
    for w in dist.batch_isend_irecv([dist.P2POp(dist.isend, st.tensor([float(r)]), peer, mine),
                                     dist.P2POp(dist.irecv, t, peer, mine)]):
        w.wait()
    check("group batch_isend_irecv", t.numpy(), [peer])
    dist.monitored_barrier(mine, timeout=20)
dist.barrier()
report({"fails": fails, "n": n})
dist.destroy_process_group()
"""

ERRORS = """
dist.init_process_group(timeout=20)
r, n = dist.get_rank(), dist.get_world_size()
res = {}
def attempt(key, fn):
    try:
        fn()
        res[key] = "ok"
    except Exception as e:
        res[key] = type(e).__name__ + ": " + str(e)
Z = st.zeros
attempt("splits_mismatch", lambda: dist.all_to_all_single(Z(4), Z(4), [1, 3] if r else [2, 2],
                                                          [2, 2]))
attempt("splits_sum", lambda: dist.all_to_all_single(Z(4), Z(4), [1, 1], [2, 2]))
attempt("splits_len", lambda: dist.all_to_all_single(Z(4), Z(4), [4], [2, 2]))
attempt("uneven_default", lambda: dist.all_to_all_single(Z(3), Z(3)))
attempt("trailing", lambda: dist.all_to_all_single(Z(2, 3), Z(2, 2)))
D = st.float64 if r else st.float32
attempt("a2a_dtype_ranks", lambda: dist.all_to_all_single(Z(2, dtype=D), Z(2, dtype=D)))
attempt("a2a_list_len", lambda: dist.all_to_all([Z(1)], [Z(1), Z(1)]))
attempt("a2a_list_dtype", lambda: dist.all_to_all([Z(1), Z(1)], [Z(1), Z(1, dtype=st.int32)]))
attempt("a2a_sizes", lambda: dist.all_to_all([Z(1), Z(2)], [Z(1), Z(1)]))
attempt("a2a_not_tensor", lambda: dist.all_to_all([Z(1), [0.0]], [Z(1), Z(1)]))
attempt("agit_shape", lambda: dist.all_gather_into_tensor(Z(3, 2), Z(2, 2)))
attempt("agit_dtype", lambda: dist.all_gather_into_tensor(Z(4, dtype=st.int64), Z(2)))
attempt("agit_ranks", lambda: dist.all_gather_into_tensor(Z(2 * (2 + r)), Z(2 + r)))
attempt("rst_shape", lambda: dist.reduce_scatter_tensor(Z(2), Z(5)))
attempt("rst_avg_int", lambda: dist.reduce_scatter_tensor(Z(1, dtype=st.int64),
                                                          Z(2, dtype=st.int64), op="avg"))
attempt("rst_op", lambda: dist.reduce_scatter_tensor(Z(1), Z(2), op="median"))
attempt("p2p_op", lambda: dist.P2POp(dist.send, Z(1), 1 - r))
attempt("p2p_tensor", lambda: dist.P2POp(dist.isend, [1.0], 1 - r))
attempt("batch_empty", lambda: dist.batch_isend_irecv([]))
attempt("batch_self", lambda: dist.batch_isend_irecv([dist.P2POp(dist.isend, Z(1), r)]))
attempt("batch_range", lambda: dist.batch_isend_irecv([dist.P2POp(dist.isend, Z(1), 7)]))
attempt("obj_list_len", lambda: dist.all_gather_object([None], 1))
attempt("obj_not_list", lambda: dist.broadcast_object_list((1, 2)))
attempt("obj_count_ranks", lambda: dist.broadcast_object_list([None] * (1 + r)))
attempt("scatter_out_empty", lambda: dist.scatter_object_list([], [1, 2]))
attempt("mb_timeout", lambda: dist.monitored_barrier(timeout=-1))
attempt("after", lambda: dist.all_to_all_single(Z(2), Z(2)))
for who in range(n):
    if who == r:
        report(res)
    dist.barrier()
"""


def _check(out, n):
    assert sorted(out) == list(range(n))
    for r in range(n):
        assert out[r]["n"] == n
        assert out[r]["fails"] == [], f"rank {r}: " + "\n".join(out[r]["fails"][:20])


@needs_mpi
def test_more_collectives_two_ranks():
    out, _ = run(2, BODY, timeout=90)
    _check(out, 2)


@needs_mpi
def test_more_collectives_four_ranks_and_groups():
    out, _ = run(4, BODY, timeout=150)
    _check(out, 4)


@needs_mpi
def test_argument_errors_and_mismatches():
    out, _ = run(2, ERRORS, timeout=90)
    for r in (0, 1):
        res = out[r]
        assert res["splits_mismatch"].startswith(
            "DistributedError: all_to_all_single: the ranks' split sizes do not match:")
        assert "rank 1 expects 1 rows from rank 0, which sends 2" in res["splits_mismatch"]
        assert res["splits_sum"] == (
            "ValueError: all_to_all_single: output_split_sizes [1, 1] must be 2 non-negative "
            "sizes (one per rank) that add up to dim 0 (4)")
        assert res["splits_len"].startswith("ValueError: all_to_all_single: output_split_sizes "
                                            "[4] must be 2")
        assert res["uneven_default"].startswith(
            "ValueError: all_to_all_single: input_split_sizes not given, so dim 0 (3) must "
            "divide evenly among 2 ranks")
        assert res["trailing"].startswith("ValueError: all_to_all_single: output (shape (2, 3)")
        assert res["a2a_dtype_ranks"].startswith(
            "DistributedError: all_to_all_single: the ranks called it with different arguments")
        assert "dtype float64" in res["a2a_dtype_ranks"]
        assert res["a2a_list_len"].startswith(
            "ValueError: all_to_all: output_tensor_list must be a list of 2 tensors")
        assert res["a2a_list_dtype"].startswith(
            "ValueError: all_to_all: input_tensor_list[1] is int32 on cpu, expected float32")
        assert res["a2a_sizes"].startswith(
            "DistributedError: all_to_all: the ranks' split sizes do not match:")
        assert f"rank {r} expects 2 elements from rank 1, which sends 1" in res["a2a_sizes"]
        assert res["a2a_not_tensor"] == ("TypeError: all_to_all: output_tensor_list[1] must be "
                                         "a Tensor, got list")
        assert res["agit_shape"].startswith(
            "ValueError: all_gather_into_tensor: output_tensor has shape (3, 2), expected "
            "(4, 2) or (2, 2, 2)")
        assert res["agit_dtype"] == ("ValueError: all_gather_into_tensor: output_tensor is "
                                     "int64, input_tensor float32; they need one dtype")
        assert res["agit_ranks"].startswith("DistributedError: all_gather_into_tensor: the "
                                            "ranks called it with different arguments")
        assert res["rst_shape"].startswith("ValueError: reduce_scatter_tensor: input has shape "
                                           "(5,), expected (4,) or (2, 2)")
        assert res["rst_avg_int"].startswith("TypeError: reduce_scatter_tensor: ReduceOp.AVG "
                                             "needs a floating-point tensor")
        assert res["rst_op"].startswith("TypeError: reduce_scatter_tensor: op must be a "
                                        "dist.ReduceOp")
        assert res["p2p_op"].startswith("ValueError: P2POp: op must be dist.isend or "
                                        "dist.irecv")
        assert res["p2p_tensor"] == "TypeError: P2POp: tensor must be a Tensor, got list"
        assert res["batch_empty"].startswith("ValueError: batch_isend_irecv: expected a "
                                             "non-empty list of dist.P2POp")
        assert res["batch_self"].startswith(f"ValueError: batch_isend_irecv: op 0 (send) has "
                                            f"peer={r}, this rank")
        assert res["batch_range"].startswith("ValueError: batch_isend_irecv: op 0 (send): "
                                             "peer=7 is not a rank of")
        assert res["obj_list_len"] == ("ValueError: all_gather_object: object_list must have "
                                       "2 entries (one per rank), got 1")
        assert res["obj_not_list"] == ("TypeError: broadcast_object_list: object_list must be "
                                       "a list, got tuple")
        assert res["obj_count_ranks"].startswith(
            "DistributedError: broadcast_object_list: the ranks called it with different")
        assert res["scatter_out_empty"].startswith(
            "ValueError: scatter_object_list: scatter_object_output_list must have at least "
            "one entry")
        assert res["mb_timeout"] == "ValueError: monitored_barrier: timeout must be positive, " \
                                    "got -1.0"
        assert res["after"] == "ok"


MONITORED = """
import time
dist.init_process_group(timeout=30)
r, n = dist.get_rank(), dist.get_world_size()
msgs = []
for wait_all in (True, False):
    dist.barrier()
    if r in (1, 3):
        time.sleep(4)  # far past the barrier's limit below
    try:
        dist.monitored_barrier(timeout=1, wait_all_ranks=wait_all)
        msgs.append("ok")
    except dist.DistributedError as e:
        msgs.append(str(e))
dist.barrier()
dist.monitored_barrier(timeout=30)  # everyone on time: the group still works
msgs.append("after")
report(msgs)
"""


@needs_mpi
def test_monitored_barrier_names_the_late_ranks():
    out, _ = run(4, MONITORED, timeout=90)
    for r in range(4):
        # the ranks that arrived hear it from rank 0; the late ones when they arrive
        assert out[r] == ["monitored_barrier: ranks 1, 3 did not arrive within 1.0 s",
                          "monitored_barrier: rank 1 did not arrive within 1.0 s", "after"], \
            (r, out[r])


@needs_mpi
def test_a_silent_peer_times_out_all_to_all_single():
    body = """
    import time
    dist.init_process_group(timeout=2)
    if dist.get_rank() == 1:
        time.sleep(30)
    try:
        dist.all_to_all_single(st.zeros(2), st.ones(2))
    except dist.DistributedError as e:
        report({"msg": str(e)})
        raise
    """
    start = time.monotonic()
    out, proc = run(2, body, timeout=45, check=False)
    assert proc.returncode != 0
    assert out[0]["msg"].startswith("all_to_all_single: no reply from the other ranks within "
                                    "2.0 s")
    assert time.monotonic() - start < 25, "rank 0 should abort the job before rank 1 wakes up"


def test_a_torchrun_launch_is_refused():
    code = ("import singa_tensor.distributed as dist\n"
            "try:\n"
            "    dist.init_process_group()\n"
            "except RuntimeError as e:\n"
            "    print('ERR', e)\n"
            "else:\n"
            "    print('JOINED', dist.get_world_size())\n")
    env = dict(os.environ, RANK="1", WORLD_SIZE="2", LOCAL_RANK="1", MASTER_ADDR="127.0.0.1",
               MASTER_PORT="29500")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=60, env=env)
    assert p.returncode == 0, p.stderr
    out = p.stdout
    assert out.startswith("ERR init_process_group: RANK=1 and WORLD_SIZE=2 are set"), out
    assert "mpiexec" in out and "python -m singa_tensor.distributed.run" in out
    # a world of one stays allowed
    env.update(RANK="0", WORLD_SIZE="1")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=60, env=env)
    assert p.stdout.strip() == "JOINED 1", p.stdout + p.stderr


@pytest.fixture
def no_launcher_env(monkeypatch):
    for var in ("RANK", "WORLD_SIZE", "LOCAL_RANK"):
        monkeypatch.delenv(var, raising=False)
    return monkeypatch


def test_init_process_group_accepts_pytorchs_spelling(no_launcher_env):
    import datetime

    dist.init_process_group(backend="MPI", init_method="env://", world_size=1, rank=0,
                            timeout=datetime.timedelta(seconds=12), group_name="g")
    assert dist.get_communicator().timeout == 12.0 and dist.get_backend() == "mpi"
    dist.destroy_process_group()
    dist.init_process_group("mpi", 7)  # the older (backend, timeout) positional form
    assert dist.get_communicator().timeout == 7.0
    dist.destroy_process_group()
    no_launcher_env.setenv("RANK", "0")
    no_launcher_env.setenv("WORLD_SIZE", "1")
    dist.init_process_group(init_method="env://")
    assert dist.get_world_size() == 1
    dist.destroy_process_group()


@pytest.mark.parametrize("kwargs, exc, msg", [
    ({"init_method": "tcp://10.0.0.1:23456"}, ValueError,
     "init_process_group: init_method='tcp://10.0.0.1:23456' is not supported"),
    ({"init_method": "file:///tmp/x"}, ValueError, "init_method='file:///tmp/x' is not supported"),
    ({"store": object()}, ValueError, "init_process_group: store= is not supported"),
    ({"pg_options": object()}, ValueError, "pg_options= is not supported"),
    ({"world_size": 4}, RuntimeError, "init_process_group: world_size=4, but MPI reports 1"),
    ({"rank": 2}, RuntimeError, "init_process_group: rank=2, but MPI reports 0"),
    ({"rank": "0"}, TypeError, "init_process_group: rank must be an int, got str"),
    ({"backend": "gloo"}, ValueError, "backend must be 'auto', 'mpi' or 'nccl', got 'gloo'"),
    ({"device_id": "cpu", "backend": "mpi"}, ValueError, "device_id must be a CUDA device"),
    ({"init_method": 5, "timeout": 5}, TypeError, "init_method must be a str, got int"),
])
def test_init_process_group_refuses_what_mpi_cannot_do(no_launcher_env, kwargs, exc, msg):
    with pytest.raises(exc) as e:
        dist.init_process_group(**kwargs)
    assert msg in str(e.value)
    assert not dist.is_initialized()


def test_env_init_method_must_agree_with_mpi(no_launcher_env):
    no_launcher_env.setenv("RANK", "3")
    no_launcher_env.setenv("WORLD_SIZE", "1")
    with pytest.raises(RuntimeError, match=r"init_method='env://' has \$RANK=3, but MPI "
                                           r"reports 0"):
        dist.init_process_group(init_method="env://")
    no_launcher_env.setenv("WORLD_SIZE", "two")
    with pytest.raises(RuntimeError, match=r"\$WORLD_SIZE='two' is not an integer"):
        dist.init_process_group()


def test_world_of_one_queries_and_get_backend_errors():
    dist.init_process_group(backend="mpi")
    assert dist.get_backend() == "mpi" and dist.get_process_group_ranks(None) == [0]
    assert dist.is_available() is True and isinstance(dist.is_nccl_available(), bool)
    with pytest.raises(TypeError, match="group must be a dist.Group"):
        dist.get_backend("world")
    out = st.zeros(2, 2)
    with pytest.raises(ValueError, match="all_to_all_single: output has 2 rows, input 3"):
        dist.all_to_all_single(out, st.zeros(3, 2), [2], [3])
    with pytest.raises(TypeError, match="monitored_barrier: timeout must be seconds"):
        dist.monitored_barrier(timeout="soon")


def _nccl_usable() -> bool:
    from ..helpers import real_gpu

    if not real_gpu():
        return False
    try:
        from cupy.cuda import nccl  # noqa: F401
    except ImportError:
        return False
    return True


@pytest.mark.skipif(not _nccl_usable(), reason="no CUDA device with NCCL: NCCL backend not run")
def test_nccl_alltoallv_and_single_tensor_calls_on_one_gpu():  # pragma: no cover - needs a GPU
    # one GPU hosts one NCCL rank: this drives the backend's all-to-all primitive (its local
    # copy and an empty NCCL group) and the single-tensor calls on device tensors
    dist.init_process_group(backend="nccl", timeout=30)
    comm = dist.get_communicator()
    t = st.arange(6, dtype=st.float32, device="cuda")
    send, _ = comm._stage(t, False)
    recv = comm._empty(send, (6,))
    assert comm._on_gpu(send)
    comm._alltoallv("all_to_all", send, [6], recv, [6]).wait()
    assert recv.tolist() == list(range(6))
    out = st.zeros(6, device="cuda")
    dist.all_to_all_single(out, t)
    assert out.cpu().tolist() == list(range(6))
    out = st.zeros(1, 6, device="cuda")
    dist.all_gather_into_tensor(out, t)
    dist.reduce_scatter_tensor(t, out)
    assert t.cpu().tolist() == list(range(6))
    dist.destroy_process_group()
