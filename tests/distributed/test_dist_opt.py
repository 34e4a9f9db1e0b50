"""optim.DistOpt: bucketed gradient averaging overlapped with backward, and its half-precision,
sparse and partial modes. Multi-rank checks run under mpiexec (one spawn per world size);
argument checks run in this process, which is a world of one."""

from __future__ import annotations

import numpy as np
import pytest

import singa_tensor as st
from singa_tensor import nn, optim
from singa_tensor.optim.dist_opt import plan_buckets

from ..helpers import to_numpy
from .mpi_run import needs_mpi, run

# Every rank trains the same MLP (initialized differently per rank, so the broadcast matters)
# on its slice of one global batch; the reference is single-process training on the whole
# batch from rank 0's initialization.
BODY = """
from singa_tensor import nn, optim

dist.init_process_group()
rank, ws = dist.get_rank(), dist.get_world_size()
B = 4
rng = np.random.default_rng(0)
X = rng.standard_normal((ws * B, 8)).astype(np.float32)
Y = rng.standard_normal((ws * B, 4)).astype(np.float32)
sl = slice(rank * B, (rank + 1) * B)

def make(seed):
    st.manual_seed(seed)
    return nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 4))

def flat(m):
    return np.concatenate([p.detach().numpy().ravel() for p in m.parameters()])

def spread(a):
    # the largest difference between this rank's values and any other rank's
    got = [st.zeros(a.size) for _ in range(ws)]
    dist.all_gather(got, st.tensor(a))
    return float(max(np.abs(g.numpy() - a).max() for g in got))

def loss_of(m, x, y):
    return ((m(st.tensor(x)) - st.tensor(y)) ** 2).mean()

out = {}
makers = {"sgd": lambda ps: optim.SGD(ps, lr=0.1, momentum=0.9),
          "adam": lambda ps: optim.Adam(ps, lr=0.01)}
for name, mk, thr in [("sgd", "sgd", None), ("sgd_buckets", "sgd", 200),
                      ("adam_buckets", "adam", 300)]:
    ref = make(100)
    ropt = makers[mk](list(ref.parameters()))
    for _ in range(4):
        ropt.zero_grad(); loss_of(ref, X, Y).backward(); ropt.step()
    m = make(100 + rank)
    opt = optim.DistOpt(makers[mk](list(m.parameters())))
    if name == "sgd":
        out["bcast_diff"] = float(np.abs(flat(m) - flat(make(100))).max())
    for _ in range(4):
        nbytes = opt.backward_and_update(loss_of(m, X[sl], Y[sl]), threshold=thr)
    out[name] = float(np.abs(flat(m) - flat(ref)).max())
    out[name + "_bytes"] = nbytes
    out[name + "_nbuckets"] = len(opt._plan(thr or opt.bucket_bytes, None))

# SINGA's idiom: a Model whose train_one_batch calls self.optimizer(loss), with a DistOpt set
# through set_optimizer (and a DistOpt called directly, as SINGA's is), averages like
# backward_and_update
from singa_tensor import model as st_model

class Net(st_model.Model):
    def __init__(self, seed):
        super().__init__()
        self.body = make(seed)

    def forward(self, x):
        return self.body(x)

    def train_one_batch(self, x, y):
        loss = ((self.forward(x) - y) ** 2).mean()
        self.optimizer(loss)
        return None, loss

ref = make(100)
ropt = makers["sgd"](list(ref.parameters()))
for _ in range(4):
    ropt.zero_grad(); loss_of(ref, X, Y).backward(); ropt.step()
net = Net(100 + rank)
net.set_optimizer(optim.DistOpt(makers["sgd"](list(net.parameters()))))
net.compile([st.tensor(X[sl])], is_train=True)
for _ in range(4):
    net(st.tensor(X[sl]), st.tensor(Y[sl]))
out["model_idiom"] = float(np.abs(flat(net.body) - flat(ref)).max())
m = make(100 + rank)
opt = optim.DistOpt(makers["sgd"](list(m.parameters())))
for _ in range(4):
    opt(loss_of(m, X[sl], Y[sl]))
out["called"] = float(np.abs(flat(m) - flat(ref)).max())

# the compressed modes on the same problem: the loss on the whole batch must fall
for mode, kw in [("half", {"clipping": True, "clip_value": 1.0}),
                 ("sparse_topk", {"spars": 0.1, "topK": True}),
                 ("sparse_abs", {"spars": 0.2, "topK": False}),
                 ("partial", {"threshold": 300})]:
    m = make(7)
    opt = optim.DistOpt(optim.SGD(list(m.parameters()), lr=0.1))
    fn = {"half": opt.backward_and_update_half, "partial": opt.backward_and_partial_update
          }.get(mode, opt.backward_and_sparse_update)
    first = float(loss_of(m, X, Y).item())
    sent = []
    for _ in range(30):
        sent.append(fn(loss_of(m, X[sl], Y[sl]), **kw))
    out[mode] = [first, float(loss_of(m, X, Y).item()), max(sent), opt.last_bytes_sent,
                 sum(sent) / len(sent)]
    out[mode + "_spread"] = spread(flat(m))
    if mode == "partial":
        # the slice averaged by the last call is equal on every rank
        chosen = opt._plan(300, None)[(opt._partial - 1) % len(opt._plan(300, None))]
        out["partial_last_spread"] = spread(np.concatenate(
            [opt.params[i].detach().numpy().ravel() for i in chosen]))
report(out)
"""

