"""Fused optimizer updates: one kernel per parameter reads the gradient and the state once and
writes the parameter and the state in place (see the header's "fused training kernels").

These are not graph ops: optimizers call them under `no_grad` on leaf tensors. float16 and
bfloat16 parameters keep their gradient and state in their own dtype, as PyTorch does: the
kernels load each element into float32, apply the float32 rule and round every stored value
once. Each function returns False, without touching anything, when no fused kernel serves the
parameter (a dtype without one, or a 16-bit parameter whose gradient came in another dtype),
and the optimizer then takes its composed path.

Example:
    >>> import singa_tensor as st
    >>> from singa_tensor.ops import fused_updates
    >>> p, g = st.tensor([1.0, 2.0]), st.tensor([0.5, 0.5])
    >>> fused_updates.sgd_step_(p, g, None, lr=0.1)
    True
    >>> p.tolist()
    [0.949999988079071, 1.9500000476837158]
"""

from __future__ import annotations

from .. import _execution
from ..tensor import Tensor
from ._registry import check_same_device, contiguous, copy_into, kernel, ptr

_FLOATS = ("float32", "float64")
_LOW = ("float16", "bfloat16")


def _prepare(op: str, p: Tensor, g: Tensor, states: tuple) -> tuple | None:
    """Validated contiguous operands, or None when no fused kernel serves p's dtype."""
    if p.dtype.name not in _FLOATS + _LOW:
        return None
    if p.dtype.name in _LOW and g.dtype is not p.dtype:
        return None  # the composed path promotes as the ops do
    check_same_device(op, p, g, *[s for s in states if s is not None])
    for name, t in (("grad", g), *((f"state {i}", s) for i, s in enumerate(states))):
        if t is None:
            continue
        if t._shape != p._shape:
            raise ValueError(f"{op}: {name} has shape {t._shape} but the parameter has shape "
                             f"{p._shape}")
        if t.dtype is not p.dtype:
            raise TypeError(f"{op}: {name} has dtype {t.dtype.name} but the parameter has "
                            f"dtype {p.dtype.name}")
    # written operands must be contiguous for the kernel: work on copies and write back
    writes = [p, *states]
    work = [w if w is None or w._contig else contiguous(w) for w in writes]
    return contiguous(g), writes, work


def _finish(writes: list, work: list) -> None:
    for w, c in zip(writes, work):
        if w is None:
            continue
        if c is not w:
            copy_into(c, w)
        else:
            w._storage.version += 1


def _counted(states: list | None, patch) -> None:
    """An optimizer's step() advanced states[i]["step"] by one before the kernel call just
    launched, and patch(args, count) gives that call's arguments for another count: a graph
    recording then replays the call with the counts advanced instead of running step()
    again in Python."""
    if states is None or not _execution.running_count:
        return
    hook = getattr(_execution.current(), "host_counter", None)
    if hook is not None:
        hook(states, "step", patch)


def _no_patch(args: list, count: int) -> None:
    """For a kernel whose arguments do not depend on the step count (RMSprop's)."""


def _ptr(ref: Tensor, t: Tensor | None):
    """t's data pointer, or the backend's NULL for an absent optional operand."""
    return ptr(t) if t is not None else ref._be.ffi.NULL


def sgd_step_(p: Tensor, g: Tensor, buf: Tensor | None, *, lr: float, momentum: float = 0.0,
              dampening: float = 0.0, weight_decay: float = 0.0, nesterov: bool = False,
              maximize: bool = False, first: bool = False) -> bool:
    """SGD in place on p and the momentum buffer buf (None without momentum); first: buf is
    set to the gradient instead of decayed (the first step)."""
    prep = _prepare("sgd_step_", p, g, (buf,))
    if prep is None:
        return False
    g, writes, work = prep
    pw, bw = work
    kernel(p, "sgd_step")(ptr(pw), ptr(g), _ptr(p, bw), p.numel(), lr, momentum, dampening,
                          weight_decay, int(nesterov), int(maximize), int(first))
    _finish(writes, work)
    return True


def multi_ready(p: Tensor, g: Tensor, *states, rule: str = "sgd") -> bool:
    """Whether p, its gradient and its state can join one multi-tensor update call of `rule`
    ("sgd" or "adam"): a backend with that list kernel (the CPU's), float32 or float64,
    everything contiguous, one dtype and shape; and no context running that cannot follow
    buffers through a table of pointers (an ONNX trace; graph capture can). Otherwise the
    per-parameter functions above serve p."""
    if p.dtype.name not in _FLOATS:
        return False
    if _execution.running_count:
        ex = _execution.current()
        if ex is not None and not ex.pointer_tables:
            return False
    for t in (g, *states):
        if t is not None and (t.dtype is not p.dtype or t._shape != p._shape or not t._contig
                              or t._device != p._device):
            return False
    return p._contig and p._be.kernel(f"st_{rule}_step_multi_{p.dtype.suffix}") is not None


def _table(ref: Tensor, tensors: list):
    """A C array of the tensors' data pointers, or NULL when the list holds only None."""
    ffi = ref._be.ffi
    if all(t is None for t in tensors):
        return ffi.NULL
    return ffi.new(f"{ffi.getctype(ffi.typeof(ptr(ref)).item)} *[]", [ptr(t) for t in tensors])


def _bump(*lists) -> None:
    for ts in lists:
        for t in ts:
            if t is not None:
                t._storage.version += 1


