"""CUDA benchmarks: singa_tensor against PyTorch CUDA, measured in the same process and run.

Rows: memory-bound elementwise ops and last-axis reductions (GB/s, ratio of throughputs),
training steps of the models of bench_train.py plus ResNet-18 at batch 64 (ms/step, ratio of
times), the same steps under bfloat16 autocast and with TF32 (against PyTorch doing the same),
square matrix products in float32, TF32 and bfloat16, and the cost of one tiny op (launch
overhead). Every sample is bracketed by device
synchronisation; the median over samples after warm-up is reported. Each side of each row runs
in its own try block, so one failing case prints its error in its row and the run goes on.

    python bench/gpu.py                   # full run
    python bench/gpu.py --quick           # fewer repeats (the GPU check uses this, < 2 min)
    python bench/gpu.py --only add,resnet18
    python bench/gpu.py --quick --only precision   # bf16 autocast, TF32 and GEMM rows
"""

from __future__ import annotations

import argparse
import gc
import math
import os
import platform
import statistics
import sys
import time
import traceback
from dataclasses import dataclass, field

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_train as bt  # noqa: E402  (the model definitions, shared with the CPU benchmark)

st = None  # singa_tensor, imported in main
torch = None  # PyTorch, when it is installed and sees a CUDA device

SIDES = ("ours", "torch")
BIG, SMALL = 256 * 2**20, 64 * 2**20  # elements of the elementwise vectors
MAT = 16384  # the reductions run over the last axis of a MAT x MAT matrix
LAUNCH_OPS = 10_000  # tiny ops per launch-overhead sample
DEVICE = "cuda"
BW_TARGET, STEP_TARGET = 0.8, 1.5  # from issue 7: throughput ratio >=, step-time ratio <=
deadline = math.inf  # perf_counter time past which timing stops at the first chance (--budget)


@dataclass
class Plan:
    """Repeat counts. `cap_s` bounds one side of one row: timing stops early (after at least
    three samples) once it is spent, so a slow kernel cannot blow the GPU check's time."""

    bw_warmup: int
    bw_reps: int
    bw_inner: int
    check_steps: int
    step_warmup: int
    steps: int
    launch_reps: int
    cap_s: float


QUICK = Plan(bw_warmup=2, bw_reps=5, bw_inner=3, check_steps=5, step_warmup=2, steps=10,
             launch_reps=3, cap_s=6.0)
FULL = Plan(bw_warmup=5, bw_reps=21, bw_inner=5, check_steps=5, step_warmup=10, steps=50,
            launch_reps=7, cap_s=30.0)


@dataclass
class Row:
    label: str
    kind: str  # "bw": ratio of throughputs; "time": ratio of times
    target: float | None = None
    gbytes: float = 0.0  # GB moved per call, for "bw" rows
    s: dict = field(default_factory=lambda: dict.fromkeys(SIDES))  # median s per call
    notes: list = field(default_factory=list)
    errors: list = field(default_factory=list)  # (side, one-line message, traceback text)
    bad: bool = False  # the check before timing failed: the times are not comparable

    def fail(self, side: str, exc: BaseException) -> None:
        msg = f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc) else ''}"
        self.errors.append((side, msg, "".join(traceback.format_exception(exc)[-4:])))


# ---- devices and timing ------------------------------------------------------------------------
def sync(side: str) -> None:
    (st.cuda.synchronize if side == "ours" else torch.cuda.synchronize)()


def sync_all() -> None:
    """Drain both libraries' queues so no earlier work is charged to the next sample."""
    for side in active_sides():
        sync(side)


def active_sides() -> tuple:
    return SIDES if torch is not None else ("ours",)


def lib(side: str):
    return st if side == "ours" else torch


def out_of_time(start: float, cap_s: float) -> bool:
    now = time.perf_counter()
    return now - start > cap_s or now > deadline


