"""Mixed precision: autocast's per-op casts, its cache and nesting, GradScaler's scaling, skipping
and growth, master weights, and training under autocast against float32 training."""

from __future__ import annotations

import threading
import warnings

import numpy as np
import pytest

import singa_tensor as st
import singa_tensor.nn.functional as F
from singa_tensor import nn, optim

from .helpers import to_numpy

BF16, F16, F32 = st.bfloat16, st.float16, st.float32


def _rand(*shape, seed=0):
    return st.tensor(np.random.default_rng(seed).standard_normal(shape).astype(np.float32))


# ---- autocast: which dtype each op runs in -------------------------------------------------------

LOWERED = {
    "linear": lambda: F.linear(_rand(4, 8), _rand(3, 8), _rand(3)),
    "matmul": lambda: _rand(4, 8) @ _rand(8, 3),
    "matmul_batched": lambda: st.matmul(_rand(2, 4, 8), _rand(8, 3)),
    "mm": lambda: st.mm(_rand(4, 8), _rand(8, 3)),
    "bmm": lambda: st.bmm(_rand(2, 4, 8), _rand(2, 8, 3)),
    "baddbmm": lambda: st.baddbmm(_rand(2, 4, 3), _rand(2, 4, 8), _rand(2, 8, 3)),
    "addmm": lambda: st.addmm(_rand(4, 3), _rand(4, 8), _rand(8, 3)),
    "einsum": lambda: st.einsum("ij,jk->ik", _rand(4, 8), _rand(8, 3)),
    "conv1d": lambda: F.conv1d(_rand(2, 3, 9), _rand(4, 3, 3)),
    "conv2d": lambda: F.conv2d(_rand(2, 3, 8, 8), _rand(4, 3, 3, 3), _rand(4), padding=1),
    "conv_transpose2d": lambda: F.conv_transpose2d(_rand(1, 3, 5, 5), _rand(3, 2, 3, 3)),
    "sdpa": lambda: F.scaled_dot_product_attention(_rand(2, 2, 5, 8), _rand(2, 2, 5, 8),
                                                   _rand(2, 2, 5, 8)),
}


@pytest.mark.parametrize("dtype", [BF16, F16], ids=["bf16", "f16"])
@pytest.mark.parametrize("name", list(LOWERED))
def test_products_run_in_the_low_dtype(name, dtype):
    with st.autocast("cpu", dtype=dtype):
        y = LOWERED[name]()
    assert y.dtype is dtype
    outside = LOWERED[name]()
    assert outside.dtype is F32  # the same call outside a region is untouched
    # the region computes what the call computes on inputs rounded to the low dtype: within a
    # few ulps of the low dtype of the float32 result (relative to the result's scale)
    ulp = 2.0 ** -7 if dtype is BF16 else 2.0 ** -10
    want = to_numpy(outside)
    err = np.abs(to_numpy(y.float()) - want).max()
    assert err <= 8 * ulp * (np.abs(want).max() + 1), (name, err)


def test_a_listed_composite_casts_once_at_its_entry(monkeypatch):
    # PyTorch's autocast casts at the listed op and runs its body without casts: the fused
    # attention path (long sequences) widens bfloat16 to float32 inside, and must not be cast
    # back to bfloat16 on the way in to its float32 kernels
    from singa_tensor.ops import attention_fused as af

    n = int(np.ceil(np.sqrt(af.CPU_MIN_SCORES)))
    q, k, v = (_rand(1, 2, n, 16, seed=s).requires_grad_() for s in range(3))
    with st.autocast("cpu", dtype=BF16):
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    assert y.dtype is BF16
    y.float().sum().backward()
    assert q.grad.dtype is F32 and k.grad.dtype is F32 and v.grad.dtype is F32
    want = F.scaled_dot_product_attention(*(t.detach().to(BF16) for t in (q, k, v)),
                                          is_causal=True)
    np.testing.assert_allclose(to_numpy(y.float()), to_numpy(want.float()), atol=2 ** -7)


