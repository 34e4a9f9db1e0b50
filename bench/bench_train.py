"""Training-step benchmarks: singa_tensor against PyTorch (CPU), measured in the same run.

Each model runs forward + backward + SGD(lr=0.01, momentum=0.9) step on one fixed random
batch, in both libraries, with the same shapes, the same data and the same initial weights.
The table gives the median step time of each and the ratio ours/torch (below 1 means
singa_tensor is faster), then a cProfile of our model furthest behind, to show where its time
goes.

    python bench/bench_train.py             # 3 rounds: 10 warm-up steps, median of 50
    python bench/bench_train.py --quick     # 1 round: 2 warm-up steps, median of 5
    python bench/bench_train.py --models transformer,lstm --rounds 5
    python bench/bench_train.py --torch-python /path/to/venv/bin/python   # PyTorch elsewhere
    python bench/bench_train.py --precision bf16   # both under bfloat16 autocast

Each library runs in its own worker process, started with the environment this script was
started with (plus the thread counts), so neither inherits what the other's import sets.
"""

from __future__ import annotations

import argparse
import cProfile
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


def basic_block(lib: Lib):
    """The BasicBlock class of `lib`: two 3x3 convolutions with BatchNorm and a shortcut."""
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

    return BasicBlock


def resnet18(lib: Lib):
    """ResNet-18 for 32x32 inputs: 3x3 stem with 64 channels and no max pool, BasicBlocks
    [2, 2, 2, 2], global average pool, 10 classes."""
    nn = lib.nn
    BasicBlock = basic_block(lib)

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


def resnet_small(lib: Lib):
    """ResNet-style: 3x3 stem with 32 channels, then three BasicBlocks 32-32, 32-64 (stride 2),
    64-128 (stride 2) with BatchNorm, global average pool, 10 classes."""
    nn = lib.nn
    block = basic_block(lib)

    class SmallResNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = nn.Sequential(nn.Conv2d(3, 32, 3, padding=1, bias=False),
                                      nn.BatchNorm2d(32), nn.ReLU())
            self.layers = nn.Sequential(block(32, 32, 1), block(32, 64, 2), block(64, 128, 2))
            self.pool = nn.AdaptiveAvgPool2d(1)
            self.flatten = nn.Flatten()
            self.fc = nn.Linear(128, 10)

        def forward(self, x):
            return self.fc(self.flatten(self.pool(self.layers(self.stem(x)))))

    return SmallResNet()


VOCAB = 1000


