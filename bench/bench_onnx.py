"""ONNX benchmarks: what an imported model costs to run, against our own module and onnxruntime.

For each model the native singa_tensor module is exported (`st.onnx.export`), imported back
(`st.onnx.load`) and run forward under no_grad on one fixed input; the same ONNX model runs in
onnxruntime (CPU provider, the same thread count) in the same process. Outputs are checked to
agree before anything is timed. The table gives the median forward time of each and two
ratios: imported/native (the graph executor's overhead over the eager module) and
imported/onnxruntime. The light ResNet-50 shipped with the onnx package is run the same way,
minus the native column. Export and load times are printed too.

    python bench/bench_onnx.py               # 3 warm-up runs, median of 20
    python bench/bench_onnx.py --quick       # 1 warm-up, median of 3
    python bench/bench_onnx.py --threads 2
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
# one timer for all benches: median seconds of individually timed calls after a warm-up
from bench_train import set_thread_env  # noqa: E402
from bench_train import time_steps as median_time  # noqa: E402


def forward(st, module, x):
    """A no-argument callable running module(x) under no_grad."""

    def run():
        with st.no_grad():
            module(x)

    return run


def models(st, nn):
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
        ("MLP 784-512-512-10, batch 64",
         nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(),
                       nn.Linear(512, 10)), st.randn(64, 784)),
        ("CNN on 28x28, batch 64", CNN(), st.randn(64, 1, 28, 28)),
        ("LSTM 2x128, 32 steps x batch 16", LSTMTagger(), st.randint(0, 100, (32, 16))),
        ("Transformer encoder layer, 32 x 16 x 128", Encoder(), st.randn(32, 16, 128)),
    ]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    if args.quick:
        args.warmup, args.reps = 1, 3
    set_thread_env(args.threads)
    import onnx
    import onnxruntime as ort

    import singa_tensor as st
    from singa_tensor import nn

    st.set_num_threads(args.threads)
    so = ort.SessionOptions()
    so.intra_op_num_threads = args.threads
    so.inter_op_num_threads = 1
    # idle onnxruntime workers otherwise spin on the cores our kernels then run on
    so.add_session_config_entry("session.intra_op.allow_spinning", "0")

    def session(proto):
        return ort.InferenceSession(proto.SerializeToString(), so,
                                    providers=["CPUExecutionProvider"])

    print(f"singa_tensor {st.__version__}, onnx {onnx.__version__}, onnxruntime "
          f"{ort.__version__}, {args.threads} threads; median of {args.reps} forwards (ms)")
    header = (f"{'model':44s} {'export':>7s} {'load':>6s} {'native':>8s} {'imported':>9s} "
              f"{'ort':>8s} {'imp/native':>10s} {'imp/ort':>8s}")
    print(header)
    print("-" * len(header))
    for name, model, x in models(st, nn):
        model.eval()
        t0 = time.perf_counter()
        proto = st.onnx.export(model, x, None, input_names=["x"])
        t_export = time.perf_counter() - t0
        t0 = time.perf_counter()
        imported = st.onnx.load(proto)
        t_load = time.perf_counter() - t0
        sess = session(proto)
        feed = {"x": x.numpy()}
        with st.no_grad():
            want = model(x).numpy()
            got = imported(x).numpy()
        ref = sess.run(None, feed)[0]
        scale = max(1.0, float(np.abs(want).max()))
        for what, v in (("imported", got), ("onnxruntime", ref)):
            err = float(np.abs(v - want).max()) / scale
            if err > 1e-4:
                raise SystemExit(f"{name}: {what} output differs from ours by {err:.2e}")

        t_nat = median_time(forward(st, model, x), args.warmup, args.reps)
        t_imp = median_time(forward(st, imported, x), args.warmup, args.reps)
        t_ort = median_time(functools.partial(sess.run, None, feed), args.warmup, args.reps)
        print(f"{name:44s} {t_export * 1e3:7.1f} {t_load * 1e3:6.1f} {t_nat * 1e3:8.2f} "
              f"{t_imp * 1e3:9.2f} {t_ort * 1e3:8.2f} {t_imp / t_nat:9.2f}x "
              f"{t_imp / t_ort:7.2f}x")

    # a model we did not write: the light ResNet-50 of onnx's conformance data
    path = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light",
                        "light_resnet50.onnx")
    if os.path.exists(path):
        proto = onnx.load(path)
        t0 = time.perf_counter()
        imported = st.onnx.load(proto)
        t_load = time.perf_counter() - t0
        x = np.random.default_rng(0).random((1, 3, 224, 224), np.float32)
        sess = session(proto)
        feed = {imported.input_names[0]: x}
        reps = max(3, args.reps // 4)
        t_imp = median_time(forward(st, imported, st.tensor(x)), 1, reps)
        t_ort = median_time(functools.partial(sess.run, None, feed), 1, reps)
        print(f"{'light ResNet-50 (onnx test data), batch 1':44s} {'':>7s} {t_load * 1e3:6.1f} "
              f"{'':>8s} {t_imp * 1e3:9.2f} {t_ort * 1e3:8.2f} {'':>10s} {t_imp / t_ort:7.2f}x")


if __name__ == "__main__":
    main()
