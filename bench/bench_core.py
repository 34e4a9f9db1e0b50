"""Core CPU benchmarks: singa_tensor against numpy and PyTorch, measured in the same run.

Every row times the same computation on the same data in each library and prints the median
of repeated runs after warm-up, the throughput, and the time ratios ours/peer (below 1 means
singa_tensor is faster). PyTorch is optional: without it the torch columns read "-".

    python bench/bench_core.py            # full run
    python bench/bench_core.py --quick    # fewer repeats, for a smoke check
"""

from __future__ import annotations

import argparse
import ctypes
import glob
import importlib.util
import json
import os
import platform
import statistics
import subprocess
import sys
import time

import numpy as np

import singa_tensor as st

# PyTorch is timed in a child process of the same run (see main): loading it into this process
# made OpenBLAS matrix products here 20-40% slower (measured on a 2-core machine), which would
# have charged PyTorch's presence to the other columns.
torch = None
LIBS = {"ours", "numpy", "torch"}  # the libraries this process times


def median_time(fn, warmup: int, repeat: int, inner: int = 1) -> float:
    """Median seconds per call of fn over `repeat` samples of `inner` calls each."""
    for _ in range(warmup):
        fn()
    samples = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(inner):
            fn()
        samples.append((time.perf_counter() - t0) / inner)
    return statistics.median(samples)


def numpy_blas_threads():
    """Threads of numpy's bundled OpenBLAS, asked from the library itself (None if unknown)."""
    libs = os.path.join(os.path.dirname(np.__file__), os.pardir, "numpy.libs")
    for path in glob.glob(os.path.join(libs, "*openblas*.so*")):
        lib = ctypes.CDLL(path)
        for sym in ("scipy_openblas_get_num_threads64_", "openblas_get_num_threads64_",
                    "openblas_get_num_threads"):
            if hasattr(lib, sym):
                return int(getattr(lib, sym)())
    return None


class Row:
    def __init__(self, name: str, unit: str, work: float):
        self.name, self.unit, self.work = name, unit, work  # work: units per call
        self.times: dict[str, float | None] = {"ours": None, "numpy": None, "torch": None}


# Thread pools spin for a while after their last task (PyTorch's OpenMP/MKL pools for about
# 200 ms by default) and would then compete for the cores with whichever library is timed
# next in this process; a pause before each library's timing lets them all go idle.
SETTLE_S = 0.3


def run_row(row: Row, impls: dict, args) -> Row:
    for lib, fn in impls.items():
        if fn is not None and lib in LIBS:
            time.sleep(SETTLE_S)
            row.times[lib] = median_time(fn, args.warmup, args.repeat, getattr(fn, "inner", 1))
    return row


def repeated(fn, n: int):
    """Time fn as n back-to-back calls per sample (it is too short to time one at a time);
    the reported time is still per call."""
    fn.inner = n
    return fn


def check(name: str, ours, ref, rtol: float = 1e-3, atol: float = 1e-3) -> None:
    """Make sure what is timed computes the right thing before it is timed."""
    got = ours.detach().numpy() if isinstance(ours, st.Tensor) else np.asarray(ours)
    if not np.allclose(got, ref, rtol=rtol, atol=atol):
        raise SystemExit(f"bench {name}: singa_tensor result differs from numpy "
                         f"(max abs diff {np.max(np.abs(got - ref)):.3g})")


def bench_sgemm(args) -> Row:
    n = 1024
    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, n), dtype=np.float32)
    b = rng.standard_normal((n, n), dtype=np.float32)
    sa, sb = st.tensor(a), st.tensor(b)
    check("sgemm", st.matmul(sa, sb), a @ b, rtol=1e-3, atol=1e-2)
    impls = {"ours": lambda: st.matmul(sa, sb), "numpy": lambda: a @ b}
    if torch is not None:
        ta, tb = torch.from_numpy(a), torch.from_numpy(b)
        impls["torch"] = lambda: torch.mm(ta, tb)
    return run_row(Row("sgemm 1024x1024x1024 f32", "GFLOP/s", 2.0 * n**3 / 1e9), impls, args)