# each layer with the dtype of its output under a region: PyTorch's for the products and norms;
# the recurrent layers run their time loops in float32 (their input projections in the low
# dtype), where PyTorch's CPU LSTM returns the low dtype; so do the cells
LAYERS = {
    # the residual sums promote: float32 input + low-dtype sublayer is float32, as in PyTorch
    "transformer": (lambda: nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=True),
                    lambda: _rand(2, 40, 32), F32),
    "mha_long": (lambda: nn.MultiheadAttention(16, 2, batch_first=True),
                 lambda: _rand(1, 80, 16), "low"),
    "lstm": (lambda: nn.LSTM(8, 16, num_layers=2, batch_first=True), lambda: _rand(3, 7, 8),
             F32),
    "gru": (lambda: nn.GRU(8, 16, bidirectional=True), lambda: _rand(7, 3, 8), F32),
    "lstm_cell": (lambda: nn.LSTMCell(8, 16), lambda: _rand(3, 8), F32),
    "conv_bn": (lambda: nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8),
                                      nn.ReLU(), nn.MaxPool2d(2)), lambda: _rand(2, 3, 8, 8),
                "low"),
}


@pytest.mark.parametrize("dtype", [BF16, F16], ids=["bf16", "f16"])
@pytest.mark.parametrize("name", list(LAYERS))
def test_layers_train_under_autocast(name, dtype):
    build, data, out_dtype = LAYERS[name]
    st.manual_seed(0)
    layer = build()
    x = data()
    ref = layer(x, x, x)[0] if name == "mha_long" else layer(x)
    ref = ref[0] if isinstance(ref, tuple) else ref
    with st.autocast("cpu", dtype=dtype):
        out = layer(x, x, x)[0] if name == "mha_long" else layer(x)
        out = out[0] if isinstance(out, tuple) else out
        loss = out.float().square().mean()
    loss.backward()
    assert out.dtype is (dtype if out_dtype == "low" else out_dtype), out.dtype
    for p in layer.parameters():
        assert p.grad is not None and p.grad.dtype is F32 and np.isfinite(to_numpy(p.grad)).all()
    ulp = 2.0 ** -7 if dtype is BF16 else 2.0 ** -10
    want = to_numpy(ref)
    assert np.abs(to_numpy(out.float()) - want).max() <= 64 * ulp * (np.abs(want).max() + 1)


LOSSES = {
    "cross_entropy": lambda x: F.cross_entropy(x, st.tensor([0, 1, 2, 0])),
    "nll_loss": lambda x: F.nll_loss(x, st.tensor([0, 1, 2, 0])),
    "mse_loss": lambda x: F.mse_loss(x, st.zeros(4, 3)),
    "l1_loss": lambda x: F.l1_loss(x, st.zeros(4, 3)),
    "smooth_l1_loss": lambda x: F.smooth_l1_loss(x, st.zeros(4, 3)),
    "bce_with_logits": lambda x: F.binary_cross_entropy_with_logits(x, st.ones(4, 3) * 0.5),
    "kl_div": lambda x: F.kl_div(x, st.full((4, 3), 1 / 3), reduction="batchmean"),
    "CrossEntropyLoss": lambda x: nn.CrossEntropyLoss()(x, st.tensor([0, 1, 2, 0])),
    "MSELoss": lambda x: nn.MSELoss()(x, st.zeros(4, 3)),
}


@pytest.mark.parametrize("name", list(LOSSES))
def test_losses_run_in_float32(name):
    with st.autocast("cpu"):
        logits = F.linear(_rand(4, 8), _rand(3, 8))
        assert logits.dtype is BF16
        loss = LOSSES[name](logits)
    assert loss.dtype is F32
    # the loss of the bfloat16 logits, computed in float32
    want = LOSSES[name](logits.detach().float())
    np.testing.assert_allclose(to_numpy(loss), to_numpy(want), rtol=1e-6, atol=1e-7)


def test_other_ops_follow_their_inputs_and_float64_and_ints_are_left_alone():
    x = _rand(4, 8)
    w = _rand(3, 8)
    with st.autocast("cpu"):
        y = F.linear(x, w)
        assert (y + 1.0).dtype is BF16          # a Python scalar does not promote
        assert (y + _rand(4, 3)).dtype is F32   # a float32 tensor does
        assert F.relu(y).dtype is BF16
        d = F.linear(x.double(), w.double())
        assert d.dtype is st.float64            # float64 is not eligible for autocast
        i = st.ones(2, 3, dtype=st.int64) @ st.ones(3, 2, dtype=st.int64)
        assert i.dtype is st.int64


