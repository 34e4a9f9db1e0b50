"""distributed.pipelining: GPipe and 1F1B over the ranks of a group. Multi-rank checks run
under mpiexec (one spawn per world size) against the same model trained on the whole batch in
one process; argument checks, the cutting of a Sequential and the world-of-one pipeline run in
this process."""

from __future__ import annotations

import numpy as np
import pytest

import singa_tensor as st
import singa_tensor.distributed as dist
import singa_tensor.nn.functional as F
from singa_tensor import nn, optim
from singa_tensor.distributed.pipelining import (
    PipelineStage,
    Schedule1F1B,
    ScheduleGPipe,
    pipeline_stage,
    split_sequential,
)

from .mpi_run import needs_mpi, run

# Every rank builds the full model from one seed, trains it on the whole batch (the
# reference), and trains its stage of a second copy with the schedule; the stage's parameters
# after STEPS SGD steps are compared with the reference's parameters of the same names.
BODY = """
from singa_tensor import nn, optim
import singa_tensor.nn.functional as F
from singa_tensor.distributed.pipelining import (
    PipelineStage, Schedule1F1B, ScheduleGPipe, pipeline_stage, split_sequential)

dist.init_process_group()
rank, ws = dist.get_rank(), dist.get_world_size()
comm = dist.get_communicator()
rng = np.random.default_rng(0)
N, M, STEPS = 12, 6, 3

def mlp():
    return nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 16), nn.Tanh(),
                         nn.Linear(16, 8), nn.Tanh(), nn.Linear(8, 3))

def cnn():
    return nn.Sequential(nn.Conv2d(2, 4, 3, padding=1), nn.ReLU(),
                         nn.Conv2d(4, 4, 3, padding=1), nn.ReLU(), nn.Flatten(),
                         nn.Linear(4 * 6 * 6, 5))

DATA = {
    "mlp": (mlp, rng.standard_normal((STEPS, N, 6)).astype(np.float32),
            rng.standard_normal((STEPS, N, 3)).astype(np.float32), F.mse_loss),
    "cnn": (cnn, rng.standard_normal((STEPS, N, 2, 6, 6)).astype(np.float32),
            rng.integers(0, 5, (STEPS, N)).astype(np.int64), F.cross_entropy),
}

def reference(build, xs, ys, loss_fn):
    st.manual_seed(0)
    model = build()
    opt = optim.SGD(model.parameters(), lr=0.1)
    outs, losses = [], []
    for x, y in zip(xs, ys):
        opt.zero_grad()
        out = model(st.tensor(x))
        loss = loss_fn(out, st.tensor(y))
        loss.backward()
        opt.step()
        outs.append(out.detach().numpy())
        losses.append(loss.item())
    return dict(model.named_parameters()), outs, losses

def train(kind, sched_cls, build, xs, ys, loss_fn, group=None, rows=slice(None)):
    st.manual_seed(0)
    seq = build()
    if kind == "mlp":   # cut by hand; the CNN by the default (parameter) balance
        size, me = dist.get_world_size(group), dist.get_rank(group)
        stage = PipelineStage(split_sequential(seq, size)[me], me, size, group=group)
    else:
        stage = pipeline_stage(seq, group=group)
    sched = sched_cls(stage, M if group is None else M // 2, loss_fn)
    params = list(stage.submod.parameters())  # a stage may be a parameter-free Flatten
    opt = optim.SGD(params, lr=0.1) if params else None
    outs, losses, sent = [], [], []
    for x, y in zip(xs, ys):
        for p in params:
            p.grad = None
        before = comm.bytes_sent
        got = []
        args = (st.tensor(x[rows]),) if stage.is_first else ()
        kw = {"target": st.tensor(y[rows]), "losses": got} if stage.is_last else {}
        out = sched.step(*args, **kw)
        sent.append(comm.bytes_sent - before)
        if group is not None:   # the data-parallel replicas of this stage average gradients
            for p in params:
                dist.all_reduce(p.grad, op=dist.ReduceOp.AVG, group=DP)
        if opt is not None:
            opt.step()
        if out is not None:
            outs.append(out.numpy())
            losses.append([v.item() for v in got])
    return stage, sched, dict(stage.submod.named_parameters()), outs, losses, sent

def maxdiff(params, ref):
    # a stage may hold no parameters (0.0 then)
    return max([float(np.abs(p.detach().numpy() - ref[k].detach().numpy()).max())
                for k, p in params.items()], default=0.0)

def boundary_bytes(build, x):
    # bytes of the activation after each stage of the cut trainer() uses, for the whole batch
    st.manual_seed(0)
    seq = build()
    parts = split_sequential(seq, ws)
    sizes, h = [], st.tensor(x)
    for p in parts:
        h = p(h)
        sizes.append(int(np.prod(h.shape)) * 4)
    return sizes

out = {}
for kind, (build, xs, ys, loss_fn) in DATA.items():
    ref, ref_outs, ref_losses = reference(build, xs, ys, loss_fn)
    got = {}
    for name, cls in (("gpipe", ScheduleGPipe), ("1f1b", Schedule1F1B)):
        stage, sched, params, outs, losses, sent = train(kind, cls, build, xs, ys, loss_fn)
        got[name] = params
        res = {
            "names": sorted(params),
            "params": maxdiff(params, ref),
            "log": sched.actions_log,
            "order": {str(k): [str(a) for a in v] for k, v in sched.pipeline_order.items()},
            "peak": stage.peak_live,
            "sent": sent,
        }
        if stage.is_last:
            res["out"] = max(float(np.abs(o - r).max()) for o, r in zip(outs, ref_outs))
            res["nlosses"] = [len(v) for v in losses]
            res["loss"] = max(abs(float(np.mean(v)) - r) for v, r in zip(losses, ref_losses))
        out[f"{kind}-{name}"] = res
    out[f"{kind}-same"] = maxdiff(got["gpipe"], got["1f1b"])
out["bounds"] = boundary_bytes(mlp, DATA["mlp"][1][0])
out["nparams"] = len(dict(mlp().named_parameters()))

if ws == 4:
    # two pipelines of two stages ([0, 1] and [2, 3]), each on half the batch; the stages'
    # replicas ([0, 2] and [1, 3]) average their gradients
    pipes = [dist.new_group([0, 1]), dist.new_group([2, 3])]
    dps = [dist.new_group([0, 2]), dist.new_group([1, 3])]
    PP, DP = pipes[rank // 2], dps[rank % 2]
    half = slice(0, N // 2) if rank < 2 else slice(N // 2, N)
    for kind, (build, xs, ys, loss_fn) in DATA.items():
        ref = reference(build, xs, ys, loss_fn)[0]
        for name, cls in (("gpipe", ScheduleGPipe), ("1f1b", Schedule1F1B)):
            params = train(kind, cls, build, xs, ys, loss_fn, group=PP, rows=half)[2]
            out[f"dp-{kind}-{name}"] = maxdiff(params, ref)

if ws == 2:
    # stages that pass several tensors, one of them an integer tensor (no gradient)
    class First(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(6, 4)

        def forward(self, x):
            h = self.fc(x)
            return h, h * 2.0 + 1.0, st.argmax(h, dim=1)

    class Second(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 3)

        def forward(self, a, b, i):
            return self.fc(a * b) + i.unsqueeze(1).to(st.float32)

    xs, ys = DATA["mlp"][1], DATA["mlp"][2]
    st.manual_seed(1)
    f_ref, s_ref = First(), Second()
    st.manual_seed(1)
    mine = [First(), Second()][rank]
    ref_opt = optim.SGD(list(f_ref.parameters()) + list(s_ref.parameters()), lr=0.1)
    sched = Schedule1F1B(PipelineStage(mine, rank, 2), M, F.mse_loss)
    opt = optim.SGD(mine.parameters(), lr=0.1)
    for x, y in zip(xs, ys):
        ref_opt.zero_grad()
        F.mse_loss(s_ref(*f_ref(st.tensor(x))), st.tensor(y)).backward()
        ref_opt.step()
        opt.zero_grad()
        sched.step(st.tensor(x)) if rank == 0 else sched.step(target=st.tensor(y))
        opt.step()
    out["tuple"] = maxdiff(dict(mine.named_parameters()),
                           dict((f_ref, s_ref)[rank].named_parameters()))

# 1F1B needs a micro-batch per stage at least
try:
    Schedule1F1B(PipelineStage(nn.Linear(2, 2), rank, ws), ws - 1, F.mse_loss)
    out["few"] = "no error"
except ValueError as e:
    out["few"] = str(e)
# step() arguments that do not fit the stage fail before any message
sched = ScheduleGPipe(PipelineStage(nn.Linear(2, 2), rank, ws), 2, F.mse_loss)
try:
    sched.step(st.ones(4, 2), target=st.ones(4, 2))
    out["args"] = "no error"
except ValueError as e:
    out["args"] = str(e)
report(out)
"""


