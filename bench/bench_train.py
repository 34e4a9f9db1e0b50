"""Training-step benchmarks: singa_tensor against PyTorch (CPU), measured in the same run.

Each model runs forward + backward + SGD(lr=0.01, momentum=0.9) step on one fixed random
batch, in both libraries, with the same shapes, the same data and the same initial weights.
The table gives the median step time of each and the ratio ours/torch (below 1 means
singa_tensor is faster), then a cProfile of our slowest model, to show where its time goes.

    python bench/bench_train.py             # full run: 10 warm-up steps, median of 100
    python bench/bench_train.py --quick     # 2 warm-up steps, median of 5 (a smoke check)
    python bench/bench_train.py --steps 200 --warmup 20 --threads 2
"""

from __future__ import annotations

import argparse
import cProfile
import importlib.util
import io
import json
import math
import os
import platform
import pstats
import statistics
import subprocess
import sys
import time

import numpy as np

# Imported in main (ours) or torch_worker (PyTorch's child process), after the thread settings
# are in the environment: OpenMP and OpenBLAS read them when they load.
st = None

LR, MOMENTUM = 0.01, 0.9
CHECK_STEPS = 5  # steps on the fixed batch whose losses must be finite and go down
PROFILE_STEPS = 10


class Lib:
    """The parts of a PyTorch-like library that the models use, so one definition serves both."""

    def __init__(self, mod, name: str):
        self.name, self.mod = name, mod
        self.nn, self.F, self.optim = mod.nn, mod.nn.functional, mod.optim

    def tensor(self, a: np.ndarray):
        return self.mod.tensor(a) if self.name == "ours" else self.mod.from_numpy(a.copy())

    def no_grad(self):
        return self.mod.no_grad()


def mlp(lib: Lib):
    nn = lib.nn
    return nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(),
                         nn.Linear(512, 10))