def test_nested_regions_and_disabling():
    x, w = _rand(4, 8), _rand(3, 8)
    with st.autocast("cpu"):
        with st.autocast("cpu", enabled=False):
            assert not st.is_autocast_enabled("cpu")
            assert F.linear(x, w).dtype is F32
        assert st.is_autocast_enabled("cpu")
        with st.autocast("cpu", dtype=F16):
            assert st.get_autocast_dtype("cpu") is F16
            assert F.linear(x, w).dtype is F16
        assert st.get_autocast_dtype("cpu") is BF16
        assert F.linear(x, w).dtype is BF16
    assert not st.is_autocast_enabled("cpu")
    assert F.linear(x, w).dtype is F32


def test_a_cuda_region_leaves_cpu_tensors_alone():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # without CUDA the region is off, with a warning
        region = st.autocast("cuda")
    with region:
        assert st.is_autocast_enabled("cuda") == st.cuda.is_available()
        assert not st.is_autocast_enabled("cpu")
        assert F.linear(_rand(4, 8), _rand(3, 8)).dtype is F32


@pytest.mark.skipif(st.cuda.is_available(), reason="checks the behaviour without CUDA")
def test_cuda_autocast_and_scaler_without_cuda_warn_and_are_off():
    with pytest.warns(UserWarning, match="CUDA is not available"):
        region = st.cuda.amp.autocast()
    with region:
        assert not st.is_autocast_enabled("cuda")
    with pytest.warns(UserWarning, match="CUDA is not available"):
        scaler = st.cuda.amp.GradScaler()
    assert not scaler.is_enabled() and scaler.get_scale() == 1.0
    w, opt = _one_param()
    loss = (w * w).sum()
    assert scaler.scale(loss) is loss  # a pass-through, as PyTorch's
    loss.backward()
    scaler.step(opt)
    np.testing.assert_allclose(to_numpy(w), [0.8, 1.6], rtol=1e-6)


def test_decorator_and_device_spellings():
    @st.autocast("cpu")
    def f(x, w):
        return F.linear(x, w)

    assert f(_rand(4, 8), _rand(3, 8)).dtype is BF16
    with st.cpu.amp.autocast():
        assert st.is_autocast_cpu_enabled() and st.get_autocast_cpu_dtype() is BF16
    with st.amp.autocast("cpu", dtype=st.float16):
        assert F.linear(_rand(4, 8), _rand(3, 8)).dtype is F16
    from singa_tensor.cpu.amp import autocast as cpu_autocast
    from singa_tensor.cuda.amp import GradScaler, autocast

    with cpu_autocast(dtype=st.float16):
        assert st.get_autocast_dtype("cpu") is F16
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # without CUDA these are off, with a warning
        region, scaler = autocast(), GradScaler(init_scale=8.0)
    with region:
        assert st.is_autocast_enabled() == st.cuda.is_available()
        assert st.get_autocast_gpu_dtype() is F16
    assert scaler.get_scale() == (8.0 if st.cuda.is_available() else 1.0)
    assert st.amp.GradScaler("cpu").get_scale() == 2.0 ** 16


def test_state_functions():
    assert not st.is_autocast_enabled("cpu")
    with st.autocast("cpu"):
        st.set_autocast_enabled("cpu", False)
        assert F.linear(_rand(4, 8), _rand(3, 8)).dtype is F32
        st.set_autocast_enabled("cpu", True)
        st.set_autocast_dtype("cpu", st.float16)
        assert F.linear(_rand(4, 8), _rand(3, 8)).dtype is F16
    assert not st.is_autocast_enabled("cpu")
    assert st.is_autocast_cache_enabled()


def test_regions_are_per_thread():
    seen = {}
    inside, done = threading.Event(), threading.Event()

    def other():
        inside.wait()
        seen["enabled"] = st.is_autocast_enabled("cpu")
        seen["dtype"] = F.linear(_rand(4, 8), _rand(3, 8)).dtype
        done.set()

    t = threading.Thread(target=other)
    t.start()
    with st.autocast("cpu"):
        inside.set()
        done.wait(30)
    t.join(30)
    assert seen == {"enabled": False, "dtype": F32}


