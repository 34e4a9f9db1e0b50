"""Where the time of one small op goes: `a + b` on one-element float32 tensors, taken apart
stage by stage, beside PyTorch's full op when it is installed.

    python bench/bench_dispatch.py [--number 200000] [--rounds 3]

Each line is the best of 5 timings of `number` back-to-back calls, in microseconds per call, and
the best over `rounds` rounds that alternate with PyTorch's. The first lines time the pieces an
op is made of on their own (the kernel call through cffi, a buffer, a buffer wrapped in a Tensor
in Python and in C, the op's forward in the C fast path of plain calls); the last ones time the
whole op, as a user calls it, without and with autograd recording. The last line times the
autograd engine: backward() through a chain of 100 multiplications of one-element tensors, per
node (the median of 200 backward calls, best over the rounds).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import timeit

# the environment as the user started the script: PyTorch's process starts from this, not from
# anything singa_tensor's import might add
USER_ENV = dict(os.environ)

import singa_tensor as st  # noqa: E402  (after USER_ENV is taken)
from singa_tensor.ops import _fast  # noqa: E402
from singa_tensor.ops._registry import int64s, kernel, ptr  # noqa: E402
from singa_tensor.tensor import Tensor  # noqa: E402


def best(fn, number: int) -> float:
    return min(timeit.repeat(fn, number=number, repeat=5)) / number * 1e6


# the engine's cost per node, run by both libraries (PyTorch's copy through TORCH_CODE)
CHAIN_CODE = """
def backward_per_node(mod, calls=200, length=100):
    import statistics, time
    x = mod.ones(1, requires_grad=True)
    c = mod.ones(1) * 1.0001
    times = []
    for i in range(calls + 20):
        y = x
        for _ in range(length):
            y = y * c
        loss = y.sum()
        x.grad = None
        t0 = time.perf_counter()
        loss.backward()
        if i >= 20:
            times.append(time.perf_counter() - t0)
    return statistics.median(times) / (length + 1) * 1e6
"""
exec(CHAIN_CODE)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--number", type=int, default=200_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--torch-python", default=os.environ.get("BENCH_TORCH_PYTHON", sys.executable),
                    help="python with PyTorch installed (default: this one, or "
                         "$BENCH_TORCH_PYTHON)")
    args = ap.parse_args()
    n, python = args.number, args.torch_python

    a = st.tensor([1.0], requires_grad=True)
    b = st.tensor([2.0], requires_grad=True)
    add = kernel(a, "add")
    one = int64s(a, (1,))
    pa, pb = ptr(a), ptr(b)
    out = st.empty(1)
    po = ptr(out)
    be = a._be

    rows = [
        ("kernel call through cffi", lambda: add(pa, pb, po, 1, one, one, one)),
        ("a buffer (Storage)", lambda: be.empty(1, st.float32)),
        ("a buffer in a new Tensor (Python)", lambda: Tensor._make(be.empty(1, st.float32), (1,),
                                                                  None, 0, st.float32,
                                                                  a._device, be)),
        ("a new Tensor (Tensor._empty, in C)", lambda: Tensor._empty((1,), st.float32,
                                                                     a._device, be)),
        ("forward: new Tensor + kernel call (C)", lambda: fast(a, b, handle)),
    ]
    handle = _fast.handle("binary", "add")
    fast = _fast.binary
    rows.append(("st: a + b, no_grad (dispatch + forward)", None))
    rows.append(("st: a + b, recorded for autograd", lambda: a + b))

    # ours and PyTorch's alternate, `rounds` times each; each figure is the best of its rounds
    ours: dict = {}
    peers: list = []
    chain = "backward(), per node of a 100-mul chain"
    for _ in range(args.rounds):
        for label, fn in rows:
            if fn is None:
                with st.no_grad():
                    t = best(lambda: a + b, n)
            else:
                t = best(fn, n)
            ours[label] = min(t, ours.get(label, t))
        t = backward_per_node(st)  # noqa: F821  (defined by CHAIN_CODE)
        ours[chain] = min(t, ours.get(chain, t))
        peer = torch_side(n, python)
        if peer is not None:
            peers.append(peer)
    print(f"singa_tensor {st.__version__}, {st.get_num_threads()} threads; us per call, best of "
          f"{args.rounds} rounds of 5 (ours and PyTorch's alternate)")
    for label, _ in rows:
        print(f"  {label:<58s} {ours[label]:7.3f}")
    print(f"  {'st: ' + chain:<58s} {ours[chain]:7.3f}")
    if not peers:
        print("  (PyTorch not installed for this python: no peer figure; see --torch-python)")
        return
    version = peers[0]["version"]
    rec, ng = min(p["recorded"] for p in peers), min(p["no_grad"] for p in peers)
    print(f"  {'torch ' + version + ': a + b, no_grad':<58s} {ng:7.3f}")
    print(f"  {'torch ' + version + ': a + b, recorded':<58s} {rec:7.3f}")
    node = min(p["node"] for p in peers)
    print(f"  {'torch ' + version + ': ' + chain:<58s} {node:7.3f}")
    print(f"ratio (recorded op): {ours[rows[-1][0]] / rec:.2f}x PyTorch, "
          f"(no_grad): {ours[rows[-2][0]] / ng:.2f}x, (backward per node): "
          f"{ours[chain] / node:.2f}x (PyTorch in its own process)")


TORCH_CODE = """
import json, timeit, torch
n = {n}
best = lambda fn: min(timeit.repeat(fn, number=n, repeat=5)) / n * 1e6
a = torch.tensor([1.0], requires_grad=True)
b = torch.tensor([2.0], requires_grad=True)
rec = best(lambda: a + b)
with torch.no_grad():
    ng = best(lambda: a + b)
exec({chain!r})
node = backward_per_node(torch)
print(json.dumps({{"version": torch.__version__, "recorded": rec, "no_grad": ng, "node": node}}))
"""


def torch_side(n: int, python: str) -> dict | None:
    r = subprocess.run([python, "-c", TORCH_CODE.format(n=n, chain=CHAIN_CODE)],
                       capture_output=True, text=True,
                       env=USER_ENV)
    if r.returncode != 0:
        return None
    return json.loads(r.stdout.strip().splitlines()[-1])


if __name__ == "__main__":
    main()
