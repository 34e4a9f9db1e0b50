"""MultiplicativeLR, ConstantLR, PolynomialLR, CyclicLR, CosineAnnealingWarmRestarts,
SequentialLR and ChainedScheduler against closed forms of their lr sequences (relative
tolerance 1e-12: the schedulers update the lr step by step, the closed forms compute it
directly)."""

from __future__ import annotations

import math

import pytest

import singa_tensor as st
from singa_tensor import optim
from singa_tensor.optim import lr_scheduler as sched

from .test_lr_scheduler import _close, _lrs, _sgd

N = 25


def test_multiplicative_lr_per_group():
    s = sched.MultiplicativeLR(_sgd(0.1, groups=2), [lambda e: 0.9, lambda e: 1.0 / (e + 1)])
    _close(_lrs(s, n=N), [0.1 * 0.9 ** e for e in range(N)])
    # 0.2 * (1/2) * (1/3) * ... * (1/N)
    assert s.get_last_lr()[1] == pytest.approx(0.2 / math.factorial(N), rel=1e-12)


def test_multiplicative_lr_one_function_and_epoch_dependence():
    s = sched.MultiplicativeLR(_sgd(1.0), lambda e: 1 - 0.01 * e)
    want = [math.prod(1 - 0.01 * k for k in range(1, e + 1)) for e in range(N)]
    _close(_lrs(s, n=N), want)


@pytest.mark.parametrize("factor,total", [(1 / 3, 5), (0.5, 1), (0.25, 0)])
def test_constant_lr(factor, total):
    s = sched.ConstantLR(_sgd(0.1), factor=factor, total_iters=total)
    _close(_lrs(s, n=N), [0.1 * (factor if e < total else 1.0) for e in range(N)])


@pytest.mark.parametrize("power,total", [(1.0, 5), (2.0, 10), (0.5, 7)])
def test_polynomial_lr(power, total):
    s = sched.PolynomialLR(_sgd(0.1, groups=2), total_iters=total, power=power)
    want = [0.1 * (1 - min(e, total) / total) ** power for e in range(N)]
    _close(_lrs(s, n=N), want)
    assert s.get_last_lr() == [0.0, 0.0]


def test_polynomial_and_constant_lr_explicit_epoch_use_the_closed_form():
    s = sched.PolynomialLR(_sgd(1.0), total_iters=8, power=3.0)
    with pytest.warns(UserWarning, match="passing an epoch to step"):
        s.step(6)
    assert s.get_last_lr()[0] == pytest.approx(0.25 ** 3)
    s = sched.ConstantLR(_sgd(1.0), factor=0.5, total_iters=4)
    with pytest.warns(UserWarning, match="passing an epoch to step"):
        s.step(9)
    assert s.get_last_lr() == [1.0]


def _sgdr(e, base, lo, t0, mult):
    start, length = 0, t0
    while e >= start + length:
        start += length
        length *= mult
    return lo + (base - lo) * (1 + math.cos(math.pi * (e - start) / length)) / 2


@pytest.mark.parametrize("t0,mult,lo", [(5, 1, 0.0), (3, 2, 0.01), (2, 3, 0.0)])
def test_cosine_annealing_warm_restarts(t0, mult, lo):
    s = sched.CosineAnnealingWarmRestarts(_sgd(0.1), T_0=t0, T_mult=mult, eta_min=lo)
    _close(_lrs(s, n=N), [_sgdr(e, 0.1, lo, t0, mult) for e in range(N)], rel=1e-12)
    # restarts: back at the base lr at the start of each cycle
    assert _sgdr(t0, 0.1, lo, t0, mult) == pytest.approx(0.1)


@pytest.mark.parametrize("mult", [1, 2])
def test_cosine_annealing_warm_restarts_fractional_epochs(mult):
    s = sched.CosineAnnealingWarmRestarts(_sgd(1.0), T_0=4, T_mult=mult)
    for epoch in (0.5, 2.25, 4.0, 5.5, 13.75, 3.0):
        s.step(epoch)  # an explicit (fractional) epoch is the documented use: no warning
        start, length = 0, 4
        while epoch >= start + length:
            start += length
            length *= mult
        want = (1 + math.cos(math.pi * (epoch - start) / length)) / 2
        assert s.get_last_lr()[0] == pytest.approx(want, rel=1e-12, abs=1e-15), epoch
        assert s.last_epoch == math.floor(epoch)
    with pytest.raises(ValueError, match="CosineAnnealingWarmRestarts: expected non-negative "
                                         "epoch, but got -1"):
        s.step(-1)


