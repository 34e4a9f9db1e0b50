"""The kernels built twice, AVX2 and AVX-512, timed against each other in one process.

    python bench/bench_simd.py              # 16 alternating rounds, best of 15 calls in each
    python bench/bench_simd.py --quick      # 4 rounds (a smoke check)

The CPU library is compiled for AVX2 + FMA; the float32 unary kernels, their gradients, the
recurrent layers' few-row step products, softmax cross entropy and the attention kernels' block
work also come compiled for AVX-512 and run where the CPU has it (docs/performance.md).
`st_cpu_avx512` switches between the builds, so both are timed here on the same data, in
alternating rounds: each row prints the median over rounds of each build's best call, and their
ratio (below 1.00x: the AVX-512 build is faster). Before timing, each row's results are compared
between the builds: bit for bit for the unary kernels, to float32 rounding for the LSTM, cross
entropy and attention. On a CPU without AVX-512 the script says so and stops.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np


def rows(st):
    """(name, callable returning its result tensor, exact?) of every row."""
    x = st.tensor(np.random.default_rng(0).standard_normal((512, 3072)).astype(np.float32))
    xg = x.detach().requires_grad_()
    g = st.tensor(np.random.default_rng(1).standard_normal((512, 3072)).astype(np.float32))
    out = []
    for name, fn in [("exp", st.exp), ("sigmoid", st.sigmoid), ("tanh", st.tanh),
                     ("gelu", st.nn.functional.gelu), ("silu", st.nn.functional.silu)]:
        out.append((f"{name} forward 512x3072", lambda fn=fn: fn(x), True))

    def grad(fn):
        xg.grad = None
        fn(xg).backward(g)
        return xg.grad

    for name, fn in [("sigmoid", st.sigmoid), ("tanh", st.tanh)]:
        out.append((f"{name} fwd+bwd 512x3072", lambda fn=fn: grad(fn), True))
    st.manual_seed(0)
    lstm = st.nn.LSTM(128, 256, 2)
    xs = st.tensor(np.random.default_rng(2).standard_normal((32, 8, 128)).astype(np.float32),
                   requires_grad=True)

    def lstm_step():
        xs.grad = None
        y, _ = lstm(xs)
        y.sum().backward()
        return xs.grad

    out.append(("LSTM 2x256, seq 32, batch 8, fwd+bwd", lstm_step, False))
    logits = st.tensor(np.random.default_rng(3).standard_normal((512, 1000)).astype(np.float32),
                       requires_grad=True)
    target = st.tensor(np.random.default_rng(4).integers(0, 1000, 512))
    ce = st.nn.functional.cross_entropy
    out.append(("cross entropy forward 512x1000", lambda: ce(logits.detach(), target), False))

    def ce_step():
        logits.grad = None
        ce(logits, target).backward()
        return logits.grad

    out.append(("cross entropy fwd+bwd 512x1000", ce_step, False))
    # the Transformer LM's attention: 8 x 4 heads of 64 x 32
    qkv = [st.tensor(np.random.default_rng(5 + i).standard_normal((8, 4, 64, 32))
                     .astype(np.float32), requires_grad=True) for i in range(3)]
    sdpa = st.nn.functional.scaled_dot_product_attention
    out.append(("attention forward 8x4 heads 64x32",
                lambda: sdpa(*(t.detach() for t in qkv)), False))

    def attention_step():
        for t in qkv:
            t.grad = None
        sdpa(*qkv).sum().backward()
        return qkv[0].grad

    out.append(("attention fwd+bwd 8x4 heads 64x32", attention_step, False))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--rounds", type=int, default=16)
    ap.add_argument("--calls", type=int, default=15)
    args = ap.parse_args()
    if args.quick:
        args.rounds, args.calls = 4, 5
    import singa_tensor as st
    from singa_tensor.backend import cpu

    before = cpu.lib.st_cpu_avx512(-1)
    if cpu.lib.st_cpu_avx512(1) != 1:
        print("this CPU has no AVX-512: the AVX2 build is the only one")
        return
    print(f"singa_tensor {st.__version__}, {st.get_num_threads()} threads; ms per call, "
          f"median over {args.rounds} alternating rounds of the best of {args.calls} calls")
    print(f"{'row':<40}{'avx2':>10}{'avx512':>10}{'ratio':>9}")
    try:
        for name, fn, exact in rows(st):
            res = {}
            for mode in (0, 1):
                cpu.lib.st_cpu_avx512(mode)
                res[mode] = fn().numpy()
            a, b = res[0], res[1]
            same = np.array_equal(a, b) if exact else np.allclose(a, b, rtol=1e-4, atol=1e-5)
            if not same:
                raise SystemExit(f"bench: {name}: the builds' results differ")
            times = {0: [], 1: []}
            for r in range(args.rounds):
                for mode in (r % 2, 1 - r % 2):
                    cpu.lib.st_cpu_avx512(mode)
                    fn()
                    best = float("inf")
                    for _ in range(args.calls):
                        t0 = time.perf_counter()
                        fn()
                        best = min(best, time.perf_counter() - t0)
                    times[mode].append(best * 1e3)
            t2, t5 = statistics.median(times[0]), statistics.median(times[1])
            print(f"{name:<40}{t2:>10.3f}{t5:>10.3f}{t5 / t2:>8.2f}x")
    finally:
        cpu.lib.st_cpu_avx512(before)


if __name__ == "__main__":
    main()
