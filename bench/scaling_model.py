"""Cost model of data-parallel gradient exchange: ring all-reduce (flat and hierarchical) and a
parameter server, calibrated with figures measured on this machine, predicting the scaling
efficiency of ResNet-50 on 8, 64, 256 and 512 GPUs. numpy only; see docs/scaling.md.

    python bench/scaling_model.py                        # the calibration recorded in the doc
    python bench/scaling_model.py --measure              # rerun both benches here, then refit
    python bench/scaling_model.py --alpha 5e-6 --bandwidth 2.5e9   # override the calibration

Model (n ranks, S gradient bytes in k buckets, B bytes/s per link, alpha s per message):
    ring all-reduce        T = 2(n-1) alpha k + 2(n-1)/n S / B
    hierarchical (g/node)  T = 2(g-1) alpha k + 2(g-1)/g S / B_intra          (reduce-scatter +
                               + 2(N-1) alpha k + 2(N-1)/N S / B_node          all-gather in node,
                                                                               ring across N nodes)
    parameter server       T = 2 alpha k + 2 S / B_link * max(1, W / K)
    top-k all-gather       T = 2(n-1) alpha 2k + (n-1) s / B   (s: one rank's (index, value) bytes)
Buckets become ready evenly through backward (2/3 of the step's compute) and are sent one after
another; what is still sending when backward ends is exposed. Efficiency = T_c / (T_c + exposed).
"""

from __future__ import annotations

import argparse
import math
import os
import re
import subprocess
import sys

import numpy as np

MB = 1 << 20
# ---- measured here (the run recorded in docs/scaling.md; --measure redoes it) ------------------
# python bench/bench_allreduce.py --repeat 9: size MB -> ours-nochk median ms, 2 ranks
ALLREDUCE_NOCHK_MS = {1: 0.56, 4: 1.92, 16: 6.27, 64: 55.36, 256: 200.27}
# the 4B (latency) row of bench_allreduce.py: a one-element dist.all_reduce on 2 ranks, with
# the check off (the ours-nochk column), as measured for docs/scaling.md
SMALL_ALLREDUCE_US = 9.0
# python bench/bench_distopt.py: mode -> (ms/step, bytes/step); 1 and 2 ranks, one run
DISTOPT = {
    1: {"local (no comm)": (8.11, 0), "full": (8.25, 0), "full, bucketed": (6.82, 0)},
    2: {"local (no comm)": (7.39, 0), "full": (11.04, 2678824), "half": (12.16, 1339412),
        "sparse top-k 1%": (18.07, 53576)},
}
DISTOPT_BUCKET = 2 * MB  # DistOpt's default fusion threshold

# ---- published figures, used as assumptions (see docs/scaling.md for sources) -----------------
RESNET50_PARAMS = 25.6e6            # ResNet-50: 25.6 M parameters -> 102 MB of float32 grads
STEP_S = 64 / 219                   # P100-class, batch 64: 219 images/s (TF benchmarks, DGX-1)
BACKWARD_FRACTION = 2 / 3           # backward ~ twice the forward's work
GPUS_PER_NODE = 8                   # DGX-class node
NVLINK_BUS = 100e9                  # intra-node all-reduce bus bandwidth, NVLink/NVSwitch class
NETWORKS = {"25 Gb/s Ethernet": 25e9 / 8, "200 Gb/s InfiniBand": 200e9 / 8}
BUCKET = 25 * MB                    # a large fusion buffer (DDP's default size)
GPU_COUNTS = (8, 64, 256, 512)


# ---- calibration ---------------------------------------------------------------------------
def fit_line(sizes: np.ndarray, times: np.ndarray, relative: bool) -> tuple[float, float]:
    """Least squares t = a + b*S; with `relative`, each row is weighted by 1/t so that the
    1 MB and the 256 MB rows count alike (the times span three decades)."""
    A = np.column_stack([np.ones_like(sizes), sizes])
    w = 1 / times if relative else np.ones_like(times)
    (a, b), *_ = np.linalg.lstsq(A * w[:, None], times * w, rcond=None)
    return float(a), float(b)


def run_benches() -> tuple[dict, dict]:
    """Run bench_allreduce.py and bench_distopt.py here and parse their tables."""
    here = os.path.dirname(os.path.abspath(__file__))
    ar = subprocess.run([sys.executable, os.path.join(here, "bench_allreduce.py"), "--repeat",
                         "9"], capture_output=True, text=True, check=True).stdout
    print(ar)
    allreduce = {int(m[1]): float(m[2]) for m in
                 re.finditer(r"^\s*(\d+)MB\s+\S+ms\s+\S+ms\s+([\d.]+)ms", ar, re.M)}
    latency = re.search(r"^\s*4B\s+\S+us\s+\S+us\s+([\d.]+)us", ar, re.M)
    if latency:
        allreduce["latency_us"] = float(latency[1])
    do = subprocess.run([sys.executable, os.path.join(here, "bench_distopt.py")],
                        capture_output=True, text=True, check=True).stdout
    print(do)
    distopt: dict = {}
    for block in do.split("DistOpt on ")[1:]:
        ranks = int(block.split()[0])
        rows = re.findall(r"^(\S.*?)\s+([\d.]+)\s+[\d.]+x\s+([\d,]+)$", block, re.M)
        distopt[ranks] = {name: (float(ms), int(b.replace(",", ""))) for name, ms, b in rows}
    return allreduce, distopt


