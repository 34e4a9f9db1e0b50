"""Train an MLP on the 8x8 digits with several processes, by all-reduce or with a parameter
server (SINGA's worker-group / server-group architecture).

    python -m singa_tensor.distributed.run -n 4 examples/dist_train.py --mode allreduce
    python -m singa_tensor.distributed.run -n 3 examples/dist_train.py --mode bsp  # 2 workers
    python -m singa_tensor.distributed.run -n 4 --servers 2 examples/dist_train.py --mode downpour
    python -m singa_tensor.distributed.run -n 4 examples/dist_train.py --mode ssp --staleness 2 \
        --groups 2

Each worker trains on its own shard of the training set (rank::workers). In the
parameter-server modes the last --servers ranks hold the parameters and run SGD; the workers
(in --groups groups, all-reduced inside) push gradients and pull parameters. Worker 0 prints
its mean loss per epoch and the test accuracy at the end.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import singa_tensor as st
import singa_tensor.distributed as dist
import singa_tensor.nn.functional as F
from singa_tensor import nn, optim
from singa_tensor.datasets import load_digits
from singa_tensor.distributed.parameter_server import ParameterServer


def make_mlp() -> nn.Module:
    return nn.Sequential(nn.Flatten(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10))


def batches(x: np.ndarray, y: np.ndarray, size: int, rng: np.random.Generator):
    """Shuffled full batches (every worker of a group must take the same number of steps)."""
    order = rng.permutation(len(x))
    for i in range(0, len(x) - size + 1, size):
        idx = order[i:i + size]
        yield st.tensor(x[idx]), st.tensor(y[idx])


def main(argv=None) -> float:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mode", choices=["allreduce", "bsp", "downpour", "ssp"], default="bsp")
    ap.add_argument("--staleness", type=int, default=2, help="ssp: steps a worker may lead")
    ap.add_argument("--groups", type=int, default=None,
                    help="worker groups (default: one per worker)")
    ap.add_argument("--servers", type=int, default=None,
                    help="server ranks (default: env SINGA_DIST_SERVERS or 1)")
    ap.add_argument("--epochs", type=int, default=5)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)

    dist.init_process_group()
    rank, world = dist.get_rank(), dist.get_world_size()
    st.manual_seed(args.seed + rank)
    model = make_mlp()

    if args.mode == "allreduce":
        # SINGA's DistOpt: broadcasts the parameters from rank 0, then all-reduces gradients
        # in buckets while backward is still running
        ps, workers = None, world
        opt = optim.DistOpt(optim.SGD(model.parameters(), lr=args.lr, momentum=0.9))
    else:
        ps = ParameterServer(model, lambda ps_: optim.SGD(ps_, lr=args.lr, momentum=0.9),
                             mode=args.mode, staleness=args.staleness, servers=args.servers,
                             groups=args.groups)
        workers = world - len(ps.server_ranks)
        if ps.is_server:
            ps.run_server()
            dist.destroy_process_group()
            return 0.0

    train, test = load_digits("train", seed=args.seed), load_digits("test", seed=args.seed)
    x_all, y_all = train.tensors[0].numpy(), train.tensors[1].numpy()
    # equal shards, so that all workers take the same number of steps per epoch
    n = len(x_all) // workers * workers
    x, y = x_all[rank:n:workers], y_all[rank:n:workers]
    rng = np.random.default_rng(args.seed + rank)
    if rank == 0:
        print(f"{args.mode}: {world} ranks, {workers} workers, {len(x)} samples each")

    start = time.perf_counter()
    for epoch in range(1, args.epochs + 1):
        total, steps = 0.0, 0
        for xb, yb in batches(x, y, args.batch_size, rng):
            loss = F.cross_entropy(model(xb), yb)
            if ps is not None:
                total += ps.step(loss)
            else:
                opt.backward_and_update(loss)
                total += loss.item()
            steps += 1
        if rank == 0:
            print(f"epoch {epoch:2d}  loss {total / max(steps, 1):.4f}  "
                  f"({time.perf_counter() - start:.1f} s)", flush=True)
    if ps is not None:
        ps.close()

    acc = 0.0
    if rank == 0:
        with st.no_grad():
            xt, yt = test.tensors
            acc = float((model(xt).argmax(dim=1) == yt).float().mean().item())
        print(f"test accuracy {acc:.4f}")
    dist.destroy_process_group()
    return acc


if __name__ == "__main__":
    main()
