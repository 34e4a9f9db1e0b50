"""Reproducible random streams.

A Generator is a (seed, offset) pair over the counter-based Philox generator of the kernels:
each draw consumes a range of counter blocks, so the same seed gives the same numbers on any
thread count and on every backend.
"""

from __future__ import annotations

import os

from . import _execution
from . import backend as _backend


class Generator:
    """An independent random stream.

    Example:
        >>> import singa_tensor as st
        >>> g = st.Generator().manual_seed(7)
        >>> a = st.rand(3, generator=g)
        >>> b = st.rand(3, generator=st.Generator().manual_seed(7))
        >>> a.tolist() == b.tolist()
        True
    """

    def __init__(self, device="cpu"):
        self.device = _backend.as_device(device)
        self._seed = int.from_bytes(os.urandom(8), "little") >> 1
        self._offset = 0

    def manual_seed(self, seed: int) -> Generator:
        if not isinstance(seed, int) or isinstance(seed, bool):
            raise TypeError(f"manual_seed: seed must be an int, got {type(seed).__name__}")
        self._seed = seed & 0xFFFFFFFFFFFFFFFF
        self._offset = 0
        return self

    def seed(self) -> int:
        self._seed = int.from_bytes(os.urandom(8), "little") >> 1
        self._offset = 0
        return self._seed

    def initial_seed(self) -> int:
        return self._seed

    def get_state(self) -> tuple:
        """(seed, offset): enough to resume the stream exactly."""
        return (self._seed, self._offset)

    def set_state(self, state) -> Generator:
        seed, offset = (int(v) for v in state)
        self._seed, self._offset = seed & 0xFFFFFFFFFFFFFFFF, offset
        return self

    def _take(self, blocks: int) -> tuple:
        start = self._offset
        self._offset += blocks
        if _execution.running_count:
            ex = _execution.current()
            if ex is not None:  # graph mode records the draw: a replay draws again
                ex.random_drawn(self, blocks, self._seed, start)
        return self._seed, start


default_generator = Generator()
default_generator.manual_seed(0x5EED)


def manual_seed(seed: int) -> Generator:
    """Seed the default generator (used by rand, randn, randint, dropout, init ...).

    Example:
        >>> import singa_tensor as st
        >>> _ = st.manual_seed(0); a = st.randn(2)
        >>> _ = st.manual_seed(0); b = st.randn(2)
        >>> a.tolist() == b.tolist()
        True
    """
    return default_generator.manual_seed(seed)


def seed() -> int:
    return default_generator.seed()


def initial_seed() -> int:
    return default_generator.initial_seed()


def get_rng_state() -> tuple:
    return default_generator.get_state()


def set_rng_state(state) -> None:
    default_generator.set_state(state)
