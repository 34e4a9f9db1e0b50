"""Graph mode (st.compile, Model.compile(use_graph=True)): replayed training equals eager
training for the MLP, CNN, ResNet-18, an LSTM and a Transformer layer; guards, random draws,
optimizer updates, the memory plan and bad arguments."""

from __future__ import annotations

import gc
import importlib.util
import os

import numpy as np
import pytest

import singa_tensor as st
import singa_tensor.nn.functional as F
from singa_tensor import nn, optim
from singa_tensor.graph import GraphError
from singa_tensor.graph._debug import compare

from . import helpers

_BENCH = os.path.join(os.path.dirname(__file__), "..", "bench", "bench_train.py")
_spec = importlib.util.spec_from_file_location("bench_train", _BENCH)
bench_train = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench_train)
LIB = bench_train.Lib(st, "ours")


class SeqModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(20, 8)
        self.rnn = nn.LSTM(8, 12, num_layers=2)
        self.fc = nn.Linear(12, 10)

    def forward(self, x):
        y, _ = self.rnn(self.emb(x))
        return self.fc(y[-1])


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.layer = nn.TransformerEncoderLayer(16, 4, 32, dropout=0.1, batch_first=True)
        self.fc = nn.Linear(16, 10)

    def forward(self, x):
        return self.fc(self.layer(x).mean(1))


def _mlp():
    return bench_train.mlp(LIB)


def _cnn():
    return bench_train.cnn(LIB)


def _resnet():
    return bench_train.resnet18(LIB)


MODELS = {
    "mlp": (_mlp, lambda r: r.standard_normal((16, 784), dtype=np.float32)),
    "cnn": (_cnn, lambda r: r.standard_normal((4, 3, 32, 32), dtype=np.float32)),
    "resnet18": (_resnet, lambda r: r.standard_normal((2, 3, 32, 32), dtype=np.float32)),
    "lstm": (SeqModel, lambda r: r.integers(0, 20, (5, 4)).astype(np.int64)),
    "transformer": (Encoder, lambda r: r.standard_normal((4, 6, 16), dtype=np.float32)),
}


def _step_fn(model, o):
    def step(x, y):
        o.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        o.step()
        return loss

    return step


def _train(name: str, graph: bool, steps: int, opt: str = "sgd", **options):
    build, make_x = MODELS[name]
    rng = np.random.default_rng(0)
    data = [(st.tensor(make_x(rng)), st.tensor(rng.integers(0, 10, 4 if name != "mlp"
                                                            else 16).astype(np.int64)))
            for _ in range(steps)]
    if name in ("cnn", "resnet18"):
        data = [(x, y[:x.shape[0]]) for x, y in data]
    st.manual_seed(0)
    model = build()
    model.train()
    o = (optim.SGD(model.parameters(), lr=0.05, momentum=0.9) if opt == "sgd"
         else optim.Adam(model.parameters(), lr=1e-3))
    sched = optim.lr_scheduler.StepLR(o, step_size=2, gamma=0.5) if opt == "sgd" else None
    step = _step_fn(model, o)
    fn = st.compile(step, **options) if graph else step
    losses = []
    for x, y in data:
        losses.append(fn(x, y).item())
        if sched is not None:
            sched.step()
    params = [p.detach().cpu().numpy().copy() for p in model.parameters()]
    buffers = [b.detach().cpu().numpy().copy() for b in model.buffers()]
    return params, buffers, losses, fn


@pytest.mark.parametrize("name", list(MODELS))
def test_replayed_training_equals_eager(name):
    steps = 5 if name != "resnet18" else 4
    pe, be, le, _ = _train(name, False, steps)
    pg, bg, lg, fn = _train(name, True, steps)
    assert fn.replays == steps - 2  # one eager warm-up step, one recorded step
    assert lg == pytest.approx(le, rel=1e-6, abs=1e-6)
    for a, b in zip(pe + be, pg + bg):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6)
    assert le[-1] != le[0]  # training moved


def test_adam_and_scheduler_updates_run_eagerly_when_their_scalars_change():
    pe, _, le, _ = _train("mlp", False, 5, opt="adam")
    pg, _, lg, fn = _train("mlp", True, 5, opt="adam")
    assert fn.replays == 3
    for a, b in zip(pe, pg):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6)