def timed(side: str, fn, warmup: int, reps: int, inner: int, cap_s: float) -> float:
    """Median seconds per call of fn; each sample is `inner` calls ended by a device sync.
    Past `cap_s` it stops after three samples, past the run's deadline after one."""
    start = time.perf_counter()
    sync_all()
    for _ in range(warmup):
        fn()
        if out_of_time(start, cap_s):
            break
    sync_all()
    samples = []
    while len(samples) < reps:
        t0 = time.perf_counter()
        for _ in range(inner):
            fn()
        sync(side)
        samples.append((time.perf_counter() - t0) / inner)
        if out_of_time(start, cap_s) and (len(samples) >= 3 or time.perf_counter() > deadline):
            break
    return statistics.median(samples)


def free_memory() -> None:
    gc.collect()
    if torch is not None:
        torch.cuda.empty_cache()
    empty = getattr(st.cuda, "empty_cache", None)
    if empty is not None:
        try:
            empty()
        except Exception:  # only housekeeping: the rows still run, with less memory free
            pass


def is_oom(exc: BaseException) -> bool:
    return isinstance(exc, MemoryError) or "memory" in f"{type(exc).__name__} {exc}".lower()


# ---- data ----------------------------------------------------------------------------------------
class Data:
    """Device inputs shared by the rows of one run: the same values in both libraries."""

    def __init__(self):
        self.cache: dict = {}
        self.n: int | None = None  # vector length actually used (BIG, or SMALL on fallback)
        self.fallback = ""

    def pair(self, shape: tuple, seed: int) -> dict:
        key = (shape, seed)
        if key not in self.cache:
            if torch is not None:  # drawing on the GPU is much faster than numpy for 1 GiB
                g = torch.Generator(device=DEVICE).manual_seed(seed)
                t = torch.randn(shape, device=DEVICE, generator=g)
                host = t.cpu().numpy()
            else:
                t, host = None, np.random.default_rng(seed).standard_normal(shape, np.float32)
            self.cache[key] = {"ours": st.tensor(host, device=DEVICE), "torch": t}
        return self.cache[key]

    def vectors(self) -> tuple[dict, dict]:
        """Two length-n float32 vectors; n is BIG unless the device is short of memory."""
        if self.n is None:
            self.n = BIG
            if torch is not None:
                free, _ = torch.cuda.mem_get_info()
                need = 12 * 4 * BIG  # inputs, outputs, checks and pool slack of both libraries
                if free < need:
                    self.n = SMALL
                    self.fallback = f"{free / 2**30:.0f} GiB free < {need / 2**30:.0f} GiB"
        try:
            return self.pair((self.n,), 1), self.pair((self.n,), 2)
        except Exception as e:
            if self.n == SMALL or not is_oom(e):
                raise
            self.clear()
            self.n, self.fallback = SMALL, f"out of memory at {BIG >> 20}M ({type(e).__name__})"
            return self.pair((self.n,), 1), self.pair((self.n,), 2)

    def clear(self) -> None:
        self.cache.clear()
        free_memory()


# ---- rows ----------------------------------------------------------------------------------------
def compare(row: Row, outs: dict, rtol: float, atol: float) -> None:
    """Check ours against PyTorch on the full output (on the GPU, through a host copy)."""
    if "ours" not in outs:
        return
    if "torch" not in outs:
        row.notes.append("unchecked (no torch result)")
        return
    want = outs["torch"]
    got = torch.from_numpy(outs["ours"].cpu().numpy()).to(want.device)
    if tuple(got.shape) != tuple(want.shape):
        row.bad = True
        row.notes.append(f"shape {tuple(got.shape)} != torch {tuple(want.shape)}")
        return
    nbad = int((~torch.isclose(got, want, rtol=rtol, atol=atol)).sum())
    diff = float((got - want).abs().max())
    if nbad:
        row.bad = True
        row.notes.append(f"MISMATCH {nbad} of {want.numel()} (max|d| {diff:.3g})")
    else:
        row.notes.append(f"checked (max|d| {diff:.2g})")


