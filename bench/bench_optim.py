"""optimizer.step() against PyTorch's, each library in its own process, in the same run.

    python bench/bench_optim.py --torch-python /path/to/python-with-torch
    python bench/bench_optim.py --rounds 5 --steps 200

Rows: SGD with momentum, Adam, AdamW, AdamW with amsgrad, RMSprop (plain, and centered with
momentum) and Adagrad, each updating two parameter lists with fixed random gradients: the MLP
of bench_train.py (784-512-512-10, 0.67 M values in 6 tensors) and a Transformer-sized list
(12 tensors, 2.55 M values). Both libraries use their defaults for the optimizer's
implementation (PyTorch picks its foreach path on the CPU lists here; ours runs the list in
one kernel call). Time per step() call, median of --steps calls after warm-up.

The two libraries take turns over --rounds rounds (PyTorch first in even rounds), each in its
own process, PyTorch's started with the environment this script was started with; the table
shows the median per-round ratio (ours / PyTorch's) with the rounds' range. Both run with
--threads threads (default 2).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np

USER_ENV = dict(os.environ)  # before singa_tensor's import adds its thread settings

SHAPES = {
    "MLP": [(512, 784), (512,), (512, 512), (512,), (10, 512), (10,)],
    "Transformer": [(1000, 128), (384, 128), (384,), (128, 128), (128,), (512, 128), (512,),
                    (128, 512), (128,), (1000, 128), (1000,), (4096, 512)],
}
RULES = [
    ("SGD momentum", "SGD", {"lr": 0.01, "momentum": 0.9}),
    ("Adam", "Adam", {"lr": 1e-3}),
    ("AdamW", "AdamW", {"lr": 1e-3, "weight_decay": 0.01}),
    ("AdamW amsgrad", "AdamW", {"lr": 1e-3, "weight_decay": 0.01, "amsgrad": True}),
    ("RMSprop", "RMSprop", {"lr": 1e-3}),
    ("RMSprop centered momentum", "RMSprop", {"lr": 1e-3, "centered": True, "momentum": 0.9}),
    ("Adagrad", "Adagrad", {"lr": 1e-2}),
]


def measure(lib: str, steps: int, threads: int) -> dict:
    if lib == "torch":
        import torch as m

        m.set_num_threads(threads)
    else:
        import singa_tensor as m

        m.set_num_threads(threads)
    out = {}
    for model, shapes in SHAPES.items():
        rng = np.random.default_rng(0)
        values = [rng.standard_normal(s).astype(np.float32) for s in shapes]
        grads = [(rng.standard_normal(s) * 0.01).astype(np.float32) for s in shapes]
        for label, cls, kw in RULES:
            params = [m.tensor(v.copy(), requires_grad=True) for v in values]
            for p, g in zip(params, grads):
                p.grad = m.tensor(g)
            opt = getattr(m.optim, cls)(params, **kw)
            for _ in range(5):
                opt.step()
            times = []
            for _ in range(steps):
                t0 = time.perf_counter()
                opt.step()
                times.append(time.perf_counter() - t0)
            out[f"{label} / {model}"] = statistics.median(times) * 1e3
    return out


def run_side(lib: str, args) -> dict:
    cmd = [args.torch_python if lib == "torch" else sys.executable, os.path.abspath(__file__),
           "--worker", lib, "--steps", str(args.steps), "--threads", str(args.threads)]
    env = dict(USER_ENV)
    if lib == "torch":
        env["OMP_NUM_THREADS"] = str(args.threads)
    res = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1800)
    if res.returncode != 0:
        raise SystemExit(f"bench_optim: the {lib} worker failed:\n{res.stderr}{res.stdout}")
    return json.loads(res.stdout.strip().splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--torch-python", default=os.environ.get("BENCH_TORCH_PYTHON",
                                                             sys.executable))
    ap.add_argument("--worker", choices=("ours", "torch"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        print(json.dumps(measure(args.worker, args.steps, args.threads)))
        return 0
    rounds = []
    for r in range(args.rounds):
        order = ("torch", "ours") if r % 2 == 0 else ("ours", "torch")
        got = {lib: run_side(lib, args) for lib in order}
        rounds.append(got)
    print(f"optimizer.step(), {args.threads} threads, median of {args.steps} calls, "
          f"{args.rounds} alternating rounds; PyTorch started with: "
          f"{ {k: v for k, v in USER_ENV.items() if k.startswith(('OMP_', 'MKL_'))} }")
    print(f"{'row':44s} {'ours ms':>9s} {'torch ms':>9s}  ours/torch [range]")
    for key in rounds[0]["ours"]:
        ours = statistics.median(r["ours"][key] for r in rounds)
        peer = statistics.median(r["torch"][key] for r in rounds)
        ratios = [r["ours"][key] / r["torch"][key] for r in rounds]
        print(f"{key:44s} {ours:9.3f} {peer:9.3f}  {statistics.median(ratios):.2f}x "
              f"[{min(ratios):.2f}-{max(ratios):.2f}]")
    return 0


if __name__ == "__main__":
    sys.exit(main())
