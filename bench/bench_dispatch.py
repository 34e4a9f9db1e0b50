"""Where the time of one small op goes: `a + b` on one-element float32 tensors, taken apart
stage by stage, beside PyTorch's full op when it is installed.

    python bench/bench_dispatch.py [--number 200000]

Each line is the best of 5 timings of `number` back-to-back calls, in microseconds per call.
The first lines time the pieces an op is made of on their own (the kernel call through cffi, a
buffer, a buffer wrapped in a Tensor, the op's forward); the last ones time the whole op, as a
user calls it, without and with autograd recording.
"""

from __future__ import annotations

import argparse
import timeit

import singa_tensor as st
from singa_tensor.ops import elementwise as E
from singa_tensor.ops._registry import int64s, kernel, ptr
from singa_tensor.tensor import Tensor


def best(fn, number: int) -> float:
    return min(timeit.repeat(fn, number=number, repeat=5)) / number * 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--number", type=int, default=200_000)
    n = ap.parse_args().number

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
        ("a buffer in a new Tensor", lambda: Tensor._empty((1,), st.float32, a._device, be)),
        ("forward: new Tensor + kernel call", lambda: E._run_binary(a, b, "add")),
    ]
    with st.no_grad():
        rows.append(("st: a + b, no_grad (dispatch + forward)", lambda: a + b))
    rows.append(("st: a + b, recorded for autograd", lambda: a + b))

    print(f"singa_tensor {st.__version__}, {st.get_num_threads()} threads; us per call, best of 5")
    for label, fn in rows:
        if label.startswith("st: a + b, no_grad"):
            with st.no_grad():
                t = best(fn, n)
        else:
            t = best(fn, n)
        print(f"  {label:<44s} {t:7.3f}")
    ours = t  # the last row: the recorded op
    try:
        import torch
    except ImportError:
        print("  (PyTorch not installed: no peer figure)")
        return
    ta = torch.tensor([1.0], requires_grad=True)
    tb = torch.tensor([2.0], requires_grad=True)
    peer = best(lambda: ta + tb, n)
    with torch.no_grad():
        peer_ng = best(lambda: ta + tb, n)
    print(f"  {'torch ' + torch.__version__ + ': a + b, no_grad':<44s} {peer_ng:7.3f}")
    print(f"  {'torch ' + torch.__version__ + ': a + b, recorded':<44s} {peer:7.3f}")
    print(f"ratio (recorded op): {ours / peer:.2f}x PyTorch")


if __name__ == "__main__":
    main()
