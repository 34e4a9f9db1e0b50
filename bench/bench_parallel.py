"""Parallel strategies side by side: step time and bytes per step at 2 and 4 ranks.

One global batch per step for every row (ranks x --batch samples), SGD with momentum 0.9:

- `DDP`, MLP 784-512-512-10: DistributedDataParallel, each rank --batch samples.
- `ZeRO`, the same: DDP with ZeroRedundancyOptimizer(optim.SGD) (sharded momentum; the owners
  broadcast their parameters after the step).
- `FSDP full shard` / `FSDP grad-op`, the same: FullyShardedDataParallel with every Linear its
  own unit (ModuleWrapPolicy), FULL_SHARD (parameters gathered for forward and again for
  backward) and SHARD_GRAD_OP (kept from forward to backward); `FSDP full, fwd pf` adds
  forward_prefetch=True (backward prefetch, BACKWARD_PRE, is on in every FSDP row).
- `pipeline GPipe` / `pipeline 1F1B`, the same MLP cut into one stage per rank
  (pipelining.pipeline_stage), the global batch in 2 x ranks micro-batches.
- `tensor parallel`, the same MLP over all ranks as one group: ColumnParallelLinear(784, 512)
  -> ReLU -> RowParallelLinear(512, 512) -> ReLU -> Linear(512, 10) replicated, every rank
  taking the whole global batch.
- `DDP` and `hybrid`, the CNN of examples/hybrid_parallel.py (two 3x3 convolutions, then
  Linear(512, 256) -> ReLU -> Linear(256, 10)) on 8x8 images: plain data parallelism, and
  SINGA's hybrid partitioning (the trunk data-parallel over all ranks, the classifier
  tensor-parallel in groups of --tp ranks).

A strategy is one function registered with @strategy(name, model): it builds its model and
returns a Row (the step, and the process groups whose bytes count besides the world's). Rows
print the median step time in ms over --steps steps (after --warmup), the bytes of parameters
and optimizer state (momentum) rank 0 holds between steps, and the bytes this rank
sent per step (the `bytes_sent` of every communicator it uses; an all-reduce of n bytes over
p ranks counts 2 (p - 1) / p * n).

    python bench/bench_parallel.py                  # 2 ranks, then 4, each under mpiexec
    python bench/bench_parallel.py --worlds 2 --steps 10
    mpiexec -n 2 python bench/bench_parallel.py     # one world size
    python bench/bench_parallel.py --only FSDP --no-progress-thread

`--no-progress-thread` runs the ranks with SINGA_DIST_PROGRESS_THREAD=0: async collectives
(DDP's buckets, FSDP's prefetched gathers and its gradient reductions) then move only while
the rank waits for them, instead of while it computes.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

import singa_tensor as st
import singa_tensor.distributed as dist
import singa_tensor.nn.functional as F
from singa_tensor import nn, optim

_CHILD = "SINGA_BENCH_PARALLEL_CHILD"
_EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "hybrid_parallel.py"


@dataclass
class Row:
    step: Callable[[], None]
    groups: list = field(default_factory=list)  # besides the world
    params: list = field(default_factory=list)  # the parameters this rank holds
    opt: object = None                          # its optimizer (state bytes held)

    def held(self) -> int:
        """Bytes of parameters and optimizer state this rank keeps between steps."""
        from singa_tensor.distributed.optim import ZeroRedundancyOptimizer, state_bytes

        opt = self.opt.optim if isinstance(self.opt, ZeroRedundancyOptimizer) else self.opt
        return sum(p.numel() * p.dtype.itemsize for p in self.params) + \
            (state_bytes(opt) if opt is not None else 0)


@dataclass
class Context:
    world: int
    rank: int
    batch: int  # per rank
    tp: int     # ranks per tensor-parallel group of the hybrid row
    rng: np.random.Generator

    def data(self, shape: tuple, rows: int) -> tuple:
        """A fixed random batch of `rows` samples and their labels (0..9)."""
        x = st.tensor(self.rng.standard_normal((rows,) + shape).astype(np.float32))
        return x, st.tensor(self.rng.integers(0, 10, rows).astype(np.int64))


STRATEGIES: dict = {}  # (name, model) -> builder(ctx) -> Row


def strategy(name: str, model: str):
    """Register a builder as the row (name, model)."""
    def register(fn):
        STRATEGIES[(name, model)] = fn
        return fn
    return register


def _mlp() -> nn.Module:
    st.manual_seed(0)
    return nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(),
                         nn.Linear(512, 10))


def _sgd(params):
    return optim.SGD(list(params), lr=0.01, momentum=0.9)


def _step(model, opt, x, y) -> Callable[[], None]:
    def step():
        opt.zero_grad()
        F.cross_entropy(model(x), y).backward()
        opt.step()
    return step


def _hybrid_example():
    spec = importlib.util.spec_from_file_location("hybrid_parallel", _EXAMPLE)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


MLP, CNN = "MLP 784-512-512-10", "CNN conv16-conv32-fc256-10"


@strategy("DDP", MLP)
def ddp_mlp(ctx: Context) -> Row:
    from singa_tensor.nn.parallel import DistributedDataParallel

    model = DistributedDataParallel(_mlp())
    opt = _sgd(model.parameters())
    return Row(_step(model, opt, *ctx.data((784,), ctx.batch)),
               params=list(model.parameters()), opt=opt)


@strategy("ZeRO", MLP)
def zero_mlp(ctx: Context) -> Row:
    from singa_tensor.distributed.optim import ZeroRedundancyOptimizer
    from singa_tensor.nn.parallel import DistributedDataParallel

    model = DistributedDataParallel(_mlp())
    opt = ZeroRedundancyOptimizer(model.parameters(), optim.SGD, lr=0.01, momentum=0.9)
    return Row(_step(model, opt, *ctx.data((784,), ctx.batch)),
               params=list(model.parameters()), opt=opt)


def _fsdp(ctx: Context, strategy_name: str, forward_prefetch: bool = False) -> Row:
    from singa_tensor.distributed.fsdp import FullyShardedDataParallel, ShardingStrategy
    from singa_tensor.distributed.fsdp.wrap import ModuleWrapPolicy

    model = FullyShardedDataParallel(_mlp(), auto_wrap_policy=ModuleWrapPolicy({nn.Linear}),
                                     sharding_strategy=getattr(ShardingStrategy, strategy_name),
                                     forward_prefetch=forward_prefetch)
    opt = _sgd(model.parameters())
    return Row(_step(model, opt, *ctx.data((784,), ctx.batch)),
               params=list(model.parameters()), opt=opt)


@strategy("FSDP full shard", MLP)
def fsdp_full_mlp(ctx: Context) -> Row:
    return _fsdp(ctx, "FULL_SHARD")


@strategy("FSDP full, fwd pf", MLP)
def fsdp_full_prefetch_mlp(ctx: Context) -> Row:
    return _fsdp(ctx, "FULL_SHARD", forward_prefetch=True)


@strategy("FSDP grad-op", MLP)
def fsdp_grad_op_mlp(ctx: Context) -> Row:
    return _fsdp(ctx, "SHARD_GRAD_OP")


def _pipeline(ctx: Context, schedule_name: str) -> Row:
    from singa_tensor.distributed import pipelining

    stage = pipelining.pipeline_stage(_mlp())
    schedule = getattr(pipelining, schedule_name)(stage, n_microbatches=2 * ctx.world,
                                                  loss_fn=F.cross_entropy)
    params = list(stage.submod.parameters())  # 4 stages of 3 Linears: one holds a ReLU only
    opt = _sgd(params) if params else None
    # the whole global batch enters at the first stage; the last holds the labels
    x, y = Context(ctx.world, 0, ctx.batch, ctx.tp, np.random.default_rng(99)).data(
        (784,), ctx.world * ctx.batch)

    def step():
        if opt is not None:
            opt.zero_grad()
        if stage.is_first:
            schedule.step(x)
        elif stage.is_last:
            schedule.step(target=y)
        else:
            schedule.step()
        if opt is not None:
            opt.step()
    return Row(step, params=params, opt=opt)


@strategy("pipeline GPipe", MLP)
def gpipe_mlp(ctx: Context) -> Row:
    return _pipeline(ctx, "ScheduleGPipe")


@strategy("pipeline 1F1B", MLP)
def one_f_one_b_mlp(ctx: Context) -> Row:
    return _pipeline(ctx, "Schedule1F1B")


@strategy("tensor parallel", MLP)
def tensor_parallel_mlp(ctx: Context) -> Row:
    from singa_tensor.distributed.tensor_parallel import ColumnParallelLinear, RowParallelLinear

    full = _mlp()
    model = nn.Sequential(ColumnParallelLinear.from_linear(full[0], gather_output=False),
                          nn.ReLU(),
                          RowParallelLinear.from_linear(full[2], input_is_parallel=True),
                          nn.ReLU(), full[4])
    # the group's batch: every rank takes the whole global batch (the same rows everywhere)
    x, y = Context(ctx.world, 0, ctx.batch, ctx.tp, np.random.default_rng(99)).data(
        (784,), ctx.world * ctx.batch)
    opt = _sgd(model.parameters())
    return Row(_step(model, opt, x, y), params=list(model.parameters()), opt=opt)


@strategy("DDP", CNN)
def ddp_cnn(ctx: Context) -> Row:
    from singa_tensor.nn.parallel import DistributedDataParallel

    ex = _hybrid_example()
    model = DistributedDataParallel(nn.Sequential(*ex.make_model()))
    opt = _sgd(model.parameters())
    return Row(_step(model, opt, *ctx.data((1, 8, 8), ctx.batch)),
               params=list(model.parameters()), opt=opt)


@strategy("hybrid", CNN)
def hybrid_cnn(ctx: Context) -> Row:
    ex = _hybrid_example()
    tp_group, dp_group = ex.groups(ctx.tp)
    model = ex.Hybrid(*ex.make_model(), tp_group, dp_group)
    x, _ = ctx.data((1, 8, 8), ctx.batch)
    # the group's labels: the same on every rank of the group
    _, y = Context(ctx.world, 0, ctx.batch, ctx.tp,
                   np.random.default_rng(100 + tp_group.ranks[0])).data((1,), ctx.tp * ctx.batch)
    opt = _sgd(model.parameters())
    return Row(_step(model, opt, x, y), [tp_group, dp_group], list(model.parameters()), opt)


def _sent(groups: list) -> int:
    total = dist.get_communicator().bytes_sent
    return total + sum(dist.get_communicator(g).bytes_sent for g in groups if g.size > 1)


def _measure(args) -> dict:
    dist.init_process_group()
    rank, world = dist.get_rank(), dist.get_world_size()
    ctx = Context(world, rank, args.batch, min(args.tp, world), np.random.default_rng(rank))
    rows = {}
    for (name, model), build in STRATEGIES.items():
        if args.only and args.only not in name:
            continue
        row = build(ctx)
        for _ in range(args.warmup):
            row.step()
        times, sent = [], []
        for _ in range(args.steps):
            dist.barrier()
            before = _sent(row.groups)
            t0 = time.perf_counter()
            row.step()
            times.append(time.perf_counter() - t0)
            sent.append(_sent(row.groups) - before)
        rows[f"{name} | {model}"] = (statistics.median(times) * 1e3, max(sent), row.held())
    return {"world": world, "tp": ctx.tp, "batch": args.batch, "rows": rows,
            "cores": os.cpu_count()}


def _print(result: dict) -> None:
    w, cores = result["world"], result["cores"]
    note = (f"; {w} ranks on {cores} cores: oversubscribed, step times include waiting for "
            f"a core" if w > cores else "")
    print(f"\n{w} ranks, one thread each, global batch {w * result['batch']} per step "
          f"({result['batch']} per rank; tensor parallel: all of it on every rank), hybrid "
          f"groups of {result['tp']}{note}")
    print(f"{'strategy':<18}{'model':<28}{'ms/step':>10}{'bytes/step':>14}{'':7}"
          f"{'held/rank':>12}  (rank 0: bytes sent; parameters + optimizer state held)")
    base, base_held = {}, {}
    for key, (ms, nbytes, held) in result["rows"].items():
        name, model = key.split(" | ")
        base.setdefault(model, nbytes)
        base_held.setdefault(model, held)
        ratio = f"{nbytes / base[model]:>6.2f}x" if base[model] else " " * 7
        print(f"{name:<18}{model:<28}{ms:>10.2f}{nbytes:>14,}{ratio}{held:>12,}"
              f"{held / base_held[model]:>6.2f}x")
    print("(the ratios are against the first row of the same model)")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--batch", type=int, default=32, help="samples per rank and step")
    ap.add_argument("--tp", type=int, default=2, help="ranks per group of the hybrid row")
    ap.add_argument("--worlds", default="2,4", help="world sizes to run, comma-separated")
    ap.add_argument("--json", action="store_true", help="print one JSON line (rank 0)")
    ap.add_argument("--only", default="", help="run only the rows whose name holds this text")
    ap.add_argument("--no-progress-thread", action="store_true",
                    help="run the ranks with SINGA_DIST_PROGRESS_THREAD=0")
    args = ap.parse_args()
    under_mpi = any(k in os.environ for k in ("PMI_RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK"))
    if under_mpi or os.environ.get(_CHILD):
        result = _measure(args)
        if dist.get_rank() == 0:
            print(json.dumps(result) if args.json else "", flush=True)
            if not args.json:
                _print(result)
        dist.destroy_process_group()
        return 0
    from singa_tensor.distributed.run import find_mpiexec

    mpiexec = find_mpiexec()
    if mpiexec is None:
        print("mpiexec not found: pip install mpi4py mpich", file=sys.stderr)
        return 1
    progress = "0" if args.no_progress_thread else \
        os.environ.get("SINGA_DIST_PROGRESS_THREAD", "1")
    print(f"bench_parallel: {os.cpu_count()} cores here; world sizes {args.worlds} "
          f"(more ranks than cores oversubscribe them: their times are not comparable); "
          f"SINGA_DIST_PROGRESS_THREAD={progress}")
    for n in (int(v) for v in args.worlds.split(",")):
        env = dict(os.environ, **{_CHILD: "1", "OMP_NUM_THREADS": "1",
                                  "OPENBLAS_NUM_THREADS": "1",
                                  "SINGA_DIST_PROGRESS_THREAD": progress})
        cmd = [mpiexec, "-n", str(n), sys.executable, __file__, "--json", "--steps",
               str(args.steps), "--warmup", str(args.warmup), "--batch", str(args.batch),
               "--tp", str(args.tp), "--only", args.only]
        out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=1200)
        if out.returncode != 0:
            print(out.stdout, out.stderr, file=sys.stderr)
            return out.returncode
        line = [ln for ln in out.stdout.splitlines() if ln.startswith("{")][-1]
        _print(json.loads(line))
    return 0


if __name__ == "__main__":
    sys.exit(main())