def _expected_log(kind: str, s: int, n_stages: int, m: int) -> list:
    if kind == "gpipe":
        return [f"{s}F{i}" for i in range(m)] + [f"{s}B{i}" for i in range(m)]
    w = n_stages - s - 1
    log = [f"{s}F{i}" for i in range(w)]
    for k in range(m - w):
        log += [f"{s}F{w + k}", f"{s}B{k}"]
    return log + [f"{s}B{i}" for i in range(m - w, m)]


def _check_world(n: int) -> dict:
    out, _ = run(n, BODY, timeout=300)
    assert sorted(out) == list(range(n))
    m, steps = 6, 3
    header = 128
    bounds = out[0]["bounds"]
    for r, res in out.items():
        for kind in ("mlp", "cnn"):
            for name in ("gpipe", "1f1b"):
                got = res[f"{kind}-{name}"]
                assert got["params"] < 1e-5, (r, kind, name, got["params"])
                assert got["log"] == _expected_log(name, r, n, m), (r, kind, name, got["log"])
                # live activations: all M under GPipe, S - s under 1F1B
                assert got["peak"] == (m if name == "gpipe" else n - r), (r, kind, name)
                if r == n - 1:
                    assert got["out"] < 1e-5 and got["loss"] < 1e-5, (r, kind, name, got)
                    assert got["nlosses"] == [m] * steps
                if kind == "mlp":
                    # forward: this stage's activations and a header per micro-batch; backward:
                    # the gradient of the previous stage's activations
                    want = (bounds[r] + m * header if r < n - 1 else 0) + \
                        (bounds[r - 1] if r > 0 else 0)
                    assert got["sent"] == [want] * steps, (r, name, got["sent"], want)
            assert res[f"{kind}-same"] < 1e-6, (r, kind)
        assert res["few"].startswith("Schedule1F1B: n_microbatches (")
        # the first stage takes no target, the others no batch
        assert res["args"].startswith("ScheduleGPipe.step: only the first stage takes the batch"
                                      if r else "ScheduleGPipe.step: target= is only taken by "
                                      "the last stage"), res["args"]
    # every rank's log is its row of the schedule's pipeline_order
    for name in ("gpipe", "1f1b"):
        order = out[0][f"mlp-{name}"]["order"]
        assert [order[str(r)] for r in range(n)] == [out[r][f"mlp-{name}"]["log"]
                                                     for r in range(n)]
    if n == 4:
        assert " ".join(out[0]["mlp-1f1b"]["log"]) == \
            "0F0 0F1 0F2 0F3 0B0 0F4 0B1 0F5 0B2 0B3 0B4 0B5"
        assert " ".join(out[3]["mlp-1f1b"]["log"]) == \
            "3F0 3B0 3F1 3B1 3F2 3B2 3F3 3B3 3F4 3B4 3F5 3B5"
    # the stages hold every parameter of the model once between them
    names = [k for r in range(n) for k in out[r]["mlp-gpipe"]["names"]]
    assert len(names) == len(set(names)) == out[0]["nparams"]
    return out


