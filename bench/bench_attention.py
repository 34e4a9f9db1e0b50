"""Scaled dot-product attention: our fused kernels against our composition (matmul, softmax,
matmul) and PyTorch's F.scaled_dot_product_attention, forward and forward + backward, measured
in the same run on the same data.

Shapes are (batch 4, heads 8, L = S, E = 64) unless `--shape` says otherwise, float32, no
mask, causal and not. For each row the table gives the median time of fused, composition and
PyTorch, the ratios fused/composition and fused/torch (below 1: fused is faster), and the peak
bytes our CPU allocator held during one call of each of ours (inputs excluded). PyTorch runs in
a child process (loading it slows our OpenBLAS products; `--torch-python` names another
interpreter for it), started before singa_tensor is imported here, so that it gets the
environment this script was started with; its column is `-` when it is not installed. Before
timing, the fused output and gradients are checked against the composition's.

    python bench/bench_attention.py                 # full run
    python bench/bench_attention.py --quick         # 1 warm-up, median of 3
    python bench/bench_attention.py --sizes 128 512 --device cuda
    python bench/bench_attention.py --shape 8 4 32 --sizes 64   # bench_train's Transformer LM
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_train import time_steps  # noqa: E402  (the step timer, shared with bench_train)

BATCH, HEADS, DIM = 4, 8, 64
SEED = 0


def data(n: int, lead=(BATCH, HEADS, DIM)) -> tuple:
    r = np.random.default_rng(SEED + n)
    shape = (lead[0], lead[1], n, lead[2])
    return tuple(r.standard_normal(shape).astype(np.float32) for _ in range(3)) + (
        r.standard_normal(shape).astype(np.float32),)


def steps(sdpa, no_grad, inputs, leaves, grad, causal, sync=lambda: None) -> tuple:
    """(forward, forward + backward) steps of one library's sdpa."""

    def fwd():
        with no_grad():
            sdpa(*inputs, is_causal=causal)
        sync()

    def fwd_bwd():
        for t in leaves:
            t.grad = None
        sdpa(*leaves, is_causal=causal).backward(grad)
        sync()

    return fwd, fwd_bwd


def torch_worker(args) -> None:
    """Time PyTorch on the same data; prints {key: seconds} as JSON (run in a child)."""
    import torch
    import torch.nn.functional as tF

    res = {}
    for n in args.sizes:
        q, k, v, g = (torch.from_numpy(a) for a in data(n, args.shape))
        for causal in (False, True):
            qs = [t.clone().requires_grad_() for t in (q, k, v)]
            fwd, fwd_bwd = steps(tF.scaled_dot_product_attention, torch.no_grad, (q, k, v),
                                 qs, g, causal)
            res[f"{n}/{causal}/fwd"] = time_steps(fwd, args.warmup, args.reps)
            res[f"{n}/{causal}/fwdbwd"] = time_steps(fwd_bwd, args.warmup, args.reps)
    print(json.dumps({"version": torch.__version__, "threads": torch.get_num_threads(),
                      "times": res}))