FULL_BYTES = (8 * 16 + 16 + 16 * 4 + 4) * 4


def _check_world(n: int) -> None:
    res, _ = run(n, BODY, timeout=50)
    assert sorted(res) == list(range(n))
    for r in range(n):
        out = res[r]
        assert out["bcast_diff"] == 0.0
        for name in ("sgd", "sgd_buckets", "adam_buckets"):
            assert out[name] < 1e-5, (n, r, name, out[name])
            assert out[name + "_bytes"] == FULL_BYTES
        assert out["sgd_nbuckets"] == 1
        assert out["model_idiom"] < 1e-5 and out["called"] < 1e-5, out
        assert out["sgd_buckets_nbuckets"] == 4
        assert out["adam_buckets_nbuckets"] >= 2
        half = out["half"]
        assert half[1] < 0.8 * half[0] and half[2] == FULL_BYTES // 2
        for mode in ("sparse_topk", "sparse_abs"):
            first, last, _, _, mean = out[mode]
            assert last < 0.9 * first, (mode, first, last)
            assert mean < FULL_BYTES / 2, (mode, mean)
        # top-k 10%: 12 + 1 + 6 + 1 entries of a float32 value and an int32 index
        assert out["sparse_topk"][3] == 20 * 8
        # slices of <= 300 bytes (the 512-byte weight alone): 272, 64, 512 bytes in turn
        first, last, most, _, mean = out["partial"]
        assert last < 0.8 * first and most == 512 and mean == pytest.approx(848 / 3)
        # every synchronous mode keeps the replicas identical; partial keeps them close, and
        # the slice averaged last is identical
        for mode in ("half", "sparse_topk", "sparse_abs"):
            assert out[mode + "_spread"] < 1e-6, (mode, out[mode + "_spread"])
        assert 0 < out["partial_spread"] < 0.5, out["partial_spread"]
        assert out["partial_last_spread"] < 1e-6


@needs_mpi
def test_dist_opt_two_ranks():
    _check_world(2)


@needs_mpi
def test_dist_opt_four_ranks():
    _check_world(4)


# ---- a world of one: no mpiexec ---------------------------------------------------------------


def _model(seed: int = 0):
    st.manual_seed(seed)
    return nn.Sequential(nn.Linear(3, 5), nn.Tanh(), nn.Linear(5, 2))


def _loss(m):
    x = st.tensor(np.linspace(-1, 1, 12, dtype=np.float32).reshape(4, 3))
    return (m(x) ** 2).mean()


def test_world_of_one_matches_plain_optimizer():
    a, b = _model(), _model()
    oa = optim.SGD(list(a.parameters()), lr=0.2, momentum=0.5)
    ob = optim.DistOpt(optim.SGD(list(b.parameters()), lr=0.2, momentum=0.5), bucket_bytes=40)
    for _ in range(3):
        oa.zero_grad()
        _loss(a).backward()
        oa.step()
        assert ob.backward_and_update(_loss(b)) == 0  # a world of one sends nothing
    for pa, pb in zip(a.parameters(), b.parameters()):
        np.testing.assert_allclose(to_numpy(pb), to_numpy(pa), atol=1e-7)
    assert ob.last_bytes_sent == 0
    assert ob.param_groups[0]["lr"] == 0.2  # the wrapped optimizer shows through