def cnn(lib: Lib):
    nn = lib.nn
    return nn.Sequential(
        nn.Conv2d(3, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(64 * 8 * 8, 10))


def resnet18(lib: Lib):
    """ResNet-18 for 32x32 inputs: 3x3 stem with 64 channels and no max pool, BasicBlocks
    [2, 2, 2, 2], global average pool, 10 classes."""
    nn = lib.nn

    class BasicBlock(nn.Module):
        def __init__(self, cin: int, cout: int, stride: int):
            super().__init__()
            self.conv1 = nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False)
            self.bn1 = nn.BatchNorm2d(cout)
            self.conv2 = nn.Conv2d(cout, cout, 3, padding=1, bias=False)
            self.bn2 = nn.BatchNorm2d(cout)
            self.relu = nn.ReLU()
            self.shortcut = nn.Sequential()
            if stride != 1 or cin != cout:
                self.shortcut = nn.Sequential(nn.Conv2d(cin, cout, 1, stride=stride, bias=False),
                                              nn.BatchNorm2d(cout))

        def forward(self, x):
            out = self.relu(self.bn1(self.conv1(x)))
            out = self.bn2(self.conv2(out))
            return self.relu(out + self.shortcut(x))

    class ResNet18(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = nn.Sequential(nn.Conv2d(3, 64, 3, padding=1, bias=False),
                                      nn.BatchNorm2d(64), nn.ReLU())
            layers, cin = [], 64
            for cout, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
                layers += [BasicBlock(cin, cout, stride), BasicBlock(cout, cout, 1)]
                cin = cout
            self.layers = nn.Sequential(*layers)
            self.pool = nn.AdaptiveAvgPool2d(1)
            self.flatten = nn.Flatten()
            self.fc = nn.Linear(512, 10)

        def forward(self, x):
            return self.fc(self.flatten(self.pool(self.layers(self.stem(x)))))

    return ResNet18()


# name, builder, input shape (batch first), ratio target from the issue (None: report only)
MODELS = [
    ("MLP 784-512-512-10 b64", mlp, (64, 784), 1.2),
    ("CNN 2xconv3x3 b32", cnn, (32, 3, 32, 32), 1.5),
    ("ResNet-18 CIFAR b16", resnet18, (16, 3, 32, 32), None),
]


def init_weights(lib: Lib, model, seed: int) -> None:
    """Give both libraries the same starting point: conv/linear weights and biases uniform in
    +-1/sqrt(fan_in), drawn in named_parameters order; batch-norm scale/shift keep 1 and 0."""
    rng = np.random.default_rng(seed)
    bound, bn = {}, set()
    with lib.no_grad():
        for name, p in model.named_parameters():
            prefix, _, leaf = name.rpartition(".")
            shape = tuple(p.shape)
            if len(shape) >= 2:
                bound[prefix] = 1.0 / math.sqrt(math.prod(shape[1:]))
            elif leaf == "weight" or prefix in bn:
                bn.add(prefix)  # a 1-D weight is a norm layer's scale
                continue
            a = rng.uniform(-bound[prefix], bound[prefix], size=shape).astype(np.float32)
            p.copy_(lib.tensor(a))


def make_step(lib: Lib, builder, shape, seed: int):
    """Build the model, optimizer and fixed batch; return (step fn -> loss tensor, model)."""
    rng = np.random.default_rng(seed)
    x = lib.tensor(rng.standard_normal(shape, dtype=np.float32))
    y = lib.tensor(rng.integers(0, 10, size=shape[0]).astype(np.int64))
    model = builder(lib)
    init_weights(lib, model, seed + 1)
    model.train()
    opt = lib.optim.SGD(model.parameters(), lr=LR, momentum=MOMENTUM)

    def step():
        opt.zero_grad()
        loss = lib.F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss

    return step, model


def check_losses(lib: str, model: str, losses: list[float]) -> None:
    if not all(math.isfinite(v) for v in losses) or not losses[-1] < losses[0]:
        raise SystemExit(f"bench {model} ({lib}): loss must be finite and decrease over "
                         f"{len(losses)} steps on a fixed batch, got {losses}")


def time_steps(step, warmup: int, steps: int) -> float:
    """Median seconds per step over `steps` individually timed steps after `warmup`."""
    for _ in range(warmup):
        step()
    samples = []
    for _ in range(steps):
        t0 = time.perf_counter()
        step()
        samples.append(time.perf_counter() - t0)
    return statistics.median(samples)


# Thread pools spin for a while after their last task; a pause before each timing lets the
# previous model's pools go idle first.
SETTLE_S = 0.3


def run_all(lib: Lib, args) -> dict:
    """Check and time every model in `lib`; {model: {"losses": [...], "s": median s/step}}."""
    out = {}
    for i, (name, builder, shape, _) in enumerate(MODELS):
        step, _ = make_step(lib, builder, shape, seed=100 * i)
        losses = [float(step().item()) for _ in range(CHECK_STEPS)]
        check_losses(lib.name, name, losses)
        time.sleep(SETTLE_S)
        out[name] = {"losses": losses, "s": time_steps(step, args.warmup, args.steps)}
    return out


def set_thread_env(n: int) -> None:
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = str(n)


def torch_worker(args) -> None:
    """Time the PyTorch side and print it as JSON (run by main in a child process)."""
    set_thread_env(args.threads)
    import torch

    torch.set_num_threads(args.threads)
    res = run_all(Lib(torch, "torch"), args)
    print(json.dumps({"version": torch.__version__, "threads": torch.get_num_threads(),
                      "models": res}))


def torch_side(args) -> dict | None:
    if args.no_torch or importlib.util.find_spec("torch") is None:
        return None
    cmd = [sys.executable, os.path.abspath(__file__), "--torch-worker", "--steps",
           str(args.steps), "--warmup", str(args.warmup), "--threads", str(args.threads)]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"bench: the PyTorch worker failed:\n{out.stderr}{out.stdout}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def print_table(ours: dict, peer: dict | None) -> None:
    head = ["model", "ours ms/step", "torch ms/step", "ratio", "target", "met",
            "loss0 ours", "loss0 torch"]
    rows = []
    for name, _, _, target in MODELS:
        o = ours[name]["s"]
        p = peer["models"][name] if peer else None
        ratio = o / p["s"] if p else None
        met = "-" if ratio is None or target is None else ("yes" if ratio <= target else "NO")
        rows.append([name, f"{o * 1e3:.2f}", f"{p['s'] * 1e3:.2f}" if p else "-",
                     f"{ratio:.2f}x" if ratio else "-",
                     f"<= {target:.1f}x" if target else "report", met,
                     f"{ours[name]['losses'][0]:.5f}", f"{p['losses'][0]:.5f}" if p else "-"])
    widths = [max(len(r[i]) for r in rows + [head]) for i in range(len(head))]

    def line(cells):
        return "  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                         for i, (c, w) in enumerate(zip(cells, widths)))

    print(line(head))
    print("  ".join("-" * w for w in widths))
    for r in rows:
        print(line(r))


def print_profile(fn, reps: int, label: str, unit: str) -> None:
    """cProfile reps calls of fn and print the time per call, the share spent inside C kernels
    and the top functions by own time (bench_seq.py uses this too)."""
    prof = cProfile.Profile()
    t0 = time.perf_counter()
    prof.enable()
    for _ in range(reps):
        fn()
    prof.disable()
    wall = time.perf_counter() - t0
    stats = pstats.Stats(prof, stream=io.StringIO())
    total = sum(v[2] for v in stats.stats.values())  # tottime over all functions
    ffi = sum(v[2] for k, v in stats.stats.items() if "_cpu_ffi" in k[2])
    print(f"\nprofile: {label}, {reps} {unit}s, {wall * 1e3 / reps:.1f} ms/{unit} "
          f"under cProfile (its overhead inflates Python-side time)")
    print(f"time inside C kernels (built-in methods of _cpu_ffi): {ffi:.3f} s of {total:.3f} s "
          f"profiled ({100 * ffi / max(total, 1e-12):.0f}%); the rest is Python, numpy and "
          "allocation")
    buf = io.StringIO()
    pstats.Stats(prof, stream=buf).sort_stats("tottime").print_stats(12)
    text = buf.getvalue()
    print(text[text.index("   ncalls"):].rstrip())  # skip pstats' header block


def profile_model(index: int, args) -> None:
    """cProfile PROFILE_STEPS steps of one model (after warm-up) and print the top functions."""
    name, builder, shape, _ = MODELS[index]
    step, _ = make_step(Lib(st, "ours"), builder, shape, seed=100 * index)
    for _ in range(max(args.warmup, 2)):
        step()
    print_profile(step, PROFILE_STEPS, name, "step")


def main(argv=None) -> None:
    global st
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="few steps (a smoke check)")
    p.add_argument("--steps", type=int, default=None, help="timed steps per model (>= 100)")
    p.add_argument("--warmup", type=int, default=None, help="untimed steps before timing")
    p.add_argument("--threads", type=int, default=2, help="threads for both libraries")
    p.add_argument("--no-torch", action="store_true", help="skip the PyTorch side")
    p.add_argument("--no-profile", action="store_true", help="skip the profile")
    p.add_argument("--torch-worker", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    args.steps = args.steps or (5 if args.quick else 100)
    args.warmup = args.warmup if args.warmup is not None else (2 if args.quick else 10)
    if args.torch_worker:
        torch_worker(args)
        return

    set_thread_env(args.threads)
    import singa_tensor

    st = singa_tensor
    st.set_num_threads(args.threads)
    ours = run_all(Lib(st, "ours"), args)
    peer = torch_side(args)
    print(f"python {platform.python_version()}, numpy {np.__version__}, singa_tensor "
          f"{st.__version__}, torch {peer['version'] if peer else 'not used'}")
    print(f"cpu cores (os.cpu_count): {os.cpu_count()}; threads: singa_tensor "
          f"{st.get_num_threads()} (OpenBLAS {os.environ['OPENBLAS_NUM_THREADS']}), torch "
          f"{peer['threads'] if peer else '-'} (timed in a child process of this run)")
    print(f"forward + backward + SGD(lr={LR}, momentum={MOMENTUM}) on one fixed random batch; "
          f"median of {args.steps} steps after {args.warmup} warm-up; ratio = ours/torch "
          "(below 1.00x: ours is faster)")
    print(f"checked: loss finite and decreasing over {CHECK_STEPS} steps in both; same initial "
          "weights and data, so loss0 should agree\n")
    print_table(ours, peer)
    if not args.no_profile:
        slowest = max(range(len(MODELS)), key=lambda i: ours[MODELS[i][0]]["s"])
        profile_model(slowest, args)


if __name__ == "__main__":
    main()
