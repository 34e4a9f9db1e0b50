"""Layer norm and the activations, forward and forward + backward: our fused kernels against the
compositions they replaced (the "before") and PyTorch, measured in the same run on the same data.

    python bench/bench_fused.py                      # 3 warm-up calls, median of 21
    python bench/bench_fused.py --quick              # 1 warm-up, median of 5
    python bench/bench_fused.py --torch-python /path/to/python-with-torch

Rows are float32 on the CPU: layer norm over the last dim of (512, 128) and (8*64, 768) with
weight and bias, and GELU (exact and tanh), SiLU, ReLU, sigmoid and tanh over (512, 128) and
(8*64, 3072). Columns: median seconds of our fused op, of our composition (layer norm's
mean/sub/pow/... forward with its recorded backward; the activations' kernels forward with the
composed Tensor-op backward),
and of PyTorch, then the ratios fused/composed and fused/torch (below 1: fused is faster).

PyTorch runs first, in its own process started with the environment this script was started
with (nothing our import might set in the environment is passed on); its column is
`-` without --torch-python or a python that imports torch. Before timing, each fused result and
gradient is checked against the composition's; the script stops if they differ. On a shared
machine the times are noisy: compare ratios of one run, and rerun before trusting a change.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import time

import numpy as np

USER_ENV = dict(os.environ)  # before singa_tensor's import adds its thread settings
DEFAULT_TORCH = "/work/wt/torchvenv/bin/python"

LN_SHAPES = [(512, 128), (8 * 64, 768)]
ACT_SHAPES = [(512, 128), (8 * 64, 3072)]
ACTS = ["gelu", "gelu_tanh", "silu", "relu", "sigmoid", "tanh"]


def data(shape: tuple, seed: int) -> tuple:
    r = np.random.default_rng(seed)
    n = shape[-1]
    return (r.standard_normal(shape).astype(np.float32),
            (1 + 0.1 * r.standard_normal(n)).astype(np.float32),
            (0.1 * r.standard_normal(n)).astype(np.float32),
            r.standard_normal(shape).astype(np.float32))


def time_steps(step, warmup: int, reps: int) -> float:
    for _ in range(warmup):
        step()
    samples = []
    for _ in range(reps):
        t0 = time.perf_counter()
        step()
        samples.append(time.perf_counter() - t0)
    return statistics.median(samples)


def cases():
    """(key, kind, shape, seed) of every row."""
    out = [(f"layer_norm {s[0]}x{s[1]}", "layer_norm", s, i) for i, s in enumerate(LN_SHAPES)]
    for a in ACTS:
        out += [(f"{a} {s[0]}x{s[1]}", a, s, 10 + i) for i, s in enumerate(ACT_SHAPES)]
    return out


def steps(lib, kind: str, arrays: tuple, fused: bool = True) -> tuple:
    """(forward, forward + backward) steps for one row in library lib ("torch" or "ours")."""
    if lib == "torch":
        import torch
        import torch.nn.functional as tF

        x, w, b, g = (torch.from_numpy(a) for a in arrays)
        no_grad = torch.no_grad
        xs, ws, bs = (t.clone().requires_grad_() for t in (x, w, b))
        fn = {"layer_norm": lambda a: tF.layer_norm(a, (a.shape[-1],), ws, bs),
              "gelu": tF.gelu, "gelu_tanh": lambda a: tF.gelu(a, approximate="tanh"),
              "silu": tF.silu, "relu": tF.relu, "sigmoid": torch.sigmoid,
              "tanh": torch.tanh}[kind]
    else:
        import singa_tensor as st
        import singa_tensor.nn.functional as F
        from singa_tensor.ops.norm import _layer_norm_composed

        x, w, b, g = (st.tensor(a) for a in arrays)
        no_grad = st.no_grad
        xs, ws, bs = (st.tensor(a, requires_grad=True) for a in arrays[:3])
        if kind == "layer_norm":
            def fn(a):
                if fused:
                    return F.layer_norm(a, (a.shape[-1],), ws, bs)
                return _layer_norm_composed(a, 1, ws, bs, 1e-5)
        else:
            fn = {"gelu": F.gelu, "gelu_tanh": lambda a: F.gelu(a, approximate="tanh"),
                  "silu": F.silu, "relu": F.relu, "sigmoid": st.sigmoid, "tanh": st.tanh}[kind]
    leaves = (xs, ws, bs) if kind == "layer_norm" else (xs,)

    def fwd():
        with no_grad():
            fn(x)

    def fwd_bwd():
        for t in leaves:
            t.grad = None
        fn(xs).backward(g)

    return fwd, fwd_bwd, leaves


def composed_activation_backward(enable: bool) -> None:
    """Make the activations' backward the composition (enable) or their kernels again."""
    from singa_tensor.ops import elementwise as elt
    from singa_tensor.ops._registry import REGISTRY

    composed = {"gelu": elt._gelu_grad, "gelu_tanh": elt._gelu_tanh_grad, "silu": elt._silu_grad,
                "relu": elt._relu_grad, "sigmoid": elt._sigmoid_grad, "tanh": elt._tanh_grad}
    for name, f in composed.items():
        spec = REGISTRY[name]
        if enable:
            spec._kernel_backward = spec.backward
            spec.backward = staticmethod(lambda ctx, g, f=f: (f(ctx, g, *ctx.saved_tensors),))
        elif hasattr(spec, "_kernel_backward"):
            spec.backward = spec._kernel_backward