def test_sparse_everything_equals_full_and_error_feedback_keeps_the_rest():
    a, b = _model(), _model()
    oa = optim.DistOpt(optim.SGD(list(a.parameters()), lr=0.2))
    ob = optim.DistOpt(optim.SGD(list(b.parameters()), lr=0.2))
    oa.backward_and_update(_loss(a))
    ob.backward_and_sparse_update(_loss(b), spars=1.0, topK=True)
    for pa, pb in zip(a.parameters(), b.parameters()):
        np.testing.assert_allclose(to_numpy(pb), to_numpy(pa), atol=1e-7)
    # with a threshold nothing passes, the whole gradient stays in the residual
    w = st.tensor([0.5, -0.25], requires_grad=True)
    opt = optim.DistOpt(optim.SGD([w], lr=1.0))
    assert opt.backward_and_sparse_update((w * w).sum() / 2, spars=10.0) == 8  # the count only
    assert w.tolist() == [0.5, -0.25]
    np.testing.assert_allclose(to_numpy(opt._residuals[0]), [0.5, -0.25])
    # the next step sends residual + gradient where it exceeds the threshold
    opt.backward_and_sparse_update((w * w).sum() * 10, spars=6.0)
    np.testing.assert_allclose(w.tolist(), [0.5 - 10.5, -0.25])
    np.testing.assert_allclose(to_numpy(opt._residuals[0]), [0.0, -5.25])
    # the residuals are this rank's: its own state loads, another rank's raises
    sd = opt.state_dict()
    assert sd["rank"] == 0
    opt.load_state_dict(sd)
    np.testing.assert_allclose(to_numpy(opt._residuals[0]), [0.0, -5.25])
    with pytest.raises(ValueError, match="residuals in this state are rank 1's, but this is "
                                         "rank 0; .* save one checkpoint per rank"):
        opt.load_state_dict(dict(sd, rank=1))
    # without residuals (dense training) any rank's state loads, as a rank-0 checkpoint does
    plain = optim.DistOpt(optim.SGD([w], lr=1.0))
    plain.load_state_dict(dict(plain.state_dict(), rank=1))


def test_half_rounds_to_float16_and_clips():
    w = st.tensor([1.0, 1.0, 1.0], requires_grad=True)
    opt = optim.DistOpt(optim.SGD([w], lr=1.0))
    g = st.tensor([1.0 + 2 ** -12, 300.0, -0.5])
    assert opt.backward_and_update_half((w * g).sum(), clipping=True, clip_value=100.0) == 6
    np.testing.assert_allclose(w.tolist(), [0.0, -99.0, 1.5])


def test_partial_round_robin_and_state_dict():
    m = _model()
    opt = optim.DistOpt(optim.Adam(list(m.parameters()), lr=0.01))
    slices = plan_buckets(opt.params, 40)
    sent = [opt.backward_and_partial_update(_loss(m), threshold=40) for _ in range(len(slices))]
    assert sent == [sum(opt.params[i].numel() * 4 for i in s) for s in slices]
    sd = opt.state_dict()
    assert sd["partial"] == len(slices)
    opt2 = optim.DistOpt(optim.Adam(list(m.parameters()), lr=0.01))
    opt2.load_state_dict(sd)
    assert opt2._partial == len(slices) and len(opt2.optimizer.state) == 4


def test_plan_buckets():
    ps = [st.zeros(4), st.zeros(4), st.zeros(100), st.zeros(2, dtype=st.float64)]
    assert plan_buckets(ps, 32) == [[3], [2], [1, 0]]
    assert plan_buckets(ps, 10 ** 6) == [[3], [2, 1, 0]]  # dtypes never share a bucket
    assert plan_buckets(ps, 10 ** 6, itemsize=2) == [[3, 2, 1, 0]]


def test_gradients_are_communicated_during_backward():
    # with one bucket per parameter, the last layer's bucket is launched from its gradient
    # hook, before backward reaches the first layer
    m = _model()
    opt = optim.DistOpt(optim.SGD(list(m.parameters()), lr=0.1), bucket_bytes=4)
    order = []
    launch0, finish = opt._dense_launch(opt._plan(4, None))

    def launch(b):
        order.append((b, [p.grad is not None for p in opt.params]))
        return launch0(b)

    opt._overlapped_backward(_loss(m), opt._plan(4, None), launch, finish)
    assert [b for b, _ in order] == [0, 1, 2, 3]
    assert order[0][1][:2] == [False, False] and order[0][1][3] is True


def test_errors():
    w = st.ones(2, requires_grad=True)
    loss = (w * w).sum()
    with pytest.raises(TypeError, match="DistOpt: expected an optimizer.*list"):
        optim.DistOpt([w])
    with pytest.raises(ValueError, match="DistOpt: bucket_bytes must be a positive.*0"):
        optim.DistOpt(optim.SGD([w]), bucket_bytes=0)
    with pytest.raises(ValueError, match="no parameters that require grad"):
        optim.DistOpt(optim.SGD([st.ones(2)]))
    opt = optim.DistOpt(optim.SGD([w], lr=0.1))
    for bad in (0, -5, 1.5, True):
        with pytest.raises(ValueError, match="backward_and_update: threshold must be a "
                                             "positive number of bytes"):
            opt.backward_and_update(loss, threshold=bad)
    with pytest.raises(ValueError, match=r"backward_and_update: loss must be a scalar.*\(2,\)"):
        opt.backward_and_update(w * 2)
    with pytest.raises(TypeError, match="loss must be a Tensor, got float"):
        opt.backward_and_partial_update(1.0)
    with pytest.raises(ValueError, match=r"topK=True spars .* \(0, 1\], got 0"):
        opt.backward_and_sparse_update(loss, spars=0, topK=True)
    with pytest.raises(ValueError, match=r"\(0, 1\], got 1.5"):
        opt.backward_and_sparse_update(loss, spars=1.5, topK=True)
    with pytest.raises(ValueError, match="absolute threshold and must be >= 0, got -0.1"):
        opt.backward_and_sparse_update(loss, spars=-0.1)
    with pytest.raises(TypeError, match="spars must be a number, got 'x'"):
        opt.backward_and_sparse_update(loss, spars="x")
    with pytest.raises(ValueError, match="clip_value must be a positive finite number, got -1"):
        opt.backward_and_update_half(loss, clipping=True, clip_value=-1)
    with pytest.raises(ValueError, match="expected a dict from DistOpt.state_dict"):
        opt.load_state_dict({"state": {}})
    assert w.tolist() == [1.0, 1.0]  # nothing ran