def ring(n: int, nbytes: float, k: int, alpha: float, bw: float) -> float:
    return 2 * (n - 1) * alpha * k + 2 * (n - 1) / n * nbytes / bw if n > 1 else 0.0


def calibrate(args, allreduce: dict, distopt: dict) -> dict:
    allreduce = dict(allreduce)
    small_us = allreduce.pop("latency_us", SMALL_ALLREDUCE_US)
    sizes = np.array(sorted(allreduce), dtype=float) * MB
    times = np.array([allreduce[s] for s in sorted(allreduce)]) * 1e-3
    a_ls, b_ls = fit_line(sizes, times, relative=False)
    a_rel, b_rel = fit_line(sizes, times, relative=True)
    # 2 ranks: T = 2 alpha + S / B, so the intercept is 2 alpha and the slope 1/B
    alpha = a_rel / 2 if a_rel > 0 else small_us * 1e-6 / 2
    alpha_src = "fit intercept / 2" if a_rel > 0 else "4-byte all_reduce / 2 (intercept < 0)"
    bw = 1 / b_rel
    if args.alpha is not None:
        alpha, alpha_src = args.alpha, "--alpha"
    bw_src = "--bandwidth" if args.bandwidth is not None else "1 / fit slope"
    bw = args.bandwidth if args.bandwidth is not None else bw
    print("Calibration measured here (2 MPI ranks, shared memory, MPICH)")
    print(f"  all_reduce ours-nochk, least squares t = a + S*b over {sorted(allreduce)} MB:")
    print(f"    plain:          a = {a_ls * 1e3:+8.3f} ms   1/b = {1 / b_ls / 1e9:5.2f} GB/s")
    print(f"    relative error: a = {a_rel * 1e3:+8.3f} ms   1/b = {1 / b_rel / 1e9:5.2f} GB/s")
    print(f"  4-byte all_reduce: {small_us:.1f} us")
    print(f"  used: alpha = {alpha * 1e6:.1f} us ({alpha_src}), B = {bw / 1e9:.2f} GB/s ({bw_src})")
    print(f"  {'size':>6} {'measured':>10} {'model':>10}")
    for s in sorted(allreduce):
        print(f"  {s:>4}MB {allreduce[s]:>8.2f}ms {ring(2, s * MB, 1, alpha, bw) * 1e3:>8.2f}ms")

    one, two = distopt[1], distopt[2]
    full_bytes = two["full"][1]
    k = max(1, math.ceil(full_bytes / DISTOPT_BUCKET))
    comm = ring(2, full_bytes, k, alpha, bw)
    # the 1-rank reference runs the same bucketed path, so the difference is communication
    ref = one.get("full, bucketed", one["full"])[0]
    exposed = two["full"][0] - ref
    hidden = min(1.0, max(0.0, 1 - exposed * 1e-3 / comm))
    print("  DistOpt MLP step (bench_distopt.py), full mode:")
    print(f"    1 rank {one['full'][0]:.2f} ms (bucketed path {ref:.2f} ms), 2 ranks "
          f"{two['full'][0]:.2f} ms (ratio to the bucketed path {two['full'][0] / ref:.2f}x), "
          f"2-rank local step {two['local (no comm)'][0]:.2f} ms")
    print(f"    model comm for {full_bytes:,} B in {k} buckets: {comm * 1e3:.2f} ms; exposed "
          f"(2-rank minus 1-rank bucketed step) {exposed:.2f} ms -> hidden fraction "
          f"h = {hidden:.2f}")
    half = two["half"][1] / full_bytes
    sparse = two["sparse top-k 1%"][1] / full_bytes
    print(f"    bytes on the wire vs full: half {half:.3f}, sparse top-k 1% {sparse:.3f}")
    return {"alpha": alpha, "bw": bw, "hidden": hidden, "half": half, "sparse": sparse}


# ---- the model -------------------------------------------------------------------------------
def exposed_comm(bucket_times: list[float], t_backward: float) -> float:
    """Buckets ready at evenly spaced times through backward, sent one after another; returns
    how long sending goes on after backward ends."""
    k = len(bucket_times)
    done = 0.0
    for i, c in enumerate(bucket_times, 1):
        done = max(done, t_backward * i / k) + c
    return max(0.0, done - t_backward)