def sgd_multi_step_(params: list, grads: list, bufs: list, *, lr: float, momentum: float = 0.0,
                    dampening: float = 0.0, weight_decay: float = 0.0, nesterov: bool = False,
                    maximize: bool = False, first: bool = False) -> None:
    """sgd_step_ over a list of parameters in one kernel call; every (param, grad, buf) must
    pass multi_ready, all of one dtype. bufs: the momentum buffers (all None without
    momentum)."""
    if not params:
        return
    p0 = params[0]
    kernel(p0, "sgd_step_multi")(
        _table(p0, params), _table(p0, grads), _table(p0, bufs),
        p0._be.int64_array([p.numel() for p in params]), len(params), lr, momentum, dampening,
        weight_decay, int(nesterov), int(maximize), int(first))
    _bump(params, bufs)


def _biases(beta1: float, beta2: float, step: int) -> tuple:
    """Adam's bias corrections for a 1-based step count."""
    return 1 - beta1 ** step, 1 - beta2 ** step


def _adam_patch(first: int, beta1: float, beta2: float):
    """Sets the bias corrections, arguments first and first + 1, for a step count."""
    def patch(args: list, step: int) -> None:
        args[first], args[first + 1] = _biases(beta1, beta2, step)
    return patch


def adam_multi_step_(params: list, grads: list, exp_avgs: list, exp_avg_sqs: list,
                     max_exp_avg_sqs: list, *, lr: float, beta1: float, beta2: float, eps: float,
                     weight_decay: float, decoupled: bool, maximize: bool, step: int,
                     counted: list | None = None) -> None:
    """adam_step_ over a list of parameters that share the step count, in one kernel call;
    every parameter and its state must pass multi_ready, all of one dtype. `counted`: the
    state dicts whose "step" the caller advanced to `step` (see `_counted`)."""
    if not params:
        return
    p0 = params[0]
    kernel(p0, "adam_step_multi")(
        _table(p0, params), _table(p0, grads), _table(p0, exp_avgs), _table(p0, exp_avg_sqs),
        _table(p0, max_exp_avg_sqs), p0._be.int64_array([p.numel() for p in params]),
        len(params), lr, beta1, beta2, eps, weight_decay, int(decoupled), int(maximize),
        *_biases(beta1, beta2, step))
    _counted(counted, _adam_patch(14, beta1, beta2))
    _bump(params, exp_avgs, exp_avg_sqs, max_exp_avg_sqs)


def adam_step_(p: Tensor, g: Tensor, exp_avg: Tensor, exp_avg_sq: Tensor,
               max_exp_avg_sq: Tensor | None, *, lr: float, beta1: float, beta2: float,
               eps: float, weight_decay: float, decoupled: bool, maximize: bool,
               step: int, counted: list | None = None) -> bool:
    """Adam/AdamW in place on p and its moments (amsgrad when max_exp_avg_sq is given); step
    is the 1-based step count used for the bias corrections (`counted`: as in
    adam_multi_step_)."""
    prep = _prepare("adam_step_", p, g, (exp_avg, exp_avg_sq, max_exp_avg_sq))
    if prep is None:
        return False
    g, writes, work = prep
    pw, mw, vw, xw = work
    kernel(p, "adam_step")(ptr(pw), ptr(g), ptr(mw), ptr(vw), _ptr(p, xw), p.numel(), lr,
                           beta1, beta2, eps, weight_decay, int(decoupled), int(maximize),
                           *_biases(beta1, beta2, step))
    _counted(counted, _adam_patch(13, beta1, beta2))
    _finish(writes, work)
    return True


def rmsprop_step_(p: Tensor, g: Tensor, square_avg: Tensor, momentum_buffer: Tensor | None,
                  grad_avg: Tensor | None, *, lr: float, alpha: float, eps: float,
                  weight_decay: float, momentum: float, maximize: bool,
                  counted: list | None = None) -> bool:
    """RMSprop in place (centered when grad_avg is given, with momentum when momentum_buffer
    is given). `counted`: the state dicts whose "step" the caller advanced (the kernel does
    not read it)."""
    prep = _prepare("rmsprop_step_", p, g, (square_avg, momentum_buffer, grad_avg))
    if prep is None:
        return False
    g, writes, work = prep
    pw, sw, bw, aw = work
    kernel(p, "rmsprop_step")(ptr(pw), ptr(g), ptr(sw), _ptr(p, bw), _ptr(p, aw), p.numel(), lr,
                              alpha, eps, weight_decay, momentum, int(maximize))
    _counted(counted, _no_patch)
    _finish(writes, work)
    return True


def adagrad_step_(p: Tensor, g: Tensor, state_sum: Tensor, *, clr: float, eps: float,
                  weight_decay: float, maximize: bool, counted: list | None = None,
                  clr_at=None) -> bool:
    """Adagrad in place on p and the running sum of squared gradients, with the decayed
    learning rate clr. `counted`: the state dicts whose "step" the caller advanced, clr
    being clr_at(step)."""
    prep = _prepare("adagrad_step_", p, g, (state_sum,))
    if prep is None:
        return False
    g, writes, work = prep
    pw, sw = work
    kernel(p, "adagrad_step")(ptr(pw), ptr(g), ptr(sw), p.numel(), clr, eps, weight_decay,
                              int(maximize))
    if counted is not None:
        def patch(args: list, step: int) -> None:
            args[4] = clr_at(step)
        _counted(counted, patch)
    _finish(writes, work)
    return True