def test_bad_arguments():
    with pytest.raises(RuntimeError, match="unsupported autocast device_type 'xpu'"):
        st.autocast("xpu")
    with pytest.raises(TypeError, match="device_type must be a string"):
        st.autocast(0)
    with pytest.raises(TypeError, match="enabled must be a bool"):
        st.autocast("cpu", enabled="yes")
    with pytest.warns(UserWarning, match="float32 is not supported"):
        ac = st.autocast("cpu", dtype=st.float32)
    with ac:
        assert not st.is_autocast_enabled("cpu")
    with pytest.raises(ValueError, match="bfloat16 or float16"):
        st.set_autocast_dtype("cpu", st.float64)


# ---- the cast cache ------------------------------------------------------------------------------


def _count_casts(monkeypatch):
    from singa_tensor.ops import layout

    calls = []
    real = layout.cast

    def counting(x, dtype):
        calls.append(id(x))
        return real(x, dtype)

    monkeypatch.setattr(layout, "cast", counting)
    return calls


def test_parameters_are_cast_once_per_region(monkeypatch):
    w = nn.Parameter(_rand(3, 8))
    x = _rand(4, 8)
    calls = _count_casts(monkeypatch)
    with st.autocast("cpu"):
        a = F.linear(x, w)
        b = F.linear(x, w)
    assert calls.count(id(w)) == 1 and calls.count(id(x)) == 2
    np.testing.assert_array_equal(to_numpy(a.float()), to_numpy(b.float()))
    calls.clear()
    with st.autocast("cpu", cache_enabled=False):
        F.linear(x, w)
        F.linear(x, w)
    assert calls.count(id(w)) == 2
    calls.clear()
    with st.autocast("cpu"):  # a new region casts afresh (the cache was dropped on exit)
        F.linear(x, w)
    assert calls.count(id(w)) == 1


def test_a_parameter_changed_in_place_is_cast_again(monkeypatch):
    w = nn.Parameter(_rand(3, 8))
    x = _rand(4, 8)
    calls = _count_casts(monkeypatch)
    with st.autocast("cpu"):
        a = F.linear(x, w)
        with st.no_grad():
            w.mul_(2.0)
        b = F.linear(x, w)
    assert calls.count(id(w)) == 2
    np.testing.assert_allclose(to_numpy(b.float()), 2 * to_numpy(a.float()), rtol=1e-2)


# ---- backward ------------------------------------------------------------------------------------


def test_gradients_reach_float32_parameters_in_float32():
    lin = nn.Linear(8, 3)
    x = _rand(4, 8)
    with st.autocast("cpu"):
        loss = F.cross_entropy(lin(x), st.tensor([0, 1, 2, 0]))
    loss.backward()
    assert lin.weight.grad.dtype is F32 and lin.bias.grad.dtype is F32
    g_outside = lin.weight.grad.clone()
    lin.zero_grad()
    with st.autocast("cpu"):  # backward inside the region: the same gradients
        loss = F.cross_entropy(lin(x), st.tensor([0, 1, 2, 0]))
        loss.backward()
    np.testing.assert_array_equal(to_numpy(lin.weight.grad), to_numpy(g_outside))
    # and within bfloat16 accuracy of float32 training's gradient
    lin.zero_grad()
    F.cross_entropy(lin(x), st.tensor([0, 1, 2, 0])).backward()
    np.testing.assert_allclose(to_numpy(g_outside), to_numpy(lin.weight.grad), atol=2e-2)


def test_custom_fwd_and_bwd():
    class Mul2(st.autograd.Function):
        @staticmethod
        @st.amp.custom_fwd(device_type="cpu", cast_inputs=st.float32)
        def forward(ctx, x, w):
            ctx.save_for_backward(x, w)
            assert not st.is_autocast_enabled("cpu")
            return x @ w

        @staticmethod
        @st.amp.custom_bwd(device_type="cpu")
        def backward(ctx, g):
            x, w = ctx.saved_tensors
            return g @ w.t(), x.t() @ g

    x = _rand(4, 8).bfloat16().requires_grad_()
    w = _rand(8, 3).requires_grad_()
    with st.autocast("cpu"):
        y = Mul2.apply(x, w)
    assert y.dtype is F32
    y.sum().backward()
    assert w.grad.dtype is F32 and x.grad.dtype is BF16

    class Plain(st.autograd.Function):
        @staticmethod
        @st.amp.custom_fwd(device_type="cpu")
        def forward(ctx, x, w):
            return x @ w

        @staticmethod
        @st.amp.custom_bwd(device_type="cpu")
        def backward(ctx, g):
            return None, None

    with st.autocast("cpu"):
        assert Plain.apply(_rand(4, 8), _rand(8, 3)).dtype is BF16


