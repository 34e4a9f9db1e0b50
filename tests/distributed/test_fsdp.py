"""distributed.fsdp.FullyShardedDataParallel: flat parameter shards gathered per unit for
forward and backward, gradients reduce-scattered into the shards. Multi-rank checks run under
mpiexec (one spawn per world size) against whole-batch training in one process; the wrapping,
the policies, the state dicts and the argument checks run in this process, a world of one."""

from __future__ import annotations

import functools

import numpy as np
import pytest

import singa_tensor as st
import singa_tensor.distributed as dist
from singa_tensor import nn, optim
from singa_tensor.distributed.fsdp import (
    FSDP,
    BackwardPrefetch,
    FullyShardedDataParallel,
    ShardingStrategy,
)
from singa_tensor.distributed.fsdp.wrap import (
    ModuleWrapPolicy,
    size_based_auto_wrap_policy,
    transformer_auto_wrap_policy,
)

from .mpi_run import needs_mpi, run

# Each rank trains the FSDP model on its slice of one global batch; a reference model with the
# same initial parameters trains on the whole batch in the same process. Both take the mean
# over their batch, so the averaged gradients, and the parameters after each step, agree.
BODY = """
import functools
from singa_tensor import nn, optim
from singa_tensor.backend import cpu
from singa_tensor.distributed.fsdp import (FSDP, BackwardPrefetch, ShardingStrategy)
from singa_tensor.distributed.fsdp.wrap import (ModuleWrapPolicy, size_based_auto_wrap_policy,
                                                transformer_auto_wrap_policy)

dist.init_process_group()
rank, ws = dist.get_rank(), dist.get_world_size()
comm = dist.get_communicator()
B = 2
rng = np.random.default_rng(4)
X = rng.standard_normal((ws * B, 6)).astype(np.float32)
Y = rng.standard_normal((ws * B, 3)).astype(np.float32)
T = rng.integers(0, 11, size=(ws * B, 5))
TY = rng.standard_normal((ws * B, 5, 3)).astype(np.float32)
sl = slice(rank * B, (rank + 1) * B)

def mlp(seed):
    st.manual_seed(seed)
    return nn.Sequential(nn.Linear(6, 10), nn.Tanh(), nn.Linear(10, 7), nn.Tanh(),
                         nn.Linear(7, 3))

class Tiny(nn.Module):
    # embedding, two encoder layers (one unit each under the transformer policy), a head. The
    # layers have no biases: the key projection's bias has a gradient of exactly zero (softmax
    # ignores a shift shared by a query's scores), so its computed gradient is rounding noise,
    # which Adam scales up to steps of lr in either direction
    def __init__(self, seed):
        super().__init__()
        st.manual_seed(seed)
        self.emb = nn.Embedding(11, 8)
        self.layers = nn.ModuleList([nn.TransformerEncoderLayer(8, 2, dim_feedforward=12,
                                                                dropout=0.0, batch_first=True,
                                                                bias=False)
                                     for _ in range(2)])
        self.norm = nn.LayerNorm(8)
        self.head = nn.Linear(8, 3)
    def forward(self, t):
        h = self.emb(t)
        for layer in self.layers:
            h = layer(h)
        return self.head(self.norm(h))

def mlp_loss(m, rows):
    return ((m(st.tensor(X[rows])) - st.tensor(Y[rows])) ** 2).mean()

def tiny_loss(m, rows):
    return ((m(st.tensor(T[rows])) - st.tensor(TY[rows])) ** 2).mean()

def worst(a, b):
    assert list(a) == list(b), (list(a), list(b))
    return max(float(np.abs(a[k].numpy() - b[k].numpy()).max()) for k in a)

def train(model, ref, loss, make_opt, steps=3):
    opt, ropt = make_opt(model.parameters()), make_opt(ref.parameters())
    for _ in range(steps):
        opt.zero_grad(); loss(model, sl).backward(); opt.step()
        ropt.zero_grad(); loss(ref, slice(None)).backward(); ropt.step()
    return worst(model.state_dict(), ref.state_dict())

sgd = lambda ps: optim.SGD(ps, lr=0.1, momentum=0.9)
adam = lambda ps: optim.Adam(ps, lr=0.01)
out = {}
mlp_policy = functools.partial(size_based_auto_wrap_policy, min_num_params=60)
for strat in ShardingStrategy:
    for oname, mk in (("sgd", sgd), ("adam", adam)):
        model = FSDP(mlp(1), sharding_strategy=strat, auto_wrap_policy=mlp_policy)
        out[f"mlp_{strat.name}_{oname}"] = train(model, mlp(1), mlp_loss, mk)
out["mlp_units"] = len(FSDP.fsdp_modules(model))

tiny_policy = functools.partial(transformer_auto_wrap_policy,
                                transformer_layer_cls={nn.TransformerEncoderLayer})
for strat, fwd, bwd in ((ShardingStrategy.FULL_SHARD, True, BackwardPrefetch.BACKWARD_PRE),
                        (ShardingStrategy.FULL_SHARD, False, BackwardPrefetch.BACKWARD_POST),
                        (ShardingStrategy.FULL_SHARD, False, None),
                        (ShardingStrategy.SHARD_GRAD_OP, True, BackwardPrefetch.BACKWARD_PRE)):
    model = FSDP(Tiny(2), sharding_strategy=strat, auto_wrap_policy=tiny_policy,
                 forward_prefetch=fwd, backward_prefetch=bwd)
    out[f"tiny_{strat.name}_{fwd}_{bwd}"] = train(model, Tiny(2), tiny_loss, adam, steps=4)
out["tiny_units"] = len(FSDP.fsdp_modules(model))

# the full state dict loads into a model wrapped from other initial values; the sharded one
# round-trips on the same ranks
ref = Tiny(2)
fresh = FSDP(Tiny(9), auto_wrap_policy=tiny_policy)
fresh.load_state_dict(model.state_dict())
out["load_full"] = worst(fresh.state_dict(), model.state_dict())
other = FSDP(Tiny(8), auto_wrap_policy=tiny_policy)
other.load_sharded_state_dict(fresh.sharded_state_dict())
out["load_sharded"] = worst(other.state_dict(), model.state_dict())
ref.load_state_dict(model.state_dict())
out["into_plain"] = worst(ref.state_dict(), model.state_dict())

# memory at rest: the shards hold 1/R of the (padded) parameters; the allocator agrees. Under
# FULL_SHARD the gathered parameters are gone between forward and backward, not so under
# SHARD_GRAD_OP
def big(seed):
    st.manual_seed(seed)
    # shards of 2**k bytes: the allocator counts blocks of such sizes
    return nn.Sequential(nn.Linear(512, 512, bias=False), nn.Tanh(),
                         nn.Linear(512, 512, bias=False))
full_bytes = sum(p.numel() * 4 for p in big(0).parameters())
before = cpu.allocated_bytes()
plain = big(0)
plain_bytes = cpu.allocated_bytes() - before  # as the allocator counts them (it rounds up)
del plain
before = cpu.allocated_bytes()
rest = FSDP(big(0), auto_wrap_policy=ModuleWrapPolicy({nn.Linear}))
out["rest_allocated"] = [cpu.allocated_bytes() - before, plain_bytes]
out["rest_params"] = [sum(p.numel() * 4 for p in rest.parameters()), full_bytes]
x = st.tensor(np.ones((1, 512), np.float32))
for strat in (ShardingStrategy.FULL_SHARD, ShardingStrategy.SHARD_GRAD_OP):
    m = FSDP(big(0), sharding_strategy=strat, auto_wrap_policy=ModuleWrapPolicy({nn.Linear}))
    base = cpu.allocated_bytes()
    loss = m(x).sum()
    between = cpu.allocated_bytes() - base
    loss.backward()
    out["between_" + strat.name] = between
    del loss, m

# bytes per step on the wire: FULL_SHARD all-gathers twice and reduce-scatters once, each
# sending (R - 1) / R of the padded flat buffer of every unit; SHARD_GRAD_OP gathers once
padded = sum(-(-n // ws) * ws for n in (512 * 512, 512 * 512))
for strat in (ShardingStrategy.FULL_SHARD, ShardingStrategy.SHARD_GRAD_OP):
    m = FSDP(big(0), sharding_strategy=strat, auto_wrap_policy=ModuleWrapPolicy({nn.Linear}))
    start = comm.bytes_sent
    m(x).sum().backward()
    out["sent_" + strat.name] = [comm.bytes_sent - start, padded * 4 * (ws - 1) // ws]

# clip_grad_norm_ measures the whole gradient across the shards
model, ref = FSDP(mlp(1), auto_wrap_policy=mlp_policy), mlp(1)
mlp_loss(model, sl).backward(); mlp_loss(ref, slice(None)).backward()
n1 = model.clip_grad_norm_(0.05).item()
n2 = nn.utils.clip_grad_norm_(ref.parameters(), 0.05).item()
with st.no_grad():
    for p, g in zip(ref.parameters(), [p.grad for p in ref.parameters()]):
        p.sub_(g)
    for p in model.parameters():
        p.sub_(p.grad)
out["clip"] = [n1, n2, worst(model.state_dict(), ref.state_dict())]

# no_sync: the first micro-batch's gradient is kept locally and joins the second's
model, ref = FSDP(mlp(1), auto_wrap_policy=mlp_policy), mlp(1)
half = B // 2
with model.no_sync():
    mlp_loss(model, slice(rank * B, rank * B + half)).backward()
out["no_sync_grad_none"] = all(p.grad is None for p in model.parameters())
mlp_loss(model, slice(rank * B + half, (rank + 1) * B)).backward()
rows = [r for k in range(ws) for r in (k * B, k * B + half)]
for part in (slice(None, None, 2), slice(1, None, 2)):
    mlp_loss(ref, rows[part]).backward()
with st.no_grad():
    for p in ref.parameters():
        p.sub_(p.grad)
    for p in model.parameters():
        p.sub_(p.grad)
out["no_sync"] = worst(model.state_dict(), ref.state_dict())

# summon_full_params: the full weights on every rank, and changes written back to the shards
with model.summon_full_params():
    w = model.module[0].weight
    out["summon_shape"] = list(w.shape)
    w.fill_(0.5)
out["writeback"] = float(np.abs(model.state_dict()["0.weight"].numpy() - 0.5).max())

# sync_module_states: every rank starts from the first rank's parameters
synced = FSDP(mlp(10 + rank), sync_module_states=True, auto_wrap_policy=mlp_policy)
out["synced"] = worst(synced.state_dict(), mlp(10).state_dict())

# a unit over a subgroup nested in one over the world: the process groups differ
g = dist.new_group([0, 1])
if rank in (0, 1):
    inner = FSDP(nn.Linear(2, 2), process_group=g)
    try:
        FSDP(nn.Sequential(inner, nn.Linear(2, 2)))
        out["group_mismatch"] = "no error"
    except ValueError as e:
        out["group_mismatch"] = str(e)
else:
    try:
        FSDP(nn.Linear(2, 2), process_group=g)
        out["not_member"] = "no error"
    except ValueError as e:
        out["not_member"] = str(e)
report(out)
"""


