"""distributed.optim.ZeroRedundancyOptimizer: optimizer state sharded over the ranks, parameters
broadcast from their owners after each step. Multi-rank checks run under mpiexec (one spawn per
world size); the partition, the checkpoint round trips and the argument checks run in this
process, which is a world of one."""

from __future__ import annotations

import numpy as np
import pytest

import singa_tensor as st
import singa_tensor.distributed as dist
from singa_tensor import nn, optim
from singa_tensor.distributed.optim import (
    ZeroRedundancyOptimizer,
    partition_parameters,
    state_bytes,
)

from ..helpers import to_numpy
from .mpi_run import needs_mpi, run

# Under DDP, each rank trains a replica on its slice of one global batch, once with the plain
# optimizer and once with ZeroRedundancyOptimizer over the same optimizer class: the parameters
# must agree, and the sharded state must be about 1/R of the plain one.
BODY = """
from singa_tensor import nn, optim
from singa_tensor.distributed.optim import ZeroRedundancyOptimizer, state_bytes

dist.init_process_group()
rank, ws = dist.get_rank(), dist.get_world_size()
B = 4
rng = np.random.default_rng(2)
X = rng.standard_normal((ws * B, 8)).astype(np.float32)
Y = rng.standard_normal((ws * B, 4)).astype(np.float32)
sl = slice(rank * B, (rank + 1) * B)

def make(seed):
    st.manual_seed(seed)
    return nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 4))

def flat(m):
    return np.concatenate([p.detach().numpy().ravel() for p in m.parameters()])

def spread(a):
    got = [st.zeros(a.size) for _ in range(ws)]
    dist.all_gather(got, st.tensor(a))
    return float(max(np.abs(g.numpy() - a).max() for g in got))

def loss_of(m, x, y):
    return ((m(st.tensor(x)) - st.tensor(y)) ** 2).mean()

def train(ddp, opt, steps):
    for _ in range(steps):
        opt.zero_grad(); loss_of(ddp, X[sl], Y[sl]).backward(); opt.step()

def states_equal(a, b):
    # two state dicts of the unsharded layout: the largest difference of their state tensors
    assert sorted(a["state"]) == sorted(b["state"]), (sorted(a["state"]), sorted(b["state"]))
    worst = 0.0
    for i in a["state"]:
        for k, v in a["state"][i].items():
            w = b["state"][i][k]
            if hasattr(v, "numpy"):
                worst = max(worst, float(np.abs(v.numpy() - w.numpy()).max()))
            else:
                assert v == w, (i, k, v, w)
    return worst

out = {}
kinds = {"sgd": (optim.SGD, dict(lr=0.05, momentum=0.9)), "adam": (optim.Adam, dict(lr=0.01))}
for name, view in [("sgd", False), ("adam", False), ("sgd_view", True)]:
    cls, kw = kinds[name.split("_")[0]]
    plain = nn.parallel.DistributedDataParallel(make(3 + rank))
    popt = cls(list(plain.parameters()), **kw)
    sharded = nn.parallel.DistributedDataParallel(make(3 + rank))
    zopt = ZeroRedundancyOptimizer(sharded.parameters(), cls, parameters_as_bucket_view=view,
                                   **kw)
    train(plain, popt, 4)
    train(sharded, zopt, 4)
    out[name] = float(np.abs(flat(plain) - flat(sharded)).max())
    out[name + "_spread"] = spread(flat(sharded))
    out[name + "_bytes"] = [zopt.local_state_bytes(), state_bytes(popt)]
    out[name + "_messages"] = zopt.num_broadcasts
    out[name + "_local"] = sum(len(g["params"]) for g in zopt.optim.param_groups)

    # checkpoints: the consolidated state is the plain optimizer's, on rank `to` only
    to = ws - 1 if view else 0
    zopt.consolidate_state_dict(to=to)
    if rank == to:
        sd = zopt.state_dict()
        out[name + "_state"] = states_equal(sd, popt.state_dict())
        fresh = cls(list(make(0).parameters()), **kw)
        fresh.load_state_dict(sd)
        out[name + "_loads"] = states_equal(fresh.state_dict(), popt.state_dict())
    else:
        try:
            zopt.state_dict()
            out[name + "_refused"] = False
        except RuntimeError as e:
            out[name + "_refused"] = "consolidate_state_dict" in str(e)

    # the plain optimizer's state dict loads into a new sharded one: both go on the same
    again = ZeroRedundancyOptimizer(sharded.parameters(), cls, parameters_as_bucket_view=view,
                                    **kw)
    again.load_state_dict(popt.state_dict())
    train(plain, popt, 2)
    train(sharded, again, 2)
    out[name + "_resumed"] = float(np.abs(flat(plain) - flat(sharded)).max())

# memory: eight equal layers split evenly, so each rank holds exactly 1/R of Adam's state
deep = nn.Sequential(*[nn.Linear(32, 32) for _ in range(8)])
popt = optim.Adam(deep.parameters(), lr=0.01)
zopt = ZeroRedundancyOptimizer(deep.parameters(), optim.Adam, lr=0.01)
for opt in (popt, zopt):
    opt.zero_grad(); deep(st.ones(2, 32)).sum().backward(); opt.step()
out["memory"] = [zopt.local_state_bytes(), state_bytes(popt)]

# a process group of two of the ranks: its group rank 1 is world rank ws - 1
if ws == 4:
    g = dist.new_group([0, 3])
    if rank in (0, 3):
        m, ref = make(5), make(5)
        zopt = ZeroRedundancyOptimizer(m.parameters(), optim.SGD, process_group=g, lr=0.1,
                                       momentum=0.5)
        ropt = optim.SGD(ref.parameters(), lr=0.1, momentum=0.5)
        for _ in range(3):
            for mm, oo in ((m, zopt), (ref, ropt)):
                oo.zero_grad(); loss_of(mm, X, Y).backward(); oo.step()
        out["group"] = float(np.abs(flat(m) - flat(ref)).max())
        out["group_local"] = sum(len(gr["params"]) for gr in zopt.optim.param_groups)
report(out)
"""