def scheme_time(scheme: str, n: int, nbytes: float, k: int, alpha: float, b_node: float,
                g: int = GPUS_PER_NODE, servers: float = 1.0, b_intra: float = NVLINK_BUS) -> float:
    """Seconds to exchange one bucket of nbytes among n GPUs (g per node)."""
    nodes = max(1, n // g)
    gl = min(g, n)
    if scheme == "flat":
        # one ring through every GPU: its slowest hop is the node's network link
        return ring(n, nbytes, 1, alpha, b_intra if nodes == 1 else b_node)
    if scheme == "hier":
        intra = 2 * (gl - 1) * alpha + 2 * (gl - 1) / gl * nbytes / b_intra if gl > 1 else 0.0
        return intra + ring(nodes, nbytes, 1, alpha, b_node)
    if scheme == "ps":
        # every worker and every server has a link of the node's bandwidth / g
        link = b_node / g
        k_srv = max(1, round(servers * n))
        return 2 * alpha + 2 * nbytes / link * max(1.0, n / k_srv)
    if scheme == "topk":
        # this rank's (index, value) pairs gathered from every rank: two all-gathers
        return 2 * (n - 1) * alpha * 2 + (n - 1) * nbytes / (b_intra if nodes == 1 else b_node)
    raise ValueError(f"scheme_time: unknown scheme {scheme!r}")


def efficiency(scheme: str, n: int, alpha: float, b_node: float, wire: float = 1.0,
               bucket: float = BUCKET, step: float = STEP_S, hidden: float | None = None,
               **kw) -> float:
    total = RESNET50_PARAMS * 4 * wire
    k = max(1, math.ceil(RESNET50_PARAMS * 4 / bucket))
    per = scheme_time(scheme, n, total / k, k, alpha, b_node, **kw)
    exposed = exposed_comm([per] * k, BACKWARD_FRACTION * step)
    if hidden is not None:  # no better than the overlap measured here
        exposed = max(exposed, (1 - hidden) * per * k)
    return step / (step + exposed)


def table(title: str, rows: list[tuple[str, dict]], alpha: float, b_node: float,
          counts=GPU_COUNTS) -> None:
    print(f"\n{title}")
    print(f"  {'scheme':<34}" + "".join(f"{n:>7}" for n in counts))
    for name, kw in rows:
        effs = [efficiency(n=n, alpha=alpha, b_node=b_node, **kw) for n in counts]
        print(f"  {name:<34}" + "".join(f"{e * 100:>6.0f}%" for e in effs))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--alpha", type=float, help="per-message latency in s (overrides the fit)")
    ap.add_argument("--bandwidth", type=float, help="measured link bandwidth in B/s (overrides)")
    ap.add_argument("--measure", action="store_true", help="rerun the two benches here first")
    args = ap.parse_args()
    allreduce, distopt = run_benches() if args.measure else (ALLREDUCE_NOCHK_MS, DISTOPT)
    cal = calibrate(args, allreduce, distopt)
    alpha = cal["alpha"]
    print("\nAssumptions (published figures): ResNet-50 25.6 M params = "
          f"{RESNET50_PARAMS * 4 / 1e6:.0f} MB fp32; step {STEP_S * 1e3:.0f} ms (64 img at "
          f"219 img/s), backward 2/3; {GPUS_PER_NODE} GPUs/node, NVLink bus "
          f"{NVLINK_BUS / 1e9:.0f} GB/s; buckets of {BUCKET // MB} MB; alpha as calibrated")
    ring_rows = [("ring flat", {"scheme": "flat"}), ("ring hierarchical", {"scheme": "hier"})]
    ps_rows = [(f"param server K = {lbl}", {"scheme": "ps", "servers": f})
               for lbl, f in (("W/4", 0.25), ("W/2", 0.5), ("W", 1.0))]
    for net, b_node in NETWORKS.items():
        table(f"ResNet-50 scaling efficiency, {net} per node", ring_rows + ps_rows, alpha,
              b_node)
    for net in ("25 Gb/s Ethernet", "200 Gb/s InfiniBand"):
        hier = {"scheme": "hier"}
        table(f"Variants, ring hierarchical unless named, {net}", [
            ("fp32 gradients", hier),
            ("fp16 on the wire (measured bytes)", {**hier, "wire": cal["half"]}),
            ("top-k 1% all-gather, flat", {"scheme": "topk", "wire": cal["sparse"]}),
            ("2 MB buckets (DistOpt default)", {**hier, "bucket": 2 * MB}),
            ("overlap capped at measured h", {**hier, "hidden": cal["hidden"]}),
            ("4x faster GPU (73 ms step)", {**hier, "step": STEP_S / 4}),
            ("4x faster GPU, fp16 on the wire", {**hier, "step": STEP_S / 4,
                                                 "wire": cal["half"]}),
        ], alpha, NETWORKS[net])
    table("Sensitivity: ring flat with alpha = 5 us (NCCL-class latency), 25 Gb/s Ethernet",
          [("ring flat, alpha 5 us", {"scheme": "flat"})], 5e-6, NETWORKS["25 Gb/s Ethernet"])
    table("Horovod-like cluster: 4 GPUs/node, 25 Gb/s per node, ring hierarchical",
          [("ResNet-50 fp32", {"scheme": "hier", "g": 4})], alpha,
          NETWORKS["25 Gb/s Ethernet"], counts=(8, 64, 256, 512))
    print("  Horovod (Sergeev & Del Balso 2018), 512 GPUs: ~90% (Inception V3, ResNet-101)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