def _check_world(n: int) -> None:
    res, _ = run(n, BODY, timeout=300)
    assert sorted(res) == list(range(n))
    for r in range(n):
        out = res[r]
        for k, v in out.items():
            if k.startswith(("mlp_", "tiny_")) and not k.endswith("_units"):
                assert v < 1e-5, (n, r, k, v)
        # size_based at 60 elements: the two large linears are units, the root keeps the last
        assert out["mlp_units"] == 3
        assert out["tiny_units"] == 3  # root (embedding, norm, head) and the two layers
        for k in ("load_full", "load_sharded", "into_plain"):
            assert out[k] == 0.0, (n, r, k, out[k])
        mine, full = out["rest_params"]
        assert mine * n == full  # 2 * 512 * 512 divides by 2 and 4: no padding
        allocated, plain = out["rest_allocated"]
        assert plain >= full and abs(allocated - plain / n) <= 0.05 * plain, (n, r, allocated,
                                                                               plain)
        # between forward and backward: FULL_SHARD keeps no gathered parameters (only small
        # activations), SHARD_GRAD_OP keeps both units' full parameters
        assert out["between_FULL_SHARD"] < 0.1 * full, (n, r, out["between_FULL_SHARD"])
        assert out["between_SHARD_GRAD_OP"] >= full, (n, r, out["between_SHARD_GRAD_OP"])
        sent, unit = out["sent_FULL_SHARD"]
        assert sent == 3 * unit, (n, r, sent, unit)
        sent, unit = out["sent_SHARD_GRAD_OP"]
        assert sent == 2 * unit, (n, r, sent, unit)
        n1, n2, diff = out["clip"]
        assert abs(n1 - n2) <= 1e-5 * n2 and n1 > 0.05 and diff < 1e-6, out["clip"]
        assert out["no_sync_grad_none"] is True
        assert out["no_sync"] < 1e-5, out["no_sync"]
        assert out["summon_shape"] == [10, 6] and out["writeback"] == 0.0
        assert out["synced"] == 0.0
        if r in (0, 1):
            assert "process group" in out["group_mismatch"], out["group_mismatch"]
        else:
            assert "not a member of process_group" in out["not_member"], out["not_member"]