def torch_side(args) -> dict | None:
    if args.no_torch or args.device != "cpu":
        return None
    if args.torch_python is None and importlib.util.find_spec("torch") is None:
        return None
    cmd = [args.torch_python or sys.executable, os.path.abspath(__file__), "--torch-worker",
           "--warmup",
           str(args.warmup), "--reps", str(args.reps), "--sizes", *map(str, args.sizes),
           "--shape", *map(str, args.shape)]
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"bench: the PyTorch worker failed:\n{out.stderr}{out.stdout}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def ours(args) -> tuple:
    import singa_tensor as st
    import singa_tensor.nn.functional as F
    from singa_tensor.backend import cpu
    from singa_tensor.ops import attention as attn_mod
    from singa_tensor.ops import attention_fused

    real_use_fused = attn_mod.use_fused

    def pick(fused: bool):
        # the dispatcher's choice, forced: fused whenever the op can run fused, or never
        attention_fused.CPU_MIN_SCORES = 0 if fused else 1 << 62
        attn_mod.use_fused = real_use_fused if fused else (lambda *a: False)

    def sync():
        if args.device != "cpu":
            st.cuda.synchronize()

    rows = []
    for n in args.sizes:
        arrays = data(n, args.shape)
        q, k, v, g = (st.tensor(a, device=args.device) for a in arrays)
        for causal in (False, True):
            qs = [st.tensor(a, device=args.device, requires_grad=True) for a in arrays[:3]]
            fwd, fwd_bwd = steps(F.scaled_dot_product_attention, st.no_grad, (q, k, v), qs, g,
                                 causal, sync)
            results = {}
            for fused in (True, False):
                pick(fused)
                fwd_bwd()
                results[fused] = [t.grad.numpy(force=True) if args.device != "cpu"
                                  else t.grad.numpy() for t in qs]
            for a, b in zip(results[True], results[False]):
                err = np.abs(a - b).max() / max(1.0, np.abs(b).max())
                if err > 1e-4:
                    raise SystemExit(f"bench: fused gradients differ from the composition's "
                                     f"at L={n} causal={causal}: {err:.2e}")
            row = {"n": n, "causal": causal}
            for fused in (True, False):
                pick(fused)
                key = "fused" if fused else "comp"
                for mode, fn in (("fwd", fwd), ("fwdbwd", fwd_bwd)):
                    time.sleep(0.2)
                    row[f"{key}/{mode}"] = time_steps(fn, args.warmup, args.reps)
                    if args.device == "cpu":
                        for t in qs:  # the last step's gradients would count against base
                            t.grad = None
                        base = cpu.allocated_bytes()
                        cpu.reset_peak_bytes()
                        fn()
                        row[f"{key}/{mode}/peak"] = cpu.peak_bytes()[0] - base
            rows.append(row)
    pick(True)
    return rows, st.get_num_threads()


def fmt_s(x) -> str:
    return "-" if x is None else f"{x * 1e3:9.2f}ms"


def fmt_b(x) -> str:
    return "-" if x is None else f"{x / 2**20:8.1f}MiB"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", type=int, nargs="+", default=[128, 512, 2048])
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--reps", type=int, default=7)
    p.add_argument("--quick", action="store_true")
    p.add_argument("--device", default="cpu")
    p.add_argument("--shape", type=int, nargs=3, default=[BATCH, HEADS, DIM],
                   metavar=("BATCH", "HEADS", "E"), help="batch, heads and head size")
    p.add_argument("--no-torch", action="store_true")
    p.add_argument("--torch-python", default=None,
                   help="the Python that runs PyTorch's side (default: this one)")
    p.add_argument("--torch-worker", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.quick:
        args.warmup, args.reps = 1, 3
    if args.torch_worker:
        torch_worker(args)
        return
    tr = torch_side(args)
    rows, threads = ours(args)
    print(f"# SDPA float32, batch {args.shape[0]}, heads {args.shape[1]}, E {args.shape[2]}, "
          f"device {args.device}, "
          f"singa_tensor threads {threads}, torch "
          + ("-" if tr is None else f"{tr['version']} ({tr['threads']} threads)"))
    head = (f"{'L=S':>5} {'causal':>6} {'pass':>7} {'fused':>11} {'comp':>11} {'torch':>11} "
            f"{'fused/comp':>10} {'fused/torch':>11} {'peak fused':>11} {'peak comp':>11}")
    print(head)
    for row in rows:
        for mode in ("fwd", "fwdbwd"):
            f, c = row[f"fused/{mode}"], row[f"comp/{mode}"]
            t = None if tr is None else tr["times"][f"{row['n']}/{row['causal']}/{mode}"]
            print(f"{row['n']:>5} {str(row['causal']):>6} {mode:>7} {fmt_s(f)} {fmt_s(c)} "
                  f"{fmt_s(t):>11} {f / c:>9.2f}x "
                  f"{'-' if t is None else f'{f / t:.2f}x':>11} "
                  f"{fmt_b(row.get(f'fused/{mode}/peak')):>11} "
                  f"{fmt_b(row.get(f'comp/{mode}/peak')):>11}")


if __name__ == "__main__":
    main()
