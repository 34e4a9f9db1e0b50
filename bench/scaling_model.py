"""Cost model of data-parallel gradient exchange: ring all-reduce (flat and hierarchical) and a
parameter server, calibrated with figures measured on this machine, predicting the scaling
efficiency of ResNet-50 on 8, 64, 256 and 512 GPUs; and, with the same calibration, of a
GPT-class transformer (Megatron-LM's 8.3B configuration) under fully sharded data parallelism
and under tensor x data parallelism on 64-1024 GPUs. numpy only; see docs/scaling.md.

    python bench/scaling_model.py                        # the calibration recorded in the doc
    python bench/scaling_model.py --measure              # rerun both benches here, then refit
    python bench/scaling_model.py --alpha 5e-6 --bandwidth 2.5e9   # override the calibration
    python bench/scaling_model.py --section fsdp,tp      # only the transformer tables

Model (n ranks, S gradient bytes in k buckets, B bytes/s per link, alpha s per message):
    ring all-reduce        T = 2(n-1) alpha k + 2(n-1)/n S / B
    hierarchical (g/node)  T = 2(g-1) alpha k + 2(g-1)/g S / B_intra          (reduce-scatter +
                               + 2(N-1) alpha k + 2(N-1)/N S / B_node          all-gather in node,
                                                                               ring across N nodes)
    parameter server       T = 2 alpha k + 2 S / B_link * max(1, W / K)
    top-k all-gather       T = 2(n-1) alpha 2k + (n-1) s / B   (s: one rank's (index, value) bytes)
Buckets become ready evenly through backward (2/3 of the step's compute) and are sent one after
another; what is still sending when backward ends is exposed. Efficiency = T_c / (T_c + exposed).

Transformer (L layers, hidden h, sequence s, P parameters, b bytes on the wire, one sequence
per GPU, T_c = 6 P s / F at F flop/s per GPU):
    FSDP, per unit (one layer)  all-gather and reduce-scatter each half a ring all-reduce;
                                FULL_SHARD gathers before forward and backward and scatters
                                (3 (n-1)/n P b per step), SHARD_GRAD_OP gathers once
                                (2 (n-1)/n P b); with prefetch the next unit's gather runs
                                while this unit computes, otherwise every collective blocks
    tensor parallel, t per node 4 L ring all-reduces of t s h b bytes inside the node (2 in
                                forward, 2 in backward), all on the critical path, plus the
                                data-parallel ring of P b / t over n/t ranks, the t rings of a
                                node sharing its link
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

# ---- the transformer: Megatron-LM's 8.3B GPT-2 configuration (published; docs/scaling.md) ----
GPT_LAYERS = 72
GPT_HIDDEN = 3072
GPT_SEQ = 1024
GPT_VOCAB = 51200                   # padded to a multiple of 1024
GPT_PARAMS = 12 * GPT_LAYERS * GPT_HIDDEN ** 2 + (GPT_VOCAB + GPT_SEQ) * GPT_HIDDEN  # 8.3e9
WIRE_BYTES = 2                      # fp16 parameters, activations and gradients on the wire
GPU_FLOPS = 39e12                   # Megatron-LM's single-V100 baseline, sustained
TP_SIZE = 8                         # Megatron-LM's 8-way tensor parallelism, one node
SUPERPOD = {"g": 16, "b_node": 100e9}  # DGX-2H: 16 GPUs, 100 GB/s between servers
BIG_COUNTS = (64, 128, 256, 512, 1024)
# python bench/bench_parallel.py, 2 and 4 ranks, batch 32 per rank: bytes rank 0 sent per step
PARALLEL_BYTES = {2: {"DDP": 2678824, "FSDP full shard": 4018236, "FSDP grad-op": 2678824,
                      "tensor parallel": 131072},
                  4: {"DDP": 4018236, "FSDP full shard": 6027372, "FSDP grad-op": 4018248,
                      "tensor parallel": 393216}}


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


# ---- the transformer: FSDP and tensor x data parallelism ---------------------------------------
def collective_bytes(kind: str, n: int, nbytes: float) -> float:
    """Bytes one rank sends in a ring collective over n ranks of an nbytes buffer (as
    bytes_sent counts them): all-reduce 2 (n-1)/n, all-gather and reduce-scatter (n-1)/n."""
    if kind == "all_reduce":
        return 2 * (n - 1) / n * nbytes
    if kind in ("all_gather", "reduce_scatter"):
        return (n - 1) / n * nbytes
    raise ValueError(f"collective_bytes: unknown collective {kind!r}")


def fsdp_bytes(strategy: str, n: int, nbytes: float) -> float:
    """Bytes one rank sends per step when the parameters (nbytes in all) are sharded over n
    ranks; "NO_SHARD" is DDP's all-reduce of the gradients."""
    if strategy == "FULL_SHARD":    # gather for forward, gather again for backward, scatter
        return 2 * collective_bytes("all_gather", n, nbytes) + \
            collective_bytes("reduce_scatter", n, nbytes)
    if strategy == "SHARD_GRAD_OP":  # the forward's gather is kept until backward
        return collective_bytes("all_gather", n, nbytes) + \
            collective_bytes("reduce_scatter", n, nbytes)
    if strategy == "NO_SHARD":
        return collective_bytes("all_reduce", n, nbytes)
    raise ValueError(f"fsdp_bytes: unknown sharding strategy {strategy!r}")