@needs_mpi
def test_fsdp_two_ranks():
    _check_world(2)


@needs_mpi
def test_fsdp_four_ranks():
    _check_world(4)


# ---- a world of one: no mpiexec ---------------------------------------------------------------


@pytest.fixture
def world():
    dist.init_process_group()
    yield
    dist.destroy_process_group()


def _mlp(seed=0):
    st.manual_seed(seed)
    return nn.Sequential(nn.Linear(3, 5), nn.Tanh(), nn.Linear(5, 2))


def _x():
    return st.tensor(np.linspace(-1, 1, 12, dtype=np.float32).reshape(4, 3))


def test_needs_an_initialized_process_group():
    with pytest.raises(RuntimeError, match="init_process_group"):
        FSDP(_mlp())


def test_parameters_are_one_flat_shard_per_unit(world):
    model = FSDP(_mlp(), auto_wrap_policy=ModuleWrapPolicy({nn.Linear}))
    names = [n for n, _ in model.named_parameters()]
    assert names == ["_fsdp_wrapped_module.0._flat_param", "_fsdp_wrapped_module.2._flat_param"]
    assert [p.numel() for p in model.parameters()] == [3 * 5 + 5, 5 * 2 + 2]
    assert FullyShardedDataParallel is FSDP and model.module is model._fsdp_wrapped_module
    assert isinstance(model.module[0], FSDP) and isinstance(model.module[0].module, nn.Linear)
    # the original attributes are full only while a forward or summon_full_params runs
    assert model.module[0].module.weight.numel() == 0
    assert "in_features=3" in repr(model)
    assert list(model.state_dict()) == ["0.weight", "0.bias", "2.weight", "2.bias"]


