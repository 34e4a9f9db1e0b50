"""Learning-rate schedulers against closed forms and hand-derived sequences."""

from __future__ import annotations

import math

import pytest

import singa_tensor as st
from singa_tensor import optim
from singa_tensor.optim import lr_scheduler as sched

N = 20


def _sgd(lr=0.1, groups=1, **kw):
    params = [{"params": [st.zeros(1, requires_grad=True)], "lr": lr * (i + 1)}
              for i in range(groups)]
    return optim.SGD(params, lr=lr, **kw)


def _lrs(scheduler, n=N, group=0):
    """lr in effect at epochs 0..n-1 (construction is epoch 0)."""
    out = [scheduler.get_last_lr()[group]]
    for _ in range(n - 1):
        scheduler.optimizer.step()
        scheduler.step()
        assert scheduler.optimizer.param_groups[group]["lr"] == scheduler.get_last_lr()[group]
        out.append(scheduler.get_last_lr()[group])
    return out


def _close(got, want, rel=1e-12):
    assert len(got) == len(want)
    for e, (g, w) in enumerate(zip(got, want)):
        assert g == pytest.approx(w, rel=rel, abs=1e-15), f"epoch {e}: {g} != {w}"


def test_step_lr():
    s = sched.StepLR(_sgd(0.1, groups=2), step_size=3, gamma=0.5)
    _close(_lrs(s), [0.1 * 0.5 ** (e // 3) for e in range(N)])
    # the second group scales from its own base lr
    assert s.get_last_lr()[1] == pytest.approx(0.2 * 0.5 ** ((N - 1) // 3))
    assert s.base_lrs == [0.1, 0.2]


def test_multistep_lr_with_repeated_milestone():
    s = sched.MultiStepLR(_sgd(1.0), milestones=[12, 4, 12], gamma=0.1)
    want = [1.0] * 4 + [0.1] * 8 + [0.001] * 8
    _close(_lrs(s), want)


def test_exponential_lr():
    _close(_lrs(sched.ExponentialLR(_sgd(0.5), gamma=0.9)), [0.5 * 0.9 ** e for e in range(N)])


def test_cosine_annealing_lr_follows_the_closed_form_past_t_max():
    base, lo, t = 0.1, 0.001, 7
    s = sched.CosineAnnealingLR(_sgd(base), T_max=t, eta_min=lo)
    want = [lo + (base - lo) * (1 + math.cos(math.pi * e / t)) / 2 for e in range(N)]
    _close(_lrs(s), want, rel=1e-9)
    assert want[t] == pytest.approx(lo)


def test_lambda_lr_per_group():
    s = sched.LambdaLR(_sgd(0.1, groups=2), [lambda e: 0.9 ** e, lambda e: 1.0 / (e + 1)])
    _close(_lrs(s, group=0), [0.1 * 0.9 ** e for e in range(N)])
    assert s.get_last_lr()[1] == pytest.approx(0.2 / N)


def test_linear_lr():
    s = sched.LinearLR(_sgd(0.1), start_factor=0.25, end_factor=0.75, total_iters=8)
    want = [0.1 * (0.25 + 0.5 * min(e, 8) / 8) for e in range(N)]
    _close(_lrs(s), want)
    # hand values: 0.025 at the start, 0.075 from epoch 8 on
    assert want[0] == pytest.approx(0.025) and want[8] == want[-1] == pytest.approx(0.075)


def test_schedulers_chain_multiplicatively():
    opt = _sgd(1.0)
    a = sched.ExponentialLR(opt, gamma=0.9)
    b = sched.StepLR(opt, step_size=4, gamma=0.1)
    got = [opt.param_groups[0]["lr"]]
    for _ in range(N - 1):
        opt.step()
        a.step()
        b.step()
        got.append(opt.param_groups[0]["lr"])
    _close(got, [0.9 ** e * 0.1 ** (e // 4) for e in range(N)])


def _one_cycle_reference(t, total, max_lr, div, final_div, pct, strategy="cos", three=False):
    """The schedule as PyTorch's documentation describes it: phases end at pct*total - 1,
    (2*pct*total - 2 for three_phase) and total - 1; each anneals between its end values."""
    initial = max_lr / div
    low = initial / final_div
    if strategy == "cos":
        def anneal(a, b, x):
            return b + (a - b) / 2 * (1 + math.cos(math.pi * x))
    else:
        def anneal(a, b, x):
            return a + (b - a) * x
    up = pct * total - 1
    if three:
        ends = [(up, initial, max_lr), (2 * up, max_lr, initial), (total - 1, initial, low)]
    else:
        ends = [(up, initial, max_lr), (total - 1, max_lr, low)]
    start = 0.0
    for i, (end, a, b) in enumerate(ends):
        if t <= end or i == len(ends) - 1:
            return anneal(a, b, (t - start) / (end - start))
        start = end


@pytest.mark.parametrize("strategy,three", [("cos", False), ("linear", False), ("cos", True)])
def test_one_cycle_lr(strategy, three):
    total = N
    opt = _sgd(0.123, momentum=0.9)
    s = sched.OneCycleLR(opt, max_lr=2.0, total_steps=total, pct_start=0.25,
                         anneal_strategy=strategy, three_phase=three, div_factor=10.0,
                         final_div_factor=100.0)
    got = _lrs(s, n=total)
    want = [_one_cycle_reference(t, total, 2.0, 10.0, 100.0, 0.25, strategy, three)
            for t in range(total)]
    _close(got, want)
    # hand values: start at max_lr / div_factor, peak at the end of the first phase, finish at
    # the minimum
    assert got[0] == pytest.approx(0.2) and got[4] == pytest.approx(2.0)
    assert got[-1] == pytest.approx(0.2 / 100.0)
    if three:
        assert got[8] == pytest.approx(0.2)
    s.step()  # like PyTorch, one step past the last (epoch == total_steps) is still allowed
    with pytest.raises(ValueError, match="OneCycleLR: tried to step 21 times; the specified "
                                         "number of total steps is 20"):
        s.step()


def test_one_cycle_cycles_sgd_momentum_and_adam_beta1():
    opt = _sgd(0.1, momentum=0.9)
    s = sched.OneCycleLR(opt, max_lr=1.0, total_steps=10, pct_start=0.5,
                         anneal_strategy="linear", base_momentum=0.8, max_momentum=0.9)
    moms = [opt.param_groups[0]["momentum"]]
    for _ in range(9):
        opt.step()
        s.step()
        moms.append(opt.param_groups[0]["momentum"])
    # momentum falls 0.9 -> 0.8 over steps 0..4 while the lr rises, then climbs back by step 9
    want = [0.9 - 0.1 * t / 4 for t in range(5)] + [0.8 + 0.1 * (t - 4) / 5 for t in range(5, 10)]
    _close(moms, want)

    w = st.zeros(1, requires_grad=True)
    adam = optim.Adam([w], lr=0.1, betas=(0.5, 0.99))
    sched.OneCycleLR(adam, max_lr=1.0, epochs=2, steps_per_epoch=5)
    assert adam.param_groups[0]["betas"] == (0.95, 0.99)
    assert adam.param_groups[0]["max_lr"] == 1.0

    with pytest.raises(ValueError, match="optimizer must support momentum or beta1"):
        sched.OneCycleLR(optim.Adagrad([w]), max_lr=1.0, total_steps=10)


def test_one_cycle_errors():
    opt = _sgd()
    with pytest.raises(ValueError, match="you must define either total_steps OR"):
        sched.OneCycleLR(opt, max_lr=1.0)
    with pytest.raises(ValueError, match="expected a positive integer total_steps, but got 0"):
        sched.OneCycleLR(opt, max_lr=1.0, total_steps=0)
    with pytest.raises(ValueError, match="expected a positive integer epochs, but got -1"):
        sched.OneCycleLR(opt, max_lr=1.0, epochs=-1, steps_per_epoch=3)
    with pytest.raises(ValueError, match="pct_start, but got 1.5"):
        sched.OneCycleLR(opt, max_lr=1.0, total_steps=10, pct_start=1.5)
    with pytest.raises(ValueError, match="anneal_strategy must be one of 'cos' or 'linear', "
                                         "instead got 'exp'"):
        sched.OneCycleLR(opt, max_lr=1.0, total_steps=10, anneal_strategy="exp")
    with pytest.raises(ValueError, match="max_lr must have one value per param group"):
        sched.OneCycleLR(opt, max_lr=[1.0, 2.0], total_steps=10)


def test_scheduler_state_dict_resume():
    def make():
        opt = _sgd(0.1, momentum=0.9)
        return opt, sched.OneCycleLR(opt, max_lr=1.0, total_steps=N)

    opt, s = make()
    full = _lrs(s)
    opt, s = make()
    part = _lrs(s, n=7)
    saved_opt, saved = opt.state_dict(), s.state_dict()
    assert "optimizer" not in saved and saved["last_epoch"] == 6
    opt2 = _sgd(0.5, momentum=0.5)
    opt2.load_state_dict(saved_opt)
    s2 = sched.OneCycleLR(opt2, max_lr=1.0, total_steps=N, last_epoch=6)
    s2.load_state_dict(saved)
    rest = [s2.get_last_lr()[0]]
    for _ in range(N - 7):
        opt2.step()
        s2.step()
        rest.append(s2.get_last_lr()[0])
    _close(part + rest[1:], full, rel=0)


def test_lambda_lr_state_dict_leaves_functions_out():
    opt = _sgd(1.0)
    s = sched.LambdaLR(opt, lambda e: 0.5 ** e)
    _lrs(s, n=4)
    sd = s.state_dict()
    assert "lr_lambdas" not in sd and sd["last_epoch"] == 3
    s2 = sched.LambdaLR(_sgd(1.0), lambda e: 0.5 ** e)
    s2.load_state_dict(sd)
    s2.step()
    assert s2.get_last_lr() == [0.5 ** 4]


def test_explicit_epoch_uses_closed_form():
    s = sched.StepLR(_sgd(1.0), step_size=2, gamma=0.5)
    with pytest.warns(UserWarning, match="passing an epoch to step"):
        s.step(7)
    assert s.get_last_lr() == [0.125]


def test_scheduler_errors():
    with pytest.raises(TypeError, match="list is not an Optimizer"):
        sched.StepLR([], step_size=1)
    with pytest.raises(KeyError, match=r"param 'initial_lr' is not specified in "
                                       r"param_groups\[0\] when resuming"):
        sched.ExponentialLR(_sgd(), gamma=0.9, last_epoch=3)
    with pytest.raises(ValueError, match="StepLR: step_size must be a positive integer, got 0"):
        sched.StepLR(_sgd(), step_size=0)
    with pytest.raises(ValueError, match="LinearLR: starting multiplicative factor expected to "
                                         "be greater than 0"):
        sched.LinearLR(_sgd(), start_factor=0.0)
    with pytest.raises(ValueError, match="LinearLR: ending multiplicative factor expected to be "
                                         "between 0 and 1, got 1.5"):
        sched.LinearLR(_sgd(), end_factor=1.5)
    with pytest.raises(ValueError, match="LambdaLR: expected 2 lr_lambdas, but got 1"):
        sched.LambdaLR(_sgd(groups=2), [lambda e: 1.0])
    with pytest.raises(ValueError, match="CosineAnnealingLR: T_max must be positive, got 0"):
        sched.CosineAnnealingLR(_sgd(), T_max=0)


# ---- ReduceLROnPlateau -----------------------------------------------------------------------

def _plateau_run(metrics, **kw):
    opt = _sgd(1.0)
    s = sched.ReduceLROnPlateau(opt, **kw)
    out = []
    for m in metrics:
        s.step(m)
        out.append(s.get_last_lr()[0])
    return out, s


def test_plateau_reduces_after_patience_bad_epochs():
    # best 5 at epoch 1; epochs 2, 3 are bad (patience 2 allows them); epoch 4 is the third
    metrics = [10, 5, 5, 6, 5.0, 4, 4, 4, 4]
    got, s = _plateau_run(metrics, factor=0.5, patience=2)
    assert got == [1, 1, 1, 1, 0.5, 0.5, 0.5, 0.5, 0.25]
    assert s.best == 4 and s.num_bad_epochs == 0 and s.last_epoch == len(metrics)


def test_plateau_cooldown_min_lr_and_eps():
    got, _ = _plateau_run([1.0] * 8, factor=0.5, patience=0, cooldown=2)
    # epoch 0 improves on inf; each bad epoch reduces, then two cooldown epochs pass
    assert got == [1, 0.5, 0.5, 0.5, 0.25, 0.25, 0.25, 0.125]
    got, _ = _plateau_run([1.0] * 6, factor=0.1, patience=0, min_lr=0.05)
    assert got == [1, 0.1, 0.05, 0.05, 0.05, 0.05]
    # a reduction smaller than eps is skipped
    got, _ = _plateau_run([1.0] * 3, factor=0.5, patience=0, min_lr=0.9, eps=0.2)
    assert got == [1, 1, 1]


def test_plateau_modes_and_thresholds():
    # max mode: rising metrics are improvements
    got, _ = _plateau_run([1, 2, 3, 3, 2], mode="max", factor=0.5, patience=1)
    assert got == [1, 1, 1, 1, 0.5]
    # rel threshold 0.1: 9.5 is not 10% better than 10, so it is a bad epoch
    got, s = _plateau_run([10, 9.5, 9.5], factor=0.5, patience=1, threshold=0.1)
    assert got == [1, 1, 0.5] and s.best == 10
    # abs threshold 0.4: 9.5 beats 10 - 0.4
    got, s = _plateau_run([10, 9.5, 9.2], factor=0.5, patience=1, threshold=0.4,
                          threshold_mode="abs")
    assert got == [1, 1, 1] and s.best == 9.5
    # a tensor metric works
    got, _ = _plateau_run([st.tensor(2.0), st.tensor(1.0)], patience=0)
    assert got == [1, 1]


def test_plateau_state_dict_and_errors():
    _, s = _plateau_run([3, 2, 2], factor=0.5, patience=5)
    sd = s.state_dict()
    assert sd["best"] == 2 and sd["num_bad_epochs"] == 1 and "optimizer" not in sd
    opt = _sgd(1.0)
    with pytest.raises(ValueError, match="ReduceLROnPlateau: factor should be < 1.0, got 1.0"):
        sched.ReduceLROnPlateau(opt, factor=1.0)
    with pytest.raises(ValueError, match="ReduceLROnPlateau: mode 'up' is unknown"):
        sched.ReduceLROnPlateau(opt, mode="up")
    with pytest.raises(ValueError, match="ReduceLROnPlateau: threshold mode 'pct' is unknown"):
        sched.ReduceLROnPlateau(opt, threshold_mode="pct")
    with pytest.raises(ValueError, match="ReduceLROnPlateau: expected 1 min_lrs, got 2"):
        sched.ReduceLROnPlateau(opt, min_lr=[0.1, 0.2])