def _check_world(n: int) -> None:
    res, _ = run(n, BODY, timeout=120)
    assert sorted(res) == list(range(n))
    for r in range(n):
        out = res[r]
        for name in ("sgd", "adam", "sgd_view"):
            # the same averaged gradients, the same update rule: the same parameters
            assert out[name] < 1e-6, (n, r, name, out[name])
            assert out[name + "_spread"] == 0.0, (n, r, name)
            assert out[name + "_resumed"] < 1e-6, (n, r, name, out[name + "_resumed"])
            # one broadcast per owner rank (the model is far below a bucket)
            assert out[name + "_messages"] == n
            assert out[name + "_local"] >= 1
            if r == (n - 1 if name == "sgd_view" else 0):
                assert out[name + "_state"] == 0.0 and out[name + "_loads"] == 0.0
            else:
                assert out[name + "_refused"] is True
        if n == 4 and r in (0, 3):
            assert out["group"] < 1e-6 and 1 <= out["group_local"] <= 3
    for r in range(n):
        local, full = res[r]["memory"]
        assert full == 2 * 8 * (32 * 32 + 32) * 4 and local * n == full, (n, r, local, full)
    # the parameters' state is spread over the ranks: together exactly the plain optimizer's,
    # each rank holding about 1/n of it (the greedy partition of 128, 64, 16 and 4 elements)
    for name in ("sgd", "adam"):
        local = [res[r][name + "_bytes"][0] for r in range(n)]
        full = res[0][name + "_bytes"][1]
        assert sum(local) == full
        assert max(local) <= full * 128 / 212 + 1e-9
        assert all(b > 0 for b in local)


@needs_mpi
def test_zero_two_ranks():
    _check_world(2)