def _count_eager_updates(monkeypatch):
    from singa_tensor.graph import _graph

    seen = []
    orig = _graph.Graph._eager_update
    monkeypatch.setattr(_graph.Graph, "_eager_update",
                        lambda self, u: (seen.append(u), orig(self, u)))
    return seen


@pytest.mark.parametrize("make", [
    lambda ps: optim.Adam(ps, lr=1e-2),
    lambda ps: optim.AdamW(ps, lr=1e-2, weight_decay=0.1, amsgrad=True),
    lambda ps: optim.Adam(ps, lr=1e-2, foreach=False),  # one kernel call per parameter
    lambda ps: optim.RMSprop(ps, lr=1e-2, centered=True, momentum=0.5),
    lambda ps: optim.Adagrad(ps, lr=1e-1, lr_decay=0.3),
], ids=["adam", "adamw-amsgrad", "adam-per-tensor", "rmsprop", "adagrad-lr-decay"])
def test_step_counted_updates_replay_without_running_step(make, monkeypatch):
    # Adam's bias corrections and Adagrad's decayed rate follow the step count, which step()
    # advances on the host: the replay advances the counts itself and rewrites the update
    # call's arguments, so the optimizer's Python step() runs only in the eager steps
    eager_updates = _count_eager_updates(monkeypatch)
    results = []
    for graph in (False, True):
        st.manual_seed(0)
        model = nn.Sequential(nn.Linear(6, 5), nn.Tanh(), nn.Linear(5, 3))
        opt = make(list(model.parameters()))
        fn = _step_fn(model, opt)
        fn = st.compile(fn) if graph else fn
        rng = np.random.default_rng(1)
        losses = [fn(st.tensor(rng.standard_normal((4, 6), dtype=np.float32)),
                     st.tensor(rng.integers(0, 3, 4))).item() for _ in range(7)]
        steps = [opt.state[p]["step"] for p in model.parameters()]
        results.append((losses, [p.detach().cpu().numpy().copy() for p in model.parameters()],
                        steps))
    assert fn.replays == 5 and eager_updates == []
    (le, pe, se), (lg, pg, sg) = results
    assert se == sg == [7] * 4
    assert lg == pytest.approx(le, rel=1e-6, abs=1e-7)
    for a, b in zip(pe, pg):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)


def test_step_counted_updates_run_eagerly_when_the_recorded_step_made_state(monkeypatch):
    # recorded on the first step, the update also made Adam's moments (zeros): replaying
    # that would zero them again, so each replay runs step() in Python, and a changed
    # learning rate does the same
    eager_updates = _count_eager_updates(monkeypatch)
    results = []
    for graph in (False, True):
        st.manual_seed(0)
        model = nn.Linear(4, 3)
        opt = optim.Adam(model.parameters(), lr=1e-2)
        fn = _step_fn(model, opt)
        fn = st.compile(fn, warmup=0) if graph else fn
        rng = np.random.default_rng(2)
        for i in range(5):
            if i == 3:
                opt.param_groups[0]["lr"] = 5e-3
            fn(st.tensor(rng.standard_normal((2, 4), dtype=np.float32)),
               st.tensor(rng.integers(0, 3, 2)))
        results.append([p.detach().cpu().numpy().copy() for p in model.parameters()])
    assert fn.replays == 4 and len(eager_updates) == 4
    for a, b in zip(*results):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)


def test_memory_plan_never_aliases_live_tensors():
    # poison fills every temporary with NaN bits once its last call ran: any plan that let
    # two live tensors share bytes would change the results
    pe, be, le, _ = _train("resnet18", False, 4)
    pg, bg, lg, fn = _train("resnet18", True, 4, poison=True)
    assert lg == pytest.approx(le, rel=1e-6, abs=1e-6)
    for a, b in zip(pe + be, pg + bg):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6)
    fn.check_plan()
    graph = fn._latest.graph
    assert graph.blocks and graph.arena_bytes < sum(b.nbytes for b in graph.blocks)


