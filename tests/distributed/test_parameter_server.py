"""The parameter server: BSP matches single-process training, Downpour/SSP/worker groups
converge, SSP respects its staleness bound, bad arguments and silent peers raise."""

from __future__ import annotations

import pytest

from singa_tensor import nn, optim
from singa_tensor.distributed.parameter_server import ParameterServer, plan_slices

from .mpi_run import needs_mpi, run

# Shared by the MPI bodies: a tiny regression problem, a BSP run checked against plain SGD on
# the whole batch, and a generic training loop that records losses.
COMMON = """
import time
dist.init_process_group()
from singa_tensor import nn, optim
from singa_tensor.distributed.parameter_server import ParameterServer

rng = np.random.default_rng(0)
X = rng.standard_normal((24, 8)).astype(np.float32)
Y = (X @ rng.standard_normal((8, 2)) + 0.5).astype(np.float32)

def make_model():
    st.manual_seed(dist.get_rank())  # different on each rank: the constructor must sync them
    return nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 2))

def mse(model, x, y):
    return ((model(x) - y) ** 2).mean()

def bsp_vs_single(servers, groups=None):
    model = make_model()
    sgd = lambda p: optim.SGD(p, lr=0.1, momentum=0.9)
    ps = ParameterServer(model, sgd, mode="bsp", servers=servers, groups=groups, timeout=30)
    if ps.is_server:
        ps.run_server()
        return {"version": ps.version}
    ref = make_model()
    with st.no_grad():
        for r, p in zip(ref.parameters(), model.parameters()):
            r.copy_(p.detach())
    workers = ps.world_size - servers
    rows = len(X) // workers
    me = slice(ps.rank * rows, (ps.rank + 1) * rows)
    for _ in range(6):
        ps.step(mse(model, st.tensor(X[me]), st.tensor(Y[me])))
    ps.close()
    opt = sgd(list(ref.parameters()))
    for _ in range(6):
        opt.zero_grad()
        mse(ref, st.tensor(X[:rows * workers]), st.tensor(Y[:rows * workers])).backward()
        opt.step()
    return {"diff": max(float(np.abs(a.detach().numpy() - b.detach().numpy()).max())
                        for a, b in zip(ref.parameters(), model.parameters())),
            "bytes": [ps.last_bytes_sent, ps.bytes_sent],
            "param_bytes": sum(4 * p.numel() for p in model.parameters())}

def gap_range(ps):
    # how far ahead of the slowest group each answered pull was; kept short, as report lines
    # from several ranks share one pipe
    gaps = [c - low for _, c, low in ps.clock_log]
    return [min(gaps), max(gaps)] if gaps else None

def train(mode, steps=25, slow=(), **kw):
    model = make_model()
    ps = ParameterServer(model, lambda p: optim.SGD(p, lr=0.05), mode=mode, timeout=30, **kw)
    if ps.is_server:
        ps.run_server()
        return {"gap": gap_range(ps), "version": ps.version}
    workers = ps.world_size - len(ps.server_ranks)
    x, y = st.tensor(X[ps.rank::workers]), st.tensor(Y[ps.rank::workers])
    losses = []
    for _ in range(steps):
        if ps.rank in slow:
            time.sleep(0.01)
        losses.append(ps.step(mse(model, x, y)))
    ps.close()
    with st.no_grad():
        final = float(mse(model, st.tensor(X), st.tensor(Y)).item())
    return {"first": losses[0], "last": losses[-1], "final": final, "gap": gap_range(ps)}
"""


def _errors(fn) -> str:
    try:
        fn()
    except (ValueError, TypeError) as e:
        return f"{type(e).__name__}: {e}"
    return "no error"


def test_bad_arguments_raise_before_any_message():
    model = nn.Linear(2, 1)
    sgd = lambda p: optim.SGD(p, lr=0.1)  # noqa: E731
    with pytest.raises(ValueError, match="unknown mode 'async'.*bsp, downpour, ssp"):
        ParameterServer(model, sgd, mode="async")
    with pytest.raises(ValueError, match="staleness must be an int >= 0, got -1"):
        ParameterServer(model, sgd, mode="ssp", staleness=-1)
    with pytest.raises(TypeError, match="optimizer_factory must be callable"):
        ParameterServer(model, optim.SGD(model.parameters(), lr=0.1))
    with pytest.raises(TypeError, match="non-empty list of parameter tensors"):
        ParameterServer([], sgd)