SCALER_BODY = """
from singa_tensor import optim

dist.init_process_group()
rank = dist.get_rank()
w = st.tensor([1.0, 2.0], requires_grad=True)
opt = optim.DistOpt(optim.SGD([w], lr=0.1))
scaler = st.amp.GradScaler("cpu", init_scale=64.0, growth_interval=1)
seen = []
for step in range(3):
    loss = (w * w).sum()
    if step == 1 and rank == 1:  # only this rank's gradient overflows
        loss = loss * float("inf")
    opt.backward_and_update(loss, scaler=scaler)
    scaler.update()
    seen.append([w.tolist(), scaler.get_scale()])
# the flag itself is reduced over the group: one rank's inf is every rank's
flag = opt._reduce_found_inf(st.tensor(float(rank == 1)))
report([seen, flag.item()])
"""


@needs_mpi
def test_grad_scaler_skips_a_step_on_every_rank_when_one_overflows():
    res, _ = run(2, SCALER_BODY, timeout=50)
    assert res[0] == res[1]  # the replicas stay equal
    seen, flag = res[0]
    assert flag == 1.0
    (w0, s0), (w1, s1), (w2, s2) = seen
    assert w1 == w0 and s1 == s0 / 2  # the step with an inf on rank 1 was skipped on rank 0 too
    assert w2 != w1 and s2 == s1 * 2  # and the next clean step ran and grew the scale
    np.testing.assert_allclose(w0, [0.8, 1.6], rtol=1e-6)


# Top-k updates under SGD momentum follow Deep Gradient Compression (local momentum,
# accumulation, factor masking). Error feedback through the optimizer's own momentum applied
# each late entry's momentum many times over: on this problem it diverged (loss 22 -> 290).
MOMENTUM_BODY = """
from singa_tensor import nn, optim

dist.init_process_group()
rank, ws = dist.get_rank(), dist.get_world_size()
rng = np.random.default_rng(0)
X = rng.standard_normal((ws * 32, 20)).astype(np.float32)
Y = (X @ rng.standard_normal((20, 4))).astype(np.float32)
sl = slice(rank * 32, (rank + 1) * 32)
st.manual_seed(0)
m = nn.Sequential(nn.Linear(20, 64), nn.Tanh(), nn.Linear(64, 4))
opt = optim.DistOpt(optim.SGD(list(m.parameters()), lr=0.05, momentum=0.9, weight_decay=1e-4))

def full_loss():
    with st.no_grad():
        return float(((m(st.tensor(X)) - st.tensor(Y)) ** 2).mean().item())

first = full_loss()
for _ in range(300):
    loss = ((m(st.tensor(X[sl])) - st.tensor(Y[sl])) ** 2).mean()
    opt.backward_and_sparse_update(loss, spars=0.05, topK=True)
flat = np.concatenate([p.detach().numpy().ravel() for p in m.parameters()])
got = [st.zeros(flat.size) for _ in range(ws)]
dist.all_gather(got, st.tensor(flat))
report({"first": first, "last": full_loss(),
        "spread": float(max(np.abs(g.numpy() - flat).max() for g in got)),
        "groups": [[g["momentum"], g["weight_decay"]] for g in opt.param_groups],
        "momenta": len(opt.state_dict()["momenta"])})
"""


@needs_mpi
def test_top_k_with_sgd_momentum_converges():
    res, _ = run(2, MOMENTUM_BODY, timeout=80)
    for r in (0, 1):
        out = res[r]
        assert out["last"] < 0.01 * out["first"], out
        assert out["spread"] < 1e-6  # the replicas stay equal
        # the SGD settings are restored after each step, and the local momenta checkpointed
        assert out["groups"] == [[0.9, 1e-4]]
        assert out["momenta"] == 4