def bench_elementwise(args) -> list[Row]:
    n = 16 * 1024 * 1024
    rng = np.random.default_rng(1)
    x = rng.standard_normal(n, dtype=np.float32)
    y = rng.standard_normal(n, dtype=np.float32)
    sx, sy = st.tensor(x), st.tensor(y)
    tx = ty = None
    if torch is not None:
        tx, ty = torch.from_numpy(x), torch.from_numpy(y)
    gb3, gb2 = 3 * 4 * n / 1e9, 2 * 4 * n / 1e9  # bytes read + written per call
    cases = [
        ("add", gb3, lambda: sx + sy, lambda: x + y, lambda: tx + ty, x + y),
        ("mul", gb3, lambda: sx * sy, lambda: x * y, lambda: tx * ty, x * y),
        ("exp", gb2, lambda: st.exp(sx), lambda: np.exp(x), lambda: torch.exp(tx), np.exp(x)),
        ("relu", gb2, lambda: st.relu(sx), lambda: np.maximum(x, 0),
         lambda: torch.relu(tx), np.maximum(x, 0)),
    ]
    rows = []
    for name, gb, ours, ref_np, ref_torch, expected in cases:
        check(name, ours(), expected, rtol=1e-5, atol=1e-6)
        impls = {"ours": ours, "numpy": ref_np, "torch": ref_torch if torch else None}
        rows.append(run_row(Row(f"{name} 16M f32", "GB/s", gb), impls, args))
    return rows


def np_softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def bench_rows_reduce(args) -> list[Row]:
    n = 4096
    x = np.random.default_rng(2).standard_normal((n, n), dtype=np.float32)
    sx = st.tensor(x)
    tx = torch.from_numpy(x) if torch is not None else None
    gb = 4 * n * n / 1e9
    rows = []
    check("sum", st.sum(sx, dim=-1), x.sum(-1), rtol=1e-4, atol=1e-3)
    rows.append(run_row(Row("sum last axis 4096x4096 f32", "GB/s", gb), {
        "ours": lambda: st.sum(sx, dim=-1), "numpy": lambda: x.sum(-1),
        "torch": (lambda: tx.sum(-1)) if torch else None}, args))
    softmax = getattr(st, "softmax", None)
    row = Row("softmax last axis 4096x4096 f32", "GB/s", 2 * gb)
    if softmax is None:
        print("note: st.softmax is not available yet; its 'ours' column is empty",
              file=sys.stderr)
    else:
        check("softmax", softmax(sx, dim=-1), np_softmax(x), rtol=1e-4, atol=1e-6)
    rows.append(run_row(row, {
        "ours": (lambda: softmax(sx, dim=-1)) if softmax else None,
        "numpy": lambda: np_softmax(x),
        "torch": (lambda: torch.softmax(tx, -1)) if torch else None}, args))
    return rows


def bench_dispatch(args) -> Row:
    ops = 2000
    a = st.tensor([1.0], requires_grad=True)
    b = st.tensor([2.0], requires_grad=True)
    check("dispatch", a + b, np.array([3.0]))
    impls = {"ours": repeated(lambda: a + b, ops), "numpy": None}
    if torch is not None:
        ta = torch.tensor([1.0], requires_grad=True)
        tb = torch.tensor([2.0], requires_grad=True)
        impls["torch"] = repeated(lambda: ta + tb, ops)
    return run_row(Row("dispatch a+b 1-elem requires_grad", "Mop/s", 1e-6), impls, args)


def bench_mlp_step(args) -> Row:
    """One linear layer step without bias: y = x @ W, loss = sum(y), backward to x and W
    (three 512^3 products). numpy does the same three products by hand."""
    n = 512
    rng = np.random.default_rng(3)
    x = rng.standard_normal((n, n), dtype=np.float32)
    w = rng.standard_normal((n, n), dtype=np.float32)
    sx = st.tensor(x, requires_grad=True)
    sw = st.tensor(w, requires_grad=True)

    def ours():
        sx.grad = sw.grad = None
        st.matmul(sx, sw).sum().backward()

    ones = np.ones((n, n), dtype=np.float32)

    def numpy_step():
        x @ w
        return ones @ w.T, x.T @ ones

    ours()
    gx, gw = numpy_step()
    check("mlp step dx", sx.grad, gx, rtol=1e-4, atol=1e-2)
    check("mlp step dW", sw.grad, gw, rtol=1e-4, atol=1e-2)
    impls = {"ours": ours, "numpy": numpy_step}
    if torch is not None:
        tx = torch.from_numpy(x.copy()).requires_grad_()
        tw = torch.from_numpy(w.copy()).requires_grad_()

        def torch_step():
            tx.grad = tw.grad = None
            torch.mm(tx, tw).sum().backward()

        impls["torch"] = torch_step
    return run_row(Row("matmul fwd+bwd 512x512 layer step", "GFLOP/s", 3 * 2.0 * n**3 / 1e9),
                   impls, args)


