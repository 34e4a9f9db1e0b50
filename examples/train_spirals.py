"""Train a small multilayer perceptron on the bundled three-spirals data, with nothing but
tensors and autograd: parameters are leaf tensors, the loss is built from ops, and a plain
SGD step updates the parameters under no_grad.

    python examples/train_spirals.py [--steps 400] [--lr 0.5]
"""

from __future__ import annotations

import argparse
import math
import pathlib
import time

import numpy as np

import singa_tensor as st

DATA = pathlib.Path(__file__).with_name("data") / "spirals.csv"


def load():
    raw = np.loadtxt(DATA, delimiter=",", skiprows=1)
    x = st.tensor(raw[:, :2], dtype=st.float32)
    y = st.tensor(raw[:, 2].astype(np.int64))
    return x, y


def init_layer(n_in: int, n_out: int):
    bound = 1.0 / math.sqrt(n_in)
    w = (st.rand(n_in, n_out) * (2 * bound) - bound).requires_grad_()
    b = st.zeros(n_out, requires_grad=True)
    return w, b


def forward(params, x):
    (w1, b1), (w2, b2), (w3, b3) = params
    h = st.tanh(x @ w1 + b1)
    h = st.relu(h @ w2 + b2)
    return h @ w3 + b3


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=400)
    ap.add_argument("--lr", type=float, default=0.5)
    ap.add_argument("--hidden", type=int, default=64)
    args = ap.parse_args()

    st.manual_seed(0)
    x, y = load()
    n_classes = int(y.max().item()) + 1
    params = [init_layer(2, args.hidden), init_layer(args.hidden, args.hidden),
              init_layer(args.hidden, n_classes)]
    flat = [p for layer in params for p in layer]
    print(f"singa_tensor {st.__version__}: {x.shape[0]} points, {n_classes} classes, "
          f"{sum(p.numel() for p in flat)} parameters")

    t0 = time.perf_counter()
    for step in range(args.steps + 1):
        logits = forward(params, x)
        loss = -st.log_softmax(logits, dim=1).gather(1, y.unsqueeze(1)).mean()
        for p in flat:
            p.grad = None
        loss.backward()
        with st.no_grad():
            for p in flat:
                p -= args.lr * p.grad
        if step % 100 == 0:
            acc = (logits.argmax(dim=1) == y).float().mean().item()
            print(f"step {step:4d}  loss {loss.item():.4f}  accuracy {acc:.3f}")
    elapsed = time.perf_counter() - t0
    with st.no_grad():
        acc = (forward(params, x).argmax(dim=1) == y).float().mean().item()
    print(f"final accuracy {acc:.3f} after {args.steps} steps in {elapsed:.2f} s")


if __name__ == "__main__":
    main()
