"""Two ways of running one training step, timed against each other in one process.

    python bench/bench_step_paths.py            # 10 alternating rounds, median of 20 steps each
    python bench/bench_step_paths.py --quick    # 2 rounds of 5 steps (a smoke check)

Each row builds one of bench_train.py's models (same shapes, data and initial weights) and
times its forward + backward + SGD step with a switch set one way, then the other, alternating
which goes first, so that both see the same machine: this machine's step times drift by tens of
percent within a minute, more than the differences timed here. A row prints the median over
rounds of each way's median step and their ratio (below 1.00x: the first way is faster).
Before timing, both ways' losses over three steps from the same weights are compared.

Rows:
- self-attention on the in-projection's output read where it lies (the packed op) against
  the heads split into copies (`nn.MultiheadAttention` without masks, CPU);
- the optimizer's update of a whole parameter list in one kernel call against one call per
  parameter (`foreach=None` against `foreach=False`).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_train as bt  # noqa: E402  (the models and their data)


def _switches(st):
    """(row name, model name, {way: setter(optimizer)}) of every row."""
    from singa_tensor.ops import attention

    real = attention.use_packed

    def packed(on):
        def set_(opt):
            attention.use_packed = real if on else (lambda *a: False)
        return set_

    def foreach(value):
        def set_(opt):
            attention.use_packed = real
            for g in opt.param_groups:
                g["foreach"] = value
        return set_

    return [
        ("Transformer LM: packed / split heads", "Transformer",
         {"packed": packed(True), "split": packed(False)}),
        ("Transformer LM: list / per-parameter update", "Transformer",
         {"list": foreach(None), "per-param": foreach(False)}),
        ("MLP: list / per-parameter update", "MLP",
         {"list": foreach(None), "per-param": foreach(False)}),
    ]


def _build(st, model_name: str):
    lib = bt.Lib(st, "ours")
    made = []

    class SGD(st.optim.SGD):  # keeps the step's optimizer, to flip its switch
        def __init__(self, *a, **k):
            super().__init__(*a, **k)
            made.append(self)

    lib.optim = type("Optim", (), {"SGD": SGD})
    name, builder, batch, _ = next(m for m in bt.MODELS if m[0].startswith(model_name))
    step, _ = bt.make_step(lib, builder, batch, seed=0)
    return name, step, made[0]


def _median_step(step, n: int) -> float:
    times = []
    for _ in range(n):
        t = time.perf_counter()
        step()
        times.append(time.perf_counter() - t)
    return statistics.median(times) * 1e3


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="2 rounds of 5 steps (a smoke check)")
    p.add_argument("--rounds", type=int, default=10)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--threads", type=int, default=2)
    args = p.parse_args()
    rounds, steps = (2, 5) if args.quick else (args.rounds, args.steps)
    os.environ.setdefault("OMP_NUM_THREADS", str(args.threads))
    import singa_tensor as st

    st.set_num_threads(args.threads)
    bt.st = st
    print(f"singa_tensor {st.__version__}, {args.threads} threads; ms per step, median over "
          f"{rounds} alternating rounds of the median of {steps} steps")
    print(f"{'row':48s} {'first':>10s} {'second':>10s}  ratio")
    for row, model_name, ways in _switches(st):
        losses = {}
        for way, set_ in ways.items():  # the same three steps from the same weights
            _, step, opt = _build(st, model_name)
            set_(opt)
            losses[way] = [float(step().item()) for _ in range(3)]
        a, b = losses.values()
        if not np.allclose(a, b, rtol=1e-5):
            raise SystemExit(f"{row}: the two ways' losses differ: {a} against {b}")
        _, step, opt = _build(st, model_name)
        for _ in range(5):
            step()
        times = {way: [] for way in ways}
        order = list(ways)
        for r in range(rounds):
            for way in (order if r % 2 == 0 else order[::-1]):
                ways[way](opt)
                step()
                times[way].append(_median_step(step, steps))
        first, second = (statistics.median(times[w]) for w in order)
        print(f"{row:48s} {first:10.3f} {second:10.3f}  {first / second:.2f}x")
    _switches(st)[0][2]["packed"](None)  # leave the module as it was


if __name__ == "__main__":
    main()