@pytest.mark.parametrize("strategy", list(ShardingStrategy))
@pytest.mark.parametrize("make", [lambda ps: optim.SGD(ps, lr=0.1, momentum=0.9),
                                  lambda ps: optim.Adam(ps, lr=0.01)])
def test_world_of_one_trains_as_the_plain_model(world, strategy, make):
    model = FSDP(_mlp(), sharding_strategy=strategy,
                 auto_wrap_policy=functools.partial(size_based_auto_wrap_policy,
                                                    min_num_params=10))
    ref = _mlp()
    opt, ropt = make(model.parameters()), make(ref.parameters())
    for _ in range(3):
        for m, o in ((model, opt), (ref, ropt)):
            o.zero_grad()
            (m(_x()) ** 2).sum().backward()
            o.step()
    got, want = model.state_dict(), ref.state_dict()
    assert list(got) == list(want)
    for k in want:
        np.testing.assert_allclose(got[k].numpy(), want[k].numpy(), rtol=0, atol=1e-6)


def test_full_shard_frees_the_gathered_parameters_until_backward(world):
    model = FSDP(_mlp())
    seen = {}

    def grab(mod, inputs):
        seen["w"] = mod.weight  # the view the layer computes with

    model.module[0].register_forward_pre_hook(grab)
    loss = (model(_x()) ** 2).sum()
    assert seen["w"]._storage.nbytes == 0  # freed after forward
    loss.backward()  # gathered again for backward, freed after
    assert model._flat_param.grad is not None and seen["w"]._storage.nbytes == 0
    keep = FSDP(_mlp(), sharding_strategy=ShardingStrategy.SHARD_GRAD_OP)
    keep.module[0].register_forward_pre_hook(grab)
    loss = (keep(_x()) ** 2).sum()
    assert seen["w"]._storage.nbytes == (3 * 5 + 5 + 5 * 2 + 2) * 4  # kept for backward
    loss.backward()
    assert seen["w"]._storage.nbytes == 0
    # without gradients nothing waits for backward: freed after forward under any strategy
    ref = _mlp()
    ref.load_state_dict(keep.state_dict())
    with st.no_grad():
        got = keep(_x())
    assert seen["w"]._storage.nbytes == 0 and not got.requires_grad
    np.testing.assert_allclose(got.numpy(), ref(_x()).detach().numpy(), rtol=1e-6)


