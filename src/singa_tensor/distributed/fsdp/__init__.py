"""Fully sharded data parallelism: `FullyShardedDataParallel` (also `FSDP`), its sharding
strategies and the auto-wrap policies of `singa_tensor.distributed.fsdp.wrap` (PyTorch's
`torch.distributed.fsdp` names).

Example:
    >>> import singa_tensor.distributed as dist
    >>> from singa_tensor import nn
    >>> from singa_tensor.distributed.fsdp import FSDP, ShardingStrategy
    >>> dist.init_process_group()
    >>> model = FSDP(nn.Linear(4, 4), sharding_strategy=ShardingStrategy.SHARD_GRAD_OP)
    >>> model.sharding_strategy.name
    'SHARD_GRAD_OP'
    >>> dist.destroy_process_group()
"""

from . import wrap
from .fully_sharded_data_parallel import (
    FSDP,
    BackwardPrefetch,
    FullyShardedDataParallel,
    ShardingStrategy,
)

__all__ = ["FSDP", "BackwardPrefetch", "FullyShardedDataParallel", "ShardingStrategy", "wrap"]