def test_plan_check_catches_an_overlap():
    from singa_tensor.graph._graph import Block, check_plan, plan_blocks

    blocks = [Block(0, 128, 0, 5, None, None), Block(1, 128, 3, 9, None, None),
              Block(2, 64, 6, 9, None, None)]
    size = plan_blocks(blocks)
    check_plan(blocks)
    assert blocks[2].offset == 0 and size == 256  # block 2 reuses block 0's bytes
    blocks[1].offset = 64
    with pytest.raises(GraphError, match="overlap in the arena while both are alive"):
        check_plan(blocks)


def test_shape_change_records_again_or_raises():
    w = st.ones(3, requires_grad=True)

    def f(x):
        return (w * x).sum(0)

    step = st.compile(f, warmup=0)
    assert step(st.ones(2, 3)).tolist() == [2.0, 2.0, 2.0]
    assert step(st.ones(4, 3)).tolist() == [4.0, 4.0, 4.0]
    assert step(st.full((2, 3), 3.0)).tolist() == [6.0, 6.0, 6.0]
    assert len(step.graphs) == 2 and step.replays == 1
    strict = st.compile(f, warmup=0, on_change="raise")
    strict(st.ones(2, 3))
    dev = st.ones(1).device  # the device under test
    with pytest.raises(GraphError, match=rf"recorded for inputs \(\(2, 3\) float32 {dev}\) "
                                         rf"and is now called with \(\(4, 3\) float32 {dev}\)"):
        strict(st.ones(4, 3))
    with pytest.raises(GraphError, match="recorded for inputs"):
        strict(st.ones(2, 3, dtype=st.float64))


def test_cached_scalar_operands_outlive_the_scalar_cache():
    """A Python number in a step (x * 2.5, a target compared with ignore_index) is a cached
    0-d tensor; the cache is cleared when it fills, which must not look like a replaced
    parameter: the step keeps replaying (and on_change="raise" does not raise)."""
    from singa_tensor import creation

    logits = st.randn(4, 3, requires_grad=True)
    y = st.tensor([0, 2, 1, 1])

    def f(x):
        return x * 2.5 + 1.25 + F.cross_entropy(logits, y, ignore_index=-7)

    want = (st.ones(3) * 2.5 + 1.25 + F.cross_entropy(logits, y, ignore_index=-7)).tolist()
    # a first recording puts the step's scalars in the cache; the second reads them from there,
    # so they are not the second one's own
    st.compile(f, warmup=0)(st.ones(3))
    step = st.compile(f, warmup=0, on_change="raise")
    np.testing.assert_allclose(step(st.ones(3)).tolist(), want, rtol=1e-6)
    for _ in range(2):
        creation._scalar_cache.clear()
        gc.collect()  # the first recording (a cycle) held them too
        np.testing.assert_allclose(step(st.ones(3)).tolist(), want, rtol=1e-6)
    assert step._latest.records == 1 and step.replays == 2


def test_guards_from_inputs_record_again_and_others_explain():
    # cross_entropy checks targets on the host: with an ignored target the Python path
    # changes, and since the check depends on the targets alone the step records again
    logits = st.randn(4, 3, requires_grad=True)
    step = st.compile(lambda y: F.cross_entropy(logits, y, ignore_index=-1), warmup=0)
    y1 = st.tensor([0, 1, 2, 1])
    y2 = st.tensor([0, -1, 2, 1])
    for y in (y1, y1, y2, y2, y1):
        assert step(y).item() == pytest.approx(F.cross_entropy(logits, y,
                                                               ignore_index=-1).item())
    assert step._latest.records == 3
    # a decision on a constant and the inputs is checked early: the step records again
    w = st.ones(2)

    def data_dependent(x):
        return x * 2 if (w * x).sum().item() > 0 else x * 3

    g = st.compile(data_dependent, warmup=0)
    assert [g(v).tolist() for v in (st.ones(2), st.ones(2), -st.ones(2))] == \
        [[2.0, 2.0], [2.0, 2.0], [-3.0, -3.0]]
    assert g._latest.records == 2
    # a decision on state the step itself changes first cannot be checked early: it raises
    s = st.zeros(2)

    def stateful(x):
        s.add_(x)
        return x * 2 if s.sum().item() < 3 else x * 3

    h = st.compile(stateful, warmup=0)
    assert h(st.ones(2)).tolist() == [2.0, 2.0]  # recorded: s is 1
    with pytest.raises(GraphError, match=r"called from \S+:\d+ read tensor values on "
                                         r"the host while the step was recorded, and now they "
                                         r"differ"):
        h(st.ones(2))  # s is 2: the sum reads 4
    assert s.tolist() == [2.0, 2.0]  # the step had partly run, as the message says