def _cyclic(e, up, down, mode="triangular", gamma=1.0):
    """Where the cyclical policy is at epoch e, between 0 (base) and 1 (max), amplitude
    scaling included: a triangle wave written from the paper's description."""
    total = up + down
    cycle = e // total + 1
    pos = e - (cycle - 1) * total
    frac = pos / up if pos <= up else 1 - (pos - up) / down
    scale = {"triangular": 1.0, "triangular2": 0.5 ** (cycle - 1), "exp_range": gamma ** e}[mode]
    return frac * scale


@pytest.mark.parametrize("mode,up,down,gamma", [("triangular", 4, None, 1.0),
                                                ("triangular", 3, 5, 1.0),
                                                ("triangular2", 4, 2, 1.0),
                                                ("exp_range", 3, None, 0.95)])
def test_cyclic_lr_and_momentum(mode, up, down, gamma):
    opt = _sgd(0.1, momentum=0.5)
    s = sched.CyclicLR(opt, base_lr=0.01, max_lr=0.2, step_size_up=up, step_size_down=down,
                       mode=mode, gamma=gamma, base_momentum=0.7, max_momentum=0.95)
    got, moms = [s.get_last_lr()[0]], [opt.param_groups[0]["momentum"]]
    for _ in range(N - 1):
        opt.step()
        s.step()
        got.append(s.get_last_lr()[0])
        moms.append(opt.param_groups[0]["momentum"])
    d = down if down is not None else up
    fr = [_cyclic(e, up, d, mode, gamma) for e in range(N)]
    _close(got, [0.01 + 0.19 * f for f in fr])
    _close(moms, [0.95 - 0.25 * f for f in fr])
    # hand values: the first peak, at epoch step_size_up
    peak = 0.2 if mode != "exp_range" else 0.01 + 0.19 * gamma ** up
    assert got[up] == pytest.approx(peak) and moms[up] == pytest.approx(
        0.7 if mode != "exp_range" else 0.95 - 0.25 * gamma ** up)


def test_cyclic_lr_symmetric_matches_the_paper_formula():
    # Smith (2017): cycle = floor(1 + e / (2 s)), x = |e / s - 2 cycle + 1|,
    # lr = base + (max - base) * max(0, 1 - x)
    s = sched.CyclicLR(_sgd(1.0), base_lr=0.1, max_lr=1.0, step_size_up=5,
                       cycle_momentum=False)
    want = []
    for e in range(N):
        cycle = math.floor(1 + e / 10)
        x = abs(e / 5 - 2 * cycle + 1)
        want.append(0.1 + 0.9 * max(0.0, 1 - x))
    _close(_lrs(s, n=N), want)


def test_cyclic_lr_custom_scale_fn_adam_beta1_and_groups():
    w, v = st.zeros(1, requires_grad=True), st.zeros(1, requires_grad=True)
    adam = optim.Adam([{"params": [w]}, {"params": [v]}], lr=1.0, betas=(0.5, 0.99))
    s = sched.CyclicLR(adam, base_lr=[0.1, 0.2], max_lr=[1.0, 2.0], step_size_up=2,
                       scale_fn=lambda x: 1.0 / (x + 1), scale_mode="iterations")
    assert adam.param_groups[0]["betas"] == (0.9, 0.99)
    lrs = [s.get_last_lr()]
    for _ in range(4):
        adam.step()
        s.step()
        lrs.append(s.get_last_lr())
    # epochs 1..4 sit at 1/2, 1, 1/2, 0 of the triangle; the scale is 1 / (epoch + 1)
    for e, frac in [(1, 0.5), (2, 1.0), (3, 0.5), (4, 0.0)]:
        assert lrs[e][0] == pytest.approx(0.1 + 0.9 * frac / (e + 1))
        assert lrs[e][1] == pytest.approx(0.2 + 1.8 * frac / (e + 1))
    assert adam.param_groups[1]["betas"][0] == pytest.approx(0.9)
    # the custom function is not state
    sd = s.state_dict()
    assert "_scale_fn_custom" not in sd and "optimizer" not in sd


