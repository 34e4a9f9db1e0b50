"""The progress thread of the MPI backend: async operations complete while the caller does
not call MPI at all, their results and errors reach the caller's wait(), the thread lets go of
operations nobody waits for, and FSDP's gradient reductions, which it now leaves in flight
through the rest of backward, still give the gradients of whole-batch training."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from singa_tensor.distributed import _mpi, _progress
from singa_tensor.distributed._base import DistributedError

from .mpi_run import needs_mpi, run


def _counter(polls: int):
    """A test() that reports completion at its polls-th call, and the calls' threads."""
    seen: list = []

    def test():
        seen.append(threading.current_thread().name)
        return len(seen) >= polls
    return test, seen


def test_the_thread_polls_until_complete():
    engine = _progress.ProgressThread()
    try:
        test, seen = _counter(50)
        ticket = engine.submit(test, keep=np.zeros(3), timeout=30.0)
        assert ticket.event.wait(10.0)
        assert ticket.error is None and len(seen) == 50
        assert set(seen) == {"singa-dist-progress"}
        # nothing of a finished operation stays referenced by its ticket
        assert ticket.keep is None and ticket.test is None
        assert engine.completed == 1
    finally:
        engine.stop()


def test_an_error_in_a_poll_reaches_the_ticket():
    engine = _progress.ProgressThread()

    def broken():
        raise RuntimeError("MPI_Test failed")
    try:
        ticket = engine.submit(broken, keep=None, timeout=30.0)
        assert ticket.event.wait(10.0)
        assert isinstance(ticket.error, RuntimeError)
        # the thread goes on serving other operations
        other = engine.submit(_counter(3)[0], keep=None, timeout=30.0)
        assert other.event.wait(10.0) and other.error is None
    finally:
        engine.stop()


def test_an_operation_past_its_timeout_is_dropped_with_its_buffers_kept():
    engine = _progress.ProgressThread()
    dropped = []
    try:
        ticket = engine.submit(lambda: False, keep=np.zeros(2), timeout=0.05,
                               on_drop=lambda: dropped.append(True))
        for _ in range(500):
            if ticket.cancelled:
                break
            time.sleep(0.01)
        assert ticket.cancelled and dropped == [True]
        assert not ticket.event.is_set()
    finally:
        engine.stop()


def test_stop_joins_and_a_later_submit_starts_it_again():
    engine = _progress.ProgressThread()
    engine.submit(_counter(1)[0], keep=None, timeout=30.0).event.wait(10.0)
    engine.stop()
    assert engine._thread is None
    ticket = engine.submit(_counter(2)[0], keep=None, timeout=30.0)
    assert ticket.event.wait(10.0)
    engine.stop()


def test_stop_gives_up_on_an_operation_that_never_completes():
    engine = _progress.ProgressThread()
    engine.submit(lambda: False, keep=None, timeout=3600.0)
    engine.stop(timeout=0.05)
    assert engine._thread is None


def test_a_handed_off_work_waits_on_the_thread_and_times_out_clearly():
    pytest.importorskip("mpi4py")
    engine = _progress.ProgressThread()
    try:
        test, seen = _counter(20)
        work = _mpi._MpiWork("all_gather", None, 30.0, np.zeros(4), poll=test)
        after = []
        work.then(lambda: after.append(threading.current_thread().name))
        work._hand_off(engine)
        assert work.wait() is True
        assert len(seen) == 20 and set(seen) == {"singa-dist-progress"}
        # the completion steps run on the caller's thread
        assert after == [threading.current_thread().name]

        stuck = _mpi._MpiWork("reduce_scatter", "reqs", 30.0, np.zeros(4),
                              poll=lambda: False)
        stuck._hand_off(engine)
        orphans = len(_mpi._orphans)
        with pytest.raises(DistributedError, match=r"reduce_scatter: no reply .* within 0\.1 s"):
            stuck.wait(0.1)
        assert len(_mpi._orphans) > orphans  # MPI may still write into its buffers

        def broken():
            raise RuntimeError("truncated message")
        failing = _mpi._MpiWork("recv", None, 30.0, None, poll=broken)
        failing._hand_off(engine)
        with pytest.raises(RuntimeError, match="truncated message"):
            failing.wait()
    finally:
        engine.stop()


@pytest.mark.parametrize("value", ["2", "maybe"])
def test_the_switch_takes_only_yes_or_no(monkeypatch, value):
    monkeypatch.setenv("SINGA_DIST_PROGRESS_THREAD", value)
    with pytest.raises(ValueError, match="SINGA_DIST_PROGRESS_THREAD must be 0 or 1"):
        _progress.enabled_by_env()