def test_plan_slices_balances_and_covers_every_row_once():
    shapes = [(16, 8), (16,), (2, 16), (2,)]
    plan = plan_slices(shapes, 2)
    loads = [sum(s.numel for s in plan if s.server == k) for k in range(2)]
    assert sum(loads) == 16 * 8 + 16 + 32 + 2
    assert max(loads) - min(loads) <= 16  # the big weight was cut by rows to balance
    assert len([s for s in plan if s.param == 0]) > 1
    for p, shape in enumerate(shapes):
        rows = sorted((s.start, s.stop) for s in plan if s.param == p)
        assert rows[0][0] == 0 and rows[-1][1] == shape[0]
        assert all(a[1] == b[0] for a, b in zip(rows, rows[1:]))
    assert [s.index for s in plan] == list(range(len(plan)))
    assert plan_slices([(3,), ()], 3)[1].numel == 1  # a scalar is one row
    with pytest.raises(ValueError, match="need at least one server, got 0"):
        plan_slices(shapes, 0)


@needs_mpi
def test_three_ranks_bsp_downpour_ssp_and_errors():
    body = COMMON + """
model = make_model()
sgd = lambda p: optim.SGD(p, lr=0.1)
errors = []
for kw in ({"servers": 3}, {"servers": 0}, {"groups": 3}):
    try:
        ParameterServer(model, sgd, **kw)
        errors.append("no error")
    except ValueError as e:
        errors.append(str(e))
report({"errors": errors, "bsp": bsp_vs_single(1), "downpour": train("downpour"),
        "ssp": train("ssp", staleness=1, slow=(1,))})
"""
    out, _ = run(3, body, timeout=55)
    assert sorted(out) == [0, 1, 2]
    for rank in range(3):
        errors = out[rank]["errors"]
        assert "servers=3 must be at least 1 and less than the world size 3" in errors[0]
        assert "servers=0 must be at least 1" in errors[1]
        assert "groups=3 must be between 1 and the number of workers 2" in errors[2]
    assert out[2]["bsp"]["version"] == 6
    for rank in (0, 1):
        assert out[rank]["bsp"]["diff"] < 1e-5
        # a step sends a push header, every gradient and a pull header (16 bytes each)
        per_step = 16 + out[rank]["bsp"]["param_bytes"] + 16
        assert out[rank]["bsp"]["bytes"] == [per_step, 6 * per_step + 16]  # + the stop
        for mode in ("downpour", "ssp"):
            r = out[rank][mode]
            assert r["last"] < 0.5 * r["first"], (mode, r)
        # a worker's clock never runs more than `staleness` ahead of the slowest
        assert out[rank]["ssp"]["gap"][1] <= 1
    low, high = out[2]["ssp"]["gap"]
    assert high == 1 and low >= 0  # the bound was reached and held
    assert out[2]["ssp"]["version"] == 50


@needs_mpi
def test_half_precision_parameters_train_in_their_dtype():
    # bfloat16 has no numpy type: parameters and gradients travel as their raw 2-byte
    # elements and the server averages with our ops (float32 accumulation)
    body = COMMON + """
out = {}
for dtype in (st.bfloat16, st.float16):
    model = make_model().to(dtype)
    ps = ParameterServer(model, lambda p: optim.SGD(p, lr=0.05), mode="bsp", timeout=30)
    if ps.is_server:
        ps.run_server()
        out[dtype.name] = {"version": ps.version,
                           "dtypes": sorted({v.dtype.name for v in ps._values})}
        continue
    rows = len(X) // 2
    me = slice(ps.rank * rows, (ps.rank + 1) * rows)
    x, y = st.tensor(X[me]).to(dtype), st.tensor(Y[me]).to(dtype)
    losses = [ps.step(mse(model, x, y)) for _ in range(20)]
    ps.close()
    out[dtype.name] = {"first": losses[0], "last": losses[-1],
                       "dtypes": sorted({p.dtype.name for p in model.parameters()}),
                       "params": [p.float().detach().numpy().tolist() for p in model.parameters()]}
report(out)
"""
    out, _ = run(3, body, timeout=55)
    for name in ("bfloat16", "float16"):
        assert out[2][name] == {"version": 20, "dtypes": [name]}
        for rank in (0, 1):
            r = out[rank][name]
            assert r["dtypes"] == [name]
            assert r["last"] < 0.5 * r["first"], (name, rank, r["first"], r["last"])
        # BSP: both workers hold the server's parameters, bit for bit
        assert out[0][name]["params"] == out[1][name]["params"]