def test_sequential_lr():
    opt = _sgd(0.1)
    warm = sched.LinearLR(opt, start_factor=0.1, total_iters=4)
    cos = sched.CosineAnnealingLR(opt, T_max=6, eta_min=0.001)
    exp = sched.ExponentialLR(opt, gamma=0.8)
    s = sched.SequentialLR(opt, [warm, cos, exp], milestones=[5, 11])
    want = []
    for e in range(N):
        if e < 5:
            want.append(0.1 * (0.1 + 0.9 * min(e, 4) / 4))
        elif e < 11:
            want.append(0.001 + 0.099 * (1 + math.cos(math.pi * (e - 5) / 6)) / 2)
        else:
            want.append(0.1 * 0.8 ** (e - 11))
    _close(_lrs(s, n=N), want, rel=1e-9)
    assert s.last_epoch == N - 1


def test_chained_scheduler():
    opt = _sgd(1.0, groups=2)
    s = sched.ChainedScheduler([sched.ConstantLR(opt, factor=0.1, total_iters=3),
                                sched.ExponentialLR(opt, gamma=0.9)])
    _close(_lrs(s, n=N), [0.9 ** e * (0.1 if e < 3 else 1.0) for e in range(N)])
    assert s.get_last_lr()[1] == pytest.approx(2.0 * 0.9 ** (N - 1))
    assert s.optimizer is opt
    # the optimizer may be passed explicitly
    s2 = sched.ChainedScheduler([sched.StepLR(opt, step_size=2)], optimizer=opt)
    assert s2.get_last_lr() == [g["lr"] for g in opt.param_groups]


def _resume(make, split=7):
    """Run make()'s scheduler for N epochs, and again with a save/load at `split`."""
    opt, s = make()
    full = _lrs(s, n=N)
    opt, s = make()
    part = _lrs(s, n=split)
    saved_opt, saved = opt.state_dict(), s.state_dict()
    assert "optimizer" not in saved
    opt2, s2 = make(lr=0.777)
    opt2.load_state_dict(saved_opt)
    s2.load_state_dict(saved)
    assert s2.get_last_lr() == part[-1:]
    rest = [s2.get_last_lr()[0]]
    for _ in range(N - split):
        opt2.step()
        s2.step()
        rest.append(s2.get_last_lr()[0])
    _close(part + rest[1:], full, rel=0)
    return saved


def _one(cls, **kw):
    def make(lr=0.1):
        opt = _sgd(lr, momentum=0.9)
        return opt, cls(opt, **kw)
    return make


@pytest.mark.parametrize("make", [
    _one(sched.MultiplicativeLR, lr_lambda=lambda e: 0.95),
    _one(sched.ConstantLR, factor=0.5, total_iters=10),
    _one(sched.PolynomialLR, total_iters=12, power=2.0),
    _one(sched.CosineAnnealingWarmRestarts, T_0=3, T_mult=2, eta_min=0.01),
    _one(sched.CyclicLR, base_lr=0.01, max_lr=0.1, step_size_up=3, mode="triangular2"),
], ids=["multiplicative", "constant", "polynomial", "warm_restarts", "cyclic"])
def test_state_dict_resume(make):
    _resume(make)


def test_combinators_state_dict_resume():
    def sequential(lr=0.1):
        opt = _sgd(lr)
        return opt, sched.SequentialLR(opt, [sched.ConstantLR(opt, factor=0.5, total_iters=9),
                                             sched.ExponentialLR(opt, gamma=0.9)],
                                       milestones=[4])

    def chained(lr=0.1):
        opt = _sgd(lr)
        return opt, sched.ChainedScheduler([sched.PolynomialLR(opt, total_iters=30),
                                            sched.ExponentialLR(opt, gamma=0.9)])

    saved = _resume(sequential)
    assert [d["last_epoch"] for d in saved["_schedulers"]] == [3, 2]
    saved = _resume(chained)
    assert len(saved["_schedulers"]) == 2 and "_schedulers" in saved
    opt, s = chained()
    with pytest.raises(ValueError, match="ChainedScheduler.load_state_dict: the state holds 1 "
                                         "schedulers, this one has 2"):
        s.load_state_dict(dict(saved, _schedulers=saved["_schedulers"][:1]))