def tp_allreduces(layers: int) -> int:
    """Megatron-style tensor parallelism: per transformer layer the attention and the MLP block
    each end in an all-reduce in forward (g) and begin with one in backward (f)."""
    return 4 * layers


def tp_bytes(t: int, seqs: int, layers: int = GPT_LAYERS, seq: int = GPT_SEQ,
             hidden: int = GPT_HIDDEN, wire: int = WIRE_BYTES) -> float:
    """Bytes one rank of a tensor-parallel group of t sends per step: every all-reduce is of the
    group's whole activation, seqs x seq x hidden values."""
    return tp_allreduces(layers) * collective_bytes("all_reduce", t, seqs * seq * hidden * wire)


def transformer_compute(seqs_per_gpu: float = 1.0, flops: float = GPU_FLOPS) -> float:
    """Seconds of forward and backward per GPU: 6 P flops per token."""
    return 6 * GPT_PARAMS * GPT_SEQ * seqs_per_gpu / flops


def fsdp_step(forward: float, backward: float, gather: float, scatter: float, units: int,
              strategy: str = "FULL_SHARD", overlap: bool = True) -> float:
    """Seconds of one step of `units` equal FSDP units, each computing `forward` and `backward`
    seconds, with collectives of `gather` / `scatter` seconds on one channel that runs them
    in the order they are issued. With `overlap`, a unit's forward (backward) issues the next
    unit's gather as it starts (forward_prefetch, BACKWARD_PRE) and the reduce-scatter goes
    out when its backward ends; without, every collective blocks the computation."""
    if strategy not in ("FULL_SHARD", "SHARD_GRAD_OP"):
        raise ValueError(f"fsdp_step: unknown sharding strategy {strategy!r}")
    if units < 1:
        raise ValueError(f"fsdp_step: units must be at least 1, got {units}")
    regather = strategy == "FULL_SHARD"
    if not overlap:
        return units * (forward + backward + gather * (2 if regather else 1) + scatter)
    channel = 0.0  # when the channel is next free

    def issue(at: float, seconds: float) -> float:
        nonlocal channel
        channel = max(channel, at) + seconds
        return channel

    now, ready = 0.0, issue(0.0, gather)
    for i in range(units):                        # forward, prefetching one unit ahead
        start = max(now, ready)
        if i + 1 < units:
            ready = issue(start, gather)
        now = start + forward
    ready = issue(now, gather) if regather else now
    for i in range(units):                        # backward, in reverse order
        start = max(now, ready)
        if regather and i + 1 < units:
            ready = issue(start, gather)
        now = start + backward
        issue(now, scatter)
    return max(now, channel)


def fsdp_efficiency(n: int, alpha: float, b_node: float, strategy: str = "FULL_SHARD",
                    overlap: bool = True, scheme: str = "hier", g: int = GPUS_PER_NODE,
                    flops: float = GPU_FLOPS, seqs: float = 1.0) -> float:
    """FSDP of the transformer over n GPUs, one unit per layer, `seqs` sequences per GPU."""
    compute = transformer_compute(seqs, flops)
    units = GPT_LAYERS
    # a ring all-reduce is a reduce-scatter then an all-gather, so each costs half of it
    gather = scheme_time(scheme, n, GPT_PARAMS * WIRE_BYTES / units, 1, alpha, b_node, g=g) / 2
    step = fsdp_step((1 - BACKWARD_FRACTION) * compute / units,
                     BACKWARD_FRACTION * compute / units, gather, gather, units, strategy,
                     overlap)
    return compute / step


def ddp_transformer_efficiency(n: int, alpha: float, b_node: float, g: int = GPUS_PER_NODE,
                               flops: float = GPU_FLOPS) -> float:
    """DDP of the transformer (the reference FSDP is measured against; its state does not fit):
    25 MB buckets, hierarchical ring, overlapped with backward."""
    compute = transformer_compute(1.0, flops)
    total = GPT_PARAMS * WIRE_BYTES
    k = math.ceil(total / BUCKET)
    per = scheme_time("hier", n, total / k, 1, alpha, b_node, g=g)
    return compute / (compute + exposed_comm([per] * k, BACKWARD_FRACTION * compute))