def test_a_unit_called_twice_and_retain_graph(world):
    lin, ref = FSDP(nn.Linear(3, 3)), nn.Linear(3, 3)
    ref.load_state_dict(lin.state_dict())
    for m in (lin, ref):
        loss = (m(m(_x())) ** 2).sum()
        loss.backward(retain_graph=True)
        loss.backward()
    np.testing.assert_allclose(lin._flat_param.grad[:9].numpy().reshape(3, 3),
                               ref.weight.grad.numpy(), rtol=1e-6)
    np.testing.assert_allclose(lin._flat_param.grad[9:].numpy(), ref.bias.grad.numpy(),
                               rtol=1e-6)


@pytest.mark.parametrize("prefetch", [False, True])
def test_prefetch_starts_the_next_units_gather_first(world, monkeypatch, prefetch):
    events = []
    start, post = FullyShardedDataParallel._start_gather, FullyShardedDataParallel._post_backward

    def gather(unit):
        events.append(("gather", unit.module.out_features))
        return start(unit)

    def reduce(unit, h, grads):
        events.append(("reduce", unit.module.out_features))
        return post(unit, h, grads)

    monkeypatch.setattr(FullyShardedDataParallel, "_start_gather", gather)
    monkeypatch.setattr(FullyShardedDataParallel, "_post_backward", reduce)
    model = FSDP(_mlp(), auto_wrap_policy=ModuleWrapPolicy({nn.Linear}),
                 forward_prefetch=prefetch,
                 backward_prefetch=BackwardPrefetch.BACKWARD_PRE if prefetch else None)
    for unit in FSDP.fsdp_modules(model)[1:]:
        unit.module.register_forward_pre_hook(
            lambda m, args: events.append(("run", m.out_features)))
    for _ in range(2):  # forward prefetch follows the order of the previous iteration
        events.clear()
        (model(_x()) ** 2).sum().backward()
    if prefetch:
        assert events == [("gather", 5), ("gather", 2), ("run", 5), ("run", 2),
                          ("gather", 2), ("gather", 5), ("reduce", 2), ("reduce", 5)]
    else:
        assert events[:4] == [("gather", 5), ("run", 5), ("gather", 2), ("run", 2)]
        assert events[4:6] == [("gather", 2), ("reduce", 2)]