def test_errors():
    opt = _sgd()
    with pytest.raises(ValueError, match="MultiplicativeLR: expected 2 lr_lambdas, but got 1"):
        sched.MultiplicativeLR(_sgd(groups=2), [lambda e: 1.0])
    with pytest.raises(TypeError, match="MultiplicativeLR: lr_lambda must be a function"):
        sched.MultiplicativeLR(opt, 0.5)
    with pytest.raises(ValueError, match="ConstantLR: constant multiplicative factor expected "
                                         "to be between 0 and 1, got 1.5"):
        sched.ConstantLR(opt, factor=1.5)
    with pytest.raises(ValueError, match="ConstantLR: total_iters must be a non-negative "
                                         "integer, got -1"):
        sched.ConstantLR(opt, total_iters=-1)
    with pytest.raises(ValueError, match="PolynomialLR: total_iters must be a positive integer, "
                                         "got 0"):
        sched.PolynomialLR(opt, total_iters=0)
    with pytest.raises(ValueError, match="CosineAnnealingWarmRestarts: expected positive "
                                         "integer T_0, but got 0"):
        sched.CosineAnnealingWarmRestarts(opt, T_0=0)
    with pytest.raises(ValueError, match="expected integer T_mult >= 1, but got 0"):
        sched.CosineAnnealingWarmRestarts(opt, T_0=2, T_mult=0)
    with pytest.raises(TypeError, match="expected float or int eta_min, but got str"):
        sched.CosineAnnealingWarmRestarts(opt, T_0=2, eta_min="0")
    with pytest.raises(ValueError, match="CyclicLR: mode is invalid and scale_fn is None"):
        sched.CyclicLR(opt, 0.1, 1.0, mode="sawtooth", cycle_momentum=False)
    with pytest.raises(ValueError, match="CyclicLR: step_size_up must be a positive number, "
                                         "got 0"):
        sched.CyclicLR(opt, 0.1, 1.0, step_size_up=0, cycle_momentum=False)
    with pytest.raises(ValueError, match="CyclicLR: expected 1 values for max_lr, got 2"):
        sched.CyclicLR(opt, 0.1, [1.0, 2.0], cycle_momentum=False)
    with pytest.raises(ValueError, match="CyclicLR: scale_mode must be 'cycle' or 'iterations'"):
        sched.CyclicLR(opt, 0.1, 1.0, scale_fn=lambda x: 1.0, scale_mode="epoch",
                       cycle_momentum=False)
    with pytest.raises(ValueError, match="CyclicLR: optimizer must support momentum or beta1"):
        sched.CyclicLR(optim.Adagrad([st.zeros(1, requires_grad=True)]), 0.1, 1.0)
    with pytest.raises(TypeError, match="list is not an Optimizer"):
        sched.CyclicLR([], 0.1, 1.0)
    a = sched.ExponentialLR(opt, gamma=0.9)
    other = sched.ExponentialLR(_sgd(), gamma=0.9)
    with pytest.raises(ValueError, match="SequentialLR expects number of schedulers provided "
                                         "to be one more than the number of milestone points, "
                                         "but got number of schedulers 1 and the number of "
                                         "milestones to be equal to 1"):
        sched.SequentialLR(opt, [a], milestones=[3])
    with pytest.raises(ValueError, match="SequentialLR expects all schedulers to belong to the "
                                         "same optimizer, but the scheduler at index 1"):
        sched.SequentialLR(opt, [a, other], milestones=[3])
    with pytest.raises(ValueError, match="SequentialLR: milestones must be increasing"):
        sched.SequentialLR(opt, [a, a, a], milestones=[5, 3])
    with pytest.raises(TypeError, match="SequentialLR expects a list of schedulers, but the "
                                        "one at index 0 is int"):
        sched.SequentialLR(opt, [3], milestones=[])
    with pytest.raises(ValueError, match="ChainedScheduler does not support ReduceLROnPlateau "
                                         "\\(at index 1\\)"):
        sched.ChainedScheduler([a, sched.ReduceLROnPlateau(opt)])
    with pytest.raises(ValueError, match="ChainedScheduler expects at least one scheduler"):
        sched.ChainedScheduler([])
    with pytest.raises(ValueError, match="ChainedScheduler expects all schedulers to belong to "
                                         "the same optimizer"):
        sched.ChainedScheduler([a, other])
