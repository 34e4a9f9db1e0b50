"""A DataLoader worker that dies or stalls while sending a batch is always reported: the parent
reads each worker's pipe with bounded waits, so neither a half-sent message nor a silent
worker can block it past `timeout`."""

from __future__ import annotations

import os
import signal
import time

import numpy as np
import pytest

import singa_tensor.utils.data as D


class BigBatches(D.Dataset):
    """Samples of 16 MB (far more than a pipe holds), announcing the worker's pid in a file
    once the first sample is made, so the test can act while that sample is being sent."""

    def __init__(self, marker: str):
        self.marker = marker

    def __len__(self):
        return 4

    def __getitem__(self, i):
        a = np.ones(4 << 20, np.float32)
        if i == 0:
            with open(self.marker + ".tmp", "w") as fh:
                fh.write(str(os.getpid()))
            os.replace(self.marker + ".tmp", self.marker)
        return a


def _worker_pid(marker: str, limit: float = 60.0) -> int:
    end = time.monotonic() + limit
    while not os.path.exists(marker):
        if time.monotonic() > end:
            raise AssertionError("the worker never made its first sample")
        time.sleep(0.01)
    return int(open(marker).read())


def _wait_blocked_in_write(pid: int) -> None:
    # the worker pickles the batch and starts writing it; the pipe fills in well under a
    # second and the writer blocks with most of the message unsent
    time.sleep(1.0)
    with open(f"/proc/{pid}/stat") as fh:
        assert fh.read().rsplit(")", 1)[1].split()[0] in "SD"


@pytest.mark.parametrize("attempt", range(20))
def test_a_worker_killed_mid_batch_is_reported_not_waited_for(tmp_path, attempt):
    marker = str(tmp_path / "pid")
    loader = D.DataLoader(BigBatches(marker), batch_size=1, num_workers=1, prefetch_factor=1)
    it = iter(loader)
    pid = _worker_pid(marker)
    if attempt % 2:
        _wait_blocked_in_write(pid)  # half of the runs: surely mid-message
    os.kill(pid, signal.SIGKILL)
    start = time.monotonic()
    with pytest.raises(RuntimeError, match=rf"DataLoader worker \(pid {pid}\) exited "
                                           "unexpectedly"):
        for _ in it:
            pass
    assert time.monotonic() - start < 20


def test_timeout_holds_for_a_worker_stalled_mid_message(tmp_path):
    marker = str(tmp_path / "pid")
    loader = D.DataLoader(BigBatches(marker), batch_size=1, num_workers=1, prefetch_factor=1,
                          timeout=2)
    it = iter(loader)
    pid = _worker_pid(marker)
    _wait_blocked_in_write(pid)
    try:
        # let part of the batch through, then freeze the worker: the rest never comes
        os.kill(pid, signal.SIGSTOP)
        start = time.monotonic()
        with pytest.raises(RuntimeError, match="DataLoader timed out after 2 seconds"):
            next(it)
        assert time.monotonic() - start < 15
    finally:
        os.kill(pid, signal.SIGKILL)


def test_big_batches_arrive_whole(tmp_path):
    loader = D.DataLoader(BigBatches(str(tmp_path / "pid")), batch_size=2, num_workers=2)
    got = list(loader)
    assert [tuple(b.shape) for b in got] == [(2, 4 << 20)] * 2
    assert all(float(b.sum()) == 2 * (4 << 20) for b in got)
