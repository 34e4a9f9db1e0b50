"""distributed.tensor_parallel: Megatron-style column/row-parallel linears, the vocab-parallel
embedding and cross entropy. Multi-rank checks run under mpiexec (one spawn per world size)
against the same model unsplit on every rank; argument checks and the world-of-one behaviour
run in this process."""

from __future__ import annotations

import numpy as np
import pytest

import singa_tensor as st
import singa_tensor.distributed as dist
import singa_tensor.nn.functional as F
from singa_tensor import nn
from singa_tensor.distributed._base import Group
from singa_tensor.distributed.tensor_parallel import (
    MODEL_PARALLEL_RNG,
    ColumnParallelLinear,
    RNGStatesTracker,
    RowParallelLinear,
    VocabParallelEmbedding,
    all_gather_batch,
    get_rng_state_tracker,
    model_parallel_seed,
    vocab_parallel_cross_entropy,
)

from ..helpers import to_numpy
from .mpi_run import needs_mpi, run

# Every rank builds the full model from the same seed, converts it with from_linear /
# from_embedding and compares the sharded outputs and gradients (gathered back in rank order)
# with the full model's.
BODY = """
from singa_tensor import nn, optim
import singa_tensor.nn.functional as F
from singa_tensor.distributed.tensor_parallel import (
    ColumnParallelLinear, RowParallelLinear, VocabParallelEmbedding,
    vocab_parallel_cross_entropy, all_gather_batch, get_rng_state_tracker,
    model_parallel_seed)

dist.init_process_group()
rank, ws = dist.get_rank(), dist.get_world_size()
comm = dist.get_communicator()
rng = np.random.default_rng(0)
X = rng.standard_normal((6, 8)).astype(np.float32)
Y = st.tensor(rng.standard_normal((6, 5)).astype(np.float32))
H = 12

def gathered(t, dim):
    parts = [st.zeros(*t.shape) for _ in range(ws)]
    dist.all_gather(parts, t.contiguous())
    return np.concatenate([p.numpy() for p in parts], axis=dim)

def diff(a, b):
    a = a.detach().numpy() if hasattr(a, "numpy") else a
    b = b.detach().numpy() if hasattr(b, "numpy") else b
    return float(np.abs(np.asarray(a) - np.asarray(b)).max())

def loss_of(a, b, x):
    return ((b(a(x).tanh()) - Y) ** 2).mean()

out = {}
# Column(gather_output=False) -> Row(input_is_parallel=True), and the gathering/splitting pair
for name, gather in (("pair", False), ("gathered", True)):
    st.manual_seed(0)
    fc1, fc2 = nn.Linear(8, H), nn.Linear(H, 5)
    col = ColumnParallelLinear.from_linear(fc1, gather_output=gather)
    row = RowParallelLinear.from_linear(fc2, input_is_parallel=not gather)
    xf, xt = st.tensor(X, requires_grad=True), st.tensor(X, requires_grad=True)
    lf = loss_of(fc1, fc2, xf)
    lf.backward()
    sent = comm.bytes_sent
    lt = loss_of(col, row, xt)
    fwd = comm.bytes_sent - sent
    lt.backward()
    bwd = comm.bytes_sent - sent - fwd
    out[name] = {
        "shard": list(col.weight.shape) + list(row.weight.shape),
        "loss": diff(lf.detach(), lt.detach()),
        "out": diff(fc2(fc1(st.tensor(X)).tanh()).detach(),
                    row(col(st.tensor(X)).tanh()).detach()),
        "x": diff(xf.grad, xt.grad),
        "w1": diff(fc1.weight.grad, gathered(col.weight.grad, 0)),
        "b1": diff(fc1.bias.grad, gathered(col.bias.grad, 0)),
        "w2": diff(fc2.weight.grad, gathered(row.weight.grad, 1)),
        "b2": diff(fc2.bias.grad, row.bias.grad),
        "bytes": [fwd, bwd]}

# a few SGD steps with momentum: the same parameters as the full model's
st.manual_seed(1)
fc1, fc2 = nn.Linear(8, H), nn.Linear(H, 5)
col = ColumnParallelLinear.from_linear(fc1, gather_output=False)
row = RowParallelLinear.from_linear(fc2, input_is_parallel=True)
of = optim.SGD(list(fc1.parameters()) + list(fc2.parameters()), lr=0.1, momentum=0.9)
ot = optim.SGD(list(col.parameters()) + list(row.parameters()), lr=0.1, momentum=0.9)
for _ in range(4):
    of.zero_grad(); loss_of(fc1, fc2, st.tensor(X)).backward(); of.step()
    ot.zero_grad(); loss_of(col, row, st.tensor(X)).backward(); ot.step()
out["sgd"] = max(diff(fc1.weight, gathered(col.weight.detach(), 0)),
                 diff(fc1.bias, gathered(col.bias.detach(), 0)),
                 diff(fc2.weight, gathered(row.weight.detach(), 1)),
                 diff(fc2.bias, row.bias))

# embedding -> column-parallel head -> vocab-parallel cross entropy
V, D = 16, 6
st.manual_seed(2)
emb, head = nn.Embedding(V, D), nn.Linear(D, V)
vemb = VocabParallelEmbedding.from_embedding(emb)
vhead = ColumnParallelLinear.from_linear(head, gather_output=False)
ids = st.tensor(np.array([[0, 3, 15, 7], [8, 8, 1, 12], [4, 11, 2, 9]], dtype=np.int64))
target = st.tensor(np.array([[15, 0, 7, 8], [3, 12, 5, 1], [10, 9, 14, 4]], dtype=np.int64))
full_logits = head(emb(ids))
lf = F.cross_entropy(full_logits.reshape(-1, V), target.reshape(-1))
lf.backward()
local = vhead(vemb(ids))
lt = vocab_parallel_cross_entropy(local, target)
lt.backward()
nf = F.cross_entropy(full_logits.detach().reshape(-1, V), target.reshape(-1), reduction="none")
nt = vocab_parallel_cross_entropy(local.detach(), target, reduction="none")
out["ce"] = {
    "shard": list(vemb.weight.shape) + list(local.shape),
    "emb_out": diff(emb(ids).detach(), vemb(ids).detach()),
    "loss": diff(lf.detach(), lt.detach()),
    "none": diff(nf.reshape(3, 4), nt) if tuple(nt.shape) == (3, 4) else 1e9,
    "sum": diff(nf.sum(), vocab_parallel_cross_entropy(local.detach(), target, reduction="sum")),
    "emb": diff(emb.weight.grad, gathered(vemb.weight.grad, 0)),
    "head_w": diff(head.weight.grad, gathered(vhead.weight.grad, 0)),
    "head_b": diff(head.bias.grad, gathered(vhead.bias.grad, 0))}

# padding_idx: the row starts at zero on the rank holding it and never gets a gradient
st.manual_seed(3)
pemb = nn.Embedding(V, D, padding_idx=5)
pv = VocabParallelEmbedding.from_embedding(pemb)
pids = st.tensor(np.array([[5, 3, 15, 5], [0, 8, 5, 12]], dtype=np.int64))
(pemb(pids) ** 2).sum().backward()
(pv(pids) ** 2).sum().backward()
fresh = VocabParallelEmbedding(V, D, padding_idx=-1)  # row 15, on the last rank
out["pad"] = {"out": diff(pemb(pids).detach(), pv(pids).detach()),
              "grad": diff(pemb.weight.grad, gathered(pv.weight.grad, 0)),
              "pad_grad": float(np.abs(gathered(pv.weight.grad, 0)[5]).max()),
              "fresh_row": float(np.abs(gathered(fresh.weight.detach(), 0)[15]).max()),
              "local": [pv.local_padding_idx, fresh.local_padding_idx]}

# ignore_index and label_smoothing against F.cross_entropy on the full logits
L = rng.standard_normal((3, 4, V)).astype(np.float32)
per = V // ws
T = np.array([[15, -100, 7, 8], [3, 12, -100, 1], [10, 9, 14, 4]], dtype=np.int64)
ce2 = {}
for ignore, eps in ((-100, 0.0), (-100, 0.2), (3, 0.1)):
    for red in ("mean", "sum", "none"):
        full = st.tensor(L, requires_grad=True)
        mine = st.tensor(L[..., rank * per:(rank + 1) * per], requires_grad=True)
        t = st.tensor(np.where(T == -100, ignore, T))
        ref = F.cross_entropy(full.reshape(-1, V), t.reshape(-1), ignore_index=ignore,
                              label_smoothing=eps, reduction=red)
        got = vocab_parallel_cross_entropy(mine, t, ignore_index=ignore, label_smoothing=eps,
                                           reduction=red)
        w = st.tensor(rng.standard_normal(tuple(got.shape)).astype(np.float32))
        (ref.reshape(tuple(got.shape)) * w).sum().backward()
        (got * w).sum().backward()
        ce2[f"{ignore} {eps} {red}"] = [
            list(got.shape), diff(ref.reshape(tuple(got.shape)), got),
            diff(full.grad, gathered(mine.grad, -1))]
none = vocab_parallel_cross_entropy(st.tensor(L[..., rank * per:(rank + 1) * per]),
                                    st.tensor(T * 0 - 100))
out["ce2"] = {"cases": ce2, "all_ignored": str(none.item())}

# all_gather_batch: the group's rows in rank order; the gradient is this rank's rows x size
XB, G = (rng.standard_normal((2 * ws, 3)).astype(np.float32) for _ in range(2))
xb = st.tensor(XB[2 * rank:2 * rank + 2], requires_grad=True)
yb = all_gather_batch(xb)
(yb * st.tensor(G)).sum().backward()
out["batch"] = {"fwd": diff(yb.detach(), XB),
                "grad": diff(xb.grad, ws * G[2 * rank:2 * rank + 2])}

# random streams: the default one alike on every rank, the forked one per rank
tracker = get_rng_state_tracker()
model_parallel_seed(42)
a = st.rand(6)
with tracker.fork():
    m = st.rand(6)
b = st.rand(6)
model_parallel_seed(42)
a2, b2 = st.rand(6), st.rand(6)
with tracker.fork():
    m2 = st.rand(6)
ga, gm = gathered(a, 0).reshape(ws, 6), gathered(m, 0).reshape(ws, 6)
out["rng"] = {"default_same": bool((ga == ga[0]).all()),
              "forked_distinct": len({tuple(r) for r in gm.tolist()}) == ws,
              "default_undisturbed": diff(b, b2) == 0.0 and diff(a, a2) == 0.0,
              "forked_repeatable": diff(m, m2) == 0.0}
# dropout on the sharded hidden layer inside fork(): the unsplit model with the ranks' masks
# side by side gives the same output
st.manual_seed(4)
fc1, fc2 = nn.Linear(8, H), nn.Linear(H, 5)
col = ColumnParallelLinear.from_linear(fc1, gather_output=False)
row = RowParallelLinear.from_linear(fc2, input_is_parallel=True)
model_parallel_seed(7)
with tracker.fork():
    mask = F.dropout(st.ones(6, H // ws), 0.5)
full_mask = st.tensor(gathered(mask, 1))
model_parallel_seed(7)
with tracker.fork():
    ht = F.dropout(col(st.tensor(X)).relu(), 0.5)
yt = row(ht)
yf = fc2(fc1(st.tensor(X)).relu() * full_mask)
out["rng"]["dropout"] = diff(yf.detach(), yt.detach())
out["rng"]["kept"] = float((full_mask.numpy() > 0).mean())

# the checks that need more than one rank
errors = {}
for key, make in (("uneven", lambda: ColumnParallelLinear(4, 5 * ws + 1)),
                  ("uneven_row", lambda: RowParallelLinear(5 * ws + 1, 4)),
                  ("uneven_vocab", lambda: VocabParallelEmbedding(5 * ws + 1, 2)),
                  ("parallel_input", lambda: RowParallelLinear(8, 4, input_is_parallel=True)(
                      st.zeros(2, 8))),
                  ("bad_id", lambda: vemb(st.tensor([V]))),
                  ("bad_target", lambda: vocab_parallel_cross_entropy(local, target * 0 + V)),
                  ("bad_target_ignore", lambda: vocab_parallel_cross_entropy(
                      local, target * 0 - 1, ignore_index=-100)),
                  ("uneven_batch", lambda: all_gather_batch(st.zeros(rank + 1, 2)))):
    try:
        make()
        errors[key] = "no error"
    except Exception as e:
        errors[key] = f"{type(e).__name__}: {e}"
out["errors"] = errors
report(out)
"""


