"""In-process tests (world of one) leave no process group behind for the next test."""

import pytest


@pytest.fixture(autouse=True)
def _no_leftover_process_group():
    yield
    import singa_tensor.distributed as dist

    if dist.is_initialized():
        dist.destroy_process_group()
