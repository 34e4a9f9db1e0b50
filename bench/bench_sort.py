"""sort and topk (k = 1% of the line): singa_tensor against numpy and PyTorch in the same run.

Rows: a 1M-element float32 vector, and a (1024, 1024) float32 matrix along its last dim. Each
cell is the median of repeated calls after warm-up; ratios are ours / peer (below 1: ours is
faster). Peers: np.sort (values only) and np.argpartition (the k largest, unordered); torch.sort
and torch.topk (values and indices, like ours) when PyTorch is installed.

    python bench/bench_sort.py            # full run
    python bench/bench_sort.py --quick    # fewer repeats, for a smoke check
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

import singa_tensor as st

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

try:
    import torch
except ImportError:  # PyTorch is optional: its columns read "-"
    torch = None

# the step timer and the pause that lets one library's thread pool go idle before the next is
# timed, shared with bench_train
from bench_train import SETTLE_S, time_steps  # noqa: E402


def _check(name: str, ours, want_values: np.ndarray) -> None:
    """Ours must agree with numpy before it is timed: a fast wrong answer is no result."""
    got = ours.values.numpy()
    if not np.array_equal(got, want_values):
        raise SystemExit(f"{name}: singa_tensor disagrees with numpy")


def rows(n_vec: int, shape: tuple):
    rng = np.random.default_rng(0)
    vec = rng.standard_normal(n_vec).astype(np.float32)
    mat = rng.standard_normal(shape).astype(np.float32)
    for label, a in ((f"vector {n_vec}", vec), (f"matrix {shape}, dim=-1", mat)):
        x = st.from_numpy(a)
        tx = torch.from_numpy(a) if torch is not None else None
        k = max(1, a.shape[-1] // 100)
        _check(f"sort {label}", st.sort(x), np.sort(a, axis=-1))
        _check(f"topk {label}", st.topk(x, k), -np.sort(-a, axis=-1)[..., :k])
        yield (f"sort {label}", lambda x=x: st.sort(x), lambda a=a: np.sort(a, axis=-1),
               (lambda tx=tx: torch.sort(tx)) if tx is not None else None)
        yield (f"topk k={k} {label}", lambda x=x, k=k: st.topk(x, k),
               lambda a=a, k=k: np.argpartition(a, -k, axis=-1)[..., -k:],
               (lambda tx=tx, k=k: torch.topk(tx, k)) if tx is not None else None)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="1 warm-up, median of 3")
    p.add_argument("--repeat", type=int, default=11)
    p.add_argument("--warmup", type=int, default=3)
    args = p.parse_args()
    if args.quick:
        args.repeat, args.warmup = 3, 1
    tv = torch.__version__ if torch is not None else "not installed"
    tt = torch.get_num_threads() if torch is not None else "-"
    print(f"singa_tensor threads {st.get_num_threads()}, numpy {np.__version__}, "
          f"torch {tv} (threads {tt})")
    head = f"{'row':<36}{'ours':>10}{'numpy':>10}{'torch':>10}{'ours/np':>9}{'ours/torch':>11}"
    print(head)
    print("-" * len(head))
    for name, ours, npy, tch in rows(1 << 20, (1024, 1024)):
        times = []
        for fn in (ours, npy, tch):
            if fn is None:
                times.append(None)
                continue
            time.sleep(SETTLE_S)
            times.append(time_steps(fn, args.warmup, args.repeat))
        t_ours, t_np, t_torch = times

        def ms(t):
            return f"{t * 1e3:8.2f}ms" if t is not None else f"{'-':>10}"

        def ratio(t, width, t_ours=t_ours):
            return f"{t_ours / t:>{width - 1}.2f}x" if t is not None else f"{'-':>{width}}"

        print(f"{name:<36}{ms(t_ours)}{ms(t_np)}{ms(t_torch)}{ratio(t_np, 9)}"
              f"{ratio(t_torch, 11)}")


if __name__ == "__main__":
    main()