# ---- training ------------------------------------------------------------------------------------


def _mlp_losses(autocast: bool, steps: int = 40, scaler=None):
    rng = np.random.default_rng(0)
    x = st.tensor(rng.standard_normal((64, 16)).astype(np.float32))
    y = st.tensor((rng.standard_normal((64, 16)) @ rng.standard_normal((16, 4))).argmax(1))
    st.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))
    opt = optim.SGD(model.parameters(), lr=0.2, momentum=0.9)
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        with st.autocast("cpu", enabled=autocast):
            loss = F.cross_entropy(model(x), y)
        if scaler is None:
            loss.backward()
            opt.step()
        else:
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        losses.append(loss.item())
    return losses


def test_training_under_autocast_tracks_float32_training():
    ref = _mlp_losses(False)
    amp = _mlp_losses(True)
    assert ref[-1] < 0.5 * ref[0]
    np.testing.assert_allclose(amp, ref, rtol=0.05, atol=0.02)
    scaled = _mlp_losses(True, scaler=st.amp.GradScaler("cpu", init_scale=1024.0))
    np.testing.assert_allclose(scaled, amp, rtol=0.02, atol=0.01)


def test_a_compiled_step_records_the_casts():
    def run(graph: bool):
        st.manual_seed(0)
        model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))
        opt = optim.SGD(model.parameters(), lr=0.1)
        x = _rand(8, 16)
        y = st.tensor([0, 1, 2, 3, 0, 1, 2, 3])

        def step(x, y):
            opt.zero_grad()
            with st.autocast("cpu"):
                loss = F.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            return loss

        fn = st.compile(step) if graph else step
        losses = [fn(x, y).item() for _ in range(5)]
        return losses, [to_numpy(p) for p in model.parameters()], fn

    le, pe, _ = run(False)
    lg, pg, fn = run(True)
    assert fn.replays >= 1
    np.testing.assert_allclose(lg, le, rtol=1e-6)
    for a, b in zip(pe, pg):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)


# ---- GradScaler ----------------------------------------------------------------------------------


def _one_param(value=(1.0, 2.0)):
    w = st.tensor(list(value), requires_grad=True)
    return w, optim.SGD([w], lr=0.1)


def test_scaler_scales_unscales_and_steps():
    w, opt = _one_param()
    scaler = st.amp.GradScaler("cpu", init_scale=256.0)
    loss = (w * w).sum()
    scaled = scaler.scale(loss)
    assert scaled.item() == 256.0 * loss.item()
    scaled.backward()
    np.testing.assert_array_equal(to_numpy(w.grad), [512.0, 1024.0])
    scaler.unscale_(opt)
    np.testing.assert_array_equal(to_numpy(w.grad), [2.0, 4.0])
    scaler.step(opt)
    scaler.update()
    np.testing.assert_allclose(to_numpy(w), [0.8, 1.6], rtol=1e-6)
    assert scaler.get_scale() == 256.0  # one clean step of a growth interval of 2000
    assert scaler.scale([loss, (loss, loss)])[1][0].item() == 256.0 * loss.item()


@pytest.mark.parametrize("bad", [float("inf"), float("nan")])
def test_scaler_skips_the_step_and_backs_off_on_inf_or_nan(bad):
    w, opt = _one_param()
    scaler = st.amp.GradScaler("cpu", init_scale=256.0, growth_interval=2)
    (scaler.scale((w * w).sum()) * bad).backward()
    before = to_numpy(w).copy()
    assert scaler.step(opt) is None
    scaler.update()
    np.testing.assert_array_equal(to_numpy(w), before)
    assert scaler.get_scale() == 128.0
    assert scaler.state_dict()["_growth_tracker"] == 0