def test_guards_compare_values_where_the_bytes_differ():
    # a guard first compares the bytes it read with the recorded ones; other bytes with the
    # same value (-0.0 against 0.0) still hold, a different value records again
    w = st.ones(2)

    def f(x):
        return x * 2 if (w * x).sum().item() >= 0 else x * 3

    g = st.compile(f, warmup=0)
    assert g(st.zeros(2)).tolist() == [0.0, 0.0]  # recorded: the sum read 0.0
    assert g(st.tensor([-0.0, -0.0])).tolist() == [-0.0, -0.0]  # reads -0.0: holds
    assert g._latest.records == 1 and g.replays == 1
    graph = g._latest.graph
    guards = graph.early_guards + [x for v in graph.late.values() for x in v]
    # on the CPU the host read is a view of the memory the replay writes: bytes to compare
    assert guards and all((x.raw is not None) == (w.device.type == "cpu") for x in guards)
    assert g(st.tensor([1.0, -3.0])).tolist() == [3.0, -9.0]  # reads -2.0: records again
    assert g._latest.records == 2


def test_early_guard_calls_run_once_and_stay_when_the_step_reads_them():
    # a guard's calls that depend on the inputs alone run before the program; when nothing
    # else in the step reads what they write (cross entropy's target checks) the program
    # skips them, and when something does (the mask below) it runs them in place too
    logits = st.randn(6, 4, requires_grad=True)
    step = st.compile(lambda y: F.cross_entropy(logits, y), warmup=0)
    ys = [st.tensor(v) for v in ([0, 1, 2, 3, 0, 1], [3, 3, 2, 1, 0, 0], [1, 0, 0, 2, 3, 2])]
    for y in ys + ys:
        assert step(y).item() == pytest.approx(F.cross_entropy(logits, y).item(), rel=1e-6)
    g = step._latest.graph
    assert g.early_only and g.early_only <= set(g.early)
    assert step._latest.records == 1
    with pytest.raises(IndexError, match="target 4 is out of bounds for 4 classes"):
        step(st.tensor([0, 1, 2, 4, 0, 1]))

    w = st.tensor([1.0, -2.0, 3.0])

    def masked(x):
        m = x > 0
        scale = 2.0 if m.any().item() else 5.0  # a decision on the inputs: an early guard
        return (w * x * m).sum() * scale

    h = st.compile(masked, warmup=0)
    for v in ([1.0, 2.0, -1.0], [-1.0, 3.0, 2.0], [4.0, -5.0, 6.0]):
        x = st.tensor(v)
        assert h(x).item() == pytest.approx(masked(x).item())
    hg = h._latest.graph
    gt = [i for i, c in enumerate(hg.calls) if c[2].startswith("st_gt")]
    # x > 0 feeds the product as well as the guard: it runs early and in the program
    assert len(gt) == 1 and gt[0] in hg.early and gt[0] not in hg.early_only


def test_index_bounds_guard_on_the_decision_not_the_values():
    emb = nn.Embedding(10, 4)
    step = st.compile(lambda i: emb(i).sum(), warmup=0)
    for ids in ([1, 2, 3], [9, 0, 4], [5, 5, 5]):
        assert step(st.tensor(ids)).item() == pytest.approx(emb(st.tensor(ids)).sum().item())
    assert step._latest.records == 1 and step.replays == 2
    # an index out of range records again, and the eager run raises as always
    with pytest.raises(IndexError, match="index 10 is out of bounds"):
        step(st.tensor([1, 10, 2]))


def test_dropout_draws_again_on_every_replay():
    st.manual_seed(3)
    eager = [F.dropout(st.ones(64), 0.5).tolist() for _ in range(4)]
    st.manual_seed(3)
    step = st.compile(lambda x: F.dropout(x, 0.5), warmup=1)
    got = [step(st.ones(64)).tolist() for _ in range(4)]
    assert got == eager and got[2] != got[3]