@needs_mpi
def test_two_stages_match_whole_batch_training():
    out = _check_world(2)
    for r in range(2):  # stages that pass tuples of tensors
        assert out[r]["tuple"] < 1e-5, (r, out[r]["tuple"])


@needs_mpi
def test_four_stages_and_pipelines_combined_with_data_parallelism():
    out = _check_world(4)
    for r in range(4):
        for key in ("dp-mlp-gpipe", "dp-mlp-1f1b", "dp-cnn-gpipe", "dp-cnn-1f1b"):
            assert out[r][key] < 1e-5, (r, key, out[r][key])


MISMATCH = """
from singa_tensor import nn
import singa_tensor.nn.functional as F
from singa_tensor.distributed.pipelining import PipelineStage, ScheduleGPipe
dist.init_process_group(timeout=20)
rank = dist.get_rank()
stage = PipelineStage(nn.Linear(3, 3), rank, 2)
sched = ScheduleGPipe(stage, 2 if rank == 0 else 4, F.mse_loss)
try:
    if rank == 0:
        sched.step(st.ones(4, 3))
    else:
        sched.step(target=st.zeros(4, 3))
except Exception as e:
    report({"type": type(e).__name__, "msg": str(e)})
    raise
"""


@needs_mpi
def test_ranks_that_disagree_on_the_step_are_told():
    out, proc = run(2, MISMATCH, timeout=120, check=False)
    assert proc.returncode != 0
    assert out[1]["type"] == "DistributedError"
    assert out[1]["msg"].startswith("pipeline step: stage 1 expected step 0, micro-batch 0 "
                                    "of 4 (with backward) from stage 0, got step 0, "
                                    "micro-batch 0 of 2"), out[1]["msg"]


