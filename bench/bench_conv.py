"""CPU convolution benchmark: conv2d forward + backward for ResNet-style shapes and a small
ResNet training step, with singa_tensor's im2col path, its oneDNN path and PyTorch.

Each column runs in its own process: ours twice (SINGA_TENSOR_ONEDNN=0, then =1) and PyTorch
with the interpreter given by --torch-python (default: $TORCH_PYTHON, else this one), in the
environment this script was started with (nothing our import sets is passed on). Times are
medians after warm-up; the ratios are ours/PyTorch (below 1: singa_tensor is faster).

    python bench/bench_conv.py                  # full run
    python bench/bench_conv.py --quick          # fewer repeats, for a smoke check
    python bench/bench_conv.py --threads 2      # both libraries on 2 threads
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

# (name, batch, in channels, size, out channels, kernel, stride, padding, groups)
CONVS = [
    ("stem 3->64 3x3 32px", 16, 3, 32, 64, 3, 1, 1, 1),
    ("64->64 3x3 32px", 16, 64, 32, 64, 3, 1, 1, 1),
    ("64->128 3x3 s2 32px", 16, 64, 32, 128, 3, 2, 1, 1),
    ("64->128 1x1 s2 32px", 16, 64, 32, 128, 1, 2, 0, 1),
    ("128->128 3x3 16px", 16, 128, 16, 128, 3, 1, 1, 1),
    ("256->256 3x3 8px", 16, 256, 8, 256, 3, 1, 1, 1),
    ("512->512 3x3 4px", 16, 512, 4, 512, 3, 1, 1, 1),
    ("r18 stem 3->64 7x7 s2 112px", 4, 3, 112, 64, 7, 2, 3, 1),
    ("r18 64->64 3x3 56px", 4, 64, 56, 64, 3, 1, 1, 1),
    ("depthwise 64 3x3 32px", 16, 64, 32, 64, 3, 1, 1, 64),
    ("tiny 8->8 3x3 8px", 2, 8, 8, 8, 3, 1, 1, 1),
]


def median_time(fn, warmup: int, repeat: int) -> float:
    for _ in range(warmup):
        fn()
    samples = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t0)
    return statistics.median(samples)


# ---- workers: one library per process ------------------------------------------------------------


def _ours(args) -> dict:
    import numpy as np

    import singa_tensor as st
    from singa_tensor import nn

    if args.threads:
        st.set_num_threads(args.threads)
    rng = np.random.default_rng(0)
    out = {"threads": st.get_num_threads(), "onednn": st.backends.mkldnn.is_available()
           and st.backends.mkldnn.enabled, "convs": {}}
    for name, n, c, s, o, k, stride, pad, g in CONVS:
        x = st.tensor(rng.standard_normal((n, c, s, s)).astype(np.float32), requires_grad=True)
        w = st.tensor(rng.standard_normal((o, c // g, k, k)).astype(np.float32) * 0.1,
                      requires_grad=True)
        b = st.tensor(np.zeros(o, np.float32), requires_grad=True)

        def step(x=x, w=w, b=b, stride=stride, pad=pad, g=g):
            x.grad = w.grad = b.grad = None
            st.conv2d(x, w, b, stride=stride, padding=pad, groups=g).sum().backward()

        out["convs"][name] = median_time(step, args.warmup, args.repeat)
    model = _resnet(nn, st)
    opt = st.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    xb = st.tensor(rng.standard_normal((16, 3, 32, 32)).astype(np.float32))
    yb = st.tensor(rng.integers(0, 10, 16))

    def train():
        opt.zero_grad()
        nn.functional.cross_entropy(model(xb), yb).backward()
        opt.step()

    out["train"] = median_time(train, args.warmup, args.repeat)
    return out


def _torch(args) -> dict:
    import numpy as np
    import torch
    from torch import nn

    if args.threads:
        torch.set_num_threads(args.threads)
    rng = np.random.default_rng(0)
    out = {"threads": torch.get_num_threads(), "convs": {}}
    for name, n, c, s, o, k, stride, pad, g in CONVS:
        x = torch.tensor(rng.standard_normal((n, c, s, s)).astype(np.float32),
                         requires_grad=True)
        w = torch.tensor(rng.standard_normal((o, c // g, k, k)).astype(np.float32) * 0.1,
                         requires_grad=True)
        b = torch.zeros(o, requires_grad=True)

        def step(x=x, w=w, b=b, stride=stride, pad=pad, g=g):
            x.grad = w.grad = b.grad = None
            torch.nn.functional.conv2d(x, w, b, stride=stride, padding=pad,
                                       groups=g).sum().backward()

        out["convs"][name] = median_time(step, args.warmup, args.repeat)
    model = _resnet(nn, torch)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    xb = torch.tensor(rng.standard_normal((16, 3, 32, 32)).astype(np.float32))
    yb = torch.tensor(rng.integers(0, 10, 16))

    def train():
        opt.zero_grad()
        nn.functional.cross_entropy(model(xb), yb).backward()
        opt.step()

    out["train"] = median_time(train, args.warmup, args.repeat)
    return out


def _resnet(nn, lib):
    """A CIFAR ResNet-8 (three stages of one basic block) built from either library's nn."""

    class Block(nn.Module):
        def __init__(self, cin, cout, stride):
            super().__init__()
            self.c1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
            self.b1 = nn.BatchNorm2d(cout)
            self.c2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
            self.b2 = nn.BatchNorm2d(cout)
            self.short = None
            if stride != 1 or cin != cout:
                self.short = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                           nn.BatchNorm2d(cout))

        def forward(self, x):
            y = self.b2(self.c2(self.b1(self.c1(x)).relu()))
            return (y + (x if self.short is None else self.short(x))).relu()

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = nn.Sequential(nn.Conv2d(3, 32, 3, 1, 1, bias=False),
                                      nn.BatchNorm2d(32), nn.ReLU())
            self.blocks = nn.Sequential(Block(32, 32, 1), Block(32, 64, 2), Block(64, 128, 2))
            self.fc = nn.Linear(128, 10)

        def forward(self, x):
            return self.fc(self.blocks(self.stem(x)).mean((2, 3)))

    return Net()


