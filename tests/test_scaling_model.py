"""bench/scaling_model.py: the cost model's formulas on cases small enough to work out by hand,
the shape of its predictions (efficiency in (0, 1], better with more bandwidth, better with
overlap), its agreement with the byte counts bench_parallel.py measured, and docs/scaling.md
holding the script's real output."""

from __future__ import annotations

import importlib.util
import math
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "bench" / "scaling_model.py"

_spec = importlib.util.spec_from_file_location("scaling_model", SCRIPT)
sm = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(sm)

ALPHA = 8.8e-6
IB = sm.NETWORKS["200 Gb/s InfiniBand"]
ETH = sm.NETWORKS["25 Gb/s Ethernet"]


# ---- bytes per step ------------------------------------------------------------------------
def test_collective_bytes_by_hand():
    assert sm.collective_bytes("all_reduce", 4, 1000) == 1500       # 2 * 3/4 * 1000
    assert sm.collective_bytes("all_gather", 4, 1000) == 750        # 3/4 * 1000
    assert sm.collective_bytes("reduce_scatter", 2, 1000) == 500
    assert sm.collective_bytes("all_reduce", 1, 1000) == 0


@pytest.mark.parametrize("n", [2, 4, 64, 1024])
def test_fsdp_bytes_against_ddp(n):
    nbytes = 8 * 1024 * 1024
    ddp = sm.fsdp_bytes("NO_SHARD", n, nbytes)
    assert ddp == pytest.approx(2 * (n - 1) / n * nbytes)
    assert sm.fsdp_bytes("FULL_SHARD", n, nbytes) == pytest.approx(1.5 * ddp)
    assert sm.fsdp_bytes("SHARD_GRAD_OP", n, nbytes) == pytest.approx(ddp)


def test_fsdp_bytes_match_bench_parallel():
    # bench_parallel.py counted these exactly (bench/README.md "Parallel strategies")
    for ranks, row in sm.PARALLEL_BYTES.items():
        ratio = row["FSDP full shard"] / row["DDP"]
        model = sm.fsdp_bytes("FULL_SHARD", ranks, 1) / sm.fsdp_bytes("NO_SHARD", ranks, 1)
        assert ratio == pytest.approx(model, rel=1e-5)
        assert row["FSDP grad-op"] / row["DDP"] == pytest.approx(1.0, rel=1e-5)
        # its TP MLP has one Column -> Row pair: one all-reduce of the (32 r) x 512 fp32 output
        assert row["tensor parallel"] == sm.collective_bytes("all_reduce", ranks,
                                                             32 * ranks * 512 * 4)


def test_tensor_parallel_counts_and_bytes_by_hand():
    assert sm.tp_allreduces(1) == 4     # 2 in forward (attention, MLP), 2 in backward
    assert sm.tp_allreduces(72) == 288
    # t = 2, one sequence of 4 tokens, hidden 8, 2 bytes: 64-byte activation, each all-reduce
    # sends 2 * 1/2 * 64 = 64 bytes per rank, four of them per layer
    assert sm.tp_bytes(2, 1, layers=1, seq=4, hidden=8, wire=2) == 256
    assert sm.tp_bytes(1, 1, layers=3, seq=4, hidden=8, wire=2) == 0


def test_gpt_parameter_count():
    # Megatron-LM's 8.3B configuration: 12 L h^2 in the layers plus the embeddings
    assert sm.GPT_PARAMS == pytest.approx(8.3e9, rel=0.01)


# ---- the FSDP timeline ---------------------------------------------------------------------
def test_fsdp_step_without_overlap_is_compute_plus_every_collective():
    assert sm.fsdp_step(1, 2, 0.5, 0.25, 3, "FULL_SHARD", overlap=False) == 3 * (3 + 1 + 0.25)
    assert sm.fsdp_step(1, 2, 0.5, 0.25, 3, "SHARD_GRAD_OP", overlap=False) == \
        3 * (3 + 0.5 + 0.25)