def test_policies_pick_the_units(world):
    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b = nn.Linear(4, 4), nn.Linear(4, 4)

        def forward(self, x):
            return self.b(self.a(x))

    def units(model):
        return sorted(type(u.module).__name__ for u in FSDP.fsdp_modules(model))

    make = lambda: nn.Sequential(Block(), Block(), nn.Linear(4, 1))  # noqa: E731
    assert units(FSDP(make(), auto_wrap_policy=ModuleWrapPolicy({Block}))) == \
        ["Block", "Block", "Sequential"]
    by_size = functools.partial(size_based_auto_wrap_policy, min_num_params=30)
    assert units(FSDP(make(), auto_wrap_policy=by_size)) == ["Block", "Block", "Sequential"]
    layer = functools.partial(transformer_auto_wrap_policy, transformer_layer_cls={nn.Linear})
    assert units(FSDP(make(), auto_wrap_policy=layer)) == ["Linear"] * 5 + ["Sequential"]
    calls = []

    def plain(module, recurse, nonwrapped_numel):
        calls.append((type(module).__name__, recurse, nonwrapped_numel))
        return recurse or isinstance(module, nn.Linear) and module.out_features == 1

    model = FSDP(make(), auto_wrap_policy=plain)
    assert units(model) == ["Linear", "Sequential"]
    assert ("Sequential", True, 2 * 40 + 5) in calls and ("Linear", False, 5) in calls
    model(st.ones(2, 4)).sum().backward()
    assert all(p.grad is not None for p in model.parameters())


def test_state_dicts_round_trip(world):
    model = FSDP(_mlp(1), auto_wrap_policy=ModuleWrapPolicy({nn.Linear}))
    plain = _mlp(1)
    sd = model.state_dict()
    for k, v in plain.state_dict().items():
        assert bool((sd[k] == v).all()), k
    other = FSDP(_mlp(2), auto_wrap_policy=ModuleWrapPolicy({nn.Linear}))
    keys = other.load_state_dict(sd)
    assert keys.missing_keys == [] and keys.unexpected_keys == []
    for k, v in other.state_dict().items():
        assert bool((sd[k] == v).all()), k
    shards = model.sharded_state_dict()
    assert "_fsdp_world_size" in shards and "_fsdp_wrapped_module.0._flat_param" in shards
    third = FSDP(_mlp(3), auto_wrap_policy=ModuleWrapPolicy({nn.Linear}))
    third.load_sharded_state_dict(shards)
    for k, v in third.state_dict().items():
        assert bool((sd[k] == v).all()), k


def test_summon_full_params_and_clip(world):
    model = FSDP(_mlp(1))
    with FSDP.summon_full_params(model):
        model.module[2].bias.fill_(1.0)
    assert model.state_dict()["2.bias"].tolist() == [1.0, 1.0]
    with model.summon_full_params(writeback=False):
        model.module[2].bias.fill_(3.0)
    assert model.state_dict()["2.bias"].tolist() == [1.0, 1.0]
    ref = _mlp(1)
    ref.load_state_dict(model.state_dict())
    for m in (model, ref):
        (m(_x()) ** 2).sum().backward()
    want = nn.utils.clip_grad_norm_(ref.parameters(), 0.1, norm_type=float("inf")).item()
    assert abs(model.clip_grad_norm_(0.1, norm_type=float("inf")).item() - want) < 1e-6