# ---- the driver ----------------------------------------------------------------------------------


def _child(worker: str, python: str, args, env_extra: dict) -> dict | None:
    cmd = [python, os.path.abspath(__file__), "--worker", worker, "--warmup", str(args.warmup),
           "--repeat", str(args.repeat), "--threads", str(args.threads)]
    env = dict(os.environ, **env_extra)
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if r.returncode != 0:
        print(f"[{worker}] failed:\n{r.stderr[-2000:]}", file=sys.stderr)
        return None
    return json.loads(r.stdout.strip().splitlines()[-1])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--worker", choices=("ours", "torch"))
    p.add_argument("--quick", action="store_true")
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--repeat", type=int, default=15)
    p.add_argument("--threads", type=int, default=0, help="0: each library's default")
    p.add_argument("--torch-python", default=os.environ.get("TORCH_PYTHON", sys.executable))
    args = p.parse_args()
    if args.quick:
        args.warmup, args.repeat = 1, 5
    if args.worker:
        print(json.dumps(_ours(args) if args.worker == "ours" else _torch(args)))
        return
    im2col = _child("ours", sys.executable, args, {"SINGA_TENSOR_ONEDNN": "0"})
    onednn = _child("ours", sys.executable, args, {"SINGA_TENSOR_ONEDNN": "1"})
    torch = _child("torch", args.torch_python, args, {})
    if im2col is None or onednn is None:
        sys.exit(1)
    if not onednn["onednn"]:
        print("note: oneDNN is not installed here; both 'ours' columns are the im2col path")
    tt = torch or {"convs": {}, "train": None, "threads": "-"}
    print(f"threads: ours {onednn['threads']}, torch {tt['threads']}")
    head = f"{'conv2d forward+backward (ms)':34s} {'im2col':>8s} {'oneDNN':>8s} {'torch':>8s}"
    print(head + f" {'im2col/t':>9s} {'oneDNN/t':>9s} {'speedup':>8s}")

    def row(name, a, b, t):
        ts = f"{t * 1e3:8.2f}" if t else f"{'-':>8s}"
        ra = f"{a / t:9.2f}" if t else f"{'-':>9s}"
        rb = f"{b / t:9.2f}" if t else f"{'-':>9s}"
        print(f"{name:34s} {a * 1e3:8.2f} {b * 1e3:8.2f} {ts} {ra} {rb} {a / b:8.2f}")

    for name in im2col["convs"]:
        row(name, im2col["convs"][name], onednn["convs"][name], tt["convs"].get(name))
    row("ResNet-8 train step, batch 16", im2col["train"], onednn["train"], tt["train"])


if __name__ == "__main__":
    main()
