"""SINGA's hybrid partitioning on the 8x8 digits: the convolutional trunk is data-parallel over
all ranks, the fully-connected classifier is tensor-parallel within groups of ranks.

    python -m singa_tensor.distributed.run -n 2 examples/hybrid_parallel.py
    python -m singa_tensor.distributed.run -n 4 examples/hybrid_parallel.py --tp 2
    python -m singa_tensor.distributed.run -n 4 examples/hybrid_parallel.py --tp 4 --check

Convolutions hold few parameters and most of the computation, fully-connected layers the
reverse (the SINGA paper, section 4): all-reducing the classifier's gradients is what makes
pure data parallelism expensive. Here every rank runs the trunk on its own `--batch-size`
samples, with DistributedDataParallel all-reducing the trunk's gradients over the world. The
ranks are split into groups of `--tp` consecutive ranks; a group gathers its members'
features (`all_gather_batch`) and runs the classifier, ColumnParallelLinear -> ReLU ->
RowParallelLinear, on the whole group batch, each rank holding 1/tp of its weights. The ranks
holding the same shard in different groups are a data-parallel group of their own, which
all-reduces that shard's gradients.

Each step draws a global batch of ranks x batch-size samples from a shuffle every rank makes
alike; rank r takes rows [r*b, (r+1)*b), and the loss is the mean over the global batch, so
the model trains as one process would on the whole batch. Rank 0 prints the loss per epoch,
the test accuracy, and the bytes this rank sent per step (its communicators' `bytes_sent`)
for the hybrid model and for pure data parallelism of the same model, with the formula.
`--check` also trains the unsplit model on the whole batch in every process, for the same
steps, and prints the largest difference between its parameters and the hybrid ones.
"""

from __future__ import annotations

import argparse

import numpy as np

import singa_tensor as st
import singa_tensor.distributed as dist
import singa_tensor.nn.functional as F
from singa_tensor import nn, optim
from singa_tensor.datasets import load_digits
from singa_tensor.distributed.tensor_parallel import (
    ColumnParallelLinear,
    RowParallelLinear,
    all_gather_batch,
)
from singa_tensor.nn.parallel import DistributedDataParallel

FEATURES, HIDDEN, CLASSES = 32 * 4 * 4, 256, 10


def make_model() -> tuple[nn.Module, nn.Module]:
    """The unsplit model, (trunk, classifier), built alike on every rank from the seed."""
    st.manual_seed(0)
    trunk = nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.Flatten())
    classifier = nn.Sequential(nn.Linear(FEATURES, HIDDEN), nn.ReLU(),
                               nn.Linear(HIDDEN, CLASSES))
    return trunk, classifier


def groups(tp: int) -> tuple:
    """(tensor-parallel group of this rank, data-parallel group of its shard); every rank
    creates every group, as new_group requires."""
    world, rank = dist.get_world_size(), dist.get_rank()
    if tp < 1 or world % tp:
        raise SystemExit(f"--tp {tp} must divide the number of ranks ({world})")
    tp_group = dp_group = None
    for start in range(0, world, tp):  # consecutive ranks: a group's rows are contiguous
        g = dist.new_group(list(range(start, start + tp)))
        tp_group = g if rank in g.ranks else tp_group
    for shard in range(tp):  # the ranks holding the same shard, one per group
        g = dist.new_group(list(range(shard, world, tp)))
        dp_group = g if rank in g.ranks else dp_group
    return tp_group, dp_group


class Hybrid(nn.Module):
    """The trunk (data-parallel) then the group's classifier (tensor-parallel)."""

    def __init__(self, trunk, classifier, tp_group, dp_group):
        super().__init__()
        fc1, fc2 = classifier[0], classifier[2]
        self.trunk = DistributedDataParallel(trunk)  # over the world
        head = nn.Sequential(
            ColumnParallelLinear.from_linear(fc1, tp_group, gather_output=False), nn.ReLU(),
            RowParallelLinear.from_linear(fc2, tp_group, input_is_parallel=True))
        self.head = DistributedDataParallel(head, process_group=dp_group)
        self.tp_group = tp_group

    def forward(self, x):
        return self.head(all_gather_batch(self.trunk(x), self.tp_group))


def bytes_sent(groups_) -> int:
    """What this rank sent so far over the world and the given groups."""
    total = dist.get_communicator().bytes_sent
    return total + sum(dist.get_communicator(g).bytes_sent for g in groups_ if g.size > 1)


def ring(nbytes: int, ranks: int) -> int:
    """An all-reduce's bytes per rank as the communicators count them (a ring)."""
    return 2 * (ranks - 1) * nbytes // ranks