@needs_mpi
def test_zero_four_ranks():
    _check_world(4)


# ---- a world of one: no mpiexec ---------------------------------------------------------------


def _net(seed: int = 0):
    st.manual_seed(seed)
    return nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2))


def _train(net, opt, steps=3):
    x = st.tensor(np.linspace(-1, 1, 6, dtype=np.float32).reshape(2, 3))
    for _ in range(steps):
        opt.zero_grad()
        (net(x) ** 2).sum().backward()
        opt.step()


def _flat(m):
    return np.concatenate([to_numpy(p).ravel() for p in m.parameters()])


def test_partition_is_greedy_by_decreasing_size():
    sizes = [3, 10, 7, 7, 1, 4]
    ps = [st.zeros(s) for s in sizes]
    parts = partition_parameters([{"params": ps}], 3)
    # 10 -> r0; 7 -> r1; 7 -> r2; 4 -> r1 (7 < 10, first of the tied 7s); 3 -> r2; 1 -> r0
    assert [[p.numel() for p in part[0]] for part in parts] == [[10, 1], [7, 4], [7, 3]]
    assert parts[1][0][0] is ps[2] and parts[2][0][0] is ps[3]  # equal sizes keep given order
    # totals (11, 11, 10) carry over to the next group: its parameter goes to rank 2
    more = partition_parameters([{"params": ps}, {"params": [st.zeros(2)]}], 3)
    assert [len(part[1]) for part in more] == [0, 0, 1]
    # more ranks than parameters: some shards are empty
    assert [sum(len(g) for g in part) for part in partition_parameters([{"params": ps}], 8)] \
        == [1] * 6 + [0, 0]


@pytest.mark.parametrize("cls,kw", [(optim.SGD, dict(lr=0.1, momentum=0.9, nesterov=True)),
                                    (optim.Adam, dict(lr=0.05)),
                                    (optim.AdamW, dict(lr=0.05, weight_decay=0.1))])
def test_world_of_one_matches_the_plain_optimizer(cls, kw):
    a, b = _net(), _net()
    zopt = ZeroRedundancyOptimizer(a.parameters(), cls, **kw)
    popt = cls(b.parameters(), **kw)
    assert isinstance(zopt.optim, cls) and isinstance(zopt, optim.Optimizer)
    _train(a, zopt)
    _train(b, popt)
    np.testing.assert_array_equal(_flat(a), _flat(b))
    assert zopt.local_state_bytes() == state_bytes(popt) > 0
    assert zopt.num_broadcasts == 0 and zopt.last_bytes_sent == 0
    # param_groups show every hyper-parameter of the optimizer class, over all parameters
    assert {k: v for k, v in zopt.param_groups[0].items() if k != "params"} == \
        {k: v for k, v in popt.param_groups[0].items() if k != "params"}
    assert len(zopt.param_groups[0]["params"]) == 4


def test_param_groups_drive_the_local_optimizer_and_zero_grad_clears_all():
    net = _net()
    zopt = ZeroRedundancyOptimizer(net.parameters(), optim.SGD, lr=0.1)
    sched = optim.lr_scheduler.StepLR(zopt, step_size=1, gamma=0.5)
    _train(net, zopt, 1)
    sched.step()
    assert zopt.param_groups[0]["lr"] == 0.05
    before = _flat(net)
    grads = [to_numpy(p.grad) for p in net.parameters()]
    zopt.step()  # the new learning rate reaches .optim at the step
    assert zopt.optim.param_groups[0]["lr"] == 0.05
    np.testing.assert_allclose(_flat(net), before - 0.05 * np.concatenate(
        [g.ravel() for g in grads]), rtol=1e-6, atol=1e-7)
    zopt.zero_grad()
    assert all(p.grad is None for p in net.parameters())