def test_model_compile_use_graph_trains_like_eager():
    from singa_tensor.model import Model

    class Net(Model):
        def __init__(self):
            super().__init__()
            self.fc1, self.fc2 = nn.Linear(6, 16), nn.Linear(16, 3)

        def forward(self, x):
            return self.fc2(st.relu(self.fc1(x)))

    rng = np.random.default_rng(1)
    data = [(st.tensor(rng.standard_normal((8, 6), dtype=np.float32)),
             st.tensor(rng.integers(0, 3, 8).astype(np.int64))) for _ in range(6)]
    results = []
    for use_graph in (False, True):
        st.manual_seed(0)
        net = Net()
        net.set_optimizer(optim.SGD(net.parameters(), lr=0.1, momentum=0.9))
        net.compile([data[0][0]], is_train=True, use_graph=use_graph)
        losses = [net(x, y)[1].item() for x, y in data]
        results.append((losses, [helpers.to_numpy(p) for p in net.parameters()]))
    assert results[0][0] == pytest.approx(results[1][0], rel=1e-6)
    for a, b in zip(results[0][1], results[1][1]):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)


def test_list_kernel_tables_follow_their_buffers_into_the_arena():
    """A kernel that takes tables of buffer pointers (the optimizers' list updates) is
    recorded with the buffers behind the table: an update of temporaries of the step writes
    where the memory plan put them, on every replay, as eager execution does."""
    from singa_tensor.ops import fused_updates

    x0 = st.randn(6)
    if not fused_updates.multi_ready(x0, x0, x0):
        pytest.skip("this backend has no list update kernel")

    def update(x):
        a, b = x * 2.0, x * 3.0 + 1.0  # temporaries: their memory is the arena's
        g1, g2 = x * 0.5, x - 1.0
        buf1, buf2 = x * 0.25, x * -1.0
        fused_updates.sgd_multi_step_([a, b], [g1, g2], [buf1, buf2], lr=0.1, momentum=0.9)
        return a + b + buf1 * buf2

    fn = st.compile(update, warmup=0)
    for _ in range(4):
        x = st.randn(6)
        np.testing.assert_array_equal(helpers.to_numpy(fn(x)), helpers.to_numpy(update(x)))
    graph = fn._latest.graph
    multi = [c for c in graph.calls if c[2] == "st_sgd_step_multi_f32"]
    assert len(multi) == 1 and fn._latest.records == 1


def test_captured_gradients_are_taken_over_without_copies_and_shared_ones_copied():
    """While a step is recorded the recorder holds every storage it sees; autograd discounts
    that reference, so a fresh gradient becomes .grad as in eager execution (no copy call in
    the replay), while a gradient the step also keeps elsewhere is still copied."""
    st.manual_seed(0)
    model = nn.Sequential(nn.Linear(5, 7), nn.ReLU(), nn.Linear(7, 3))
    opt = optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    x = st.randn(4, 5)
    y = st.tensor(np.array([0, 2, 1, 0], dtype=np.int64))

    def step():
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss

    fn = st.compile(step)
    for _ in range(3):
        fn()
    symbols = [c[2] for c in fn._latest.graph.calls]
    backward = symbols[symbols.index("st_softmax_xent_backward_f32"):]
    # the products and sums of the backward write the four gradients themselves; the update
    # is one call of the list kernel where the backend has one, else one call per parameter
    w = model[0].weight
    listed = w._be.kernel("st_sgd_step_multi_f32") is not None
    assert backward.count("st_sgd_step_multi_f32") == (1 if listed else 0)
    assert backward.count("st_sgd_step_f32") == (0 if listed else 4)
    assert not [sym for sym in backward if sym.startswith("st_copy")], symbols
    grads = [p.grad for p in model.parameters()]
    fn()
    assert [p.grad for p in model.parameters()] == grads  # the same tensors, rewritten

    a, b = st.ones(3, requires_grad=True), st.ones(3, requires_grad=True)
    g_user = st.ones(3)

    def shared():
        a.grad = b.grad = None
        (a + b).backward(g_user)  # add hands one gradient to both inputs
        return a.grad

    shared_fn = st.compile(shared)
    for _ in range(2):
        shared_fn()
    a.grad.add_(1.0)
    assert helpers.to_numpy(b.grad).tolist() == [1.0] * 3


