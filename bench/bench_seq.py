"""Sequence-layer benchmarks: forward + backward of an LSTM and of a Transformer encoder layer,
and a training step of a small LSTM language model, singa_tensor against PyTorch (CPU),
measured in the same run.

Each layer case runs the layer forward on one fixed random input (which requires grad) and back
from one fixed random output gradient, in both libraries, with the same shapes, data and
weights: ours are drawn by singa_tensor's initialisers, written out as a numpy state dict and
loaded into PyTorch's layer under the same names. The language-model case runs embedding ->
2-layer LSTM -> linear head -> cross entropy on fixed tokens, backward, and an SGD step with
momentum. Before anything is timed, the PyTorch worker checks that its output (the LM: its
loss) and every gradient agree with ours. The table gives the median time of each and the ratio
ours/torch (below 1 means singa_tensor is faster).

PyTorch runs in a child process, by default this interpreter, or the one --torch-python names
(an environment of its own with PyTorch installed), with the environment this script started
with plus the thread settings: nothing singa_tensor's import sets reaches it.

    python bench/bench_seq.py             # full run: 5 warm-up reps, median of 30
    python bench/bench_seq.py --quick     # 1 warm-up rep, median of 5 (a smoke check)
    python bench/bench_seq.py --profile   # then a cProfile of our side of each case
    python bench/bench_seq.py --reps 100 --warmup 10 --threads 2
    python bench/bench_seq.py --torch-python /path/to/venv-with-torch/bin/python
    python bench/bench_seq.py --per-step  # our recurrent layers on their per-step loop
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
# The thread setup, the step timer and the profile printer are bench_train's, so the two
# benchmarks time alike.
from bench_train import SETTLE_S, print_profile, set_thread_env, time_steps  # noqa: E402

st = None  # singa_tensor, imported in main after the thread settings are in the environment
# the environment as the user started this script, for the PyTorch child (singa_tensor's
# import adds OpenMP settings that PyTorch would not otherwise run with)
START_ENV = dict(os.environ)

SEED = 0
PROFILE_REPS = 5
# Agreement demanded before timing, per array: max |ours - torch| <= tol * max(1, max |torch|).
# In float32 only the output is compared: a ReLU input within rounding of zero may take the
# other branch in one library, which changes that unit's gradient by a whole term, so float32
# gradients can differ by 1e-3 with both libraries right. The same case run once more in
# float64, where such ties are out of reach, compares the output and every gradient.
TOL32, TOL64 = 1e-4, 1e-9


def lstm(nn):
    return nn.LSTM(256, 256, num_layers=2)  # (seq, batch, feature) input, PyTorch's default


def encoder_layer(nn):
    # dropout=0 so both libraries compute the same function (their random streams differ).
    return nn.TransformerEncoderLayer(256, 4, dim_feedforward=1024, dropout=0.0,
                                      batch_first=True)


VOCAB = 1000


def lstm_lm(nn):
    """Embedding 1000x128 -> LSTM 128->256, 2 layers -> linear 256->1000, sequence-first."""

    class LSTMLM(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(VOCAB, 128)
            self.lstm = nn.LSTM(128, 256, num_layers=2)
            self.head = nn.Linear(256, VOCAB)

        def forward(self, tokens):
            y, _ = self.lstm(self.emb(tokens))
            return self.head(y)

    return LSTMLM()


# name, builder, input shape (the LM: tokens, seq x batch), ratio target from the issue
CASES = [
    ("LSTM 2x256 seq64 b32", lstm, (64, 32, 256), 1.5),
    ("TransformerEncoderLayer d256 h4 seq128 b16", encoder_layer, (16, 128, 256), 1.5),
    ("LSTM LM emb1000x128 2x256 seq32 b8 +SGD", lstm_lm, (32, 8), 1.5),
]


def output_of(result):
    """The output tensor: an RNN returns (output, state), the encoder layer the tensor alone."""
    return result[0] if isinstance(result, tuple) else result


class Case:
    """One layer in one library, its fixed input and output gradient, and a step that runs
    forward + backward and returns the output. Ours draws its weights from the seed; PyTorch's
    loads `weights`, a numpy state dict of ours. `double` runs it all in float64."""

    def __init__(self, lib, index: int, weights: dict | None = None, double: bool = False,
                 per_step: bool = False):
        name, builder, shape, _ = CASES[index]
        self.name, self.lib = name, lib
        is_torch = lib.__name__ == "torch"
        dtype = np.float64 if double else np.float32
        self.lm = builder is lstm_lm

        def tensor(a: np.ndarray):
            return lib.from_numpy(a.astype(dtype)) if is_torch else lib.tensor(a.astype(dtype))

        rng = np.random.default_rng(SEED + index)
        if is_torch:
            self.model = builder(lib.nn)
            self.model.load_state_dict({k: lib.from_numpy(v) for k, v in weights.items()})
        else:
            lib.manual_seed(SEED + index)
            self.model = builder(lib.nn)
        if double:
            self.model.to(lib.float64)
        self.model.train()
        if per_step:  # the path the whole-loop kernel replaced, for a before/after figure
            for m in self.model.modules():
                if isinstance(m, lib.nn.RNNBase):
                    m._sequence_kernel = False
        self.params = dict(self.model.named_parameters())
        if self.lm:
            tokens = rng.integers(0, VOCAB, (shape[0] + 1, shape[1]))
            as_int = lib.from_numpy if is_torch else lib.tensor
            self.x, self.target = as_int(tokens[:-1]), as_int(tokens[1:].reshape(-1))
            self.opt = lib.optim.SGD(self.model.parameters(), lr=0.1, momentum=0.9)
            return
        self.x = tensor(rng.standard_normal(shape, dtype=np.float32)).requires_grad_()
        with lib.no_grad():
            out_shape = tuple(output_of(self.model(self.x)).shape)
        self.g = tensor(rng.standard_normal(out_shape, dtype=np.float32))

    def loss(self):
        logits = self.model(self.x)
        return self.lib.nn.functional.cross_entropy(logits.reshape(-1, VOCAB), self.target)

    def step(self):
        if self.lm:  # one training step
            self.opt.zero_grad()
            loss = self.loss()
            loss.backward()
            self.opt.step()
            return loss
        self.x.grad = None
        for p in self.params.values():
            p.grad = None
        out = output_of(self.model(self.x))
        out.backward(self.g)
        return out

    def weights(self) -> dict:
        return {k: v.detach().numpy().copy() for k, v in self.model.state_dict().items()}

    def results(self) -> dict:
        """Output and all gradients of one step, as numpy arrays (the LM: the loss and the
        gradients before any update)."""
        if self.lm:
            for p in self.params.values():
                p.grad = None
            loss = self.loss()
            loss.backward()
            res = {"output": loss.detach().numpy().copy()}
            res.update({f"grad {k}": p.grad.numpy().copy() for k, p in self.params.items()})
            return res
        out = self.step()
        res = {"output": out.detach().numpy().copy(), "grad input": self.x.grad.numpy().copy()}
        res.update({f"grad {k}": p.grad.numpy().copy() for k, p in self.params.items()})
        return res


def max_difference(ours: dict, theirs: dict) -> float:
    """The largest max |ours - theirs| / max(1, max |theirs|) over the arrays of `theirs`."""
    if ours.keys() != theirs.keys():
        raise SystemExit(f"bench: the layers differ in their parameters: ours "
                         f"{sorted(ours)}, torch {sorted(theirs)}")
    return max(float(np.abs(ours[k].astype(np.float64) - ref).max())
               / max(1.0, float(np.abs(ref).max())) for k, ref in theirs.items())


def part(saved, prefix: str) -> dict:
    """The arrays of an .npz written by main whose names start with `prefix`, unprefixed."""
    return {k[len(prefix):]: saved[k] for k in saved.files if k.startswith(prefix)}


def torch_worker(args) -> None:
    """Check, then time, the PyTorch side; print the result as JSON (run by main in a child
    process). Reads our weights and results from the .npz files main wrote to args.dir."""
    set_thread_env(args.threads)
    import torch

    torch.set_num_threads(args.threads)
    out = {}
    for i in selected(args):
        name = CASES[i][0]
        saved = np.load(os.path.join(args.dir, f"case{i}.npz"))
        weights = part(saved, "w:")
        case = Case(torch, i, weights)
        out32 = {"output": case.results()["output"]}
        d32 = max_difference({"output": part(saved, "r32:")["output"]}, out32)
        d64 = max_difference(part(saved, "r64:"),
                             Case(torch, i, weights, double=True).results())
        if d32 > TOL32 or d64 > TOL64:
            raise SystemExit(f"bench {name}: singa_tensor and PyTorch disagree before timing: "
                             f"max relative |d| {d32:.1e} in the float32 output (allowed "
                             f"{TOL32:.0e}), {d64:.1e} in the float64 output and gradients "
                             f"(allowed {TOL64:.0e})")
        time.sleep(SETTLE_S)
        out[name] = {"s": time_steps(case.step, args.warmup, args.reps), "d32": d32, "d64": d64}
    print(json.dumps({"version": torch.__version__, "threads": torch.get_num_threads(),
                      "cases": out}))


def selected(args) -> list:
    """The indices of the cases --case picks (all without it)."""
    return [i for i, (name, *_) in enumerate(CASES)
            if not args.case or any(c in name for c in args.case)]


def torch_side(args, workdir: str) -> dict | None:
    python = args.torch_python or sys.executable
    if args.no_torch or (not args.torch_python and importlib.util.find_spec("torch") is None):
        return None
    cmd = [python, os.path.abspath(__file__), "--torch-worker", "--dir", workdir,
           "--reps", str(args.reps), "--warmup", str(args.warmup), "--threads",
           str(args.threads), *(f"--case={c}" for c in args.case)]
    out = subprocess.run(cmd, capture_output=True, text=True, env=START_ENV)
    if out.returncode != 0:
        raise SystemExit(f"bench: the PyTorch worker failed:\n{out.stderr}{out.stdout}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def print_table(ours: dict, peer: dict | None) -> None:
    head = ["case", "ours ms", "torch ms", "ratio", "target", "met", "|d| f32 out",
            "|d| f64 all"]
    rows = []
    for name, _, _, target in CASES:
        if name not in ours:
            continue
        o = ours[name]
        p = peer["cases"][name] if peer else None
        ratio = o / p["s"] if p else None
        met = "-" if ratio is None else ("yes" if ratio <= target else "NO")
        rows.append([name, f"{o * 1e3:.2f}", f"{p['s'] * 1e3:.2f}" if p else "-",
                     f"{ratio:.2f}x" if ratio else "-", f"<= {target:.1f}x", met,
                     f"{p['d32']:.1e}" if p else "unchecked",
                     f"{p['d64']:.1e}" if p else "unchecked"])
    widths = [max(len(r[i]) for r in rows + [head]) for i in range(len(head))]

    def line(cells):
        return "  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                         for i, (c, w) in enumerate(zip(cells, widths)))

    print(line(head))
    print("  ".join("-" * w for w in widths))
    for r in rows:
        print(line(r))


def profile_case(case: Case) -> None:
    """cProfile PROFILE_REPS forward + backward reps of our side and print the top functions."""
    case.step()
    print_profile(case.step, PROFILE_REPS, case.name, "rep")


def main(argv=None) -> None:
    global st
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="few reps (a smoke check)")
    p.add_argument("--reps", type=int, default=None, help="timed reps per case (>= 30)")
    p.add_argument("--warmup", type=int, default=None, help="untimed reps before timing")
    p.add_argument("--threads", type=int, default=2, help="threads for both libraries")
    p.add_argument("--no-torch", action="store_true", help="skip the PyTorch side")
    p.add_argument("--torch-python", help="the Python interpreter (with PyTorch) to time it in")
    p.add_argument("--case", action="append", default=[],
                   help="run only the cases whose name contains this (repeatable)")
    p.add_argument("--per-step", action="store_true",
                   help="run our recurrent layers on their per-step loop")
    p.add_argument("--profile", action="store_true", help="cProfile our side of each case")
    p.add_argument("--torch-worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--dir", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    args.reps = args.reps or (5 if args.quick else 30)
    args.warmup = args.warmup if args.warmup is not None else (1 if args.quick else 5)
    if args.torch_worker:
        torch_worker(args)
        return

    set_thread_env(args.threads)
    START_ENV.update({k: os.environ[k] for k in
                      ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")})
    import singa_tensor

    st = singa_tensor
    st.set_num_threads(args.threads)
    cases = {i: Case(st, i, per_step=args.per_step) for i in selected(args)}
    with tempfile.TemporaryDirectory() as workdir:
        for i, case in cases.items():
            arrays = {f"w:{k}": v for k, v in case.weights().items()}
            arrays.update({f"r32:{k}": v for k, v in case.results().items()})
            arrays.update({f"r64:{k}": v for k, v in
                           Case(st, i, double=True, per_step=args.per_step).results().items()})
            np.savez(os.path.join(workdir, f"case{i}.npz"), **arrays)
        peer = torch_side(args, workdir)
    ours = {}
    for case in cases.values():
        time.sleep(SETTLE_S)
        ours[case.name] = time_steps(case.step, args.warmup, args.reps)

    print(f"python {platform.python_version()}, numpy {np.__version__}, singa_tensor "
          f"{st.__version__}, torch {peer['version'] if peer else 'not used'}")
    print(f"cpu cores (os.cpu_count): {os.cpu_count()}; threads: singa_tensor "
          f"{st.get_num_threads()} (OpenBLAS {os.environ['OPENBLAS_NUM_THREADS']}), torch "
          f"{peer['threads'] if peer else '-'} (timed in a child process of this run)")
    print(f"forward + backward (input requires grad; backward from a fixed random output "
          f"gradient), train mode, dropout 0; median of {args.reps} reps after {args.warmup} "
          "warm-up; ratio = ours/torch (below 1.00x: ours is faster)")
    print("the LM case: one training step (forward, cross entropy, backward, SGD momentum 0.9)"
          + ("; our recurrent layers on their per-step loop (--per-step)" if args.per_step
             else ""))
    print(f"checked before timing, relative to max(1, max|torch|): the float32 output within "
          f"{TOL32:.0e}; in a float64 run of the same case, the output and every gradient "
          f"within {TOL64:.0e}" if peer else "unchecked: PyTorch is not used in this run")
    print()
    print_table(ours, peer)
    if args.profile:
        for case in cases.values():
            profile_case(case)


if __name__ == "__main__":
    main()
