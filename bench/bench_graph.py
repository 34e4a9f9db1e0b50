"""Graph mode against eager execution and PyTorch (CPU) eager, in the same run.

Rows:
- The MLP, Transformer LM and ResNet-style training steps of bench_train.py (forward, cross
  entropy, backward, SGD with momentum; the MLP also with AdamW, whose step count a replay
  advances itself), eager and replayed, beside PyTorch's eager step
  (timed in a child process, as in bench_train.py, with the same thread count, started with
  the environment this script was started with, not the one singa_tensor's import leaves).
  The two libraries take turns over --rounds rounds (PyTorch first in even rounds), since a
  shared machine's speed drifts by tens of percent within minutes; each round gives one
  ratio, and the table shows the median ratio with the rounds' range. Within a round each
  mode's steps run back to back (eager, then graph), as PyTorch's do in its process.
- A chain of 100 elementwise ops on 1000-element tensors (no autograd): the per-op overhead.
- ResNet-18 (CIFAR form), batch 16: step time (eager and graph steps interleaved), and the
  allocator's peak bytes in use during one step (after warm-up; parameters, gradients and
  optimizer state included, and for graph mode its arena): graph / eager.

    python bench/bench_graph.py            # 3 rounds, median of 30 steps (10 for ResNet-18)
    python bench/bench_graph.py --calls    # and where each replay's time goes, by kind of call
    python bench/bench_graph.py --quick
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
# the environment the user started this script with, before singa_tensor's import adds to it
# anything: PyTorch's child process starts from this, with PyTorch's own defaults
USER_ENV = dict(os.environ)

THREADS = 2


def _median_ms(fn, warmup: int, steps: int) -> float:
    from bench_train import time_steps

    return time_steps(fn, warmup, steps) * 1e3


def _chain(mod, x, ops: int = 100):
    y = x
    for i in range(ops // 4):
        y = mod.exp(y * 0.5) - 1.0 if i % 2 else mod.tanh(y + 0.25) * 2.0
    return y


# the training steps of bench_train.py that graph mode is measured on against PyTorch's eager
# step: (row label, bench_train.MODELS name, target ratio graph/torch from issue 20)
STEPS = [("MLP 784-512-512-10 b64 step", "MLP 784-512-512-10 b64", 0.6),
         ("MLP b64 step, AdamW", "MLP 784-512-512-10 b64", None),
         ("Transformer LM seq64 b8 step", "Transformer LM 2x128 seq64 b8", 0.8),
         ("ResNet-style 3 blocks b16 step", "ResNet-style 3 blocks b16", 0.8)]
# rows whose step updates with another optimizer than SGD with momentum
OPTIMIZERS = {"MLP b64 step, AdamW": "adamw"}


def _torch_side(args) -> dict:
    code = f"""
import json, sys, time, statistics, numpy as np, torch
sys.path.insert(0, {HERE!r})
torch.set_num_threads({THREADS})
from bench_graph import _median_ms, _chain, STEPS, OPTIMIZERS
from bench_train import Lib, MODELS, make_step
lib = Lib(torch, "torch")
out = {{}}
for label, name, _ in STEPS:
    _, builder, batch, _ = next(m for m in MODELS if m[0] == name)
    step, _ = make_step(lib, builder, batch, 0, OPTIMIZERS.get(label, "sgd"))
    out[label] = _median_ms(step, {args.warmup}, {args.steps})
x = torch.from_numpy(np.random.default_rng(0).standard_normal(1000).astype(np.float32))
with torch.no_grad():
    out["chain"] = _median_ms(lambda: _chain(torch, x), {args.warmup}, {args.steps} * 10)