def bandwidth_row(data: Data, plan: Plan, name: str) -> Row:
    op, per_elem, rtol, atol = BANDWIDTH[name]
    if name in ("sum", "softmax"):
        x = data.pair((MAT, MAT), 3)
        args, numel, size = (x, x), MAT * MAT, f"{MAT}x{MAT}"
        what = f"{name} last axis {size} f32"
        gbytes = (per_elem * numel + (4 * MAT if name == "sum" else 0)) / 1e9
    else:
        a, b = data.vectors()
        args, numel = (a, b), data.n
        what = f"{name} {numel >> 20}M f32"
        gbytes = per_elem * numel / 1e9
    row = Row(what, "bw", BW_TARGET, gbytes)
    if data.fallback and name not in ("sum", "softmax"):
        row.notes.append(f"fallback: {data.fallback}")
    outs = {}
    for side in active_sides():
        try:
            outs[side] = op(lib(side), args[0][side], args[1][side])
            sync(side)
        except Exception as e:
            row.fail(side, e)
    try:
        compare(row, outs, rtol, atol)
    except Exception as e:
        row.notes.append(f"check failed: {type(e).__name__}: {e}"[:80])
    del outs
    for side in active_sides():
        if any(s == side for s, _, _ in row.errors):
            continue
        fa, fb, m = args[0][side], args[1][side], lib(side)
        try:
            row.s[side] = timed(side, lambda m=m, fa=fa, fb=fb: op(m, fa, fb), plan.bw_warmup,
                                plan.bw_reps, plan.bw_inner, plan.cap_s)
        except Exception as e:
            row.fail(side, e)
    return row


# name -> (op(lib, a, b), bytes moved per element, rtol, atol of the check against PyTorch)
BANDWIDTH = {
    "add": (lambda m, a, b: a + b, 12, 1e-6, 1e-6),
    "mul": (lambda m, a, b: a * b, 12, 1e-6, 1e-6),
    "relu": (lambda m, a, b: m.relu(a), 8, 0.0, 0.0),
    "sum": (lambda m, x, _: m.sum(x, dim=-1), 4, 1e-4, 1e-3),
    "softmax": (lambda m, x, _: m.softmax(x, dim=-1), 8, 1e-4, 1e-8),
}


def make_step(side: str, builder, shape: tuple, seed: int, graph: bool = False,
              precision: str = "f32"):
    """bench_train's model on the GPU: built and initialised on the CPU with the same weights
    in both libraries, then moved; returns the step function (forward, backward, SGD), ours
    in graph mode (st.compile: CUDA-graph replay) when graph is set. precision "bf16" runs the
    forward and the loss under bfloat16 autocast, "tf32" lets float32 matrix products use TF32
    (both libraries' `backends.cuda.matmul.allow_tf32`, set for the step and reset after)."""
    m = lib(side)
    lb = bt.Lib(m, side)
    rng = np.random.default_rng(seed)
    xn = rng.standard_normal(shape, dtype=np.float32)
    yn = rng.integers(0, 10, size=shape[0]).astype(np.int64)
    model = builder(lb)
    bt.init_weights(lb, model, seed + 1)
    model.to(DEVICE)
    model.train()
    x, y = lb.tensor(xn).to(DEVICE), lb.tensor(yn).to(DEVICE)
    opt = lb.optim.SGD(model.parameters(), lr=bt.LR, momentum=bt.MOMENTUM)

    def step():
        opt.zero_grad()
        if precision == "bf16":
            with m.autocast("cuda", dtype=m.bfloat16):
                loss = lb.F.cross_entropy(model(x), y)
        else:
            loss = lb.F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss

    if precision == "tf32":
        def tf32_step(inner=step):
            m.backends.cuda.matmul.allow_tf32 = True
            try:
                return inner()
            finally:
                m.backends.cuda.matmul.allow_tf32 = False

        step = tf32_step
    if graph and side == "ours":
        return st.compile(step)
    return step