def test_fsdp_step_overlap_by_hand():
    # 2 units, forward 1, backward 2, gather 0.5, scatter 0.5: only the first forward gather,
    # the first backward gather and the last scatter are exposed
    assert sm.fsdp_step(1, 2, 0.5, 0.5, 2, "FULL_SHARD") == pytest.approx(0.5 + 6 + 0.5 + 0.5)
    # SHARD_GRAD_OP keeps the parameters: the backward gather disappears
    assert sm.fsdp_step(1, 2, 0.5, 0.5, 2, "SHARD_GRAD_OP") == pytest.approx(0.5 + 6 + 0.5)
    # no communication: the step is the compute
    assert sm.fsdp_step(1, 2, 0, 0, 5, "FULL_SHARD") == 15


def test_fsdp_step_communication_bound_is_the_channel_time():
    # no compute: the channel runs every collective back to back, overlap or not
    for strategy, per_unit in (("FULL_SHARD", 2 * 0.5 + 0.3), ("SHARD_GRAD_OP", 0.5 + 0.3)):
        assert sm.fsdp_step(0, 0, 0.5, 0.3, 4, strategy) == pytest.approx(4 * per_unit)
        assert sm.fsdp_step(0, 0, 0.5, 0.3, 4, strategy, overlap=False) == \
            pytest.approx(4 * per_unit)


def test_fsdp_step_rejects_bad_input():
    with pytest.raises(ValueError, match="fsdp_step: unknown sharding strategy 'HYBRID'"):
        sm.fsdp_step(1, 2, 0.5, 0.5, 2, "HYBRID")
    with pytest.raises(ValueError, match="fsdp_step: units must be at least 1, got 0"):
        sm.fsdp_step(1, 2, 0.5, 0.5, 0)


def test_bytes_helpers_reject_bad_input():
    with pytest.raises(ValueError, match="collective_bytes: unknown collective 'broadcast'"):
        sm.collective_bytes("broadcast", 2, 8)
    with pytest.raises(ValueError, match="fsdp_bytes: unknown sharding strategy 'ZERO'"):
        sm.fsdp_bytes("ZERO", 2, 8)


# ---- efficiencies --------------------------------------------------------------------------
EFFICIENCIES = {
    "fsdp full shard": lambda n, b: sm.fsdp_efficiency(n, ALPHA, b, "FULL_SHARD", True),
    "fsdp full shard, no overlap": lambda n, b: sm.fsdp_efficiency(n, ALPHA, b, "FULL_SHARD",
                                                                   False),
    "fsdp grad-op": lambda n, b: sm.fsdp_efficiency(n, ALPHA, b, "SHARD_GRAD_OP", True),
    "fsdp flat ring": lambda n, b: sm.fsdp_efficiency(n, ALPHA, b, scheme="flat"),
    "ddp transformer": lambda n, b: sm.ddp_transformer_efficiency(n, ALPHA, b),
    "tp x dp": lambda n, b: sm.tp_dp_efficiency(n, ALPHA, b),
    "tp x dp, no overlap": lambda n, b: sm.tp_dp_efficiency(n, ALPHA, b, overlap=False),
    "tp 4 x dp": lambda n, b: sm.tp_dp_efficiency(n, ALPHA, b, t=4),
}


@pytest.mark.parametrize("name", sorted(EFFICIENCIES))
def test_efficiency_in_range_and_monotone_in_bandwidth(name):
    fn = EFFICIENCIES[name]
    for n in sm.BIG_COUNTS:
        effs = [fn(n, b) for b in (ETH, IB, 4 * IB, 100 * IB)]
        assert all(0 < e <= 1 for e in effs), effs
        assert all(a <= b for a, b in zip(effs, effs[1:])), effs
        assert effs[0] < effs[-1]


