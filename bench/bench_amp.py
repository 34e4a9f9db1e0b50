"""Mixed-precision benchmarks: bfloat16 against float32, singa_tensor against PyTorch (CPU),
measured in the same run.

The benchmark is made of sections, each a list of timed rows (`--sections gemm,...`; all by
default):

- `gemm`: square matrix products (512, 1024, 2048) in float32 and bfloat16, our bfloat16
  product with oneDNN switched off (the library's own kernel: operands widened to float32 for
  sgemm) and a linear layer's forward + backward (three GEMMs and a bias sum) in both dtypes.
- `train`: training steps of bench_train.py's MLP, CNN and Transformer LM (forward, backward,
  SGD with momentum), float32 against the forward and loss under `autocast("cpu",
  dtype=bfloat16)` in each library (PyTorch's CPU autocast on its side); each step's losses
  are checked to be finite and falling before it is timed.

The table of a section gives each row's median time in each library, ours/torch, and for the
bfloat16 rows the bfloat16/float32 ratio within each library (below 1 means bfloat16 is
faster). Before a row is timed its result is checked against the float32 product of the same
inputs, so a fast wrong answer never shows up as a speed-up.

    python bench/bench_amp.py                                   # every section
    python bench/bench_amp.py --sections gemm --quick           # a smoke check
    python bench/bench_amp.py --torch-python /work/wt/torchvenv/bin/python

Each library runs in its own worker process started from the environment this script was
started with (bench_train.py's helpers), so neither inherits what the other's import sets.

A new section is a function `(lib, args) -> {row: seconds}` (lib: a `Lib` of either library)
with a `ROWS` list of (row, float32 peer row or None, flops or None), added to SECTIONS.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time

import bench_train as _bt  # first: it records the user's environment before anything changes it
import numpy as np


class Lib:
    """What the sections use of a PyTorch-like library, so one definition times both."""

    def __init__(self, mod, name: str):
        self.mod, self.name = mod, name
        self.F = mod.nn.functional
        self.bfloat16, self.float32 = mod.bfloat16, mod.float32

    def tensor(self, a: np.ndarray, dtype, requires_grad: bool = False):
        t = (self.mod.tensor(a) if self.name == "ours" else self.mod.from_numpy(a.copy()))
        t = t.to(dtype)
        return t.requires_grad_() if requires_grad else t

    def values(self, t) -> np.ndarray:
        return t.detach().float().numpy().astype(np.float64)

    def onednn(self, enabled: bool):
        """A context with oneDNN on or off for our products (nothing for PyTorch)."""
        if self.name == "ours":
            return self.mod.backends.mkldnn.flags(enabled=enabled)
        import contextlib

        return contextlib.nullcontext()


def median_time(fn, warmup: int, repeat: int) -> float:
    for _ in range(warmup):
        fn()
    samples = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t0)
    return statistics.median(samples)


def _check(name: str, got: np.ndarray, want: np.ndarray, k: int) -> None:
    # bfloat16 operands of |x| < 1, float32 accumulation, one rounding: within a few bfloat16
    # ulps of the row's largest value (generous, it only catches wrong answers)
    err = np.abs(got - want).max() / max(np.abs(want).max(), 1e-30)
    if not np.isfinite(err) or err > 2.0 ** -6:
        raise SystemExit(f"bench_amp {name}: relative error {err:.3g} against float32 (k={k})")


# ---- gemm ---------------------------------------------------------------------------------------

GEMM_SIZES = (512, 1024, 2048)
LINEAR = (512, 1024, 1024)  # batch rows, in_features, out_features


def gemm_rows():
    rows = []
    for n in GEMM_SIZES:
        f = 2.0 * n ** 3
        rows += [(f"gemm {n} f32", None, f), (f"gemm {n} bf16", f"gemm {n} f32", f),
                 (f"gemm {n} bf16 own kernel", f"gemm {n} f32", f)]
    m, k, n = LINEAR
    f = 3 * 2.0 * m * k * n
    rows += [(f"linear {m}x{k}->{n} fwd+bwd f32", None, f),
             (f"linear {m}x{k}->{n} fwd+bwd bf16", f"linear {m}x{k}->{n} fwd+bwd f32", f)]
    return rows


def gemm(lib: Lib, args) -> dict:
    rng = np.random.default_rng(0)
    out = {}
    reps = dict(warmup=args.warmup, repeat=args.repeat)
    for n in GEMM_SIZES:
        a_np = rng.uniform(-1, 1, (n, n)).astype(np.float32)
        b_np = rng.uniform(-1, 1, (n, n)).astype(np.float32)
        want = a_np.astype(np.float64) @ b_np.astype(np.float64)
        for dt, tag in ((lib.float32, "f32"), (lib.bfloat16, "bf16"), (lib.bfloat16, "own")):
            if tag == "own" and lib.name != "ours":
                continue
            a, b = lib.tensor(a_np, dt), lib.tensor(b_np, dt)
            row = f"gemm {n} {tag}" if tag != "own" else f"gemm {n} bf16 own kernel"
            with lib.onednn(tag != "own"):
                if tag != "f32":  # the product of the bfloat16-rounded inputs
                    want_dt = lib.values(a) @ lib.values(b)
                else:
                    want_dt = want
                _check(row, lib.values(a @ b), want_dt, n)
                out[row] = median_time(lambda a=a, b=b: a @ b, **reps)
    m, k, n = LINEAR
    x_np = rng.uniform(-1, 1, (m, k)).astype(np.float32)
    w_np = rng.uniform(-1, 1, (n, k)).astype(np.float32) / np.sqrt(k)
    b_np = rng.uniform(-1, 1, n).astype(np.float32)
    g_np = rng.uniform(-1, 1, (m, n)).astype(np.float32)
    for dt, tag in ((lib.float32, "f32"), (lib.bfloat16, "bf16")):
        x, w = lib.tensor(x_np, dt, True), lib.tensor(w_np, dt, True)
        bias, g = lib.tensor(b_np, dt, True), lib.tensor(g_np, dt)

        def step(x=x, w=w, bias=bias, g=g):
            x.grad = w.grad = bias.grad = None
            lib.F.linear(x, w, bias).backward(g)

        step()
        ex, ew, eg = lib.values(x), lib.values(w), lib.values(g)
        _check(f"linear {tag} dx", lib.values(x.grad), eg @ ew, n)
        _check(f"linear {tag} dw", lib.values(w.grad), eg.T @ ex, m)
        out[f"linear {m}x{k}->{n} fwd+bwd {tag}"] = median_time(step, **reps)
    return out


# ---- train --------------------------------------------------------------------------------------

# bench_train.py's models (same weights and data in both libraries), one step each: forward and
# loss under autocast("cpu", dtype=bfloat16) against the same step in float32
TRAIN_MODELS = ("MLP", "CNN", "Transformer LM")


def train_rows():
    rows = []
    for key in TRAIN_MODELS:
        name = next(m[0] for m in _bt.MODELS if m[0].startswith(key))
        rows += [(f"{name} f32", None, None),
                 (f"{name} bf16 autocast", f"{name} f32", None)]
    return rows


def train(lib: Lib, args) -> dict:
    blib = _bt.Lib(lib.mod, lib.name)
    out = {}
    for i, m in enumerate(_bt.MODELS):
        name, builder, batch, _ = m
        if not any(name.startswith(k) for k in TRAIN_MODELS):
            continue
        for precision, tag in (("f32", "f32"), ("bf16", "bf16 autocast")):
            _bt.PRECISION[0] = precision
            step, _ = _bt.make_step(blib, builder, batch, seed=100 * i)
            losses = [float(step().item()) for _ in range(_bt.CHECK_STEPS)]
            _bt.check_losses(lib.name, f"{name} {tag}", losses)
            out[f"{name} {tag}"] = median_time(step, warmup=args.warmup,
                                               repeat=max(args.repeat, 5))
        _bt.PRECISION[0] = "f32"
    return out


# section name -> (timing function, rows: [(row, float32 row it is compared with, flops)])
SECTIONS = {"gemm": (gemm, gemm_rows), "train": (train, train_rows)}


# ---- workers and the tables ---------------------------------------------------------------------


def worker(args) -> None:
    before = _bt.shown_env()
    if args.worker == "torch":
        import torch as mod
    else:
        import singa_tensor as mod
    mod.set_num_threads(args.threads)
    lib = Lib(mod, args.worker)
    res = {s: SECTIONS[s][0](lib, args) for s in args.section_list}
    print(json.dumps({"version": mod.__version__, "threads": mod.get_num_threads(),
                      "env_at_start": before, "env_after_import": _bt.shown_env(),
                      "sections": res}))


def run_worker(side: str, args) -> dict:
    python = args.torch_python if side == "torch" else sys.executable
    cmd = [python, os.path.abspath(__file__), "--worker", side, "--sections", args.sections,
           "--threads", str(args.threads), "--warmup", str(args.warmup), "--repeat",
           str(args.repeat)]
    out = subprocess.run(cmd, capture_output=True, text=True, env=_bt.child_env(args.threads))
    if out.returncode != 0:
        raise SystemExit(f"bench_amp: the {side} worker failed:\n{out.stderr}{out.stdout}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def print_section(name: str, ours: dict, peer: dict | None) -> None:
    head = ["row", "ours ms", "torch ms", "ours/torch", "bf16/f32 ours", "bf16/f32 torch",
            "GFLOP/s ours", "GFLOP/s torch"]
    rows = []
    for row, base, flops in SECTIONS[name][1]():
        o = ours.get(row)
        p = peer.get(row) if peer else None

        def ratio(x, y):
            return f"{x / y:.2f}x" if x is not None and y else "-"

        def gflops(t, flops=flops):
            return f"{flops / t / 1e9:.1f}" if flops and t else "-"

        rows.append([row, f"{o * 1e3:.2f}" if o else "-", f"{p * 1e3:.2f}" if p else "-",
                     ratio(o, p), ratio(o, ours.get(base)) if base else "",
                     ratio(p, peer.get(base)) if base and peer else "", gflops(o), gflops(p)])
    widths = [max(len(r[i]) for r in rows + [head]) for i in range(len(head))]

    def line(cells):
        return "  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                         for i, (c, w) in enumerate(zip(cells, widths)))

    print(f"\n[{name}]")
    print(line(head))
    print("  ".join("-" * w for w in widths))
    for r in rows:
        print(line(r))


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sections", default=",".join(SECTIONS),
                   help=f"comma-separated sections to run, of {', '.join(SECTIONS)}")
    p.add_argument("--quick", action="store_true", help="1 warm-up call, median of 3")
    p.add_argument("--warmup", type=int, default=None, help="untimed calls before timing")
    p.add_argument("--repeat", type=int, default=None, help="timed calls per row (median)")
    p.add_argument("--threads", type=int, default=2, help="threads for both libraries")
    p.add_argument("--torch-python", default=os.environ.get("BENCH_TORCH_PYTHON",
                                                            sys.executable),
                   help="python with PyTorch installed (default: this one, or "
                        "$BENCH_TORCH_PYTHON)")
    p.add_argument("--no-torch", action="store_true", help="skip the PyTorch side")
    p.add_argument("--worker", choices=("ours", "torch"), help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    args.warmup = args.warmup if args.warmup is not None else (1 if args.quick else 3)
    args.repeat = args.repeat or (3 if args.quick else 9)
    args.section_list = [s.strip() for s in args.sections.split(",") if s.strip()]
    unknown = [s for s in args.section_list if s not in SECTIONS]
    if unknown or not args.section_list:
        raise SystemExit(f"bench_amp: unknown sections {unknown} (known: {list(SECTIONS)})")
    if args.worker:
        worker(args)
        return
    ours = run_worker("ours", args)
    peer = None
    if not args.no_torch and _bt.has_torch(args.torch_python):
        peer = run_worker("torch", args)
    print(f"python {platform.python_version()}, numpy {np.__version__}, singa_tensor "
          f"{ours['version']}, torch {peer['version'] if peer else 'not used'}")
    print(f"cpu cores (os.cpu_count): {os.cpu_count()}; threads: singa_tensor "
          f"{ours['threads']}, torch {peer['threads'] if peer else '-'}; each library in its "
          "own process")
    print(f"median of {args.repeat} calls after {args.warmup} warm-up; ratios below 1.00x: "
          "the first is faster; results checked against float32 before timing")
    for s in args.section_list:
        print_section(s, ours["sections"][s], peer["sections"][s] if peer else None)


if __name__ == "__main__":
    main()