def test_side_by_side_debug_names_the_first_differing_call():
    if st.ones(1).device.type != "cpu":
        fn = st.compile(lambda x: x * 2, warmup=0)
        fn(st.ones(2))
        with pytest.raises(GraphError, match="works for CPU steps only"):
            compare(fn._latest, (st.ones(2),))
        return
    model = _mlp()
    o = optim.SGD(model.parameters(), lr=0.1)
    x, y = st.randn(4, 784), st.tensor([1, 2, 3, 4])
    fn = st.compile(_step_fn(model, o), fuse=False)  # the comparison goes call by call
    fn(x, y)
    fn(x, y)
    assert compare(fn._latest, (x, y)) is None
    # corrupt one recorded argument: the comparison must find that very call
    calls = fn._latest.graph.calls
    k = next(i for i, c in enumerate(calls) if c[2] == "st_relu_f32")
    fn_, args, sym = calls[k]
    calls[k] = (fn_, args[:2] + [args[2] // 2] + args[3:], sym)
    found = compare(fn._latest, (x, y))
    assert found is not None and found.startswith(f"call {k} (st_relu_f32)")


def test_bad_arguments():
    with pytest.raises(TypeError, match="compile: expected a function, got int"):
        st.compile(3)
    with pytest.raises(ValueError, match="on_change must be one of rerecord, raise, got 'x'"):
        st.compile(lambda: None, on_change="x")
    with pytest.raises(ValueError, match="warmup must be an int >= 0, got -1"):
        st.compile(lambda: None, warmup=-1)
    step = st.compile(lambda x, opts: x, warmup=0)
    with pytest.raises(TypeError, match="arguments must be tensors or hashable values"):
        step(st.ones(1), [1, 2])
    inner = st.compile(lambda x: x + 1, warmup=0)
    outer = st.compile(lambda x: inner(x) * 2, warmup=0)
    with pytest.raises(GraphError, match="another capture is already recording"):
        outer(st.ones(1))


def test_collectives_are_recorded_and_host_communication_refused():
    # more in tests/distributed/test_graph_collectives.py, on 2 and 4 ranks
    pytest.importorskip("mpi4py")
    import singa_tensor.distributed as dist

    dist.init_process_group(backend="mpi")
    try:
        def f(x):
            y = x * 2
            dist.all_reduce(y)
            return y

        step = st.compile(f, warmup=0)
        assert step(st.ones(2)).tolist() == [2.0, 2.0]
        assert step(st.full((2,), 3.0)).tolist() == [6.0, 6.0]
        assert "collective all_reduce" in [s for _, _, s in step._latest.graph.calls]
        step = st.compile(lambda x: dist.all_gather_object([None], 1), warmup=0)
        with pytest.raises(GraphError, match="all_gather_object cannot be recorded in graph "
                                             "mode"):
            step(st.ones(2))
    finally:
        dist.destroy_process_group()


def test_elementwise_chains_fuse_into_one_call_with_the_same_bits():
    rng = np.random.default_rng(5)
    x = st.tensor(rng.standard_normal((8, 30)).astype(np.float32))
    bias = st.tensor(rng.standard_normal(30).astype(np.float32))

    def chain(t):
        a = st.tanh(t + bias) * 2.0  # a row-broadcast input
        b = st.exp(a * 0.5) - 1.0
        return a, st.relu(b) / 3.0  # a is returned: it must still be stored

    with st.no_grad():
        want = [helpers.to_numpy(v) for v in chain(x)]
        plain = st.compile(chain, warmup=0, fuse=False)
        fused = st.compile(chain, warmup=0)
        for step in (plain, fused):
            step(x)
            got = step(x)
            for g, w in zip(got, want):
                assert np.array_equal(helpers.to_numpy(g), w)
    symbols = [c[2] for c in fused._latest.graph.calls]
    assert symbols == ["st_fused_f32"] and plain.calls == 8
    # the five intermediates between a and the result never reach memory
    assert fused.arena_bytes < plain.arena_bytes


def test_fused_register_allocation_reuses_registers_for_long_chains():
    x = st.tensor(np.linspace(-1, 1, 1000, dtype=np.float32))

    def long_chain(t):
        for i in range(60):
            t = st.tanh(t * 1.01) if i % 2 else t + 0.001
        return t

    with st.no_grad():
        want = helpers.to_numpy(long_chain(x))
        step = st.compile(long_chain, warmup=0)
        step(x)
        assert np.array_equal(helpers.to_numpy(step(x)), want)
    # 90 kernel calls (a scalar operand is its own call's input) in a few fused calls
    assert 1 <= step.calls <= 4


def test_recomputed_im2col_columns_shrink_the_arena_and_keep_the_results():
    # the im2col path's columns (oneDNN's convolutions, where installed, make none)
    with st.backends.mkldnn.flags(enabled=False):
        pe, be, le, _ = _train("cnn", False, 4)
        pg, bg, lg, fn = _train("cnn", True, 4, poison=True)
        _, _, lk, kept = _train("cnn", True, 4, recompute=False)
    assert lg == le and lk == le
    for a, b in zip(pe + be, pg + bg):
        np.testing.assert_array_equal(a, b)
    symbols = [c[2] for c in fn._latest.graph.calls]
    assert symbols.count("st_im2col_f32") == 2 * [c[2] for c in kept._latest.graph.calls
                                                  ].count("st_im2col_f32")
    assert fn.arena_bytes < kept.arena_bytes


def test_a_replaced_parameter_records_again():
    lin = nn.Linear(3, 2)
    x = st.ones(1, 3)
    with st.no_grad():
        step = st.compile(lambda t: lin(t).sum(), warmup=0)
        step(x)
        step(x)
        lin.weight = nn.Parameter(st.zeros(2, 3))  # the recording read the old one
        assert step(x).item() == pytest.approx(lin(x).sum().item())
        assert step._latest.records == 2
        strict = st.compile(lambda t: lin(t).sum(), warmup=0, on_change="raise")
        strict(x)
        lin.bias = nn.Parameter(st.ones(2))
        with pytest.raises(GraphError, match="was replaced since recording"):
            strict(x)


@pytest.mark.parametrize("name,opt", [("transformer", "sgd"), ("mlp", "adam")])
def test_cuda_graph_replay_trains_like_eager(cuda, name, opt):
    # Runs of kernel launches replay as CUDA graphs; cuBLAS products, random draws (dropout
    # takes a new seed each step) and eager optimizer updates (Adam's step count) stay
    # between them. On the stand-in device a captured launch runs only when its graph does,
    # with the arguments it had at capture, and cuBLAS refuses a capturing stream as CuPy's
    # wrappers do: a launch wrongly put in a graph shows up as a failed capture or as
    # results that differ from eager.
    from singa_tensor import backend

    fake = backend._loaded.get("cuda")
    stand_in = fake in helpers._fakes.values()
    launches = fake.fake_cupy.graph_launches if stand_in else []
    before = st.get_default_device()
    st.set_default_device(cuda)
    try:
        pe, be, le, _ = _train(name, False, 5, opt=opt)
        n0 = len(launches)
        pg, bg, lg, fn = _train(name, True, 5, opt=opt)
        po, bo, lo, plain = _train(name, True, 5, opt=opt, cuda_graphs=False)
    finally:
        st.set_default_device(before)
    stats = fn.cuda_graph_stats
    assert stats["failed"] == 0 and stats["captured"] >= 2
    # at least half the launches the program runs are inside graphs (cuBLAS products and
    # eager updates stay out; the calls of the early guards run before the program, and only
    # there when nothing else reads what they write)
    assert stats["launches"] >= (fn.calls - len(fn._latest.graph.early_only)) // 2
    assert plain.cuda_graph_stats == {"captured": 0, "failed": 0, "launches": 0}
    assert lg == pytest.approx(le, rel=1e-6, abs=1e-6) and lg == lo
    for a, b, c in zip(pe + be, pg + bg, po + bo):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6)
        np.testing.assert_array_equal(b, c)
    if stand_in:  # each of the 3 replays launched every graph once
        assert len(launches) - n0 == 3 * stats["captured"]


def test_a_failed_cuda_graph_capture_warns_and_replays_launch_by_launch(cuda, monkeypatch):
    from singa_tensor import backend

    be = backend.get(st.device(cuda))

    def refuse(calls):
        raise RuntimeError("capture refused for the test")

    monkeypatch.setattr(type(be), "capture", lambda self, calls: refuse(calls))
    x = st.arange(6.0, device=cuda)
    step = st.compile(lambda t: (t * 2 + 1).relu() - 3, warmup=0, fuse=False)
    step(x)
    with pytest.warns(RuntimeWarning, match="CUDA graph failed.*capture refused"):
        got = step(x)
    assert got.tolist() == [max(2 * v + 1, 0) - 3 for v in range(6)]
    assert step.cuda_graph_stats["failed"] >= 1 and step.cuda_graph_stats["captured"] == 0
    assert step(x + 1).tolist() == [max(2 * v + 3, 0) - 3 for v in range(6)]


def test_an_op_that_writes_its_result_outside_the_kernels_is_refused():
    # a spec whose forward fills its output through its own code (here ctypes on the host;
    # in a tutorial, C compiled with cffi) is invisible to the recording: a replay would hand
    # back the recorded values, so recording refuses it instead
    import ctypes

    from singa_tensor.ops._registry import REGISTRY, OpSpec, apply, empty_like_shape

    class Negate(OpSpec):
        name = "test_graph_outside_negate"
        differentiable = False

        @staticmethod
        def forward(ctx, x):
            out = empty_like_shape(x, x.shape)
            vals = (-x.detach().cpu().numpy()).astype(np.float32)
            ctypes.memmove(out.data_ptr(), vals.ctypes.data, vals.nbytes)
            return out

    x = st.tensor([1.0, 2.0], device="cpu")
    assert apply(Negate, x).tolist() == [-1.0, -2.0]  # eager: fine
    step = st.compile(lambda t: apply(Negate, t) * 2, warmup=0)
    with pytest.raises(GraphError, match="op test_graph_outside_negate made its result without "
                                         "a kernel call"):
        step(x)
    assert "test_graph_outside_negate" not in REGISTRY


def test_copies_between_devices_inside_the_step_replay_with_new_values(cuda):
    # a step that moves its input to the device and its result back: the copies are recorded
    # calls, so each replay copies the new values (recorded copies were once kept as
    # constants and replayed the first input's values)
    up = st.compile(lambda x: (x * 2).to(cuda) * 3, warmup=0)
    down = st.compile(lambda x: (x.to(cuda) + 1).cpu() * 2, warmup=0)
    for v in (1.0, 2.0, 5.0):
        x = st.full((4,), v, device="cpu")
        assert up(x).cpu().tolist() == [6 * v] * 4
        assert down(x).tolist() == [2 * (v + 1)] * 4
    assert up.replays == down.replays == 2


def test_recording_patches_nothing_and_leaves_other_threads_eager():
    """A capture is the execution context of its own thread: Tensor, Generator and the backends
    keep their functions, and a thread running while another records is neither recorded nor
    refused (its host reads, draws and new tensors stay out of the recording)."""
    import threading

    from singa_tensor import random as st_random
    from singa_tensor.backend import cpu
    from singa_tensor.graph._capture import Recorder

    before = (st.Tensor.__dict__["_make"], st.Tensor._numpy, st_random.Generator._take,
              cpu.from_numpy)
    started, release, seen = threading.Event(), threading.Event(), {}

    def other_thread():
        started.wait()
        g = st.Generator().manual_seed(1)
        x = st.rand(5, generator=g)
        seen["value"] = (x * 2).tolist()  # a host read, a draw, new tensors, a kernel
        seen["after"] = (st.Tensor.__dict__["_make"], st.Tensor._numpy,
                         st_random.Generator._take, cpu.from_numpy)
        release.set()

    worker = threading.Thread(target=other_thread)
    worker.start()
    with Recorder() as rec:
        y = st.ones(3) + 1.0
        started.set()
        assert release.wait(60)
        assert y.tolist() == [2.0, 2.0, 2.0]
    worker.join()
    g = st.Generator().manual_seed(1)
    assert seen["value"] == (st.rand(5, generator=g) * 2).tolist()
    assert seen["after"] == before
    assert (st.Tensor.__dict__["_make"], st.Tensor._numpy, st_random.Generator._take,
            cpu.from_numpy) == before
    rec_guards = rec.recording.guards
    assert len(rec_guards) == 1 and rec_guards[0].expected.tolist() == [2.0, 2.0, 2.0]
    assert rec.recording.rng == []  # the other thread's draw is not this step's