def test_scaler_grows_after_the_interval():
    w, opt = _one_param()
    scaler = st.amp.GradScaler("cpu", init_scale=4.0, growth_factor=3.0, growth_interval=3)
    scales = []
    for _ in range(7):
        opt.zero_grad()
        scaler.scale((w * w).sum()).backward()
        scaler.step(opt)
        scaler.update()
        scales.append(scaler.get_scale())
    assert scales == [4.0, 4.0, 12.0, 12.0, 12.0, 36.0, 36.0]
    scaler.update(new_scale=2.0)
    assert scaler.get_scale() == 2.0


def test_scaler_with_clip_grad_norm_after_unscale():
    w, opt = _one_param((3.0, 4.0))
    scaler = st.amp.GradScaler("cpu", init_scale=1024.0)
    scaler.scale((w * w).sum()).backward()
    scaler.unscale_(opt)
    norm = nn.utils.clip_grad_norm_([w], max_norm=1.0)
    assert norm.item() == pytest.approx(10.0)
    assert np.linalg.norm(to_numpy(w.grad)) == pytest.approx(1.0, rel=1e-5)
    scaler.step(opt)  # unscale_ ran: step does not unscale again
    scaler.update()
    np.testing.assert_allclose(to_numpy(w), [3.0 - 0.06, 4.0 - 0.08], rtol=1e-5)


def test_scaler_state_dict_round_trip_through_a_checkpoint(tmp_path):
    w, opt = _one_param()
    scaler = st.amp.GradScaler("cpu", init_scale=64.0, growth_interval=5)
    for _ in range(3):
        opt.zero_grad()
        scaler.scale((w * w).sum()).backward()
        scaler.step(opt)
        scaler.update()
    st.save({"scaler": scaler.state_dict()}, tmp_path / "ck.st")
    again = st.amp.GradScaler("cpu")
    again.load_state_dict(st.load(tmp_path / "ck.st")["scaler"])
    assert again.state_dict() == scaler.state_dict()
    assert again.get_scale() == 64.0 and again.get_growth_interval() == 5


def test_scaler_disabled_is_a_pass_through():
    w, opt = _one_param()
    scaler = st.amp.GradScaler("cpu", enabled=False)
    loss = (w * w).sum()
    assert scaler.scale(loss) is loss
    loss.backward()
    scaler.unscale_(opt)
    scaler.step(opt)
    scaler.update()
    np.testing.assert_allclose(to_numpy(w), [0.8, 1.6], rtol=1e-6)
    assert scaler.get_scale() == 1.0 and scaler.state_dict() == {}


def test_scaler_errors():
    w, opt = _one_param()
    scaler = st.amp.GradScaler("cpu")
    with pytest.raises(RuntimeError, match="no scale yet"):
        scaler.step(opt)
    with pytest.raises(RuntimeError, match="no scale yet"):
        scaler.update()
    scaler.scale((w * w).sum()).backward()
    scaler.unscale_(opt)
    with pytest.raises(RuntimeError, match="already called on this optimizer"):
        scaler.unscale_(opt)
    scaler.step(opt)
    with pytest.raises(RuntimeError, match="step\\(\\) has already been called"):
        scaler.step(opt)
    with pytest.raises(RuntimeError, match="after step"):
        scaler.unscale_(opt)
    scaler.update()
    with pytest.raises(RuntimeError, match="no inf checks"):
        scaler.update()
    with pytest.raises(RuntimeError, match="closure"):
        scaler.step(opt, closure=lambda: None)
    with pytest.raises(TypeError, match="Tensor or a list"):
        scaler.scale(3.0)
    for kwargs, err in [({"init_scale": -1.0}, ValueError), ({"growth_factor": 0.5}, ValueError),
                        ({"backoff_factor": 1.5}, ValueError), ({"growth_interval": 0}, ValueError),
                        ({"init_scale": "big"}, TypeError), ({"enabled": 1}, TypeError)]:
        with pytest.raises(err, match="GradScaler"):
            st.amp.GradScaler("cpu", **kwargs)
    with pytest.raises(RuntimeError, match="empty"):
        st.amp.GradScaler("cpu").load_state_dict({})
    h = st.ones(2, dtype=st.float16, requires_grad=True)
    hopt = optim.SGD([h], lr=0.1)
    s16 = st.amp.GradScaler("cpu")
    s16.scale(h.float().sum()).backward()
    with pytest.raises(ValueError, match="unscale float16 gradients"):
        s16.unscale_(hopt)