def train_row(plan: Plan, name: str) -> Row:
    graph = name in GRAPH
    base, precision = PRECISION.get(name, (GRAPH.get(name, name), "f32"))
    label, builder, shape = TRAIN[base]
    suffix = {"f32": "", "bf16": " bf16 autocast", "tf32": " tf32"}[precision]
    row = Row(f"{label} step" + (" graph" if graph else "") + suffix, "time", STEP_TARGET)
    loss0 = {}
    for side in active_sides():
        try:
            step = make_step(side, builder, shape, seed=7, graph=graph, precision=precision)
            start, losses = time.perf_counter(), []
            while len(losses) < plan.check_steps:
                losses.append(float(step().item()))
                if len(losses) >= 2 and out_of_time(start, plan.cap_s):
                    break
            loss0[side] = losses[0]
            if not all(math.isfinite(v) for v in losses) or not losses[-1] < losses[0]:
                row.bad = True
                row.notes.append(f"{side} loss not decreasing: {losses[0]:.4g}->{losses[-1]:.4g}")
            row.s[side] = timed(side, step, plan.step_warmup, plan.steps, 1, plan.cap_s)
            if graph and side == "ours":
                row.notes.append(f"replays {step.replays}, CUDA graphs {step.cuda_graph_stats}")
        except Exception as e:
            row.fail(side, e)
        step = None
        free_memory()
    if loss0:
        row.notes.append("loss0 " + " / ".join(f"{loss0[s]:.5f}" for s in SIDES if s in loss0))
    return row


def lstm2(lb):
    """bench_seq.py's 2-layer LSTM (input and hidden 256), classifying from the last step."""
    nn = lb.nn

    class LSTMClassifier(nn.Module):
        def __init__(self):
            super().__init__()
            self.rnn = nn.LSTM(256, 256, num_layers=2, batch_first=True)
            self.head = nn.Linear(256, 10)

        def forward(self, x):
            return self.head(self.rnn(x)[0][:, -1])

    return LSTMClassifier()


def encoder(lb):
    """bench_seq.py's Transformer encoder layer (d_model 256, 4 heads, feed-forward 1024, no
    dropout), classifying from the mean over the sequence."""
    nn = lb.nn

    class EncoderClassifier(nn.Module):
        def __init__(self):
            super().__init__()
            self.layer = nn.TransformerEncoderLayer(256, 4, 1024, dropout=0.0, batch_first=True)
            self.head = nn.Linear(256, 10)

        def forward(self, x):
            return self.head(self.layer(x).mean(1))

    return EncoderClassifier()


# name -> (label, model builder, input shape); MLP and CNN as in bench_train.py, the sequence
# models as in bench_seq.py
TRAIN = {
    "mlp": ("MLP 784-512-512-10 b64", bt.mlp, (64, 784)),
    "cnn": ("CNN 2xconv3x3 b32", bt.cnn, (32, 3, 32, 32)),
    "resnet18": ("ResNet-18 CIFAR b64", bt.resnet18, (64, 3, 32, 32)),
    "lstm": ("LSTM 2x256 seq64 b32", lstm2, (32, 64, 256)),
    "encoder": ("Transformer enc d256 h4 s128 b16", encoder, (16, 128, 256)),
}


def launch_row(plan: Plan, name: str) -> Row:
    grad = name == "launch_grad"
    row = Row("launch a+b 1-elem" + (" grad" if grad else ""), "time")
    for side in active_sides():
        try:
            m = lib(side)
            a = m.tensor([1.0], device=DEVICE, requires_grad=grad)
            b = m.tensor([2.0], device=DEVICE, requires_grad=grad)
            if abs(float((a + b).item()) - 3.0) > 0:
                row.bad = True
                row.notes.append(f"{side}: 1 + 2 != 3")
            row.s[side] = timed(side, lambda a=a, b=b: a + b, 100, plan.launch_reps, LAUNCH_OPS,
                                plan.cap_s)
        except Exception as e:
            row.fail(side, e)
    row.notes.append(f"per op, {LAUNCH_OPS} ops/sample")
    return row