@needs_mpi
def test_a_checkpoint_of_every_rank_resumes_bsp_training_exactly(tmp_path):
    # 3 steps, a checkpoint of every rank (the servers' slices and momentum, the workers'
    # models and clocks), a new ParameterServer loaded from them and 3 more steps: the same
    # parameters as 6 steps without a stop
    body = COMMON + f"""
import os
folder = {str(tmp_path)!r}
sgd = lambda p: optim.SGD(p, lr=0.1, momentum=0.9)
rows = len(X) // 2

def train_bsp(steps, resume=False):
    model = make_model()
    path = os.path.join(folder, f"rank{{dist.get_rank()}}.pt")
    if resume and dist.get_rank() < 2:
        model.load_state_dict(st.load(path)["model"])
    ps = ParameterServer(model, sgd, mode="bsp", timeout=30)
    if resume:
        ps.load_state_dict(st.load(path)["ps"])
    if ps.is_server:
        ps.run_server()
        st.save({{"ps": ps.state_dict()}}, path)
        return ps.version, None
    me = slice(ps.rank * rows, (ps.rank + 1) * rows)
    for _ in range(steps):
        ps.step(mse(model, st.tensor(X[me]), st.tensor(Y[me])))
    ps.close()
    st.save({{"ps": ps.state_dict(), "model": model.state_dict()}}, path)
    return ps.clock, [p.detach().numpy().copy() for p in model.parameters()]

_, whole = train_bsp(6)
train_bsp(3)
done, resumed = train_bsp(3, resume=True)
errors = []
if dist.get_rank() == 2:
    ps = ParameterServer(make_model(), sgd, mode="bsp", timeout=30)
    st_ = ps.state_dict()
    for bad in ({{"role": "worker", "rank": 2, "clock": 0}}, dict(st_, slices=[[0, 0, 1]]), 7):
        try:
            ps.load_state_dict(bad)
        except ValueError as e:
            errors.append(str(e))
    ps.run_server()
else:
    ps = ParameterServer(make_model(), sgd, mode="bsp", timeout=30)
    ps.close()
report({{"done": done, "errors": errors,
        "diff": None if whole is None else max(float(np.abs(a - b).max())
                                               for a, b in zip(whole, resumed))}})
"""
    out, _ = run(3, body, timeout=55)
    assert out[2]["done"] == 6  # the server's step count went on from the checkpoint
    for rank in (0, 1):
        assert out[rank]["done"] == 6
        assert out[rank]["diff"] < 1e-6, out[rank]
    errors = out[2]["errors"]
    assert len(errors) == 3
    assert "saved by worker rank 2, but this is server rank 2" in errors[0]
    assert "are not this server's" in errors[1]
    assert "expected a dict from ParameterServer.state_dict()" in errors[2]


@needs_mpi
def test_four_ranks_two_servers_and_worker_groups():
    body = COMMON + """
report({"bsp2": bsp_vs_single(2),
        "bsp_unequal": bsp_vs_single(1, groups=2),
        "groups": train("downpour", groups=2),
        "groups_ssp": train("ssp", staleness=0, groups=2, slow=(2,)),
        "bsp_groups": train("bsp", groups=2, steps=10)})
"""
    out, _ = run(4, body, timeout=55)
    assert sorted(out) == [0, 1, 2, 3]
    assert out[2]["bsp2"]["version"] == out[3]["bsp2"]["version"] == 6
    for rank in (0, 1):
        assert out[rank]["bsp2"]["diff"] < 1e-5
    # groups of 2 and 1 workers: weighted by size, BSP still equals whole-batch training
    assert out[3]["bsp_unequal"]["version"] == 6
    for rank in (0, 1, 2):
        assert out[rank]["bsp_unequal"]["diff"] < 1e-5, (rank, out[rank]["bsp_unequal"])
    # ranks 0, 1 form one group and rank 2 the other; rank 3 is the server
    for key in ("groups", "groups_ssp"):
        for rank in (0, 1, 2):
            r = out[rank][key]
            assert r["last"] < 0.5 * r["first"], (key, rank, r)
        assert out[1][key]["gap"] is None  # only leaders talk to the servers
    # a group is synchronous inside: its ranks hold the same parameters, so the same loss
    assert out[0]["bsp_groups"]["final"] == pytest.approx(out[1]["bsp_groups"]["final"])
    assert out[0]["bsp_groups"]["final"] == pytest.approx(out[2]["bsp_groups"]["final"])
    assert out[3]["groups_ssp"]["gap"][1] == 0
    assert out[3]["groups"]["version"] == 2 * 25


@needs_mpi
def test_a_silent_server_times_out_instead_of_hanging():
    body = """
import time
dist.init_process_group()
from singa_tensor import nn, optim
from singa_tensor.distributed.parameter_server import ParameterServer
model = nn.Linear(2, 1)
ps = ParameterServer(model, lambda p: optim.SGD(p, lr=0.1), timeout=1.0)
if ps.is_server:
    time.sleep(2.5)  # never serves
    report("server")
else:
    try:
        ps.step(model(st.ones(1, 2)).sum())
        report("no error")
    except dist.DistributedError as e:
        report(str(e))
"""
    out, _ = run(2, body, timeout=40)
    assert out[1] == "server"
    assert "timed out after 1 s waiting for parameters from the servers" in out[0]
