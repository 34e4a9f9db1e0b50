"""The CPU backend's two paths for float32 matrix products, timed against each other.

    python bench/bench_cpu_paths.py            # 200 alternating calls per shape, 8 step rounds
    python bench/bench_cpu_paths.py --quick    # 40 calls, 2 rounds (a smoke check)

With oneDNN installed, a float32 product of at least 2^22 multiply-adds (16 rows and columns or
more, no batch) runs on oneDNN's matmul instead of OpenBLAS, and such a linear layer adds its
bias in the product instead of copying it into the output first (backend/cpu.py). This script
times both paths in one process, alternating call by call (the median of each):

- `gemm`: st_gemm_f32 on the shapes of bench_train.py's MLP and Transformer LM (forward,
  and both gradients' layouts), OpenBLAS against oneDNN;
- `linear`: F.linear with a bias, the copy + GEMM against the bias in oneDNN's product;
- `step`: whole training steps of bench_train.py's MLP, Transformer LM and LSTM LM with every
  float32 product on OpenBLAS (and the bias copied) against the rule above, in alternating
  rounds (median over rounds of each round's median step).

Ratios below 1.00x: the oneDNN path is faster. Each row's results are compared first (to
float32 rounding: the two paths sum in different orders). Without oneDNN it says so and stops.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import numpy as np

GEMMS = [  # ta, tb, m, n, k
    (0, 1, 64, 512, 784), (0, 0, 64, 784, 512), (1, 0, 512, 784, 64),
    (0, 1, 64, 512, 512), (0, 0, 64, 512, 512), (1, 0, 512, 512, 64),
    (0, 1, 512, 384, 128), (0, 0, 512, 128, 384), (1, 0, 384, 128, 512),
    (0, 1, 512, 512, 128), (0, 1, 512, 128, 512), (0, 1, 512, 1000, 128),
    (0, 0, 512, 128, 1000), (1, 0, 1000, 128, 512),
]
LINEARS = [(512, 128, 384), (512, 128, 512), (512, 512, 128), (256, 256, 1000), (64, 784, 512)]


def alternate(f0, f1, calls: int) -> tuple[float, float]:
    t = ([], [])
    for i in range(calls):
        for j, f in ((0, f0), (1, f1)) if i % 2 else ((1, f1), (0, f0)):
            t0 = time.perf_counter()
            f()
            t[j].append(time.perf_counter() - t0)
    return statistics.median(t[0][2:]) * 1e6, statistics.median(t[1][2:]) * 1e6


def gemm_row(cpu, onednn, ta, tb, m, n, k, calls: int) -> tuple[float, float]:
    """(OpenBLAS us, oneDNN us) for one st_gemm_f32 call shape."""
    ffi = cpu.ffi
    r = np.random.default_rng(m * n + k)
    a = r.standard_normal((k, m) if ta else (m, k)).astype(np.float32)
    b = r.standard_normal((n, k) if tb else (k, n)).astype(np.float32)
    c0, c1 = np.zeros((m, n), np.float32), np.zeros((m, n), np.float32)
    pa, pb = ffi.from_buffer("float[]", a), ffi.from_buffer("float[]", b)
    p0, p1 = ffi.from_buffer("float[]", c0), ffi.from_buffer("float[]", c1)
    lda, ldb = a.shape[1], b.shape[1]
    plan = onednn.matmul_plan("float32", ta, tb, m, n, k, lda, ldb, n, 1, 0, 0, 0, False,
                              cpu.lib.st_num_threads())

    def blas():
        cpu.lib.st_gemm_f32(ta, tb, m, n, k, 1.0, pa, lda, pb, ldb, 0.0, p0, n, 1, 0, 0, 0)

    def dnnl():
        plan.run(pa, pb, p1)

    blas()
    dnnl()
    if not np.allclose(c0, c1, rtol=1e-4, atol=1e-4 * np.abs(c0).max()):
        raise SystemExit(f"bench: gemm {m}x{n}x{k}: the two paths disagree")
    return alternate(blas, dnnl, calls)


def gemm_rows(st, cpu, onednn, calls: int) -> None:
    print(f"{'gemm (ta tb m x n x k)':<34}{'openblas':>11}{'onednn':>11}{'ratio':>8}")
    for ta, tb, m, n, k in GEMMS:
        t0, t1 = gemm_row(cpu, onednn, ta, tb, m, n, k, calls)
        print(f"{ta}{tb} {m:>5} x {n:>5} x {k:>5}{'':<12}{t0:>9.0f}us{t1:>9.0f}us{t1 / t0:>7.2f}x")


def linear_row(st, cpu, m, k, n, calls: int) -> tuple[float, float]:
    """(copy + GEMM us, bias in the product us) for F.linear of one shape."""
    import singa_tensor.nn.functional as F

    real = cpu.linear_plan
    x, w, b = st.randn(m, k), st.randn(n, k), st.randn(n)

    def run(plan):
        def f():
            cpu.linear_plan = plan
            try:
                return F.linear(x, w, b)
            finally:
                cpu.linear_plan = real
        return f

    f0, f1 = run(lambda *a: None), run(real)
    if not np.allclose(f0().numpy(), f1().numpy(), rtol=1e-4, atol=1e-3):
        raise SystemExit(f"bench: linear {m}x{n}x{k}: the two paths disagree")
    return alternate(f0, f1, calls)


def linear_rows(st, cpu, calls: int) -> None:
    print(f"{'linear + bias (m x n x k)':<34}{'copy+gemm':>11}{'in product':>11}{'ratio':>8}")
    for m, k, n in LINEARS:
        t0, t1 = linear_row(st, cpu, m, k, n, calls)
        print(f"{m:>5} x {n:>5} x {k:>5}{'':<15}{t0:>9.0f}us{t1:>9.0f}us{t1 / t0:>7.2f}x")


def step_rows(st, cpu, rounds: int) -> None:
    from singa_tensor.ops import _registry

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import bench_train as bt

    bt.st = st
    lib = bt.Lib(st, "ours")
    wrapped = cpu.kernel("st_gemm_f32")
    real_plan = cpu.linear_plan

    def use(onednn_path: bool) -> None:
        cpu._wrapped["st_gemm_f32"] = wrapped if onednn_path else cpu.lib.st_gemm_f32
        cpu.linear_plan = real_plan if onednn_path else (lambda *a: None)
        _registry._kernel_cache.clear()

    print(f"{'training step (ms)':<34}{'openblas':>11}{'rule':>11}{'ratio':>8}")
    try:
        for name in ("MLP", "Transformer", "LSTM"):
            model = next(m for m in bt.MODELS if m[0].startswith(name))
            step, _ = bt.make_step(lib, model[1], model[2], 0)
            res = ([], [])
            for r in range(rounds):
                for mode in (r % 2, 1 - r % 2):
                    use(bool(mode))
                    for _ in range(3):
                        step()
                    ts = []
                    for _ in range(20):
                        t0 = time.perf_counter()
                        step()
                        ts.append(time.perf_counter() - t0)
                    res[mode].append(statistics.median(ts) * 1e3)
            t0, t1 = statistics.median(res[0]), statistics.median(res[1])
            print(f"{model[0]:<34}{t0:>11.2f}{t1:>11.2f}{t1 / t0:>7.2f}x")
    finally:
        use(True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--no-steps", action="store_true", help="skip the training-step rows")
    args = ap.parse_args()
    if args.quick:
        args.calls, args.rounds = 40, 2
    import singa_tensor as st
    from singa_tensor.backend import cpu, onednn

    if not onednn.is_available():
        print(f"oneDNN is not usable ({onednn.unavailable_reason()}): only OpenBLAS runs")
        return
    print(f"singa_tensor {st.__version__}, {st.get_num_threads()} threads, "
          f"{st.backends.cpu.get_cpu_capability()}; medians of alternating calls")
    gemm_rows(st, cpu, onednn, args.calls)
    linear_rows(st, cpu, args.calls)
    if not args.no_steps:
        step_rows(st, cpu, args.rounds)


if __name__ == "__main__":
    main()