def test_errors(world):
    model = FSDP(_mlp())
    with pytest.raises(ValueError, match="already a FullyShardedDataParallel"):
        FSDP(model)
    with pytest.raises(ValueError, match="already sharded"):
        FSDP(model.module)
    inner = nn.Sequential(FSDP(nn.Linear(2, 2)), nn.Linear(2, 2))
    with pytest.raises(ValueError, match="wrap by hand or by policy"):
        FSDP(inner, auto_wrap_policy=ModuleWrapPolicy({nn.Linear}))
    with pytest.raises(TypeError, match="expected an nn.Module"):
        FSDP(st.zeros(2))
    with pytest.raises(TypeError, match="sharding_strategy must be a ShardingStrategy"):
        FSDP(_mlp(), sharding_strategy="FULL_SHARD")
    with pytest.raises(TypeError, match="backward_prefetch"):
        FSDP(_mlp(), backward_prefetch="pre")
    with pytest.raises(TypeError, match="auto_wrap_policy must be callable"):
        FSDP(_mlp(), auto_wrap_policy={nn.Linear})
    with pytest.raises(TypeError, match="process_group must be a dist.Group"):
        FSDP(_mlp(), process_group="world")
    with pytest.raises(NotImplementedError, match="cpu_offload"):
        FSDP(_mlp(), cpu_offload=True)
    with pytest.raises(NotImplementedError, match="use_orig_params"):
        FSDP(_mlp(), use_orig_params=True)
    with pytest.raises(TypeError, match="not an nn.Module class"):
        ModuleWrapPolicy({int})
    mixed = nn.Sequential(nn.Linear(2, 2), nn.Linear(2, 2).double())
    with pytest.raises(ValueError, match="share a dtype and device"):
        FSDP(mixed)
    with pytest.raises(ValueError, match="device_id names"):
        FSDP(_mlp(), device_id="cuda:0")
    lin = nn.Linear(2, 2)
    weight = lin.weight
    outer = nn.Sequential(FSDP(lin), nn.Linear(2, 2))
    outer[1].weight = weight  # the outer layer holds the inner unit's original weight
    with pytest.raises(ValueError, match="shared with a nested unit"):
        FSDP(outer)
    model = FSDP(_mlp(), auto_wrap_policy=ModuleWrapPolicy({nn.Linear}))
    sd = model.state_dict()
    del sd["2.bias"]
    with pytest.raises(RuntimeError, match='Missing key\\(s\\) in state_dict: "2.bias"'):
        model.load_state_dict(sd)
    sd["2.bias"] = st.zeros(7)
    with pytest.raises(RuntimeError, match="size mismatch for 2.bias"):
        model.load_state_dict(sd)
    shards = model.sharded_state_dict()
    shards["_fsdp_world_size"] = st.tensor(4)
    with pytest.raises(ValueError, match="saved on 4 ranks"):
        model.load_sharded_state_dict(shards)
    shards = model.sharded_state_dict()
    del shards["_fsdp_wrapped_module.2._flat_param"]
    with pytest.raises(RuntimeError, match="missing key"):
        model.load_sharded_state_dict(shards)
    with pytest.raises(RuntimeError, match="root unit"):
        model.module[0].clip_grad_norm_(1.0)
    with pytest.raises(ValueError, match="max_norm"):
        model.clip_grad_norm_(-1.0)
    with pytest.raises(ValueError, match="rank0_only=True needs writeback=False"):
        with model.summon_full_params(rank0_only=True):
            pass

    def summon_inside(mod, inputs):
        with model.summon_full_params():
            pass

    model.module[0].module.register_forward_pre_hook(summon_inside)
    with pytest.raises(RuntimeError, match="inside forward"):
        model(_x())


def test_the_lazy_attribute():
    import singa_tensor.distributed.fsdp as fsdp

    assert dist.fsdp is fsdp and dist.fsdp.FullyShardedDataParallel is FSDP
    assert dist.tensor_parallel.__name__ == "singa_tensor.distributed.tensor_parallel"
    assert BackwardPrefetch.BACKWARD_POST.name == "BACKWARD_POST"
