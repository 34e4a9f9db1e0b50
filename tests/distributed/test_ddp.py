"""nn.parallel.DistributedDataParallel (gradient averaging from the gradient-ready hooks) and
utils.data.DistributedSampler. Multi-rank checks run under mpiexec, one spawn per world size;
the sampler and the argument checks run in this process."""

from __future__ import annotations

import numpy as np
import pytest

import singa_tensor as st
import singa_tensor.distributed as dist
from singa_tensor import nn
from singa_tensor.optim.dist_opt import plan_buckets
from singa_tensor.utils.data import DataLoader, DistributedSampler, TensorDataset

from ..helpers import to_numpy
from .mpi_run import needs_mpi, run

BODY = """
from singa_tensor import nn, optim

dist.init_process_group()
rank, ws = dist.get_rank(), dist.get_world_size()
B = 4
rng = np.random.default_rng(1)
X = rng.standard_normal((ws * B, 8)).astype(np.float32)
Y = rng.standard_normal((ws * B, 4)).astype(np.float32)
sl = slice(rank * B, (rank + 1) * B)

class Net(nn.Module):
    def __init__(self, seed, extra=False):
        super().__init__()
        st.manual_seed(seed)
        self.body = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 4))
        self.unused = nn.Linear(4, 4) if extra else None
        self.register_buffer("scale", st.full((1,), float(seed)))

    def forward(self, x):
        return self.body(x) * self.scale

def grads(m):
    return np.concatenate([p.grad.numpy().ravel() for p in m.body.parameters()])

def flat(m):
    return np.concatenate([p.detach().numpy().ravel() for p in m.body.parameters()])

def loss_of(m, x, y):
    return ((m(st.tensor(x)) - st.tensor(y)) ** 2).mean()

out = {}
makers = {"sgd": lambda ps: optim.SGD(ps, lr=0.05, momentum=0.9),
          "adam": lambda ps: optim.Adam(ps, lr=0.01)}
for name, mk, cap in [("sgd", "sgd", 200), ("adam", "adam", 10 ** 6)]:
    ref = Net(3)
    ropt = makers[mk](list(ref.parameters()))
    ddp = nn.parallel.DistributedDataParallel(Net(3 + rank), bucket_bytes=cap)
    out[name + "_buffer"] = float(ddp.module.scale.item())
    out[name + "_buckets"] = len(ddp._buckets)
    opt = makers[mk](list(ddp.parameters()))
    for step in range(4):
        ropt.zero_grad(); loss_of(ref, X, Y).backward(); ropt.step()
        opt.zero_grad(); loss_of(ddp, X[sl], Y[sl]).backward()
        if step == 0:
            out[name + "_grad"] = float(np.abs(grads(ddp.module) - grads(ref)).max())
        opt.step()
    out[name] = float(np.abs(flat(ddp.module) - flat(ref)).max())
    out[name + "_bytes"] = ddp.last_bytes_sent

# gradient accumulation: no_sync on the first micro-batch, averaged on the second
ref = Net(3)
loss_of(ref, X, Y).backward()
ddp = nn.parallel.DistributedDataParallel(Net(3 + rank), bucket_bytes=100)
with ddp.no_sync():
    loss_of(ddp, X[sl][:2], Y[sl][:2]).backward()
out["no_sync_local"] = float(np.abs(grads(ddp.module) - grads(ref)).max()) > 1e-3
loss_of(ddp, X[sl][2:], Y[sl][2:]).backward()
out["no_sync"] = float(np.abs(grads(ddp.module) - 2 * grads(ref)).max())

# a parameter outside the graph: found after forward, its gradient averages to zero
ddp = nn.parallel.DistributedDataParallel(Net(5, extra=True), bucket_bytes=100,
                                          find_unused_parameters=True)
for _ in range(2):
    ddp.zero_grad(); loss_of(ddp, X[sl], Y[sl]).backward()
out["unused_grad"] = [float(np.abs(p.grad.numpy()).max()) for p in ddp.module.unused.parameters()]
out["unused_running"] = ddp._running
report(out)
"""

FULL_BYTES = (8 * 16 + 16 + 16 * 4 + 4) * 4


def _check_world(n: int) -> None:
    res, _ = run(n, BODY, timeout=50)
    assert sorted(res) == list(range(n))
    for r in range(n):
        out = res[r]
        for name in ("sgd", "adam"):
            assert out[name + "_buffer"] == 3.0  # rank 0's buffer
            assert out[name + "_grad"] < 1e-6, (name, out[name + "_grad"])
            assert out[name] < 1e-5, (n, r, name, out[name])
            assert out[name + "_bytes"] == FULL_BYTES
        assert out["sgd_buckets"] == 4 and out["adam_buckets"] == 1
        assert out["no_sync_local"] is True  # inside no_sync the gradient stayed local
        assert out["no_sync"] < 1e-5
        assert out["unused_grad"] == [0.0, 0.0] and out["unused_running"] is False