def torch_worker(args) -> None:
    import torch

    res = {}
    for key, kind, shape, seed in cases():
        fwd, fwd_bwd, _ = steps("torch", kind, data(shape, seed))
        res[f"{key}/fwd"] = time_steps(fwd, args.warmup, args.reps)
        res[f"{key}/fwdbwd"] = time_steps(fwd_bwd, args.warmup, args.reps)
    print(json.dumps({"version": torch.__version__, "threads": torch.get_num_threads(),
                      "times": res}))


def torch_side(args) -> dict | None:
    py = args.torch_python
    if not py or not os.path.exists(py):
        return None
    cmd = [py, os.path.abspath(__file__), "--torch-worker", "--warmup", str(args.warmup),
           "--reps", str(args.reps)]
    out = subprocess.run(cmd, capture_output=True, text=True, env=USER_ENV, timeout=1800)
    if out.returncode != 0:
        raise SystemExit(f"bench: the PyTorch worker failed:\n{out.stderr}{out.stdout}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def check(kind: str, arrays: tuple) -> None:
    """Stop when the fused gradients differ from the composition's."""
    results = []
    for fused in (True, False):
        composed_activation_backward(not fused)
        _, fwd_bwd, leaves = steps("ours", kind, arrays, fused)
        fwd_bwd()
        results.append([t.grad.numpy() for t in leaves])
    composed_activation_backward(False)
    for a, b in zip(*results):
        err = np.abs(a - b).max() / max(1.0, np.abs(b).max())
        if err > 1e-5:
            raise SystemExit(f"bench: {kind}: fused gradients differ from the composition's "
                             f"by {err:.2e}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--reps", type=int, default=21)
    ap.add_argument("--torch-python", default=DEFAULT_TORCH)
    ap.add_argument("--torch-worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.quick:
        args.warmup, args.reps = 1, 5
    if args.torch_worker:
        torch_worker(args)
        return
    peer = torch_side(args)  # first, before our import changes this process's environment
    import singa_tensor as st

    head = f"singa_tensor threads {st.get_num_threads()}"
    if peer:
        head += f"; torch {peer['version']} threads {peer['threads']}"
    print(head)
    print(f"{'row':<24}{'mode':<8}{'fused':>10}{'composed':>10}{'torch':>10}"
          f"{'fused/comp':>12}{'fused/torch':>12}")
    for key, kind, shape, seed in cases():
        arrays = data(shape, seed)
        check(kind, arrays)
        t = {}
        for fused in (True, False):
            composed_activation_backward(not fused)
            fwd, fwd_bwd, _ = steps("ours", kind, arrays, fused)
            for mode, fn in (("fwd", fwd), ("fwdbwd", fwd_bwd)):
                time.sleep(0.1)
                t[(fused, mode)] = time_steps(fn, args.warmup, args.reps)
        composed_activation_backward(False)
        for mode in ("fwd", "fwdbwd"):
            f, c = t[(True, mode)], t[(False, mode)]
            tt = peer["times"][f"{key}/{mode}"] if peer else None
            print(f"{key:<24}{mode:<8}{f * 1e6:>8.0f}us{c * 1e6:>8.0f}us"
                  + (f"{tt * 1e6:>8.0f}us" if tt else f"{'-':>10}")
                  + f"{f / c:>11.2f}x" + (f"{f / tt:>11.2f}x" if tt else f"{'-':>12}"))


if __name__ == "__main__":
    main()