# ---- one process ---------------------------------------------------------------------------------


def _mlp():
    return nn.Sequential(nn.Linear(5, 7), nn.Tanh(), nn.Linear(7, 2))


@pytest.mark.parametrize("cls", [ScheduleGPipe, Schedule1F1B])
def test_one_stage_pipeline_equals_whole_batch_training(cls):
    rng = np.random.default_rng(1)
    xs = rng.standard_normal((3, 6, 5)).astype(np.float32)
    ys = rng.standard_normal((3, 6, 2)).astype(np.float32)
    st.manual_seed(0)
    ref = _mlp()
    st.manual_seed(0)
    model = _mlp()
    dist.init_process_group()
    sched = cls(PipelineStage(model, 0, 1), 3, F.mse_loss)
    opt_r, opt_p = optim.SGD(ref.parameters(), lr=0.2), optim.SGD(model.parameters(), lr=0.2)
    for x, y in zip(xs, ys):
        opt_r.zero_grad()
        loss = F.mse_loss(ref(st.tensor(x)), st.tensor(y))
        loss.backward()
        opt_r.step()
        opt_p.zero_grad()
        losses = ["stale"]
        out = sched.step(st.tensor(x), target=st.tensor(y), losses=losses)
        opt_p.step()
        assert out.shape == (6, 2)
        assert len(losses) == 3  # cleared, then one per micro-batch
        assert abs(np.mean([v.item() for v in losses]) - loss.item()) < 1e-6
    for (k, a), (_, b) in zip(ref.named_parameters(), model.named_parameters()):
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), atol=1e-6,
                                   err_msg=k)