@pytest.fixture
def world_of_one():
    import singa_tensor.distributed as dist

    yield
    if dist.is_initialized():  # DistOpt made a world of one: leave none behind
        dist.destroy_process_group()


def test_scaler_with_dist_opt_in_a_world_of_one(world_of_one):
    w, opt = _one_param()
    dopt = optim.DistOpt(opt)
    scaler = st.amp.GradScaler("cpu", init_scale=512.0)
    dopt.backward_and_update((w * w).sum(), scaler=scaler)
    scaler.update()
    np.testing.assert_allclose(to_numpy(w), [0.8, 1.6], rtol=1e-6)
    dopt.backward_and_update((w * w).sum() * float("inf"), scaler=scaler)
    scaler.update()
    np.testing.assert_allclose(to_numpy(w), [0.8, 1.6], rtol=1e-6)
    assert scaler.get_scale() == 256.0


# ---- master weights ------------------------------------------------------------------------------


def test_master_weights_keep_small_updates_that_bfloat16_rounds_away():
    def train(master: bool):
        w = st.ones(4, dtype=BF16, requires_grad=True)
        opt = optim.SGD([w], lr=1e-3, master_weights=master)
        for _ in range(10):
            opt.zero_grad()
            w.float().sum().backward()  # gradient 1 each step: w -= 1e-3
            opt.step()
        return w, opt

    plain, _ = train(False)
    kept, opt = train(True)
    # 1 - 1e-3 rounds back to 1 in bfloat16 (its spacing below 1 is 2^-8): plain SGD is stuck
    assert to_numpy(plain.float()).tolist() == [1.0] * 4
    master = next(opt.master_params())
    assert master.dtype is F32
    np.testing.assert_allclose(to_numpy(master), [0.99] * 4, rtol=1e-6)
    assert kept.dtype is BF16
    np.testing.assert_allclose(to_numpy(kept.float()), [0.98828125] * 4)  # 0.99 in bfloat16


def test_master_weights_state_is_float32_and_round_trips():
    model = nn.Linear(4, 2).to(dtype=BF16)
    opt = optim.Adam(model.parameters(), lr=1e-2, master_weights=True)
    x = _rand(3, 4).bfloat16()
    for _ in range(2):
        opt.zero_grad()
        model(x).float().sum().backward()
        opt.step()
    sd = opt.state_dict()
    assert sd["state"][0]["exp_avg"].dtype is F32
    again = optim.Adam(model.parameters(), lr=1e-2, master_weights=True)
    again.load_state_dict(sd)
    assert again.state_dict()["state"][0]["exp_avg"].dtype is F32
    assert model.weight.grad is not None
    opt.zero_grad()
    assert model.weight.grad is None


def test_master_weights_with_a_float16_model_and_the_scaler():
    w = st.tensor([1.0, 2.0], dtype=F16, requires_grad=True)
    opt = optim.SGD([w], lr=0.1, master_weights=True)
    scaler = st.amp.GradScaler("cpu", init_scale=1024.0)
    scaler.scale((w.float() ** 2).sum()).backward()
    scaler.step(opt)  # the float32 master gradients are unscaled: no float16 refusal
    scaler.update()
    np.testing.assert_allclose(to_numpy(w.float()), [0.8, 1.6], rtol=1e-3)
    (scaler.scale((w.float() ** 2).sum()) * float("inf")).backward()
    scaler.step(opt)
    scaler.update()
    np.testing.assert_allclose(to_numpy(w.float()), [0.8, 1.6], rtol=1e-3)


def test_master_weights_bad_arguments():
    w = st.ones(2, dtype=BF16, requires_grad=True)
    with pytest.raises(TypeError, match="master_weights must be a bool"):
        optim.SGD([w], lr=0.1, master_weights="yes")
    with pytest.raises(ValueError, match="master_weights is not supported"):
        optim.LBFGS([w], master_weights=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        optim.AdamW([w], master_weights=True)  # subclasses of subclasses take it too