@needs_mpi
def test_ddp_two_ranks():
    _check_world(2)


@needs_mpi
def test_ddp_four_ranks():
    _check_world(4)


# ---- a world of one: no mpiexec ---------------------------------------------------------------


def _net():
    st.manual_seed(0)
    return nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))


def test_world_of_one_state_dict_and_forward():
    net = _net()
    ddp = nn.parallel.DistributedDataParallel(net, bucket_bytes=16)
    assert ddp.module is net
    x = st.ones(2, 3)
    np.testing.assert_array_equal(to_numpy(ddp(x)), to_numpy(net(x)))
    ddp(x).sum().backward()
    g = to_numpy(net[2].weight.grad)
    plain = _net()
    plain(x).sum().backward()
    np.testing.assert_allclose(g, to_numpy(plain[2].weight.grad))
    # state dict keys are the module's, and PyTorch-style "module." keys load too
    assert list(ddp.state_dict()) == list(net.state_dict()) == ["0.weight", "0.bias",
                                                                "2.weight", "2.bias"]
    other = _net()
    with st.no_grad():
        for p in other.parameters():
            p.fill_(0.5)
    ddp.load_state_dict({"module." + k: v for k, v in other.state_dict().items()})
    assert net[0].weight.tolist() == [[0.5] * 3] * 4
    plain.load_state_dict(ddp.state_dict())


