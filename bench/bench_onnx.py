"""ONNX benchmarks: what an imported model costs to run, against onnxruntime.

Models come from two places, both written to a temporary folder as .onnx files with an input:
our own modules exported with `st.onnx.export` (MLP, CNN, LSTM, transformer encoder layer) and
models built with PyTorch in the peer's Python and exported there with `torch.onnx.export`
(a small transformer block, a conv + batch norm + ReLU CNN and a ResNet-18-like network, batch
norms kept in the file as a training-mode export would), plus the light ResNet-50 of onnx's test
data. onnxruntime (CPU provider, the same thread count) times each model in its own process,
started with the environment this script was started with; our side runs in this process.
Outputs are checked to agree before anything is timed.

Columns: median forward ms of onnxruntime, of ours on the plain node-by-node plan
(`module.fast = False`) and of ours on the inference path (folded, compiled and replayed:
onnx/_fast.py), and the ratios to onnxruntime.

    python bench/bench_onnx.py --peer /path/to/python-with-torch-and-onnxruntime
    python bench/bench_onnx.py --quick       # 1 warm-up, median of 3
    python bench/bench_onnx.py --threads 2

Without a peer that has torch only our own exports run; without onnxruntime in the peer the
onnxruntime columns are empty.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np

# the environment the user started us with: the peer gets it, not what our import sets
_ENV0 = dict(os.environ)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
# one timer for all benches: median seconds of individually timed calls after a warm-up
from bench_train import set_thread_env  # noqa: E402
from bench_train import time_steps as median_time  # noqa: E402

TARGETS = {"transformer": 3.0, "cnn": 2.0}


# ---- the peer's side (torch export, onnxruntime timing): no singa_tensor here -----------------


def peer_export(folder: str) -> None:
    """Build the PyTorch models, export them to folder and print their manifest entries."""
    import torch
    from torch import nn

    torch.manual_seed(0)

    class Block(nn.Module):
        def __init__(self, d=128, heads=4, ff=256):
            super().__init__()
            self.h, self.dk = heads, d // heads
            self.qkv = nn.Linear(d, 3 * d)
            self.proj = nn.Linear(d, d)
            self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.ff1, self.ff2 = nn.Linear(d, ff), nn.Linear(ff, d)

        def forward(self, x):
            b, t, d = x.shape
            q, k, v = self.qkv(x).reshape(b, t, 3, self.h, self.dk).permute(2, 0, 3, 1, 4)
            att = torch.softmax(q @ k.transpose(-1, -2) / self.dk ** 0.5, dim=-1)
            y = (att @ v).transpose(1, 2).reshape(b, t, d)
            x = self.ln1(x + self.proj(y))
            return self.ln2(x + self.ff2(torch.relu(self.ff1(x))))

    def cbr(cin, cout, stride=1):
        return [nn.Conv2d(cin, cout, 3, stride, 1, bias=False), nn.BatchNorm2d(cout),
                nn.ReLU()]

    class Basic(nn.Module):
        def __init__(self, cin, cout, stride):
            super().__init__()
            self.body = nn.Sequential(*cbr(cin, cout, stride)[:3],
                                      nn.Conv2d(cout, cout, 3, 1, 1, bias=False),
                                      nn.BatchNorm2d(cout))
            self.down = None
            if stride != 1 or cin != cout:
                self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                          nn.BatchNorm2d(cout))

        def forward(self, x):
            return torch.relu(self.body(x) + (x if self.down is None else self.down(x)))

    class ResNet18(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = nn.Sequential(nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64),
                                      nn.ReLU(), nn.MaxPool2d(3, 2, 1))
            layers, cin = [], 64
            for cout, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
                layers += [Basic(cin, cout, stride), Basic(cout, cout, 1)]
                cin = cout
            self.layers = nn.Sequential(*layers)
            self.head = nn.Linear(512, 1000)

        def forward(self, x):
            x = self.layers(self.stem(x))
            return self.head(torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1))

    cnn = nn.Sequential(*cbr(1, 16), nn.MaxPool2d(2), *cbr(16, 32), nn.MaxPool2d(2),
                        nn.Flatten(), nn.Linear(32 * 7 * 7, 10))
    models = [
        ("torch transformer block, 16 x 32 x 128", "transformer", Block(),
         torch.randn(16, 32, 128), True),
        ("torch transformer block, 1 x 8 x 128", "transformer", Block(),
         torch.randn(1, 8, 128), True),
        ("torch CNN conv-bn-relu, 64 x 1 x 28 x 28", "cnn", cnn, torch.randn(64, 1, 28, 28),
         False),
        ("torch ResNet-18, 1 x 3 x 224 x 224", "cnn", ResNet18(), torch.randn(1, 3, 224, 224),
         False),
    ]
    entries = []
    for i, (name, kind, model, x, fold) in enumerate(models):
        for m in model.modules():  # statistics that make a folded batch norm do something
            if isinstance(m, nn.BatchNorm2d):
                m.running_mean.uniform_(-0.5, 0.5)
                m.running_var.uniform_(0.5, 2.0)
                m.weight.data.uniform_(0.5, 1.5)
                m.bias.data.uniform_(-0.2, 0.2)
        model.eval()
        path = os.path.join(folder, f"torch{i}.onnx")
        # a CNN exported with its batch norms kept (PRESERVE, no constant folding), as a file
        # from a training framework arrives; the transformer as torch.onnx.export makes it
        torch.onnx.export(model, (x,), path, input_names=["x"], output_names=["y"],
                          opset_version=17, dynamo=False, do_constant_folding=fold,
                          training=torch.onnx.TrainingMode.EVAL if fold else
                          torch.onnx.TrainingMode.PRESERVE)
        np.save(path + ".x.npy", x.numpy())
        entries.append({"name": name, "kind": kind, "file": path, "input": path + ".x.npy"})
    print(json.dumps(entries))


def peer_ort(manifest: str, threads: int, warmup: int, reps: int) -> None:
    """Time every model of the manifest in onnxruntime; save its outputs; print JSON."""
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    res = {}
    for e in json.load(open(manifest)):
        sess = ort.InferenceSession(e["file"], so, providers=["CPUExecutionProvider"])
        feed = {sess.get_inputs()[0].name: np.load(e["input"])}
        out = sess.run(None, feed)[0]
        np.save(e["file"] + ".ort.npy", out)
        r = max(3, reps // 4) if e.get("large") else reps
        res[e["name"]] = median_time(functools.partial(sess.run, None, feed), warmup, r)
    print(json.dumps({"version": ort.__version__, "seconds": res}))


def _peer(args, *extra) -> str | None:
    cmd = [args.peer, os.path.abspath(__file__), *extra]
    out = subprocess.run(cmd, capture_output=True, text=True, env=_ENV0)
    if out.returncode != 0:
        print(f"bench: the peer ({' '.join(extra[:1])}) failed:\n{out.stderr[-2000:]}",
              file=sys.stderr)
        return None
    return out.stdout.strip().splitlines()[-1]


# ---- our side ------------------------------------------------------------------------------------


def own_models(st, nn):
    st.manual_seed(0)

    class CNN(nn.Module):
        def __init__(self):
            super().__init__()
            self.body = nn.Sequential(
                nn.Conv2d(1, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
                nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
                nn.Flatten(), nn.Linear(32 * 7 * 7, 10))

        def forward(self, x):
            return self.body(x)

    class LSTMTagger(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(100, 64)
            self.lstm = nn.LSTM(64, 128, num_layers=2)
            self.head = nn.Linear(128, 100)

        def forward(self, x):
            y, _ = self.lstm(self.emb(x))
            return self.head(y)

    class Encoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.layer = nn.TransformerEncoderLayer(128, 4, 256, dropout=0.0)

        def forward(self, x):
            return self.layer(x)

    return [
        ("ours MLP 784-512-512-10, batch 64", None,
         nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(),
                       nn.Linear(512, 10)), st.randn(64, 784)),
        ("ours CNN on 28x28, batch 64", "cnn", CNN(), st.randn(64, 1, 28, 28)),
        ("ours LSTM 2x128, 32 steps x batch 16", None, LSTMTagger(),
         st.randint(0, 100, (32, 16))),
        ("ours transformer layer, 32 x 16 x 128", "transformer", Encoder(),
         st.randn(32, 16, 128)),
    ]


def forward(st, module, x, fast: bool) -> None:
    """module(x) under no_grad, on the inference path (fast) or the plain plan."""
    module.fast = fast
    with st.no_grad():
        module(x)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--peer", default=sys.executable,
                    help="a Python with torch and onnxruntime (default: this one)")
    ap.add_argument("--peer-export", metavar="DIR", help=argparse.SUPPRESS)
    ap.add_argument("--peer-ort", metavar="MANIFEST", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.quick:
        args.warmup, args.reps = 1, 3
    if args.peer_export:
        return peer_export(args.peer_export)
    if args.peer_ort:
        return peer_ort(args.peer_ort, args.threads, args.warmup, args.reps)

    folder = tempfile.mkdtemp(prefix="bench_onnx_")
    set_thread_env(args.threads)
    import onnx

    import singa_tensor as st
    from singa_tensor import nn

    st.set_num_threads(args.threads)
    entries = []
    for name, kind, model, x in own_models(st, nn):
        model.eval()
        path = os.path.join(folder, f"ours{len(entries)}.onnx")
        st.onnx.export(model, x, path, input_names=["x"])
        np.save(path + ".x.npy", x.numpy())
        entries.append({"name": name, "kind": kind, "file": path, "input": path + ".x.npy"})
    got = _peer(args, "--peer-export", folder)
    if got is not None:
        entries += json.loads(got)
    light = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light",
                         "light_resnet50.onnx")
    if os.path.exists(light):
        x = np.random.default_rng(0).random((1, 3, 224, 224), np.float32)
        np.save(os.path.join(folder, "light.x.npy"), x)
        entries.append({"name": "light ResNet-50 (onnx test data), 1 x 3 x 224 x 224",
                        "kind": "cnn", "file": light, "large": True,
                        "input": os.path.join(folder, "light.x.npy")})
    manifest = os.path.join(folder, "manifest.json")
    with open(manifest, "w") as f:
        json.dump(entries, f)
    got = _peer(args, "--peer-ort", manifest, "--threads", str(args.threads), "--warmup",
                str(args.warmup), "--reps", str(args.reps))
    ort = json.loads(got) if got is not None else None

    print(f"singa_tensor {st.__version__}, onnx {onnx.__version__}, onnxruntime "
          f"{ort['version'] if ort else 'not run'} (own process), {args.threads} threads; "
          f"median of {args.reps} forwards (ms)")
    head = (f"{'model':52s} {'load':>6s} {'ort':>8s} {'plain':>8s} {'fast':>8s} "
            f"{'plain/ort':>9s} {'fast/ort':>8s} {'target':>7s}")
    print(head)
    print("-" * len(head))
    for e in entries:
        x = np.load(e["input"])
        t0 = time.perf_counter()
        m = st.onnx.load(e["file"])
        t_load = time.perf_counter() - t0
        xt = st.tensor(x)
        with st.no_grad():
            m.fast = False
            plain = m(xt).numpy()
            m.fast = True
            fast = [m(xt).numpy() for _ in range(3)][-1]
        scale = max(1.0, float(np.abs(plain).max()))
        refs = [("fast path", fast)]
        ort_file = e["file"] + ".ort.npy"
        if ort and os.path.exists(ort_file) and e["name"] in ort["seconds"]:
            refs.append(("onnxruntime", np.load(ort_file)))
        for what, v in refs:
            err = float(np.abs(v - plain).max()) / scale
            if err > 1e-3:
                raise SystemExit(f"{e['name']}: {what} output differs from the plain plan's "
                                 f"by {err:.2e}")
        reps = max(3, args.reps // 4) if e.get("large") else args.reps

        t_plain = median_time(functools.partial(forward, st, m, xt, False), args.warmup, reps)
        t_fast = median_time(functools.partial(forward, st, m, xt, True), args.warmup, reps)
        t_ort = ort["seconds"].get(e["name"]) if ort else None
        target = TARGETS.get(e["kind"])
        cells = [f"{e['name']:52s}", f"{t_load * 1e3:6.1f}",
                 f"{t_ort * 1e3:8.2f}" if t_ort else f"{'-':>8s}",
                 f"{t_plain * 1e3:8.2f}", f"{t_fast * 1e3:8.2f}"]
        if t_ort:
            cells += [f"{t_plain / t_ort:8.2f}x", f"{t_fast / t_ort:7.2f}x"]
        else:
            cells += [f"{'-':>9s}", f"{'-':>8s}"]
        cells.append(f"{'<=' + format(target, '.0f') + 'x' if target else '':>7s}")
        print(" ".join(cells))
    shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
