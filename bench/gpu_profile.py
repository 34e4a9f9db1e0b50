"""Where a CUDA training step spends its host time: cProfile over steps of one of bench/gpu.py's
models (singa_tensor side only), the top functions by own time, and the step time with and
without a device sync after each step (their gap is the GPU time the host does not hide).

    python bench/gpu_profile.py [mlp|cnn|resnet18] [--steps N]
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import gpu  # noqa: E402  (bench/gpu.py: the models and the step)

import singa_tensor as st  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model", nargs="?", default="cnn", choices=sorted(gpu.TRAIN))
    ap.add_argument("--steps", type=int, default=20)
    args = ap.parse_args()
    if not st.cuda.is_available():
        print("gpu_profile: no usable CUDA device; nothing to profile")
        return
    _, builder, shape = gpu.TRAIN[args.model]
    gpu.st = st  # bench/gpu.py binds the library in its main()
    step = gpu.make_step("ours", builder, shape, seed=7)
    for _ in range(5):
        step()
    st.cuda.synchronize()
    for sync in (False, True):
        t = time.perf_counter()
        for _ in range(args.steps):
            step()
            if sync:
                st.cuda.synchronize()
        st.cuda.synchronize()
        print(f"{args.model}: {(time.perf_counter() - t) / args.steps * 1e3:.3f} ms/step "
              f"({'sync after each step' if sync else 'no sync between steps'})")
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(args.steps):
        step()
    st.cuda.synchronize()
    prof.disable()
    pstats.Stats(prof).sort_stats("tottime").print_stats(25)


if __name__ == "__main__":
    main()