def _check_world(n: int) -> None:
    res, _ = run(n, BODY, timeout=120)
    assert sorted(res) == list(range(n))
    h = 12 // n
    for r in range(n):
        out = res[r]
        for name in ("pair", "gathered"):
            o = out[name]
            assert o["shard"] == [h, 8, 5, h], (name, o["shard"])
            for key in ("loss", "out", "x", "w1", "b1", "w2", "b2"):
                assert o[key] < 1e-5, (n, r, name, key, o[key])
        # the pair: one all-reduce of the (6, 5) output forward, one of the (6, 8) input's
        # gradient backward; each counted as a ring all-reduce's 2 (R-1)/R of the bytes
        ring = lambda nbytes: 2 * (n - 1) * nbytes // n  # noqa: E731
        assert out["pair"]["bytes"] == [ring(6 * 5 * 4), ring(6 * 8 * 4)]
        assert out["sgd"] < 1e-5, (n, r, out["sgd"])
        ce = out["ce"]
        assert ce["shard"] == [16 // n, 6, 3, 4, 16 // n]
        for key in ("emb_out", "loss", "none", "sum", "emb", "head_w", "head_b"):
            assert ce[key] < 1e-5, (n, r, key, ce[key])
        pad = out["pad"]
        assert pad["out"] < 1e-6 and pad["grad"] < 1e-6, (n, r, pad)
        assert pad["pad_grad"] == 0.0 and pad["fresh_row"] == 0.0, (n, r, pad)
        per = 16 // n
        assert pad["local"] == [5 - r * per if r == 5 // per else None,
                                per - 1 if r == n - 1 else None]
        for case, (shape, value, grad) in out["ce2"]["cases"].items():
            assert shape == ([3, 4] if case.endswith("none") else []), (case, shape)
            assert value < 1e-5 and grad < 1e-6, (n, r, case, value, grad)
        assert out["ce2"]["all_ignored"] == "nan"
        assert out["batch"]["fwd"] == 0.0 and out["batch"]["grad"] < 1e-6, out["batch"]
        rng = out["rng"]
        assert rng["default_same"] and rng["forked_distinct"], (n, r, rng)
        assert rng["default_undisturbed"] and rng["forked_repeatable"], (n, r, rng)
        assert rng["dropout"] < 1e-5 and 0.2 < rng["kept"] < 0.8, (n, r, rng)
        e = out["errors"]
        assert e["uneven"].startswith("ValueError: ColumnParallelLinear: out_features=")
        assert f"does not split evenly over {n} ranks" in e["uneven"]
        assert e["uneven_row"].startswith("ValueError: RowParallelLinear: in_features=")
        assert e["uneven_vocab"].startswith("ValueError: VocabParallelEmbedding: num_embeddings=")
        assert e["parallel_input"].startswith("ValueError: RowParallelLinear: input of shape "
                                              "(2, 8)")
        assert f"must be {8 // n} (in_features / group size" in e["parallel_input"]
        assert e["bad_id"] == ("IndexError: VocabParallelEmbedding: index 16 is out of range for "
                               "num_embeddings=16")
        assert e["bad_target"].startswith("IndexError: vocab_parallel_cross_entropy: index 16")
        assert e["bad_target_ignore"] == (
            "IndexError: vocab_parallel_cross_entropy: index -1 is out of range for the "
            "vocabulary size (V = last dim x group size)=16, nor ignore_index=-100")
        assert e["uneven_batch"].startswith("DistributedError: all_gather: the ranks called it "
                                            "with different arguments"), e["uneven_batch"]


@needs_mpi
def test_tensor_parallel_two_ranks():
    _check_world(2)


@needs_mpi
def test_tensor_parallel_four_ranks():
    _check_world(4)


# ---- a world of one, or no process group: nn.Linear and nn.Embedding exactly ------------------


@pytest.mark.parametrize("initialized", [False, True])
def test_alone_the_layers_are_linear_and_embedding(initialized):
    if initialized:
        dist.init_process_group()
    x = st.randn(3, 4, requires_grad=True)
    for cls in (ColumnParallelLinear, RowParallelLinear):
        st.manual_seed(5)
        ref = nn.Linear(4, 6)
        st.manual_seed(5)
        m = cls(4, 6)  # the same initialization as nn.Linear's
        assert m.tp_size == 1 and m.weight.shape == (6, 4)
        np.testing.assert_array_equal(to_numpy(m.weight), to_numpy(ref.weight))
        np.testing.assert_array_equal(to_numpy(m.bias), to_numpy(ref.bias))
        ya, yb = ref(x), m(x)
        np.testing.assert_array_equal(to_numpy(yb), to_numpy(ya))
        ga = st.autograd.grad(ya.sum(), [x, ref.weight])
        gb = st.autograd.grad(yb.sum(), [x, m.weight])
        for a, b in zip(ga, gb):
            np.testing.assert_array_equal(to_numpy(b), to_numpy(a))
        c = cls.from_linear(ref)
        np.testing.assert_array_equal(to_numpy(c(x)), to_numpy(ya))
    emb = nn.Embedding(7, 3)
    vemb = VocabParallelEmbedding.from_embedding(emb)
    ids = st.tensor([[0, 6], [3, 3]])
    np.testing.assert_array_equal(to_numpy(vemb(ids)), to_numpy(emb(ids)))
    with pytest.raises(IndexError):  # nn.Embedding's own error for an id outside the table
        vemb(st.tensor([7]))
    logits = st.randn(2, 3, 7, requires_grad=True)
    target = st.tensor([[0, 6, 2], [1, 5, 3]])
    ref = F.cross_entropy(logits.reshape(-1, 7), target.reshape(-1), reduction="none")
    got = vocab_parallel_cross_entropy(logits, target, reduction="none")
    assert got.shape == (2, 3)
    np.testing.assert_array_equal(to_numpy(got).ravel(), to_numpy(ref))
    got = vocab_parallel_cross_entropy(logits, target)
    got.backward()
    g = logits.grad.numpy()
    logits.grad = None
    F.cross_entropy(logits.reshape(-1, 7), target.reshape(-1)).backward()
    np.testing.assert_array_equal(g, logits.grad.numpy())


def test_a_group_of_one_rank_communicates_nothing():
    dist.init_process_group()
    g = dist.new_group([0])
    comm = dist.get_communicator()
    col = ColumnParallelLinear(4, 6, gather_output=True, group=g)
    row = RowParallelLinear(6, 2, group=g)
    before = comm.bytes_sent
    row(col(st.randn(3, 4, requires_grad=True))).sum().backward()
    assert comm.bytes_sent == before
    assert col.weight.grad.shape == (6, 4) and row.weight.grad.shape == (2, 6)


def test_wrong_input_sizes():
    col, row = ColumnParallelLinear(4, 6), RowParallelLinear(4, 6, input_is_parallel=True)
    with pytest.raises(ValueError, match=r"ColumnParallelLinear: input of shape \(2, 5\) does "
                                         r"not match the layer: the last input dimension must "
                                         r"be 4 \(in_features\)"):
        col(st.zeros(2, 5))
    with pytest.raises(ValueError, match=r"RowParallelLinear: input of shape \(\) "):
        row(st.tensor(1.0))
    with pytest.raises(TypeError, match="RowParallelLinear: input must be a Tensor, got list"):
        row([1.0, 2.0])
    with pytest.raises(TypeError, match="VocabParallelEmbedding: input must be a Tensor"):
        VocabParallelEmbedding(4, 2)([1])


def test_bad_groups():
    with pytest.raises(TypeError, match="ColumnParallelLinear: group must be a dist.Group from "
                                        "new_group.. or None, got int"):
        ColumnParallelLinear(4, 6, group=0)
    with pytest.raises(TypeError, match="vocab_parallel_cross_entropy: group must be a dist"):
        vocab_parallel_cross_entropy(st.zeros(2, 3), st.tensor([0, 1]), group="world")
    # a Group that outlived its process group
    dist.init_process_group()
    g = dist.new_group([0])
    dist.destroy_process_group()
    with pytest.raises(RuntimeError, match="process group is not initialized"):
        RowParallelLinear(4, 6, group=g)
    # a group this rank does not belong to
    dist.init_process_group()
    outsider = Group([1], -1, None)
    with pytest.raises(ValueError, match=r"VocabParallelEmbedding: this rank is not a member "
                                         r"of Group\(ranks=\[1\], rank=-1\)"):
        VocabParallelEmbedding(4, 2, group=outsider)


def test_bad_sizes_and_conversions():
    with pytest.raises(ValueError, match="ColumnParallelLinear: out_features must be a "
                                         "non-negative int, got 2.5"):
        ColumnParallelLinear(4, 2.5)
    with pytest.raises(TypeError, match="ColumnParallelLinear.from_linear: expected an "
                                        "nn.Linear, got Embedding"):
        ColumnParallelLinear.from_linear(nn.Embedding(3, 2))
    with pytest.raises(TypeError, match="RowParallelLinear.from_linear: expected an nn.Linear"):
        RowParallelLinear.from_linear(st.zeros(2, 2))
    with pytest.raises(TypeError, match="VocabParallelEmbedding.from_embedding: expected an "
                                        "nn.Embedding, got Linear"):
        VocabParallelEmbedding.from_embedding(nn.Linear(2, 2))
    no_bias = ColumnParallelLinear.from_linear(nn.Linear(3, 2, bias=False))
    assert no_bias.bias is None and no_bias(st.ones(1, 3)).shape == (1, 2)


def test_cross_entropy_argument_checks():
    name = "vocab_parallel_cross_entropy"
    logits, target = st.zeros(2, 5), st.tensor([0, 4])
    with pytest.raises(ValueError, match=f"{name}: reduction must be 'mean', 'sum' or 'none', "
                                         f"got 'avg'"):
        vocab_parallel_cross_entropy(logits, target, reduction="avg")
    with pytest.raises(ValueError, match=rf"{name}: target of shape \(3,\) must have the shape "
                                         rf"of logits_local without its last dim, \(2,\)"):
        vocab_parallel_cross_entropy(logits, st.tensor([0, 1, 2]))
    with pytest.raises(ValueError, match=f"{name}: logits_local must be a floating tensor"):
        vocab_parallel_cross_entropy(st.tensor([[1, 2]]), st.tensor([0]))
    with pytest.raises(TypeError, match=f"{name}: logits_local and target must be Tensors"):
        vocab_parallel_cross_entropy(logits, [0, 4])


def test_double_backward_through_the_communication_ops():
    # the Functions' backwards are themselves Functions: gradients of gradients are recorded
    from singa_tensor.distributed import tensor_parallel as tp

    x = st.tensor([1.0, 2.0, 3.0, 4.0], requires_grad=True)
    for fn, args in ((tp._CopyToGroup, (None,)), (tp._ReduceFromGroup, (None,)),
                     (tp._GatherFromGroup, (None, 0, 1)), (tp._SplitToGroup, (None, 0, 1))):
        dist.init_process_group()
        y = fn.apply(x * x, *args)
        (g,) = st.autograd.grad(y.sum(), [x], create_graph=True)
        np.testing.assert_allclose(to_numpy(g), [2.0, 4.0, 6.0, 8.0])
        (gg,) = st.autograd.grad(g.sum(), [x])
        np.testing.assert_allclose(to_numpy(gg), [2.0, 2.0, 2.0, 2.0])
        dist.destroy_process_group()


def test_reachable_as_dist_tensor_parallel():
    assert dist.tensor_parallel.ColumnParallelLinear is ColumnParallelLinear


# ---- padding_idx, the embedding's refusals, the cross entropy's options (world of one) --------


def test_padding_idx_alone_is_nn_embedding():
    st.manual_seed(8)
    ref = nn.Embedding(7, 3, padding_idx=-2)
    st.manual_seed(8)
    m = VocabParallelEmbedding(7, 3, padding_idx=-2)
    assert m.padding_idx == 5 and m.local_padding_idx == 5
    np.testing.assert_array_equal(to_numpy(m.weight), to_numpy(ref.weight))
    ids = st.tensor([[5, 1], [5, 6]])
    (m(ids) ** 2).sum().backward()
    (ref(ids) ** 2).sum().backward()
    np.testing.assert_array_equal(to_numpy(m.weight.grad), to_numpy(ref.weight.grad))
    assert not to_numpy(m.weight.grad)[5].any()
    conv = VocabParallelEmbedding.from_embedding(ref)
    assert conv.padding_idx == 5 and "padding_idx=5" in repr(conv)


def test_embedding_refuses_what_it_does_not_implement():
    for kw in ({"max_norm": 1.0}, {"scale_grad_by_freq": True}, {"sparse": True}):
        (key, value), = kw.items()
        with pytest.raises(NotImplementedError, match=f"VocabParallelEmbedding: {key}={value} "
                                                      f"is not supported"):
            VocabParallelEmbedding(4, 2, **kw)
    with pytest.raises(ValueError, match="VocabParallelEmbedding: padding_idx must be within "
                                         "num_embeddings=4, got 4"):
        VocabParallelEmbedding(4, 2, padding_idx=4)
    with pytest.raises(TypeError, match="VocabParallelEmbedding: padding_idx must be an int or "
                                        "None, got float"):
        VocabParallelEmbedding(4, 2, padding_idx=1.0)


@pytest.mark.parametrize("ignore_index, eps", [(-100, 0.0), (2, 0.3), (-100, 1.0)])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cross_entropy_options_alone_are_f_cross_entropy(ignore_index, eps, reduction):
    logits = st.randn(2, 3, 7, requires_grad=True)
    target = st.tensor([[0, ignore_index, 2], [1, 5, 2]])
    ref = F.cross_entropy(logits.reshape(-1, 7), target.reshape(-1), ignore_index=ignore_index,
                          label_smoothing=eps, reduction=reduction)
    got = vocab_parallel_cross_entropy(logits, target, ignore_index=ignore_index,
                                       label_smoothing=eps, reduction=reduction)
    np.testing.assert_allclose(to_numpy(got).ravel(), to_numpy(ref).ravel(), rtol=1e-6)


def test_cross_entropy_option_checks():
    name = "vocab_parallel_cross_entropy"
    logits, target = st.zeros(2, 5), st.tensor([0, 4])
    with pytest.raises(ValueError, match=f"{name}: label_smoothing must be in \\[0, 1\\], got "
                                         f"1.5"):
        vocab_parallel_cross_entropy(logits, target, label_smoothing=1.5)
    with pytest.raises(ValueError, match=f"{name}: label_smoothing must be in"):
        vocab_parallel_cross_entropy(logits, target, label_smoothing="0.1")
    with pytest.raises(TypeError, match=f"{name}: ignore_index must be an int, got 0.5"):
        vocab_parallel_cross_entropy(logits, target, ignore_index=0.5)


def test_all_gather_batch_alone_and_its_checks():
    x = st.ones(2, 3, requires_grad=True)
    assert all_gather_batch(x) is x
    with pytest.raises(TypeError, match="all_gather_batch: input must be a Tensor, got list"):
        all_gather_batch([1.0])
    with pytest.raises(ValueError, match="all_gather_batch: input must have a batch dimension"):
        all_gather_batch(st.tensor(1.0))
    with pytest.raises(TypeError, match="all_gather_batch: group must be a dist.Group"):
        all_gather_batch(x, group=1)


# ---- the random-stream tracker ----------------------------------------------------------------


def test_fork_draws_from_its_stream_and_leaves_the_default_one_alone():
    t = RNGStatesTracker()
    t.add("a", 11)
    st.manual_seed(0)
    first, second = st.rand(4).tolist(), st.rand(4).tolist()
    st.manual_seed(0)
    assert st.rand(4).tolist() == first
    with t.fork("a"):
        inside = st.rand(4).tolist()
        assert F.dropout(st.ones(3), 0.5).shape == (3,)
    assert st.rand(4).tolist() == second  # as if nothing had been drawn in between
    assert inside == st.rand(4, generator=st.Generator().manual_seed(11)).tolist()
    saved = t.get_states()
    with t.fork("a"):
        after = st.rand(4).tolist()  # the stream continues where it stopped
    t.set_states(saved)
    with t.fork("a"):
        assert st.rand(4).tolist() == after
    assert inside != after


def test_model_parallel_seed_alone():
    model_parallel_seed(5)
    tracker = get_rng_state_tracker()
    assert list(tracker.get_states()) == [MODEL_PARALLEL_RNG]
    a = st.rand(3).tolist()
    st.manual_seed(5)
    assert st.rand(3).tolist() == a  # the default stream is plainly seeded
    with tracker.fork():
        m = st.rand(3).tolist()
    model_parallel_seed(5)  # resets the tracker: the same streams again
    with tracker.fork():
        assert st.rand(3).tolist() == m
    assert m != a


def test_tracker_errors():
    t = RNGStatesTracker()
    with pytest.raises(RuntimeError, match="RNGStatesTracker.fork: no stream named 'x'; call "
                                           "model_parallel_seed"):
        with t.fork("x"):
            pass
    t.add("x", 1)
    with pytest.raises(ValueError, match="RNGStatesTracker.add: a stream named 'x' exists"):
        t.add("x", 2)
    with pytest.raises(ValueError, match="RNGStatesTracker.add: seed 1 is already used"):
        t.add("y", 1)
    with pytest.raises(TypeError, match="RNGStatesTracker.add: seed must be an int, got float"):
        t.add("y", 1.0)
    with pytest.raises(TypeError, match="RNGStatesTracker.add: name must be a str, got int"):
        t.add(3, 3)
    with pytest.raises(RuntimeError, match=r"already inside fork\('x'\)"):
        with t.fork("x"), t.fork("x"):
            pass
    with t.fork("x"):  # usable again after the failed nesting
        pass
    with pytest.raises(TypeError, match="RNGStatesTracker.set_states: expected the dict"):
        t.set_states([1, 2])
    with pytest.raises(ValueError, match="RNGStatesTracker.set_states: the state of 'x' must "
                                         "be a \\(seed, offset\\) pair"):
        t.set_states({"x": 3})
    t.reset()
    assert t.get_states() == {}
    with pytest.raises(TypeError, match="model_parallel_seed: seed must be an int, got str"):
        model_parallel_seed("1")