def gemm_row(plan: Plan, name: str) -> Row:
    """One square matrix product in a precision: bf16 (tensor cores), f32, or f32 with TF32."""
    precision = name.split("_")[1]
    n = 8192
    row = Row(f"gemm {n}^3 {precision}", "time")
    rng = np.random.default_rng(3)
    an = rng.standard_normal((n, n), dtype=np.float32)
    bn = rng.standard_normal((n, n), dtype=np.float32)
    want = None
    for side in active_sides():
        try:
            m = lib(side)
            dt = m.bfloat16 if precision == "bf16" else m.float32
            a = m.tensor(an[:256]).to(DEVICE).to(dt)
            b = m.tensor(bn[:, :256]).to(DEVICE).to(dt)
            m.backends.cuda.matmul.allow_tf32 = precision == "tf32"
            small = (a @ b[:256]).float().cpu().numpy()
            ref = an[:256, :256].astype(np.float64) @ bn[:256, :256]
            err = float(np.abs(small - ref).max() / np.abs(ref).max())
            if want is None:
                want = err
            row.notes.append(f"{side} rel err {err:.1e}")
            a = m.tensor(an).to(DEVICE).to(dt)
            b = m.tensor(bn).to(DEVICE).to(dt)
            row.s[side] = timed(side, lambda a=a, b=b: a @ b, 2, plan.launch_reps, 1, plan.cap_s)
            tflops = 2 * n ** 3 / row.s[side] / 1e12
            row.notes.append(f"{side} {tflops:.0f} TFLOP/s")
        except Exception as e:
            row.fail(side, e)
        finally:
            try:
                lib(side).backends.cuda.matmul.allow_tf32 = False
            except Exception:
                pass
        free_memory()
    return row


# ours in graph mode against PyTorch eager
GRAPH = {"mlp_graph": "mlp", "cnn_graph": "cnn"}
# the same steps in lower precision against PyTorch in the same precision
PRECISION = {"mlp_bf16": ("mlp", "bf16"), "cnn_bf16": ("cnn", "bf16"),
             "resnet18_bf16": ("resnet18", "bf16"), "encoder_bf16": ("encoder", "bf16"),
             "mlp_tf32": ("mlp", "tf32"), "resnet18_tf32": ("resnet18", "tf32")}
CASES = {**{k: bandwidth_row for k in BANDWIDTH}, **{k: train_row for k in TRAIN},
         **{k: train_row for k in GRAPH}, **{k: train_row for k in PRECISION},
         "gemm_f32": gemm_row, "gemm_tf32": gemm_row, "gemm_bf16": gemm_row,
         "launch": launch_row, "launch_grad": launch_row}
# --only accepts these names for sets of cases: the float32 rows and the lower-precision ones
PRECISION_CASES = ("gemm_f32", "gemm_tf32", "gemm_bf16", *PRECISION)
GROUPS = {"float32": tuple(n for n in CASES if n not in PRECISION_CASES),
          "precision": PRECISION_CASES}


# ---- output --------------------------------------------------------------------------------------
COLS = [("case", 33), ("ours", 10), ("torch", 10), ("ours GB/s", 9), ("torch GB/s", 10),
        ("ratio", 7), ("target", 8), ("met", 4), ("note", 0)]


def fmt_time(s: float | None) -> str:
    if s is None:
        return "-"
    if s >= 10:
        return f"{s:.2f} s"
    return f"{s * 1e6:.2f} us" if s < 1e-3 else f"{s * 1e3:.3f} ms"


def cells(row: Row) -> list[str]:
    o, t = row.s["ours"], row.s["torch"]
    gbs = [f"{row.gbytes / v:.0f}" if v and row.kind == "bw" else "-" for v in (o, t)]
    ratio = None
    if o and t:
        ratio = t / o if row.kind == "bw" else o / t  # "bw": throughput ratio, else time ratio
    if row.target is None:
        target = "report"
    else:
        target = f"{'>=' if row.kind == 'bw' else '<='} {row.target:.2f}x"
    if row.bad:
        met = "BAD"
    elif ratio is None or row.target is None:
        met = "-"
    else:
        ok = ratio >= row.target if row.kind == "bw" else ratio <= row.target
        met = "yes" if ok else "NO"
    notes = row.notes + [f"{side} ERROR {msg}"[:110] for side, msg, _ in row.errors]
    return [row.label, fmt_time(o), fmt_time(t), *gbs, f"{ratio:.2f}x" if ratio else "-",
            target, met, "; ".join(notes)]


def print_line(values: list[str]) -> None:
    parts = [v.ljust(w) if i == 0 else v.rjust(w) if w else v
             for i, (v, (_, w)) in enumerate(zip(values, COLS))]
    print("  ".join(parts).rstrip(), flush=True)