def test_closure_is_evaluated_and_its_loss_returned():
    net = _net()
    zopt = ZeroRedundancyOptimizer(net.parameters(), optim.SGD, lr=0.1)
    x = st.ones(1, 3)

    def closure():
        zopt.zero_grad()
        loss = net(x).sum()
        loss.backward()
        return loss

    before = _flat(net)
    loss = zopt.step(closure)
    assert isinstance(loss, st.Tensor)
    assert np.abs(_flat(net) - before).max() > 0


def test_add_param_group_extends_the_local_optimizer():
    a, b = _net(), _net()
    extra_a, extra_b = st.ones(3, requires_grad=True), st.ones(3, requires_grad=True)
    zopt = ZeroRedundancyOptimizer(a.parameters(), optim.SGD, lr=0.1, momentum=0.9)
    popt = optim.SGD(b.parameters(), lr=0.1, momentum=0.9)
    for opt, extra in ((zopt, extra_a), (popt, extra_b)):
        opt.add_param_group({"params": [extra], "lr": 0.5})
    assert len(zopt.optim.param_groups) == 2
    assert zopt.optim.param_groups[1]["lr"] == 0.5 and zopt.param_groups[1]["momentum"] == 0.9
    for net, opt, extra in ((a, zopt, extra_a), (b, popt, extra_b)):
        for _ in range(2):
            opt.zero_grad()
            (net(st.ones(1, 3)).sum() + (extra * extra).sum()).backward()
            opt.step()
    np.testing.assert_array_equal(to_numpy(extra_a), to_numpy(extra_b))
    np.testing.assert_array_equal(_flat(a), _flat(b))


def test_state_dict_round_trips_with_the_plain_optimizer():
    a, b = _net(), _net()
    zopt = ZeroRedundancyOptimizer(a.parameters(), optim.Adam, lr=0.05)
    popt = optim.Adam(b.parameters(), lr=0.05)
    _train(a, zopt)
    _train(b, popt)
    with pytest.raises(RuntimeError, match="ZeroRedundancyOptimizer.state_dict: the optimizer "
                                           "state has not been consolidated on this rank"):
        zopt.state_dict()
    zopt.consolidate_state_dict()
    sd = zopt.state_dict()
    psd = popt.state_dict()
    assert sd["param_groups"] == psd["param_groups"]
    assert sorted(sd["state"]) == sorted(psd["state"]) == [0, 1, 2, 3]
    for i in psd["state"]:
        assert sd["state"][i]["step"] == psd["state"][i]["step"] == 3
        np.testing.assert_array_equal(to_numpy(sd["state"][i]["exp_avg"]),
                                      to_numpy(psd["state"][i]["exp_avg"]))
    # a step makes the consolidated copy stale: it is refused again
    _train(a, zopt, 1)
    with pytest.raises(RuntimeError, match="consolidate_state_dict"):
        zopt.state_dict()
    # the plain optimizer's dict (with a changed learning rate) loads into a fresh sharded one
    _train(b, popt, 1)
    psd = popt.state_dict()
    psd["param_groups"][0]["lr"] = 0.01
    popt.load_state_dict(psd)
    fresh = ZeroRedundancyOptimizer(a.parameters(), optim.Adam)
    fresh.load_state_dict(psd)
    assert fresh.param_groups[0]["lr"] == fresh.optim.param_groups[0]["lr"] == 0.01
    _train(a, fresh, 2)
    _train(b, popt, 2)
    np.testing.assert_array_equal(_flat(a), _flat(b))


def test_bucket_view_makes_the_parameters_views_of_one_buffer():
    a, b = _net(), _net()
    zopt = ZeroRedundancyOptimizer(a.parameters(), optim.SGD, parameters_as_bucket_view=True,
                                   lr=0.1, momentum=0.9)
    (bucket,) = zopt._buckets
    ptrs = [p.data_ptr() for p in bucket.params]
    sizes = [p.numel() * 4 for p in bucket.params]
    assert ptrs == [bucket.view.data_ptr() + sum(sizes[:i]) for i in range(len(sizes))]
    popt = optim.SGD(b.parameters(), lr=0.1, momentum=0.9)
    _train(a, zopt)
    _train(b, popt)
    np.testing.assert_array_equal(_flat(a), _flat(b))
    assert bucket.params[0].data_ptr() == bucket.view.data_ptr()  # still the buffer's