def tp_dp_efficiency(n: int, alpha: float, b_node: float, t: int = TP_SIZE,
                     overlap: bool = True, g: int = GPUS_PER_NODE, flops: float = GPU_FLOPS,
                     b_intra: float = NVLINK_BUS, dp: bool = True) -> float:
    """Tensor parallelism in groups of t GPUs inside a node, data parallelism across the n/t
    groups; t sequences per group. The TP all-reduces are on the critical path; the gradient
    all-reduce (P b / t per rank, 25 MB buckets) overlaps backward when `overlap`, else it
    follows it. Each data-parallel ring crosses each node once, so the t rings of a node (one
    per TP rank) share its link. `dp=False` leaves the gradient exchange out."""
    if t < 1 or t > g or g % t:
        raise ValueError(f"tp_dp_efficiency: the TP size must divide the {g} GPUs of a node, "
                         f"got t={t}")
    if n % t:
        raise ValueError(f"tp_dp_efficiency: {n} GPUs do not split into groups of t={t}")
    compute = transformer_compute(1.0, flops)
    act = t * GPT_SEQ * GPT_HIDDEN * WIRE_BYTES
    tp = tp_allreduces(GPT_LAYERS) * ring(t, act, 1, alpha, b_intra)
    exposed = 0.0
    d = n // t
    if dp and d > 1:
        grad = GPT_PARAMS * WIRE_BYTES / t
        k = math.ceil(grad / BUCKET)
        per = ring(d, grad / k, 1, alpha, b_node / t)
        exposed = exposed_comm([per] * k, BACKWARD_FRACTION * compute) if overlap else per * k
    return compute / (compute + tp + exposed)


def big_table(title: str, rows: list[tuple[str, object]], counts=BIG_COUNTS) -> None:
    print(f"\n{title}")
    print(f"  {'scheme':<42}" + "".join(f"{n:>7}" for n in counts))
    for name, fn in rows:
        print(f"  {name:<42}" + "".join(f"{fn(n) * 100:>6.0f}%" for n in counts))