def test_forward_only_schedule_and_uneven_micro_batches():
    st.manual_seed(0)
    model = _mlp()
    x = st.randn(7, 5)
    dist.init_process_group()
    sched = ScheduleGPipe(PipelineStage(model, 0, 1), 3)  # no loss_fn: forward only
    out = sched.step(x)
    np.testing.assert_allclose(out.numpy(), model(x).detach().numpy(), atol=1e-6)
    assert sched.actions_log == ["0F0", "0F1", "0F2"]
    assert all(p.grad is None for p in model.parameters())


def test_gradients_accumulate_and_scale_grads_false_sums():
    st.manual_seed(0)
    model = _mlp()
    x, y = st.randn(4, 5), st.randn(4, 2)
    dist.init_process_group()
    stage = PipelineStage(model, 0, 1)
    ScheduleGPipe(stage, 2, F.mse_loss).step(x, target=y)
    mean_grad = model[0].weight.grad.numpy().copy()
    ScheduleGPipe(stage, 2, F.mse_loss).step(x, target=y)  # accumulates, as backward() does
    np.testing.assert_allclose(model[0].weight.grad.numpy(), 2 * mean_grad, rtol=1e-5)
    model.zero_grad()
    ScheduleGPipe(stage, 2, F.mse_loss, scale_grads=False).step(x, target=y)
    np.testing.assert_allclose(model[0].weight.grad.numpy(), 2 * mean_grad, rtol=1e-5)


def test_bad_arguments_raise_clear_errors():
    with pytest.raises(RuntimeError, match="not initialized"):
        PipelineStage(_mlp(), 0, 1)
    dist.init_process_group()
    with pytest.raises(ValueError, match="stage_index 1 is out of range for 1 stages"):
        PipelineStage(_mlp(), 1, 1)
    with pytest.raises(ValueError, match="stage_index -1 is out of range"):
        PipelineStage(_mlp(), -1, 2)
    with pytest.raises(ValueError, match="num_stages=2 but the group has 1 ranks"):
        PipelineStage(_mlp(), 0, 2)
    with pytest.raises(ValueError, match="num_stages must be at least 1"):
        PipelineStage(_mlp(), 0, 0)
    with pytest.raises(TypeError, match="submodule must be an nn.Module"):
        PipelineStage(lambda x: x, 0, 1)
    with pytest.raises(TypeError, match="stage_index must be an int"):
        PipelineStage(_mlp(), 0.0, 1)
    stage = PipelineStage(_mlp(), 0, 1)
    with pytest.raises(TypeError, match="stage must be a PipelineStage"):
        ScheduleGPipe(_mlp(), 2)
    with pytest.raises(ValueError, match="n_microbatches must be at least 1, got 0"):
        Schedule1F1B(stage, 0)
    with pytest.raises(TypeError, match="loss_fn must be callable"):
        ScheduleGPipe(stage, 2, "mse")
    sched = ScheduleGPipe(stage, 4, F.mse_loss)
    x, y = st.randn(3, 5), st.randn(3, 2)
    with pytest.raises(ValueError, match="argument 0 has batch size 3 along dim 0, fewer than "
                                         "n_microbatches=4"):
        sched.step(x, target=st.randn(8, 2))
    with pytest.raises(ValueError, match="target has batch size 3 .* n_microbatches=4"):
        sched.step(st.randn(8, 5), target=y)
    with pytest.raises(ValueError, match="the last stage .* needs target= for the loss"):
        sched.step(st.randn(8, 5))
    with pytest.raises(ValueError, match="must be passed the batch"):
        sched.step(target=st.randn(8, 2))
    with pytest.raises(TypeError, match="argument 0 must be a Tensor, got list"):
        sched.step([[1.0] * 5] * 8, target=st.randn(8, 2))
    with pytest.raises(TypeError, match="losses must be a list, got tuple"):
        sched.step(st.randn(8, 5), target=st.randn(8, 2), losses=())
    with pytest.raises(ValueError, match="target= is only taken by the last stage of a "
                                         "schedule with a loss_fn"):
        ScheduleGPipe(stage, 2).step(st.randn(8, 5), target=st.randn(8, 2))
    with st.no_grad(), pytest.raises(RuntimeError, match="called under no_grad"):
        sched.step(st.randn(8, 5), target=st.randn(8, 2))
    with pytest.raises(TypeError, match="a stage must return a Tensor"):
        ScheduleGPipe(PipelineStage(_Listy(), 0, 1), 1).step(x)