def test_errors():
    net = _net()
    with pytest.raises(TypeError, match="ZeroRedundancyOptimizer: optimizer_class must be an "
                                        "optimizer class"):
        ZeroRedundancyOptimizer(net.parameters(), "SGD", lr=0.1)
    with pytest.raises(TypeError, match="optimizer_class must be an optimizer class"):
        ZeroRedundancyOptimizer(net.parameters(), optim.SGD(net.parameters()))
    with pytest.raises(TypeError, match="optimizer_class must be an optimizer class"):
        ZeroRedundancyOptimizer(net.parameters(), optim.DistOpt)
    with pytest.raises(TypeError, match="optimizer_class cannot be ZeroRedundancyOptimizer"):
        ZeroRedundancyOptimizer(net.parameters(), ZeroRedundancyOptimizer)
    with pytest.raises(ValueError, match="ZeroRedundancyOptimizer: got an empty parameter list"):
        ZeroRedundancyOptimizer([], optim.SGD, lr=0.1)
    with pytest.raises(NotImplementedError, match="ZeroRedundancyOptimizer: "
                                                  "overlap_with_ddp=True .* is not implemented"):
        ZeroRedundancyOptimizer(net.parameters(), optim.SGD, overlap_with_ddp=True)
    with pytest.raises(TypeError, match="ZeroRedundancyOptimizer: SGD takes no argument "
                                        "'betas'"):
        ZeroRedundancyOptimizer(net.parameters(), optim.SGD, lr=0.1, betas=(0.9, 0.99))
    with pytest.raises(TypeError, match="ZeroRedundancyOptimizer: parameters_as_bucket_view "
                                        "must be a bool, got int"):
        ZeroRedundancyOptimizer(net.parameters(), optim.SGD, parameters_as_bucket_view=1)
    with pytest.raises(ValueError, match="SGD: invalid learning rate: -1"):
        ZeroRedundancyOptimizer(net.parameters(), optim.SGD, lr=-1)
    zopt = ZeroRedundancyOptimizer(net.parameters(), optim.SGD, lr=0.1)
    with pytest.raises(ValueError, match=r"ZeroRedundancyOptimizer.consolidate_state_dict: to "
                                         r"must be a rank of the process group \(0..0\), got 1"):
        zopt.consolidate_state_dict(to=1)
    with pytest.raises(ValueError, match="ZeroRedundancyOptimizer.load_state_dict: expected a "
                                         "dict with 'state' and 'param_groups'"):
        zopt.load_state_dict([])
    sd = optim.SGD(_net().parameters(), lr=0.1).state_dict()
    sd["param_groups"][0]["params"] = sd["param_groups"][0]["params"][:2]
    with pytest.raises(ValueError, match="ZeroRedundancyOptimizer.load_state_dict: loaded "
                                         "parameter group 0 has 2 parameters, the optimizer's "
                                         "has 4"):
        zopt.load_state_dict(sd)
    sd = optim.SGD(_net().parameters(), lr=0.1).state_dict()
    sd["param_groups"].append(dict(sd["param_groups"][0]))
    with pytest.raises(ValueError, match="loaded state dict has 2 parameter groups, the "
                                         "optimizer has 1"):
        zopt.load_state_dict(sd)
    sd = optim.SGD(_net().parameters(), lr=0.1).state_dict()
    sd["state"] = {7: {}}
    with pytest.raises(ValueError, match="state refers to parameter 7"):
        zopt.load_state_dict(sd)
    dist.destroy_process_group()
    assert not dist.is_initialized()