print(json.dumps(out))
"""
    env = dict(USER_ENV, OMP_NUM_THREADS=str(THREADS))
    try:
        r = subprocess.run([args.torch_python, "-c", code], capture_output=True, text=True,
                           env=env, timeout=900)
    except (OSError, subprocess.TimeoutExpired):
        return {}
    if r.returncode != 0:
        print("(PyTorch column left out:", r.stderr.strip().splitlines()[-1:], ")")
        return {}
    return json.loads(r.stdout.strip().splitlines()[-1])


# kinds of recorded calls, by their kernel's name
KINDS = (("matrix products", ("gemm", "onednn_linear")), ("optimizer update", ("_step",)),
         ("convolution", ("forward", "backward_data", "backward_weights", "im2col", "col2im")),
         ("attention", ("attention",)), ("norms", ("norm",)), ("cross entropy", ("xent",)))


def call_profile(graph_step, replays: int = 30) -> dict:
    """ms per replay by kind of call: every recorded call of the latest recording timed on its
    own, in the recorded order, the median over `replays` runs of the whole sequence (the
    optimizer updates run too: training goes on)."""
    calls = graph_step._latest.graph.calls
    times = [[] for _ in calls]
    for _ in range(replays):
        for k, (fn, call_args, _) in enumerate(calls):
            t0 = time.perf_counter()
            fn(*call_args)
            times[k].append(time.perf_counter() - t0)
    kinds: dict = {}
    for (_, _, symbol), t in zip(calls, times):
        kind = next((name for name, keys in KINDS if any(key in symbol for key in keys)),
                    "everything else")
        kinds[kind] = kinds.get(kind, 0.0) + statistics.median(t) * 1e3
    return kinds


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=3,
                    help="alternating rounds of the training-step rows (default 3)")
    ap.add_argument("--calls", action="store_true",
                    help="also time each recorded call of the training steps' replays (median "
                         "of 30 replays) and print the totals by kind of call")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--no-torch", action="store_true")
    ap.add_argument("--torch-python", default=os.environ.get("BENCH_TORCH_PYTHON", sys.executable),
                    help="python with PyTorch installed (default: this one, or "
                         "$BENCH_TORCH_PYTHON)")
    args = ap.parse_args()
    if args.quick:
        args.steps, args.warmup, args.rounds = 5, 2, 1
    if args.rounds < 1:
        raise SystemExit("bench: --rounds must be at least 1")
    os.environ.setdefault("OMP_NUM_THREADS", str(THREADS))
    from bench_train import Lib, make_step, resnet18

    import singa_tensor as st
    from singa_tensor.backend import cpu

    st.set_num_threads(THREADS)
    lib = Lib(st, "ours")
    rows = []

    # training steps: eager and replayed, interleaved step by step, in rounds that alternate
    # with PyTorch's child process
    from bench_train import MODELS

    models = []
    for label, name, _ in STEPS:
        _, builder, batch, _ = next(m for m in MODELS if m[0] == name)
        step, _ = make_step(lib, builder, batch, 0, OPTIMIZERS.get(label, "sgd"))
        step_g, _ = make_step(lib, builder, batch, 0, OPTIMIZERS.get(label, "sgd"))
        graph_step = st.compile(step_g)
        for _ in range(args.warmup):
            step()
            graph_step()
        if abs(float(step().item()) - float(graph_step().item())) > 1e-4:
            raise SystemExit(f"{label}: graph mode's loss differs from eager's")
        models.append((label, step, graph_step))

    def ours_round() -> dict:
        out = {}
        for label, step, graph_step in models:
            # each mode's steps run back to back, as a user runs them and as PyTorch's are
            # timed: steps of the other mode in between would leave their buffers in the
            # caches
            times = []
            for fn in (step, graph_step):
                for _ in range(2):  # back from the other process's or mode's turn
                    fn()
                into = []
                for _ in range(args.steps):
                    t0 = time.perf_counter()
                    fn()
                    into.append(time.perf_counter() - t0)
                times.append(statistics.median(into) * 1e3)
            out[label] = tuple(times)
        return out

    rounds = []  # (ours {label: (eager, graph)}, PyTorch's {label: ms})
    peer: dict = {}
    for r in range(args.rounds):
        torch_first = r % 2 == 0
        got = {} if args.no_torch or not torch_first else _torch_side(args)
        mine = ours_round()
        if not args.no_torch and not torch_first:
            got = _torch_side(args)
        rounds.append((mine, got))
        peer = peer or got  # the chain row takes the first round's figure
    ranges = {}
    for label, _, _ in STEPS:
        e = statistics.median(m[label][0] for m, _ in rounds)
        g = statistics.median(m[label][1] for m, _ in rounds)
        ts = [p[label] for _, p in rounds if label in p]
        t = statistics.median(ts) if ts else None
        ratios = [m[label][1] / p[label] for m, p in rounds if label in p]
        if ratios:
            ranges[label] = (statistics.median(ratios), min(ratios), max(ratios))
        rows.append((label, e, g, t))
    profiles = [(label, call_profile(graph_step)) for label, _, graph_step in models] \
        if args.calls else []
    models.clear()

    # 100 elementwise ops on 1000 elements
    x = st.tensor(np.random.default_rng(0).standard_normal(1000).astype(np.float32))
    with st.no_grad():
        want = _chain(st, x).numpy().copy()
        chain_g = st.compile(lambda t: _chain(st, t))
        chain_g(x)
        chain_g(x)
        if not np.array_equal(chain_g(x).numpy(), want):
            raise SystemExit("graph chain result differs from eager")
        eager_c = _median_ms(lambda: _chain(st, x), args.warmup, args.steps * 10)
        graph_c = _median_ms(lambda: chain_g(x), args.warmup, args.steps * 10)
    rows.append(("100 elementwise ops, 1000 elem", eager_c, graph_c, peer.get("chain")))

    # ResNet-18 b16: time, eager and graph steps interleaved (the machine's speed drifts over
    # a run of this length), then peak memory of one step of each, one model at a time
    steps_r = max(3, args.steps // 3)
    step_r, _ = make_step(lib, resnet18, (16, 3, 32, 32), 0)
    step_rg, _ = make_step(lib, resnet18, (16, 3, 32, 32), 0)
    graph_r_step = st.compile(step_rg)
    for _ in range(2):
        step_r()
        graph_r_step()
    times_e, times_g = [], []
    for _ in range(steps_r):
        for fn, into in ((step_r, times_e), (graph_r_step, times_g)):
            t0 = time.perf_counter()
            fn()
            into.append(time.perf_counter() - t0)
    eager_r, graph_r = (statistics.median(t) * 1e3 for t in (times_e, times_g))
    calls_r = graph_r_step.calls
    del step_r, step_rg, graph_r_step
    # peaks one model at a time, so each counts its own parameters, gradients and state
    peaks = []
    for graph_mode in (False, True):
        gc.collect()
        zero = cpu.allocated_bytes()  # what earlier rows left behind is not this model's
        fn, _ = make_step(lib, resnet18, (16, 3, 32, 32), 0)
        if graph_mode:
            fn = st.compile(fn)
        for _ in range(3):
            fn()
        cpu.reset_peak_bytes()
        fn()
        peaks.append(cpu.peak_bytes()[0] - zero)
        arena_r = fn.arena_bytes if graph_mode else 0
        del fn
    eager_peak, graph_peak = peaks
    rows.append(("ResNet-18 CIFAR b16 step", eager_r, graph_r, None))

    print(f"PyTorch's process started with: "
          f"{ {k: v for k, v in USER_ENV.items() if k.startswith(('OMP_', 'OPENBLAS_', 'MKL_'))} } "
          f"plus OMP_NUM_THREADS={THREADS}; ours after import: OMP_WAIT_POLICY="
          f"{os.environ.get('OMP_WAIT_POLICY', '-')}")
    print(f"graph mode, {THREADS} threads, median of {args.steps} steps "
          f"(ResNet-18: {steps_r}); times in ms; training steps: medians over {args.rounds} "
          f"alternating rounds, graph/torch the median of the rounds' ratios [their range]")
    print(f"{'row':<34}{'eager':>10}{'graph':>10}{'torch':>10}{'graph/eager':>13}"
          f"{'graph/torch':>13}")
    targets = {label: target for label, _, target in STEPS}
    for name, e, g, t in rows:
        tcol = f"{t:>10.3f}" if t else f"{'-':>10}"
        ratio, lo, hi = ranges.get(name, (g / t if t else None, None, None))
        gt = f"{ratio:>12.2f}x" if t else f"{'-':>13}"
        spread = f"  [{lo:.2f}-{hi:.2f}]" if lo is not None else ""
        tg = targets.get(name)
        met = "" if tg is None or not t else (f"  (target <= {tg}x: "
                                               f"{'met' if ratio <= tg else 'NOT met'})")
        print(f"{name:<34}{e:>10.3f}{g:>10.3f}{tcol}{g / e:>12.2f}x{gt}{spread}{met}")
    for label, kinds in profiles:
        total = sum(kinds.values())
        parts = ", ".join(f"{k} {v:.3f}" for k, v in sorted(kinds.items(), key=lambda kv: -kv[1]))
        print(f"{label}: recorded calls, one at a time, {total:.3f} ms: {parts}")
    print(f"ResNet-18 b16 peak bytes in use during a step: eager {eager_peak / 2**20:.1f} MiB, "
          f"graph {graph_peak / 2**20:.1f} MiB (graph/eager {graph_peak / eager_peak:.2f}x; "
          f"arena {arena_r / 2**20:.1f} MiB, {calls_r} calls)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