def test_unused_parameter_without_find_unused_is_reported():
    class Two(nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b = nn.Linear(2, 2), nn.Linear(2, 2)

        def forward(self, x):
            return self.a(x)

    ddp = nn.parallel.DistributedDataParallel(Two())
    ddp(st.ones(1, 2)).sum().backward()
    with pytest.raises(RuntimeError, match="find_unused_parameters=True.*finish"):
        ddp(st.ones(1, 2))
    ddp.finish()  # the way out: launches the rest with zero gradients
    assert to_numpy(ddp.module.b.weight.grad).tolist() == [[0.0, 0.0], [0.0, 0.0]]
    ddp(st.ones(1, 2)).sum().backward()


def test_ddp_errors():
    with pytest.raises(TypeError, match="DistributedDataParallel: expected an nn.Module, got "
                                        "list"):
        nn.parallel.DistributedDataParallel([1])
    with pytest.raises(ValueError, match="ReLU has no parameters that require grad"):
        nn.parallel.DistributedDataParallel(nn.ReLU())
    with pytest.raises(ValueError, match="bucket_bytes must be a positive number of bytes, "
                                         "got -1"):
        nn.parallel.DistributedDataParallel(_net(), bucket_bytes=-1)


# ---- DistributedSampler -----------------------------------------------------------------------


def _expected_shard(n, replicas, rank, drop_last):
    """torch's partition rule: pad to a multiple of replicas by repeating the first indices
    (or drop the tail), then every replicas-th index from rank."""
    idx = list(range(n))
    if drop_last:
        idx = idx[:n // replicas * replicas]
    else:
        total = -(-n // replicas) * replicas
        while len(idx) < total:
            idx += idx[:total - len(idx)]
    return idx[rank::replicas]


def test_sampler_partition_rules():
    # the rule spelled out on small cases
    assert [list(DistributedSampler(range(5), 2, r, shuffle=False)) for r in (0, 1)] == \
        [[0, 2, 4], [1, 3, 0]]
    assert [list(DistributedSampler(range(5), 2, r, shuffle=False, drop_last=True))
            for r in (0, 1)] == [[0, 2], [1, 3]]
    assert [list(DistributedSampler(range(1), 4, r, shuffle=False)) for r in range(4)] == \
        [[0]] * 4
    for n in (0, 1, 5, 8, 11):
        for replicas in (1, 2, 3, 4):
            for drop_last in (False, True):
                if n == 0 and not drop_last:
                    continue
                for rank in range(replicas):
                    ours = DistributedSampler(range(n), replicas, rank, shuffle=False,
                                              drop_last=drop_last)
                    want = _expected_shard(n, replicas, rank, drop_last)
                    assert list(ours) == want, (n, replicas, rank, drop_last)
                    assert len(ours) == len(want)


def test_sampler_shuffle_is_shared_and_changes_with_epoch():
    def shards(epoch, seed=0):
        out = []
        for rank in range(3):
            s = DistributedSampler(range(10), num_replicas=3, rank=rank, seed=seed)
            s.set_epoch(epoch)
            out.append(list(s))
        return out

    a = shards(0)
    assert [len(x) for x in a] == [4, 4, 4]
    merged = [a[r][i] for i in range(4) for r in range(3)]  # the padded permutation
    assert sorted(merged[:10]) == list(range(10)) and merged[10:] == merged[:2]
    assert shards(0) == a and shards(1) != a and shards(0, seed=1) != a


def test_sampler_with_data_loader_and_default_world():
    if not dist.is_initialized():
        dist.init_process_group()
    ds = TensorDataset(st.arange(6))
    s = DistributedSampler(ds, shuffle=False)  # a world of one: everything, in order
    assert (s.num_replicas, s.rank) == (1, 0)
    batches = [b[0].tolist() for b in DataLoader(ds, batch_size=4, sampler=s)]
    assert batches == [[0, 1, 2, 3], [4, 5]]


def test_sampler_errors():
    with pytest.raises(ValueError, match=r"invalid rank 2, rank should be in the interval "
                                         r"\[0, 1\]"):
        DistributedSampler(range(4), num_replicas=2, rank=2)
    with pytest.raises(ValueError, match="num_replicas must be positive, got 0"):
        DistributedSampler(range(4), num_replicas=0, rank=0)
    with pytest.raises(TypeError, match="seed must be an int, got 1.5"):
        DistributedSampler(range(4), num_replicas=1, rank=0, seed=1.5)


# ---- PyTorch's keyword arguments --------------------------------------------------------------


def test_pytorch_keyword_arguments():
    DDP = nn.parallel.DistributedDataParallel
    # bucket_cap_mb is in MiB: 50 bytes split the parameters (48, 16, 32 and 8 bytes, taken
    # last first) into three buckets, as bucket_bytes=50 does
    net = _net()
    small = DDP(net, bucket_cap_mb=50 / 2 ** 20)
    assert small._buckets == plan_buckets(list(net.parameters()), 50) == [[3, 2], [1], [0]]
    assert len(DDP(_net(), bucket_cap_mb=25)._buckets) == 1
    assert len(DDP(_net(), bucket_cap_mb=1e-6)._buckets) == 4
    # process_group is the group
    g = dist.new_group([0])
    ddp = DDP(_net(), process_group=g)
    assert ddp.group is g and ddp.world_size == 1
    ddp(st.ones(1, 3)).sum().backward()
    # hints: kept, no change in what backward leaves in .grad
    a = DDP(_net(), gradient_as_bucket_view=True, static_graph=True, check_reduction=True)
    b = DDP(_net())
    assert a.gradient_as_bucket_view is True and a.static_graph is True
    for m in (a, b):
        m(st.ones(2, 3)).sum().backward()
    for pa, pb in zip(a.parameters(), b.parameters()):
        np.testing.assert_array_equal(to_numpy(pa.grad), to_numpy(pb.grad))
    # device_ids / output_device naming the module's device, in each spelling
    for ids, out in [(["cpu"], "cpu"), ([st.device("cpu")], st.device("cpu")), (None, None)]:
        DDP(_net(), device_ids=ids, output_device=out)
    assert DDP(_net(), dim=1).dim == 1
    # positional order is PyTorch's: module, device_ids, output_device, dim, broadcast_buffers
    assert DDP(_net(), None, None, 0, False).broadcast_buffers is False


def test_pytorch_keyword_argument_errors():
    DDP = nn.parallel.DistributedDataParallel
    with pytest.raises(ValueError, match=r"DistributedDataParallel: device_ids names cuda:0, but "
                                         r"the module's parameters are on cpu"):
        DDP(_net(), device_ids=[0])
    with pytest.raises(ValueError, match="DistributedDataParallel: output_device names cuda:1"):
        DDP(_net(), output_device="cuda:1")
    with pytest.raises(ValueError, match="device_ids must be None or a list of one device"):
        DDP(_net(), device_ids=["cpu", "cpu"])
    with pytest.raises(ValueError, match="device_ids must be None or a list of one device"):
        DDP(_net(), device_ids="cpu")
    with pytest.raises(ValueError, match="DistributedDataParallel: device_ids 'tpu' is not a "
                                         "device"):
        DDP(_net(), device_ids=["tpu"])
    with pytest.raises(TypeError, match="DistributedDataParallel: dim must be an int, got str"):
        DDP(_net(), dim="0")
    with pytest.raises(ValueError, match="bucket_cap_mb must be a positive number of MiB, got "
                                         "0"):
        DDP(_net(), bucket_cap_mb=0)
    with pytest.raises(ValueError, match="bucket_cap_mb must be a positive number of MiB, got "
                                         "'25'"):
        DDP(_net(), bucket_cap_mb="25")
    with pytest.raises(ValueError, match="got both bucket_cap_mb and bucket_bytes"):
        DDP(_net(), bucket_cap_mb=1, bucket_bytes=100)
    with pytest.raises(TypeError, match="DistributedDataParallel: static_graph must be a bool, "
                                        "got str"):
        DDP(_net(), static_graph="yes")
    with pytest.raises(TypeError, match="gradient_as_bucket_view must be a bool, got int"):
        DDP(_net(), gradient_as_bucket_view=1)
    with pytest.raises(TypeError, match="group must be a dist.Group"):
        DDP(_net(), process_group="world")
    g = dist.new_group([0])
    with pytest.raises(ValueError, match="got both process_group and group"):
        DDP(_net(), process_group=g, group=dist.new_group([0]))