def test_overlap_and_sharding_order():
    for n in sm.BIG_COUNTS:
        for b in (ETH, IB):
            full_no = sm.fsdp_efficiency(n, ALPHA, b, "FULL_SHARD", False)
            full = sm.fsdp_efficiency(n, ALPHA, b, "FULL_SHARD", True)
            grad_op = sm.fsdp_efficiency(n, ALPHA, b, "SHARD_GRAD_OP", True)
            assert full_no < full < grad_op
            assert sm.tp_dp_efficiency(n, ALPHA, b, overlap=False) < \
                sm.tp_dp_efficiency(n, ALPHA, b)


def test_tensor_parallel_alone_by_hand():
    # without the gradient exchange only the 4 L in-node all-reduces remain: independent of n
    # and of the network
    compute = 6 * sm.GPT_PARAMS * sm.GPT_SEQ / sm.GPU_FLOPS
    act = 8 * sm.GPT_SEQ * sm.GPT_HIDDEN * sm.WIRE_BYTES
    one = 2 * 7 * ALPHA + 2 * 7 / 8 * act / sm.NVLINK_BUS
    want = compute / (compute + 4 * sm.GPT_LAYERS * one)
    for n in (8, 64, 1024):
        for b in (ETH, IB):
            assert sm.tp_dp_efficiency(n, ALPHA, b, dp=False) == pytest.approx(want)
    # one group of 8: no data parallelism, the same
    assert sm.tp_dp_efficiency(8, ALPHA, ETH) == pytest.approx(want)


def test_data_parallel_exchange_after_backward_by_hand():
    # TP 8 x DP 8 on 64 GPUs, the gradient exchange after backward: P b / 8 bytes per rank in
    # 25 MB buckets over a ring of 8, at 1/8 of the node's link each
    compute = sm.transformer_compute()
    tp = 4 * sm.GPT_LAYERS * sm.ring(8, 8 * sm.GPT_SEQ * sm.GPT_HIDDEN * 2, 1, ALPHA,
                                     sm.NVLINK_BUS)
    grad = sm.GPT_PARAMS * 2 / 8
    k = math.ceil(grad / sm.BUCKET)
    dp = k * (2 * 7 * ALPHA + 2 * 7 / 8 * (grad / k) / (IB / 8))
    assert sm.tp_dp_efficiency(64, ALPHA, IB, overlap=False) == \
        pytest.approx(compute / (compute + tp + dp))


def test_tp_dp_rejects_bad_input():
    with pytest.raises(ValueError, match="TP size must divide the 8 GPUs of a node, got t=16"):
        sm.tp_dp_efficiency(64, ALPHA, IB, t=16)
    with pytest.raises(ValueError, match="TP size must divide the 8 GPUs of a node, got t=3"):
        sm.tp_dp_efficiency(63, ALPHA, IB, t=3)
    with pytest.raises(ValueError, match="100 GPUs do not split into groups of t=8"):
        sm.tp_dp_efficiency(100, ALPHA, IB)


# ---- the script and its documentation ------------------------------------------------------
def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True,
                          timeout=300)


def test_section_flag_selects_tables():
    r = run("--section", "fsdp")
    assert r.returncode == 0, r.stderr
    assert "FSDP (one unit per layer)" in r.stdout
    assert "ResNet-50 scaling efficiency" not in r.stdout
    assert "tensor x data parallel" not in r.stdout
    bad = run("--section", "dp,pipeline")
    assert bad.returncode == 2
    assert "--section: unknown section(s) pipeline; choose from dp, fsdp, tp" in bad.stderr


def test_docs_hold_the_real_output():
    doc = (ROOT / "docs" / "scaling.md").read_text()
    blocks = re.findall(r"^#{2,3} Prediction.*?\n```\n(.*?)```\n", doc, re.M | re.S)
    assert len(blocks) == 2, "docs/scaling.md: expected two recorded output blocks"
    r = run()
    assert r.returncode == 0, r.stderr
    assert r.stdout == blocks[0] + "\n" + blocks[1]