def header(plan: Plan, args) -> None:
    gpu = torch.cuda.get_device_name() if torch is not None else "(name unknown without torch)"
    tv = torch.__version__ if torch is not None else "not used (not installed or no CUDA)"
    print(f"gpu: {gpu}; python {platform.python_version()}, singa_tensor {st.__version__}, "
          f"torch {tv}")
    if torch is not None:
        print("torch TF32 off for matmul and cuDNN (both libraries in strict float32), "
              "cudnn.benchmark off")
    print(f"timing: median over samples, each ended by a device sync, after warm-up "
          f"({'--quick' if args.quick else 'full'}: elementwise {plan.bw_reps}x{plan.bw_inner} "
          f"calls, training {plan.steps} steps, launch {plan.launch_reps}x{LAUNCH_OPS} ops; "
          f"at most ~{plan.cap_s:.0f} s per side of a row)")
    print(f"ratio: GB/s rows ours/torch throughput (higher is better, target >= {BW_TARGET}); "
          f"other rows ours/torch time (lower is better); BAD: the result check failed\n")
    print_line([c for c, _ in COLS])
    print_line(["-" * max(w, 4) for _, w in COLS])


def usable_cuda() -> str | None:
    """None when singa_tensor can use a CUDA device; otherwise why not."""
    try:
        if st.cuda.is_available():
            return None
        return "st.cuda.is_available() is False (CUDA backend not built, or no GPU visible)"
    except Exception as e:
        return f"st.cuda.is_available() raised {type(e).__name__}: {e}"


def load_torch() -> str:
    global torch
    try:
        import torch as _torch
    except ImportError:
        return "torch is not installed: only singa_tensor's columns are filled"
    if not _torch.cuda.is_available():
        return "torch sees no CUDA device: only singa_tensor's columns are filled"
    torch = _torch
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    return ""


def main(argv=None) -> int:
    global st, deadline
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="fewer repeats (the GPU check)")
    p.add_argument("--only", action="append", default=[], metavar="NAME",
                   help=f"run only these cases (repeat or comma-separate): {', '.join(CASES)}; "
                        f"or the groups {', '.join(GROUPS)}")
    p.add_argument("--budget", type=float, default=None,
                   help="skip the remaining cases after this many seconds "
                        "(default 100 with --quick, none otherwise)")
    args = p.parse_args(argv)
    names = [n for item in args.only for n in item.split(",") if n] or list(CASES)
    names = [m for n in names for m in GROUPS.get(n, (n,))]
    unknown = [n for n in names if n not in CASES]
    if unknown:
        p.error(f"unknown case {', '.join(unknown)}; choose from {', '.join(CASES)}")
    budget = args.budget if args.budget is not None else (100.0 if args.quick else None)
    plan = QUICK if args.quick else FULL

    import singa_tensor

    st = singa_tensor
    why = usable_cuda()
    if why is not None:
        print(f"bench/gpu.py: no usable CUDA device for singa_tensor, nothing to measure: {why}")
        return 0
    note = load_torch()
    if note:
        print(f"note: {note}")
    header(plan, args)
    start, data, rows = time.perf_counter(), Data(), []
    deadline = start + budget if budget is not None else math.inf
    for name in names:
        if time.perf_counter() > deadline:
            print_line([name, *["-"] * 7, f"skipped: time budget of {budget:.0f} s spent"])
            continue
        try:
            if name in TRAIN or name.startswith("launch"):
                data.clear()  # the 1 GiB inputs are not needed past the bandwidth rows
            row = CASES[name](data, plan, name) if name in BANDWIDTH else CASES[name](plan, name)
        except Exception as e:  # setup failed before any side ran (e.g. the inputs)
            row = Row(name, "time")
            row.fail("setup", e)
        rows.append(row)
        print_line(cells(row))
    errors = [(r.label, side, tb) for r in rows for side, _, tb in r.errors]
    if errors:
        print("\nerrors (last frames):")
        for label, side, tb in errors:
            print(f"--- {label} [{side}]\n{tb.rstrip()}")
    print(f"\ntotal {time.perf_counter() - start:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