def transformer_lm(lib: Lib):
    """Transformer LM: embedding 1000x128, 2 encoder layers (4 heads, feed-forward 512, no
    dropout, batch first), a linear head back to the vocabulary."""
    nn = lib.nn

    class TransformerLM(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(VOCAB, 128)
            layer = nn.TransformerEncoderLayer(128, 4, 512, dropout=0.0, batch_first=True)
            self.encoder = nn.TransformerEncoder(layer, 2)
            self.head = nn.Linear(128, VOCAB)

        def forward(self, tokens):
            return self.head(self.encoder(self.emb(tokens))).reshape(-1, VOCAB)

    return TransformerLM()


def lstm_lm(lib: Lib):
    """LSTM LM: embedding 1000x128, 2-layer LSTM with hidden size 256 (batch first), a linear
    head back to the vocabulary."""
    nn = lib.nn

    class LSTMLM(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(VOCAB, 128)
            self.lstm = nn.LSTM(128, 256, 2, batch_first=True)
            self.head = nn.Linear(256, VOCAB)

        def forward(self, tokens):
            out, _ = self.lstm(self.emb(tokens))
            return self.head(out).reshape(-1, VOCAB)

    return LSTMLM()


def images(shape):
    """Batch maker for image/vector models: standard-normal inputs, one class of 10 per row."""
    def make(lib: Lib, rng):
        x = lib.tensor(rng.standard_normal(shape, dtype=np.float32))
        return x, lib.tensor(rng.integers(0, 10, size=shape[0]).astype(np.int64))
    return make


def tokens(batch: int, seq: int):
    """Batch maker for the language models: random token ids, the next token as the target."""
    def make(lib: Lib, rng):
        ids = rng.integers(0, VOCAB, size=(batch, seq + 1)).astype(np.int64)
        return lib.tensor(ids[:, :-1].copy()), lib.tensor(ids[:, 1:].reshape(-1).copy())
    return make


# name, builder, batch maker, ratio target from issue 20 (None: report only)
MODELS = [
    ("MLP 784-512-512-10 b64", mlp, images((64, 784)), 1.0),
    ("CNN 2xconv3x3 b32", cnn, images((32, 3, 32, 32)), 1.0),
    ("ResNet-style 3 blocks b16", resnet_small, images((16, 3, 32, 32)), 1.0),
    ("Transformer LM 2x128 seq64 b8", transformer_lm, tokens(8, 64), 1.0),
    ("LSTM LM 2x256 seq32 b8", lstm_lm, tokens(8, 32), 1.0),
    ("ResNet-18 CIFAR b16", resnet18, images((16, 3, 32, 32)), None),
]


def init_weights(lib: Lib, model, seed: int) -> None:
    """Give both libraries the same starting point: every weight of 2 or more dims (conv,
    linear, embedding, recurrent, attention projections) and the biases after it uniform in
    +-1/sqrt(fan_in), drawn in named_parameters order; norm layers' scale/shift keep 1 and 0."""
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


# "bf16": the forward and the loss run under `autocast("cpu", dtype=bfloat16)` in both libraries
PRECISION = ["f32"]


def make_step(lib: Lib, builder, batch, seed: int, optimizer: str = "sgd"):
    """Build the model, optimizer and fixed batch; return (step fn -> loss tensor, model).
    `batch` is a batch maker (images/tokens) or, for image models, an input shape.
    optimizer: "sgd" (with momentum) or "adamw" (lr 1e-3, weight decay 0.01)."""
    rng = np.random.default_rng(seed)
    if isinstance(batch, tuple):
        batch = images(batch)
    x, y = batch(lib, rng)
    model = builder(lib)
    init_weights(lib, model, seed + 1)
    model.train()
    if optimizer == "adamw":
        opt = lib.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)
    else:
        opt = lib.optim.SGD(model.parameters(), lr=LR, momentum=MOMENTUM)

    def step():
        opt.zero_grad()
        if PRECISION[0] == "bf16":
            with lib.mod.autocast("cpu", dtype=lib.mod.bfloat16):
                loss = lib.F.cross_entropy(model(x), y)
        else:
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


def selected(args) -> list[int]:
    """Indices of the MODELS rows that --models picks (substrings of the names, any case)."""
    if not args.models:
        return list(range(len(MODELS)))
    keys = [k.strip().lower() for k in args.models.split(",") if k.strip()]
    picked = [i for i, m in enumerate(MODELS) if any(k in m[0].lower() for k in keys)]
    if not picked:
        raise SystemExit(f"bench: --models {args.models!r} matches none of "
                         f"{[m[0] for m in MODELS]}")
    return picked


def run_all(lib: Lib, args) -> dict:
    """Check and time the selected models in `lib`; {model: {"losses": [...], "s": median}}."""
    out = {}
    for i in selected(args):
        name, builder, batch, _ = MODELS[i]
        step, _ = make_step(lib, builder, batch, seed=100 * i)
        losses = [float(step().item()) for _ in range(CHECK_STEPS)]
        check_losses(lib.name, name, losses)
        time.sleep(SETTLE_S)
        out[name] = {"losses": losses, "s": time_steps(step, args.warmup, args.steps)}
    return out


def set_thread_env(n: int) -> None:
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = str(n)


# The environment this script was started with, before anything here or in a library changed
# it: each worker process starts from it, so neither library inherits the other's settings
# (an import that set a thread-pool variable such as OMP_WAIT_POLICY would otherwise leak).
USER_ENV = dict(os.environ)
THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
SHOWN_VARS = THREAD_VARS + ("OMP_WAIT_POLICY", "OMP_PROC_BIND", "GOMP_SPINCOUNT",
                            "KMP_BLOCKTIME")


def shown_env() -> dict:
    return {k: os.environ[k] for k in SHOWN_VARS if k in os.environ}


def worker(args) -> None:
    """Time one library's side and print it as JSON (main runs this in a child process)."""
    before = shown_env()
    if args.worker == "torch":
        import torch as mod

        mod.set_num_threads(args.threads)
        version, threads = mod.__version__, mod.get_num_threads()
    else:
        global st
        import singa_tensor as mod

        st = mod
        mod.set_num_threads(args.threads)
        version, threads = mod.__version__, mod.get_num_threads()
    if args.profile is not None:
        profile_model(args.profile, args)
        return
    res = run_all(Lib(mod, "torch" if args.worker == "torch" else "ours"), args)
    print(json.dumps({"version": version, "threads": threads, "env_at_start": before,
                      "env_after_import": shown_env(), "models": res}))


def child_env(threads: int) -> dict:
    return dict(USER_ENV, **{v: str(threads) for v in THREAD_VARS})


def run_worker(side: str, args, profile: int | None = None) -> dict | None:
    python = args.torch_python if side == "torch" else sys.executable
    cmd = [python, os.path.abspath(__file__), "--worker", side, "--steps", str(args.steps),
           "--warmup", str(args.warmup), "--threads", str(args.threads),
           "--precision", args.precision]
    if args.models:
        cmd += ["--models", args.models]
    if profile is not None:
        subprocess.run(cmd + ["--profile", str(profile)], env=child_env(args.threads))
        return None
    out = subprocess.run(cmd, capture_output=True, text=True, env=child_env(args.threads))
    if out.returncode != 0:
        raise SystemExit(f"bench: the {side} worker failed:\n{out.stderr}{out.stdout}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def has_torch(python: str) -> bool:
    probe = subprocess.run([python, "-c", "import torch"], capture_output=True,
                           env=child_env(1))
    return probe.returncode == 0


def print_table(rounds: list[tuple[dict, dict | None]], picked: list[int]) -> None:
    """One row per model: medians over the rounds of each side's median step, the ratio of
    those medians, and the range of the per-round ratios (each round times both sides)."""
    head = ["model", "ours ms/step", "torch ms/step", "ratio", "ratio range", "target", "met",
            "loss0 ours", "loss0 torch"]
    rows = []
    for i in picked:
        name, _, _, target = MODELS[i]
        o = statistics.median(r[0]["models"][name]["s"] for r in rounds)
        have = [r for r in rounds if r[1]]
        p = statistics.median(r[1]["models"][name]["s"] for r in have) if have else None
        per_round = [r[0]["models"][name]["s"] / r[1]["models"][name]["s"] for r in have]
        ratio = o / p if p else None
        met = "-" if ratio is None or target is None else ("yes" if ratio <= target else "NO")
        rng = f"{min(per_round):.2f}-{max(per_round):.2f}x" if per_round else "-"
        rows.append([name, f"{o * 1e3:.2f}", f"{p * 1e3:.2f}" if p else "-",
                     f"{ratio:.2f}x" if ratio else "-", rng,
                     f"<= {target:.1f}x" if target else "report", met,
                     f"{rounds[0][0]['models'][name]['losses'][0]:.5f}",
                     f"{have[0][1]['models'][name]['losses'][0]:.5f}" if have else "-"])
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
    name, builder, batch, _ = MODELS[index]
    step, _ = make_step(Lib(st, "ours"), builder, batch, seed=100 * index)
    for _ in range(max(args.warmup, 2)):
        step()
    print_profile(step, PROFILE_STEPS, name, "step")


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="few steps, one round (a smoke check)")
    p.add_argument("--steps", type=int, default=None, help="timed steps per model and round")
    p.add_argument("--warmup", type=int, default=None, help="untimed steps before timing")
    p.add_argument("--rounds", type=int, default=None,
                   help="rounds; each times both libraries, in alternating order")
    p.add_argument("--threads", type=int, default=2, help="threads for both libraries")
    p.add_argument("--models", default="", help="comma-separated name substrings to run")
    p.add_argument("--torch-python", default=os.environ.get("BENCH_TORCH_PYTHON",
                                                            sys.executable),
                   help="python with PyTorch installed (default: this one, or "
                        "$BENCH_TORCH_PYTHON)")
    p.add_argument("--precision", choices=("f32", "bf16"), default="f32",
                   help="bf16: forward and loss under bfloat16 autocast in both libraries")
    p.add_argument("--no-torch", action="store_true", help="skip the PyTorch side")
    p.add_argument("--no-profile", action="store_true", help="skip the profile")
    p.add_argument("--worker", choices=("ours", "torch"), help=argparse.SUPPRESS)
    p.add_argument("--profile", type=int, default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    args.steps = args.steps or (5 if args.quick else 50)
    args.warmup = args.warmup if args.warmup is not None else (2 if args.quick else 10)
    args.rounds = args.rounds or (1 if args.quick else 3)
    PRECISION[0] = args.precision
    if args.worker:
        worker(args)
        return

    picked = selected(args)
    peer_ok = not args.no_torch and has_torch(args.torch_python)
    rounds = []
    for r in range(args.rounds):
        sides = ("ours", "torch") if r % 2 == 0 else ("torch", "ours")
        got = {s: run_worker(s, args) for s in sides if s == "ours" or peer_ok}
        rounds.append((got["ours"], got.get("torch")))
    ours0, peer0 = rounds[0]
    print(f"python {platform.python_version()}, numpy {np.__version__}, singa_tensor "
          f"{ours0['version']}, torch {peer0['version'] if peer0 else 'not used'}")
    print(f"cpu cores (os.cpu_count): {os.cpu_count()}; threads: singa_tensor "
          f"{ours0['threads']}, torch {peer0['threads'] if peer0 else '-'}; each library in its "
          "own process")
    print(f"environment each worker started with: {ours0['env_at_start']}; after import: "
          f"singa_tensor {ours0['env_after_import']}"
          + (f", torch {peer0['env_after_import']}" if peer0 else ""))
    if args.precision == "bf16":
        print("precision: forward and loss under autocast('cpu', dtype=bfloat16) in both "
              "libraries (float32 parameters, float32 gradients)")
    print(f"forward + backward + SGD(lr={LR}, momentum={MOMENTUM}) on one fixed random batch; "
          f"{args.rounds} rounds (alternating which library goes first), each the median of "
          f"{args.steps} steps after {args.warmup} warm-up; ratio = ours/torch of the medians "
          "over rounds (below 1.00x: ours is faster)")
    print(f"checked: loss finite and decreasing over {CHECK_STEPS} steps in both; same initial "
          "weights and data, so loss0 should agree\n")
    print_table(rounds, picked)
    if not args.no_profile:
        slowest = max(picked, key=lambda i: ours0["models"][MODELS[i][0]]["s"]
                      / (peer0["models"][MODELS[i][0]]["s"] if peer0 else 1.0))
        run_worker("ours", args, profile=slowest)


if __name__ == "__main__":
    main()