def transformer_sections(sections: set[str], cal: dict) -> None:
    alpha = cal["alpha"]
    p_bytes = GPT_PARAMS * WIRE_BYTES
    print(f"\nTransformer (Megatron-LM's 8.3B GPT-2): {GPT_LAYERS} layers, hidden {GPT_HIDDEN}, "
          f"sequence {GPT_SEQ}, vocabulary {GPT_VOCAB}: P = {GPT_PARAMS / 1e9:.2f} B parameters, "
          f"{p_bytes / 1e9:.1f} GB at {WIRE_BYTES} B; one sequence per GPU; "
          f"{GPU_FLOPS / 1e12:.0f} TFLOPS per GPU -> T_c = {transformer_compute() * 1e3:.0f} ms "
          f"(6 P flops per token); alpha as calibrated")
    print("  bytes per GPU per step, model vs bench_parallel.py (exact counts, MLP):")
    for r, row in PARALLEL_BYTES.items():
        ddp = row["DDP"]
        print(f"    {r} ranks: FSDP full shard / DDP {row['FSDP full shard'] / ddp:.3f} "
              f"(model {fsdp_bytes('FULL_SHARD', r, 1) / fsdp_bytes('NO_SHARD', r, 1):.3f}), "
              f"grad-op / DDP {row['FSDP grad-op'] / ddp:.3f} "
              f"(model {fsdp_bytes('SHARD_GRAD_OP', r, 1) / fsdp_bytes('NO_SHARD', r, 1):.3f}), "
              f"TP {row['tensor parallel']:,} (model, one Column->Row all-reduce of the "
              f"{32 * r} x 512 fp32 output: "
              f"{collective_bytes('all_reduce', r, 32 * r * 512 * 4):,.0f})")
    n = 512
    print(f"  at {n} GPUs: FSDP full shard {fsdp_bytes('FULL_SHARD', n, p_bytes) / 1e9:.1f} GB, "
          f"grad-op {fsdp_bytes('SHARD_GRAD_OP', n, p_bytes) / 1e9:.1f} GB, DDP "
          f"{fsdp_bytes('NO_SHARD', n, p_bytes) / 1e9:.1f} GB per GPU per step; TP {TP_SIZE} "
          f"{tp_bytes(TP_SIZE, TP_SIZE) / 1e9:.1f} GB inside the node ({tp_allreduces(GPT_LAYERS)} "
          f"all-reduces of {TP_SIZE * GPT_SEQ * GPT_HIDDEN * WIRE_BYTES / MB:.0f} MB) plus "
          f"{collective_bytes('all_reduce', n // TP_SIZE, p_bytes / TP_SIZE) / 1e9:.1f} GB of "
          f"gradients across nodes")
    fast = GPU_FLOPS * 4
    for net, b_node in NETWORKS.items():
        if "fsdp" in sections:
            def fs(strategy, overlap, scheme="hier", flops=GPU_FLOPS, seqs=1.0, b=b_node):
                return lambda n: fsdp_efficiency(n, alpha, b, strategy, overlap, scheme,
                                                 flops=flops, seqs=seqs)
            big_table(f"8.3B transformer, FSDP (one unit per layer), {net} per node", [
                ("DDP reference (state does not fit)",
                 lambda n, b=b_node: ddp_transformer_efficiency(n, alpha, b)),
                ("FULL_SHARD, no overlap", fs("FULL_SHARD", False)),
                ("FULL_SHARD, overlapped (this project)", fs("FULL_SHARD", True)),
                ("SHARD_GRAD_OP, no overlap", fs("SHARD_GRAD_OP", False)),
                ("SHARD_GRAD_OP, prefetch overlapped", fs("SHARD_GRAD_OP", True)),
                ("FULL_SHARD, overlapped, ring flat", fs("FULL_SHARD", True, "flat")),
                ("FULL_SHARD, overlapped, 4 seqs per GPU", fs("FULL_SHARD", True, seqs=4)),
                ("FULL_SHARD, overlapped, 4x faster GPU", fs("FULL_SHARD", True, flops=fast)),
            ])
        if "tp" in sections:
            def tpr(t=TP_SIZE, overlap=True, flops=GPU_FLOPS, dp=True, b=b_node):
                return lambda n: tp_dp_efficiency(n, alpha, b, t, overlap, flops=flops, dp=dp)
            big_table(f"8.3B transformer, tensor x data parallel, {net} per node", [
                (f"TP {TP_SIZE} all-reduces alone (no DP cost)", tpr(dp=False)),
                (f"TP {TP_SIZE} x DP n/{TP_SIZE}, DP overlapped", tpr()),
                (f"TP {TP_SIZE} x DP n/{TP_SIZE}, DP after backward", tpr(overlap=False)),
                ("TP 4 x DP n/4, DP overlapped", tpr(t=4)),
                (f"TP {TP_SIZE} x DP n/{TP_SIZE}, overlapped, 4x faster GPU", tpr(flops=fast)),
            ])
    if "tp" in sections:
        g, b_node = SUPERPOD["g"], SUPERPOD["b_node"]
        print(f"\nMegatron-LM's setting: {g} GPUs and {b_node / 1e9:.0f} GB/s per node "
              f"(DGX-2H SuperPOD), {GPU_FLOPS / 1e12:.0f} TFLOPS per GPU")
        rows = [
            (f"TP {TP_SIZE} alone, {TP_SIZE} GPUs", TP_SIZE, {"dp": False}, "77%"),
            (f"TP {TP_SIZE} x DP 64, DP after backward", 512, {"overlap": False},
             "74% (76% in FLOPS)"),
            (f"TP {TP_SIZE} x DP 64, DP overlapped", 512, {}, "-"),
        ]
        print(f"  {'scheme':<42}{'GPUs':>6}{'model':>8}   published")
        for name, n, kw, pub in rows:
            e = tp_dp_efficiency(n, alpha, b_node, TP_SIZE, g=g, **kw)
            print(f"  {name:<42}{n:>6}{e * 100:>7.0f}%   {pub}")
        for strategy in ("FULL_SHARD", "SHARD_GRAD_OP"):
            e = [fsdp_efficiency(512, alpha, b_node, strategy, o, g=g) for o in (False, True)]
            print(f"  {'FSDP ' + strategy + ', no overlap / overlap':<42}{512:>6}"
                  f"{e[0] * 100:>7.0f}% / {e[1] * 100:.0f}%")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--alpha", type=float, help="per-message latency in s (overrides the fit)")
    ap.add_argument("--bandwidth", type=float, help="measured link bandwidth in B/s (overrides)")
    ap.add_argument("--measure", action="store_true", help="rerun the two benches here first")
    ap.add_argument("--section", default="dp,fsdp,tp",
                    help="comma-separated tables to print: dp (ResNet-50 data parallel), fsdp, "
                         "tp (the transformer); default all")
    args = ap.parse_args()
    sections = set(args.section.split(","))
    unknown = sections - {"dp", "fsdp", "tp"}
    if unknown:
        ap.error(f"--section: unknown section(s) {', '.join(sorted(unknown))}; "
                 "choose from dp, fsdp, tp")
    allreduce, distopt = run_benches() if args.measure else (ALLREDUCE_NOCHK_MS, DISTOPT)
    cal = calibrate(args, allreduce, distopt)
    if "dp" in sections:
        data_parallel_sections(cal)
    if sections & {"fsdp", "tp"}:
        transformer_sections(sections, cal)
    return 0


def data_parallel_sections(cal: dict) -> None:
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


if __name__ == "__main__":
    sys.exit(main())