def fmt_time(s: float | None) -> str:
    if s is None:
        return "-"
    if s < 1e-3:
        return f"{s * 1e6:.2f} us"
    return f"{s * 1e3:.3f} ms"


def fmt_rate(row: Row, s: float | None) -> str:
    return "-" if s is None else f"{row.work / s:.1f}"


def fmt_ratio(a: float | None, b: float | None) -> str:
    return "-" if a is None or b is None else f"{a / b:.2f}x"


def print_table(rows: list[Row]) -> None:
    head = ["benchmark", "ours", "numpy", "torch", "ours/np", "ours/torch", "unit", "ours",
            "numpy", "torch"]
    lines = []
    for r in rows:
        t = r.times
        lines.append([r.name, fmt_time(t["ours"]), fmt_time(t["numpy"]), fmt_time(t["torch"]),
                      fmt_ratio(t["ours"], t["numpy"]), fmt_ratio(t["ours"], t["torch"]),
                      r.unit, fmt_rate(r, t["ours"]), fmt_rate(r, t["numpy"]),
                      fmt_rate(r, t["torch"])])
    widths = [max(len(x[i]) for x in lines + [head]) for i in range(len(head))]
    print("  ".join(h.ljust(w) if i == 0 else h.rjust(w) for i, (h, w) in
                    enumerate(zip(head, widths))))
    print("  ".join("-" * w for w in widths))
    for line in lines:
        print("  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in
                        enumerate(zip(line, widths))))


def collect(args) -> list[Row]:
    rows = [bench_sgemm(args)]
    rows += bench_elementwise(args)
    rows += bench_rows_reduce(args)
    rows.append(bench_dispatch(args))
    rows.append(bench_mlp_step(args))
    return rows


def torch_worker(args) -> None:
    """Time only the PyTorch column and print it as JSON (run by main in a child process)."""
    global torch, LIBS
    import torch as _torch

    torch, LIBS = _torch, {"torch"}
    rows = collect(args)
    print(json.dumps({"version": torch.__version__, "threads": torch.get_num_threads(),
                      "times": {r.name: r.times["torch"] for r in rows}}))


def torch_column(args) -> dict | None:
    if args.no_torch or importlib.util.find_spec("torch") is None:
        return None
    cmd = [sys.executable, os.path.abspath(__file__), "--torch-worker",
           "--repeat", str(args.repeat), "--warmup", str(args.warmup)]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv=None) -> None:
    global LIBS
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="fewer repeats (a smoke check)")
    p.add_argument("--repeat", type=int, default=None, help="timed samples per measurement")
    p.add_argument("--warmup", type=int, default=None, help="untimed calls before timing")
    p.add_argument("--no-torch", action="store_true", help="skip the PyTorch columns")
    p.add_argument("--torch-worker", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    args.repeat = args.repeat or (3 if args.quick else 11)
    args.warmup = args.warmup or (1 if args.quick else 3)
    if args.torch_worker:
        torch_worker(args)
        return

    LIBS = {"ours", "numpy"}
    rows = collect(args)
    peer = torch_column(args)
    if peer is not None:
        for r in rows:
            r.times["torch"] = peer["times"].get(r.name)
    print(f"python {platform.python_version()}, numpy {np.__version__}, singa_tensor "
          f"{st.__version__}, torch {peer['version'] if peer else 'not used'}")
    print(f"cpu cores (os.cpu_count): {os.cpu_count()}; threads: singa_tensor "
          f"{st.get_num_threads()}, numpy OpenBLAS {numpy_blas_threads() or 'unknown'}, torch "
          f"{peer['threads'] if peer else '-'} (timed in a child process of this run)")
    print(f"median of {args.repeat} runs after {args.warmup} warm-up; times per call; ratios are "
          "ours/peer time (below 1.00x: ours is faster); rates are work per second\n")
    print_table(rows)
    g = rows[0]
    if g.times["ours"] and g.times["numpy"]:
        share = g.times["numpy"] / g.times["ours"]
        print(f"sgemm: ours reaches {share:.2f}x numpy's GFLOP/s (target >= 0.90x): "
              f"{'met' if share >= 0.9 else 'NOT met'}")


if __name__ == "__main__":
    main()