def expected_bytes(world: int, tp: int, batch: int, trunk: nn.Module,
                   classifier: nn.Module) -> dict:
    """Bytes per rank and step (float32): pure data parallelism all-reduces every gradient;
    the hybrid all-reduces the trunk's over the world, all-gathers the features into the
    group, all-reduces the logits (forward) and the features' gradient (backward) in the group,
    and all-reduces each classifier shard's gradients over the groups."""
    def n(m):
        return sum(p.numel() for p in m.parameters())

    fc1, fc2 = classifier[0], classifier[2]
    shard = (fc1.weight.numel() + fc1.bias.numel() + fc2.weight.numel()) // tp \
        + fc2.bias.numel()
    gb = tp * batch  # the group's batch
    hybrid = {"trunk all-reduce (world)": ring(4 * n(trunk), world),
              "features all-gather (group)": (tp - 1) * 4 * batch * FEATURES,
              "logits all-reduce (group)": ring(4 * gb * CLASSES, tp),
              "feature-gradient all-reduce (group)": ring(4 * gb * FEATURES, tp),
              "classifier shard all-reduce (across groups)": ring(4 * shard, world // tp)}
    return {"data parallel": ring(4 * (n(trunk) + n(classifier)), world),
            "hybrid": sum(hybrid.values()), "hybrid parts": hybrid}


def max_difference(model: Hybrid, trunk_ref, classifier_ref, tp_group) -> float:
    """Largest |hybrid - unsplit| over the parameters (the shards gathered in rank order)."""
    diffs = [float(np.abs(a.detach().numpy() - b.detach().numpy()).max())
             for a, b in zip(model.trunk.module.parameters(), trunk_ref.parameters())]
    col, row = model.head.module[0], model.head.module[2]
    full1, full2 = classifier_ref[0], classifier_ref[2]
    for shard, full, dim in ((col.weight, full1.weight, 0), (col.bias, full1.bias, 0),
                             (row.weight, full2.weight, 1)):
        parts = [st.zeros(*shard.shape) for _ in range(tp_group.size)]
        dist.all_gather(parts, shard.detach().contiguous(), group=tp_group)
        got = np.concatenate([p.numpy() for p in parts], axis=dim)
        diffs.append(float(np.abs(got - full.detach().numpy()).max()))
    diffs.append(float(np.abs(row.bias.detach().numpy() - full2.bias.detach().numpy()).max()))
    return max(diffs)


def main(argv=None) -> float:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tp", type=int, default=2, help="ranks per tensor-parallel group")
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--batch-size", type=int, default=16, help="samples per rank and step")
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--steps", type=int, default=None, help="stop after this many steps")
    ap.add_argument("--check", action="store_true",
                    help="also train the unsplit model on the whole batch and compare")
    args = ap.parse_args(argv)

    dist.init_process_group()
    rank, world = dist.get_rank(), dist.get_world_size()
    tp = min(args.tp, world)
    tp_group, dp_group = groups(tp)
    b = args.batch_size

    trunk, classifier = make_model()
    model = Hybrid(trunk, classifier, tp_group, dp_group)
    opt = optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    if args.check:
        ref_trunk, ref_cls = make_model()
        ref = nn.Sequential(ref_trunk, ref_cls)
        ref_opt = optim.SGD(ref.parameters(), lr=args.lr, momentum=0.9)

    train, test = load_digits("train"), load_digits("test")
    x_all, y_all = train.tensors[0].numpy(), train.tensors[1].numpy()
    rng = np.random.default_rng(0)  # the same shuffle on every rank
    me = slice(rank * b, (rank + 1) * b)
    group_rows = slice(tp_group.ranks[0] * b, (tp_group.ranks[-1] + 1) * b)
    per_step, step, diff = [], 0, 0.0
    comms = [tp_group, dp_group]
    for epoch in range(args.epochs):
        order = rng.permutation(len(x_all))
        losses = []
        for i in range(0, len(order) - world * b + 1, world * b):
            idx = order[i:i + world * b]
            x, y = x_all[idx], y_all[idx]
            before = bytes_sent(comms)
            opt.zero_grad()
            # every rank of the group holds the group's logits: the loss is the group's mean,
            # and the mean over groups (the data-parallel averages) is the global batch's
            loss = F.cross_entropy(model(st.tensor(x[me])), st.tensor(y[group_rows]))
            loss.backward()
            opt.step()
            per_step.append(bytes_sent(comms) - before)
            losses.append(loss.item())
            if args.check:
                ref_opt.zero_grad()
                F.cross_entropy(ref(st.tensor(x)), st.tensor(y)).backward()
                ref_opt.step()
            step += 1
            if args.steps is not None and step >= args.steps:
                break
        mean = float(np.mean(losses))
        if rank == 0:
            print(f"epoch {epoch}: loss {mean:.4f}", flush=True)
        if args.steps is not None and step >= args.steps:
            break
    if args.check:
        diff = max_difference(model, ref_trunk, ref_cls, tp_group)

    # pure data parallelism of the same model: one step, its bytes
    t2, c2 = make_model()
    dp = DistributedDataParallel(nn.Sequential(t2, c2))
    before = dist.get_communicator().bytes_sent
    F.cross_entropy(dp(st.tensor(x_all[me])), st.tensor(y_all[me])).backward()
    dp_bytes = dist.get_communicator().bytes_sent - before

    # test accuracy: the trunk on every test sample, the group's classifier on them
    with st.no_grad():
        xt, yt = test.tensors
        n = len(xt) // tp * tp
        part = slice(tp_group.rank * (n // tp), (tp_group.rank + 1) * (n // tp))
        feats = all_gather_batch(model.trunk.module(xt[part]), tp_group)
        pred = model.head.module(feats).argmax(-1).numpy()
        acc = float((pred == yt[:n].numpy()).mean())

    want = expected_bytes(world, tp, b, trunk, classifier)
    if rank == 0:
        hb = per_step[0]
        print(f"{world} ranks, tensor-parallel groups of {tp}, batch {b} per rank "
              f"({world * b} per step)")
        ratio = f" ({hb / dp_bytes:.2f}x)" if dp_bytes else ""
        print(f"bytes sent per step by rank 0: hybrid {hb:,}, pure data parallel "
              f"{dp_bytes:,}{ratio}")
        print(f"formula: hybrid {want['hybrid']:,}, pure data parallel "
              f"{want['data parallel']:,}")
        for k, v in want["hybrid parts"].items():
            print(f"  {k}: {v:,}")
        print(f"steps {step}, bytes per step all equal: {len(set(per_step)) == 1}")
        print(f"test accuracy {acc:.3f}")
        if args.check:
            print(f"max |hybrid - whole-batch single process| over the parameters: {diff:.3e}")
    dist.destroy_process_group()
    return acc


if __name__ == "__main__":
    main()
