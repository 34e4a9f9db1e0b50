"""Polynomial regression in the style of PyTorch's regression example: fit a degree-4
polynomial with one nn.Linear on features x, x^2, x^3, x^4, the update written by hand on
each parameter's .data, until the smooth L1 loss is small.

Written for PyTorch; runs on singa_tensor with only the imports changed.
"""

import os

import numpy as np
import torch
import torch.nn.functional as F

STEPS = int(os.environ.get("PORT_STEPS", "200"))
POLY_DEGREE = 4


def sync_init(model, name="model"):
    """The same initial weights in both libraries (bench/bench_ports.py)."""
    save, load = os.environ.get("PORT_SAVE_INIT"), os.environ.get("PORT_LOAD_INIT")
    if save:
        np.savez(f"{save}.{name}.npz", **{k: v.detach().cpu().numpy()
                                          for k, v in model.state_dict().items()})
    if load:
        with np.load(f"{load}.{name}.npz") as f:
            model.load_state_dict({k: torch.tensor(f[k]) for k in f.files})


def make_features(x):
    x = x.unsqueeze(1)
    return torch.cat([x ** i for i in range(1, POLY_DEGREE + 1)], 1)


def main():
    torch.manual_seed(0)
    rng = np.random.default_rng(6)
    W_target = torch.tensor(rng.standard_normal((POLY_DEGREE, 1)).astype(np.float32)) * 5
    b_target = torch.tensor(rng.standard_normal(1).astype(np.float32)) * 5

    def f(x):
        return x.mm(W_target) + b_target.item()

    fc = torch.nn.Linear(W_target.size(0), 1)
    sync_init(fc)
    for step in range(STEPS):
        x = make_features(torch.tensor(rng.standard_normal(32).astype(np.float32)))
        y = f(x)
        fc.zero_grad()
        output = F.smooth_l1_loss(fc(x), y)
        loss = output.item()
        output.backward()
        for param in fc.parameters():
            param.data.add_(-0.1 * param.grad)
        if step % 10 == 0 or step == STEPS - 1:
            print(f"loss {step} {loss:.10f}")
        if loss < 1e-3:
            break
    print(f"weights {' '.join(f'{w:.4f}' for w in fc.weight.view(-1).tolist())}")


if __name__ == "__main__":
    main()