def test_an_activation_of_too_many_dims_cannot_be_announced():
    dist.init_process_group()
    stage = PipelineStage(_mlp(), 0, 1)
    assert stage._header(0, 1, 0, st.zeros(*[1] * 7)).shape == (16,)  # 128 bytes
    with pytest.raises(ValueError, match="stage 0 outputs a 8-d tensor; activations of at "
                                         "most 7 dims can be sent"):
        stage._header(0, 1, 0, st.zeros(*[1] * 8))


class _Listy(nn.Module):
    def forward(self, x):
        return [x]


def test_split_sequential_balances_parameters_and_keeps_names():
    seq = nn.Sequential(nn.Linear(10, 10), nn.ReLU(), nn.Linear(10, 2), nn.ReLU(),
                        nn.Linear(2, 2), nn.Linear(2, 2))
    parts = split_sequential(seq, 2)
    # 110 parameters in the first layer against 22 + 6 + 6 after it; ties broken by layers
    assert [len(p) for p in parts] == [2, 4]
    assert sorted(k for p in parts for k, _ in p.named_parameters()) == \
        sorted(k for k, _ in seq.named_parameters())
    assert parts[1][0] is seq[2]
    assert [len(p) for p in split_sequential(seq, 3)] == [2, 2, 2]
    assert [len(p) for p in split_sequential(seq, 6)] == [1] * 6
    assert [len(p) for p in split_sequential(seq, 2, balance=[5, 1])] == [5, 1]
    # a cut with a parameter-free part ([2, 2, 2] here) loses to one without
    relus = nn.Sequential(nn.Linear(10, 10), nn.ReLU(), nn.ReLU(), nn.ReLU(), nn.Linear(10, 1),
                          nn.Linear(1, 1))
    parts = split_sequential(relus, 3)
    assert all(list(p.parameters()) for p in parts), [len(p) for p in parts]
    assert max(len(p) for p in parts) == 3
    x = st.randn(3, 10)
    h = x
    for p in split_sequential(seq, 4):
        h = p(h)
    np.testing.assert_allclose(h.detach().numpy(), seq(x).detach().numpy(), atol=1e-6)
    with pytest.raises(TypeError, match="expected an nn.Sequential, got Linear"):
        split_sequential(nn.Linear(2, 2), 1)
    with pytest.raises(ValueError, match="num_stages must be between 1 and the 6 layers"):
        split_sequential(seq, 7)
    with pytest.raises(ValueError, match=r"balance must be 2 positive layer counts adding up "
                                         r"to 6, got \[3, 2\]"):
        split_sequential(seq, 2, balance=[3, 2])
    with pytest.raises(ValueError, match="balance must be 2 positive"):
        split_sequential(seq, 2, balance=[6, 0])


def test_pipeline_stage_and_the_lazy_attribute():
    import singa_tensor.distributed.pipelining as pipelining

    assert dist.pipelining is pipelining
    assert dist.tensor_parallel.__name__ == "singa_tensor.distributed.tensor_parallel"
    dist.init_process_group()
    seq = _mlp()
    stage = pipeline_stage(seq)
    assert (stage.stage_index, stage.num_stages, stage.is_first, stage.is_last) == (0, 1, True,
                                                                                  True)
    assert stage.submod[2] is seq[2]
    assert str(stage.device) == "cpu"
    other = dist.new_group([0])
    assert pipeline_stage(seq, group=other).group is other