@pytest.mark.parametrize("value,on", [("0", False), ("off", False), ("1", True), ("", True)])
def test_the_switch(monkeypatch, value, on):
    monkeypatch.setenv("SINGA_DIST_PROGRESS_THREAD", value)
    assert _progress.enabled_by_env() is on


BODY = """
import time
from singa_tensor import nn
from singa_tensor.distributed import _progress
from singa_tensor.distributed.fsdp import FSDP
from singa_tensor.distributed.fsdp.wrap import ModuleWrapPolicy

dist.init_process_group(timeout=30)
r, n = dist.get_rank(), dist.get_world_size()
out = {}
engine = _progress.engine()

# an all-gather of 4 MB completes while this thread never calls MPI: is_completed() of a
# handed-off operation only reads the flag the progress thread sets
done_before = engine.completed
shard = st.full((1 << 20,), float(r + 1))
full = st.empty(n << 20)
work = dist.all_gather_into_tensor(full, shard, async_op=True)
deadline = time.monotonic() + 20
while not work.is_completed() and time.monotonic() < deadline:
    time.sleep(0.01)
out["completed_alone"] = work.is_completed()
out["by_thread"] = engine.completed - done_before
work.wait()
out["gathered"] = [float(v) for v in full.reshape(n, -1).mean(1).tolist()]

# float16 sums run Python inside MPI: they stay with the caller, and stay right
t = st.full((1000,), 0.5 * (r + 1), dtype=st.float16)
before = engine.completed
w = dist.all_reduce(t, async_op=True)
w.wait()
out["fp16"] = [float(t[0].item()), engine.completed - before]

# FSDP: gradients reduced in flight during backward equal those of whole-batch training, and
# backward(inputs=...) (no callback at its end) reduces at once, with the same result
st.manual_seed(3)
ref = nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 8), nn.Tanh(), nn.Linear(8, 2))
st.manual_seed(3)
model = FSDP(nn.Sequential(nn.Linear(6, 8), nn.Tanh(), nn.Linear(8, 8), nn.Tanh(),
                           nn.Linear(8, 2)), auto_wrap_policy=ModuleWrapPolicy({nn.Linear}))
rng = np.random.default_rng(0)
X = rng.standard_normal((2 * n, 6)).astype(np.float32)
(ref(st.tensor(X)) ** 2).mean().backward()
(model(st.tensor(X[2 * r:2 * r + 2])) ** 2).mean().backward()
with st.no_grad():
    for p in ref.parameters():
        p.sub_(p.grad)
    for p in model.parameters():
        p.sub_(p.grad)
state = model.state_dict()
out["fsdp"] = max(float(np.abs(state[k].numpy() - v.numpy()).max())
                  for k, v in ref.state_dict().items())
flats = list(model.parameters())
grads = [p.grad.clone() for p in flats]
for p in flats:
    p.grad = None
(model(st.tensor(X[2 * r:2 * r + 2])) ** 2).mean().backward()
deferred = [p.grad.clone() for p in flats]
for p in flats:
    p.grad = None
(model(st.tensor(X[2 * r:2 * r + 2])) ** 2).mean().backward(inputs=flats)
out["inputs_equal"] = max(float(np.abs(a.numpy() - b.numpy()).max())
                          for a, b in zip(deferred, [p.grad for p in flats]))
out["grads_set"] = all(g is not None for g in grads)
report(out)
dist.destroy_process_group()
"""


@needs_mpi
@pytest.mark.parametrize("n", [2, 4])
def test_async_operations_progress_without_the_caller(n):
    results, _ = run(n, BODY, timeout=180)
    assert sorted(results) == list(range(n))
    for r, out in results.items():
        assert out["completed_alone"] is True, r
        assert out["by_thread"] >= 1, r
        assert out["gathered"] == [float(k + 1) for k in range(n)]
        total = 0.5 * n * (n + 1) / 2
        assert out["fp16"] == [total, 0], r
        assert out["fsdp"] < 1e-5, (r, out["fsdp"])
        assert out["inputs_equal"] < 1e-6, (r, out["inputs_equal"])
        assert out["grads_set"], r


@needs_mpi
def test_with_the_thread_off_nothing_is_handed_over():
    body = """
from singa_tensor.distributed import _progress
dist.init_process_group(timeout=30)
t = st.ones(1 << 16)
w = dist.all_reduce(t, async_op=True)
w.wait()
report([w._ticket is None, _progress._engine is None, float(t[0].item())])
dist.destroy_process_group()
"""
    results, _ = run(2, body, env={"SINGA_DIST_PROGRESS_THREAD": "0"})
    assert results == {0: [True, True, 2.0], 1: [True, True, 2.0]}
