"""Write tests/data/amp_fixtures.npz: what PyTorch's CPU autocast and its bfloat16/float16 ops
give on fixed inputs, for tests/test_amp_fixtures.py to compare with.

Run once with a Python that has torch (never a dependency of singa_tensor or its tests; the
tests only read the file this writes):

    python tools/make_amp_fixtures.py

Every case is named; for each the file holds the inputs (float32 arrays drawn from a seeded
generator), the result as float32 (16-bit results are exact in float32) and its dtype name.
The cases are listed once, in CASES, as (name, inputs, function of a library module and its
tensors), so the test runs the same functions on singa_tensor.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

OUT = Path(__file__).resolve().parents[1] / "tests" / "data" / "amp_fixtures.npz"


def _inputs(seed: int, *shapes):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s).astype(np.float32) for s in shapes]


def _ac(m, fn):
    """fn() under the library's CPU bfloat16 autocast."""
    with m.autocast("cpu", dtype=m.bfloat16):
        return fn()


# name -> (inputs, fn(m, *tensors) -> tensor); tensors arrive as float32 tensors
CASES = {
    # autocast's dtype choices and values
    "ac_linear": (_inputs(0, (8, 32), (16, 32), (16,)),
                  lambda m, x, w, b: _ac(m, lambda: m.nn.functional.linear(x, w, b))),
    "ac_matmul": (_inputs(1, (4, 8, 32), (32, 16)), lambda m, a, b: _ac(m, lambda: a @ b)),
    "ac_addmm": (_inputs(2, (8, 16), (8, 32), (32, 16)),
                 lambda m, c, a, b: _ac(m, lambda: m.addmm(c, a, b))),
    "ac_baddbmm": (_inputs(3, (2, 8, 16), (2, 8, 32), (2, 32, 16)),
                   lambda m, c, a, b: _ac(m, lambda: m.baddbmm(c, a, b))),
    "ac_conv2d": (_inputs(4, (2, 3, 9, 9), (8, 3, 3, 3), (8,)),
                  lambda m, x, w, b: _ac(m, lambda: m.nn.functional.conv2d(x, w, b, padding=1))),
    "ac_linear_relu_add": (_inputs(5, (8, 32), (16, 32), (8, 16)),
                           lambda m, x, w, r: _ac(m, lambda: m.relu(
                               m.nn.functional.linear(x, w)) + r)),
    "ac_cross_entropy": (_inputs(6, (8, 32), (10, 32)),
                         lambda m, x, w: _ac(m, lambda: m.nn.functional.cross_entropy(
                             m.nn.functional.linear(x, w), m.arange(8) % 10))),
    "ac_mse": (_inputs(7, (8, 32), (16, 32), (8, 16)),
               lambda m, x, w, t: _ac(m, lambda: m.nn.functional.mse_loss(
                   m.nn.functional.linear(x, w), t))),
    "ac_layer_norm": (_inputs(8, (8, 32), (16, 32), (16,), (16,)),
                      lambda m, x, w, g, b: _ac(m, lambda: m.nn.functional.layer_norm(
                          m.nn.functional.linear(x, w), (16,), g, b))),
    "ac_softmax": (_inputs(9, (8, 32), (16, 32)),
                   lambda m, x, w: _ac(m, lambda: m.softmax(m.nn.functional.linear(x, w), -1))),
    # plain bfloat16 / float16 ops (no autocast): one rounding of the float32 result
    "bf16_add": (_inputs(10, (64,), (64,)), lambda m, a, b: a.bfloat16() + b.bfloat16()),
    "bf16_mul": (_inputs(11, (64,), (64,)), lambda m, a, b: a.bfloat16() * b.bfloat16()),
    "bf16_div": (_inputs(12, (64,), (64,)), lambda m, a, b: a.bfloat16() / b.bfloat16()),
    "bf16_mul_scalar": (_inputs(13, (64,)), lambda m, a: a.bfloat16() * 0.1),
    "bf16_add_scalar": (_inputs(14, (64,)), lambda m, a: a.bfloat16() + 0.3),
    "f16_mul": (_inputs(15, (64,), (64,)), lambda m, a, b: a.half() * b.half()),
    "bf16_with_f32": (_inputs(16, (64,), (64,)), lambda m, a, b: a.bfloat16() + b),
    "bf16_sum": (_inputs(17, (16, 64)), lambda m, a: a.bfloat16().sum(1)),
    "bf16_mean": (_inputs(18, (16, 64)), lambda m, a: a.bfloat16().mean(0)),
    "bf16_matmul": (_inputs(19, (16, 64), (64, 8)), lambda m, a, b: a.bfloat16() @ b.bfloat16()),
}


def _grads_case(m, x, w1, w2, target):
    """An MLP step under autocast: the loss and the float32 parameter gradients."""
    w1 = w1.clone().requires_grad_(True)
    w2 = w2.clone().requires_grad_(True)
    with m.autocast("cpu", dtype=m.bfloat16):
        h = m.relu(m.nn.functional.linear(x, w1))
        loss = m.nn.functional.cross_entropy(m.nn.functional.linear(h, w2), target)
    loss.backward()
    return loss, w1.grad, w2.grad


GRAD_INPUTS = _inputs(20, (16, 32), (64, 32), (10, 64))


def _scaler_scales(m):
    """GradScaler's scale after each of 6 steps, the third with an inf gradient."""
    w = m.tensor([1.0, 2.0], requires_grad=True)
    opt = m.optim.SGD([w], lr=0.01)
    scaler = m.amp.GradScaler("cpu", init_scale=8.0, growth_interval=2)
    scales = []
    for step in range(6):
        opt.zero_grad()
        loss = (w * w).sum() * (float("inf") if step == 2 else 1.0)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        scales.append(scaler.get_scale())
    return np.array(scales), w.detach().numpy().copy()


def main() -> None:
    import torch

    out = {}
    for name, (inputs, fn) in CASES.items():
        ts = [torch.from_numpy(a.copy()) for a in inputs]
        y = fn(torch, *ts)
        for i, a in enumerate(inputs):
            out[f"{name}/in{i}"] = a
        out[f"{name}/out"] = y.detach().float().numpy()
        out[f"{name}/dtype"] = np.array(str(y.dtype).removeprefix("torch."))
    x, w1, w2 = (torch.from_numpy(a.copy()) for a in GRAD_INPUTS)
    loss, g1, g2 = _grads_case(torch, x, w1, w2, torch.arange(16) % 10)
    out["mlp/loss"] = loss.detach().float().numpy()
    out["mlp/g1"], out["mlp/g2"] = g1.numpy(), g2.numpy()
    out["scaler/scales"], out["scaler/w"] = _scaler_scales(torch)
    out["torch_version"] = np.array(torch.__version__)
    np.savez_compressed(OUT, **out)
    print(f"wrote {OUT} ({len(out)} arrays, torch {torch.__version__})")


if __name__ == "__main__":
    main()
