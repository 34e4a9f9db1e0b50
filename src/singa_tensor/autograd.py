"""Define-by-run automatic differentiation.

Every differentiable op application records a `Node`: the op's backward, what it saved, and
one edge per input (the input's own node, or an `AccumulateGrad` node for a leaf). `backward`
walks the graph from the roots in dependency order, so a leaf's gradient is final (and its
post-accumulate hooks fire) as soon as every path into it has been processed. Backward
formulas are written with Tensor ops, so running them with grad mode on (`create_graph=True`)
records a graph of the backward itself: higher-order gradients come free.
"""

from __future__ import annotations

import functools
import sys
import threading
import weakref
from typing import Callable, Sequence

from . import _execution
from .tensor import Tensor

# ---- grad mode ---------------------------------------------------------------------------------


class _GradMode(threading.local):
    """Grad mode is per thread, as in PyTorch: a no_grad block in a data-loading thread does not
    switch recording off for the training loop."""

    enabled = True


_mode = _GradMode()


def is_grad_enabled() -> bool:
    return _mode.enabled


class _GradMode:
    """Base of the grad-mode contexts. As a decorator, every call enters a fresh context
    object, so nested and recursive calls each restore the mode they found."""

    def _fresh(self):
        return type(self)()

    def __call__(self, fn):
        @functools.wraps(fn)
        def run(*args, **kwargs):
            with self._fresh():
                return fn(*args, **kwargs)

        return run


class set_grad_enabled(_GradMode):
    """Turn gradient recording on or off, as a context manager, decorator or plain call.

    Example:
        >>> import singa_tensor as st
        >>> x = st.ones(2, requires_grad=True)
        >>> with st.set_grad_enabled(False):
        ...     (x * 2).requires_grad
        False
    """

    def __init__(self, mode: bool):
        self.prev = _mode.enabled
        self.mode = bool(mode)
        _mode.enabled = self.mode

    def __call__(self, fn):
        # as a decorator the mode applies while fn runs, not from the moment of decoration
        _mode.enabled = self.prev
        return super().__call__(fn)

    def _fresh(self):
        return type(self)(self.mode)

    def __enter__(self):
        _mode.enabled = self.mode
        return self

    def __exit__(self, *exc):
        _mode.enabled = self.prev
        return False


class no_grad(_GradMode):
    """Context manager and decorator that disables gradient recording.

    Example:
        >>> import singa_tensor as st
        >>> w = st.ones(3, requires_grad=True)
        >>> with st.no_grad():
        ...     y = w * 2
        >>> y.requires_grad
        False
    """

    def __enter__(self):
        self.prev = _mode.enabled
        _mode.enabled = False
        return self

    def __exit__(self, *exc):
        _mode.enabled = self.prev
        return False


class enable_grad(_GradMode):
    """Context manager and decorator that enables gradient recording inside `no_grad`.

    Example:
        >>> import singa_tensor as st
        >>> x = st.ones(1, requires_grad=True)
        >>> with st.no_grad():
        ...     with st.enable_grad():
        ...         (x * 2).requires_grad
        True
    """

    def __enter__(self):
        self.prev = _mode.enabled
        _mode.enabled = True
        return self

    def __exit__(self, *exc):
        _mode.enabled = self.prev
        return False


# ---- graph nodes -------------------------------------------------------------------------------


class Node:
    """One recorded op application; also the `ctx` its forward and backward receive.

    Attributes a forward may set freely on ctx are kept for its backward.
    """

    # Defaults live on the class so that creating a node (once per op call) costs nothing.
    name = "Node"
    spec = None  # ops get a Node subclass per spec with spec and name preset (ops/_registry.py)
    next: tuple = ()  # one (node, output index) edge per forward input, None where no grad flows
    needs_input_grad: tuple = ()
    n_outputs = 1
    _saved: list | None = None
    _freed = False
    _hooks: dict | None = None
    _outputs_meta: tuple = ()  # (shape, dtype, device) per output

    # -- saving ------------------------------------------------------------------------------
    def save_for_backward(self, *tensors) -> None:
        self._saved = list(tensors)

    def _pack_saved(self, outputs: Sequence) -> None:
        """Replace saved outputs with node-less aliases (no reference cycle output -> node ->
        output) and remember the storage version of every saved tensor."""
        packed = []
        for t in self._saved:
            if t is None:
                packed.append(None)
                continue
            out_idx = -1
            for i, o in enumerate(outputs):
                if o is t:
                    out_idx = i
                    break
            if out_idx >= 0:
                alias = t._alias()
                packed.append((alias, alias._storage.version, out_idx))
            else:
                packed.append((t, t._storage.version, -1))
        self._saved = packed

    @property
    def saved_tensors(self) -> tuple:
        if self._freed:
            raise RuntimeError(
                f"{self.name}: trying to backward through the graph a second time (or to "
                "access saved tensors after they have been freed). Pass retain_graph=True to "
                "the first backward() if you need to backward twice."
            )
        if self._saved is None:
            return ()
        out = []
        for entry in self._saved:
            if entry is None:
                out.append(None)
                continue
            t, version, out_idx = entry
            if t._storage.version != version:
                raise RuntimeError(
                    f"{self.name}: one of the tensors needed for gradient computation has been "
                    f"modified by an in-place operation: a tensor of shape {tuple(t.shape)} "
                    f"is at version {t._storage.version}, expected version {version}. Use an "
                    "out-of-place op (or .clone()) before modifying it."
                )
            if out_idx >= 0 and not t.requires_grad and _mode.enabled:
                # re-attach a saved output to this node so double backward can see through it
                t = t._alias()
                t.requires_grad = True
                t._node = self
                t._out = out_idx
            out.append(t)
        return tuple(out)

    def mark_non_differentiable(self, *tensors) -> None:
        for t in tensors:
            t._non_diff = True

    def _release(self) -> None:
        self._saved = None
        self._freed = True
        # drop attributes a forward stored for backward (they may hold large tensors)
        d = self.__dict__
        for k in [k for k in d if k[0] != "_" and k not in _NODE_KEEP]:
            del d[k]

    def register_hook(self, out_idx: int, fn: Callable) -> None:
        if self._hooks is None:
            self._hooks = {}
        self._hooks.setdefault(out_idx, []).append(fn)

    # -- backward ----------------------------------------------------------------------------
    def apply(self, grads: list) -> tuple:
        if self._freed:
            raise RuntimeError(
                f"{self.name}: trying to backward through the graph a second time. Pass "
                "retain_graph=True to the first backward() if you need to backward twice."
            )
        return self.spec.backward(self, *grads)

    def __repr__(self) -> str:
        return f"<{self.name}Backward>"


_NODE_KEEP = {"next", "needs_input_grad", "n_outputs", "spec", "name", "leaf"}


class AccumulateGrad(Node):
    """Graph sink for a leaf tensor: adds the incoming gradient to `leaf.grad`.

    The leaf caches its accumulator, so the accumulator refers back to it only weakly: a
    strong reference both ways would keep every temporary leaf alive until a garbage-collector
    pass. A leaf deleted before backward simply receives nothing."""

    name = "AccumulateGrad"

    def __init__(self, leaf):
        self._leaf = weakref.ref(leaf)
        self.shape = leaf._shape
        self.dtype = leaf.dtype

    @property
    def leaf(self):
        return self._leaf()

    def _release(self) -> None:
        pass


# ---- recording ---------------------------------------------------------------------------------


def _edge(t):
    """The gradient edge into tensor t: its producer, or its leaf accumulator."""
    node = t._node
    if node is not None:
        return (node, t._out)
    acc = t._accum
    if acc is None:
        acc = t._accum = AccumulateGrad(t)
    return (acc, 0)


def record(spec, ctx: Node, inputs: Sequence, outputs):
    """Attach a freshly computed forward to the graph when any tensor input requires grad.

    spec has `name`, `backward(ctx, *grads)` and optionally `differentiable`. inputs are the
    forward's positional arguments (non-tensors are skipped).
    """
    if ctx.spec is not spec:
        ctx.spec = spec
        ctx.name = spec.name
    nexts = []
    needs = []
    for t in inputs:
        if t.__class__ is Tensor and t.requires_grad:
            node = t._node
            if node is not None:
                nexts.append((node, t._out))
            else:
                acc = t._accum
                if acc is None:
                    acc = t._accum = AccumulateGrad(t)
                nexts.append((acc, 0))
            needs.append(True)
        else:
            nexts.append(None)
            needs.append(False)
    ctx.next = tuple(nexts)
    ctx.needs_input_grad = tuple(needs)
    if outputs.__class__ is Tensor:  # the common single-output case
        ctx._outputs_meta = ((outputs._shape, outputs.dtype, outputs._device),)
        if outputs.dtype.is_floating_point and not outputs._non_diff:
            outputs.requires_grad = True
            outputs._node = ctx
        if ctx._saved:
            ctx._pack_saved((outputs,))
        return outputs
    outs = outputs
    ctx.n_outputs = len(outs)
    ctx._outputs_meta = tuple([(o._shape, o.dtype, o._device) for o in outs])
    for i, o in enumerate(outs):
        if o.dtype.is_floating_point and not o._non_diff:
            o.requires_grad = True
            o._node = ctx
            o._out = i
    if ctx._saved:
        ctx._pack_saved(outs)
    return outputs


_record_py = record
try:  # the single-output case in C (singa_tensor._fastpath), the rest by the function above
    from . import _fastpath as _C

    _C.set_autograd(AccumulateGrad, _record_py)
    record = _C.record  # noqa: F811
except ImportError:  # pragma: no cover - built with the package
    pass


# ---- the engine --------------------------------------------------------------------------------


def _accumulate(slot: list, i: int, g) -> None:
    slot[i] = g if slot[i] is None else slot[i] + g


class _Backwards(threading.local):
    """The backward calls running on this thread, innermost last: for each, None (a `grad`
    call, which fills no .grad) or the list of callbacks queued to run at its end."""

    def __init__(self) -> None:
        self.frames: list = []


_backwards = _Backwards()


def queue_callback(fn: Callable[[], None]) -> bool:
    """Run fn once the backward call now running on this thread has gone through the whole
    graph, before it returns (a backward's Function or hook queues it; the callbacks run in
    the order queued, and may queue more). Returns False, queueing nothing, outside backward
    and inside `st.autograd.grad`, which fills no `.grad`: the caller then does its work at
    once. PyTorch's `Variable._execution_engine.queue_callback`.

    Example:
        >>> import singa_tensor as st
        >>> x = st.ones(2, requires_grad=True)
        >>> seen = []
        >>> def hook(g):  # runs before x.grad is set; the callback sees it set
        ...     st.autograd.queue_callback(lambda: seen.append(x.grad.tolist()))
        >>> _ = x.register_hook(hook)
        >>> (x * 3).sum().backward()
        >>> seen, st.autograd.queue_callback(lambda: None)
        ([[3.0, 3.0]], False)
    """
    frames = _backwards.frames
    if not frames or frames[-1] is None:
        return False
    frames[-1].append(fn)
    return True


class _ExecutionEngine:
    """The backward engine as PyTorch names it (`Variable._execution_engine`)."""

    @staticmethod
    def queue_callback(fn: Callable[[], None]) -> None:
        """`queue_callback(fn)`, raising outside a backward that fills `.grad` (as PyTorch's
        engine does) instead of returning False."""
        if not queue_callback(fn):
            raise RuntimeError("queue_callback: final callbacks can only be installed during "
                               "a backward pass")


class Variable:
    """PyTorch's legacy wrapper, kept for the scripts that still use it: `Variable(t)` is t
    itself (with requires_grad set when asked), and `Variable._execution_engine.queue_callback`
    queues a function to run at the end of the current backward.

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor.autograd import Variable
        >>> v = Variable(st.ones(2), requires_grad=True)
        >>> isinstance(v, st.Tensor), v.requires_grad
        (True, True)
    """

    _execution_engine = _ExecutionEngine()

    def __new__(cls, data, requires_grad: bool = False):
        if not isinstance(data, Tensor):
            raise TypeError(f"Variable: data must be a Tensor, got {type(data).__name__}")
        if requires_grad:
            data.requires_grad_(True)
        return data


def _run(roots, root_grads, retain_graph: bool, create_graph: bool, capture=None):
    """Propagate root_grads from roots through the graph, then run the queued callbacks.

    capture: None to accumulate into leaves' .grad, or a dict {edge: None} whose values are
    filled with the gradient arriving at each requested edge (used by `grad`).
    """
    frames = _backwards.frames
    callbacks: list | None = [] if capture is None else None
    frames.append(callbacks)
    try:
        if _execution.autocast_count:  # a backward inside an autocast region casts nothing
            with _execution.autocast_suspended():
                _propagate(roots, root_grads, retain_graph, create_graph, capture)
        else:
            _propagate(roots, root_grads, retain_graph, create_graph, capture)
        if callbacks:
            prev = set_grad_enabled(create_graph)
            try:
                i = 0
                while i < len(callbacks):  # a callback may queue another
                    callbacks[i]()
                    i += 1
            finally:
                set_grad_enabled(prev.prev)
    finally:
        frames.pop()


def _propagate(roots, root_grads, retain_graph: bool, create_graph: bool, capture=None):
    # dependency counts over the reachable graph
    deps: dict[Node, int] = {}
    stack = []
    for t in roots:
        node, _ = _edge(t)
        if node not in deps:
            deps[node] = 0
            stack.append(node)
    while stack:
        node = stack.pop()
        for e in node.next:
            if e is None:
                continue
            nxt = e[0]
            if nxt in deps:
                deps[nxt] += 1
            else:
                deps[nxt] = 1
                stack.append(nxt)

    needed = _ancestors_of(capture, deps, roots) if capture is not None else None

    grads: dict[Node, list] = {}
    for t, g in zip(roots, root_grads):
        node, idx = _edge(t)
        slot = grads.setdefault(node, [None] * node.n_outputs)
        _accumulate(slot, idx, g)
    ready = [n for n in grads if deps[n] == 0]
    # leaves whose gradient is complete go first, so post-accumulate hooks fire as early as
    # possible (distributed training overlaps its all-reduce with the rest of backward)
    ready_leaves = [n for n in ready if n.__class__ is AccumulateGrad]
    ready = [n for n in ready if n.__class__ is not AccumulateGrad]
    prev = set_grad_enabled(create_graph)
    try:
        while ready or ready_leaves:
            node = ready_leaves.pop() if ready_leaves else ready.pop()
            slot = grads.pop(node, None)
            if slot is None:
                slot = [None] * node.n_outputs
            if node._hooks:
                for i, fns in node._hooks.items():
                    if slot[i] is None:
                        continue
                    for fn in fns:
                        r = fn(slot[i])
                        if r is not None:
                            slot[i] = r
            if capture is not None:
                for i in range(node.n_outputs):
                    if (node, i) in capture and slot[i] is not None:
                        capture[(node, i)] = slot[i]
            if isinstance(node, AccumulateGrad):
                leaf = node.leaf
                if capture is None and slot[0] is not None and leaf is not None:
                    _accumulate_leaf(leaf, slot[0], create_graph)
            elif needed is None or node in needed:
                # one output (most nodes): its gradient is there; several: the missing ones
                # are zeros, unless all are missing
                if slot[0] is not None if len(slot) == 1 else any(s is not None for s in slot):
                    node_inputs = slot if len(slot) == 1 else _materialize(node, slot)
                    in_grads = node.apply(node_inputs)
                    if not isinstance(in_grads, tuple):
                        in_grads = (in_grads,)
                    for e, g in zip(node.next, in_grads):
                        if e is None or g is None:
                            continue
                        nxt, idx = e
                        nslot = grads.get(nxt)
                        if nslot is None:
                            nslot = grads[nxt] = [None] * nxt.n_outputs
                        g = _match(g, nxt, idx, node)
                        nslot[idx] = g if nslot[idx] is None else nslot[idx] + g
                    # drop this node's gradients now: a leaf can then tell whether anything
                    # else still holds the gradient it receives (see _exclusive)
                    node_inputs = in_grads = g = None
                if not retain_graph:
                    node._release()
            slot = None
            for e in node.next:
                if e is None:
                    continue
                nxt = e[0]
                deps[nxt] -= 1
                if deps[nxt] == 0:
                    (ready_leaves if nxt.__class__ is AccumulateGrad else ready).append(nxt)
    finally:
        set_grad_enabled(prev.prev)


def _ancestors_of(capture: dict, deps: dict, roots) -> set:
    """The nodes whose backward leads to a captured edge: `grad` runs only those, so it neither
    computes nor frees parts of the graph that its inputs do not depend on."""
    targets = {node for node, _ in capture}
    # a topological order of the reachable graph (roots first), by Kahn's algorithm
    remaining = dict(deps)
    order = []
    frontier = [n for n, d in remaining.items() if d == 0]
    while frontier:
        node = frontier.pop()
        order.append(node)
        for e in node.next:
            if e is not None:
                remaining[e[0]] -= 1
                if remaining[e[0]] == 0:
                    frontier.append(e[0])
    needed = set()  # nodes with a path to a target; a target itself only if it has one too
    for node in reversed(order):
        if any(e is not None and (e[0] in needed or e[0] in targets) for e in node.next):
            needed.add(node)
    return needed


def _materialize(node: Node, slot: list) -> list:
    """Missing output gradients of a multi-output node are zeros."""
    if all(s is not None for s in slot):
        return slot
    from . import creation

    out = []
    for s, (shape, dtype, device) in zip(slot, node._outputs_meta):
        out.append(s if s is not None else creation.zeros(shape, dtype=dtype, device=device))
    return out


def _match(g, nxt: Node, idx: int, producer: Node):
    """Check a backward's output against the input it is for; a floating gradient of another
    floating dtype is converted to the input's (PyTorch's rule: a custom Function's backward
    under autocast may return bfloat16 for a float32 input)."""
    if isinstance(nxt, AccumulateGrad):
        shape, dtype = nxt.shape, nxt.dtype
    else:
        shape, dtype = nxt._outputs_meta[idx][0], nxt._outputs_meta[idx][1]
    if g.shape != shape:
        raise RuntimeError(
            f"{producer.name} backward returned a gradient of shape {tuple(g.shape)} for an input "
            f"of shape {tuple(shape)}"
        )
    if g.dtype is not dtype and g.dtype.is_floating_point and dtype.is_floating_point:
        return g.to(dtype=dtype)
    return g


# references to an unshared gradient while _exclusive counts them: the engine's slot list,
# the parameters g of _accumulate_leaf and of _exclusive, and getrefcount's own argument
_OWN_REFS = 4


def _exclusive(g, leaf) -> bool:
    """Whether g is a whole, contiguous buffer in leaf's layout that no other live object
    refers to, so that it can become leaf.grad without a copy. Reference counts can only
    overstate sharing, never hide it: a gradient that may be shared is always copied."""
    st_ = g._storage
    if not (g.__class__ is Tensor and g._contig and g._offset == 0 and g.dtype is leaf.dtype
            and g._device == leaf._device and st_.nbytes == g.numel() * g.dtype.itemsize
            and sys.getrefcount(g) <= _OWN_REFS):
        return False
    # the counts below include the local names st_ and base and getrefcount's argument, and
    # the reference a running context keeps (graph capture holds every storage it sees)
    held = 3
    if _execution.running_count:
        ex = _execution.current()
        if ex is not None:
            held += ex.storage_refs(st_)
    base = g._base
    if base is None:  # the buffer is held by g alone
        return sys.getrefcount(st_) == held
    # a view covering its whole buffer (a weight's gradient transposed back into the weight's
    # layout): the buffer is held by g and its base, and the base by g alone
    return base._base is None and sys.getrefcount(st_) == held + 1 and sys.getrefcount(base) == 3


def _accumulate_leaf(leaf, g, create_graph: bool) -> None:
    if leaf._hooks:
        for fn in leaf._hooks:
            r = fn(g)
            if r is not None:
                g = r
    if create_graph:
        leaf.grad = g if leaf.grad is None else leaf.grad + g
    elif leaf.grad is None:
        # A backward may hand the same tensor to several inputs (add does), and a user's
        # gradient may arrive unchanged: then copy, so that an in-place update of one .grad
        # never changes another tensor. A fresh gradient that nothing else holds is taken over
        # without a copy.
        leaf.grad = g.detach() if _exclusive(g, leaf) else g.detach().clone()
    else:
        leaf.grad.add_(g.detach())
    if leaf._post_hooks:
        for fn in leaf._post_hooks:
            fn(leaf)


def _root_grads(tensors, grad_tensors, op: str):
    from . import creation

    out = []
    for t, g in zip(tensors, grad_tensors):
        if not isinstance(t, Tensor):
            raise TypeError(f"{op}: expected Tensors, got {type(t).__name__}")
        if not t.requires_grad:
            raise RuntimeError(
                f"{op}: element of the outputs does not require grad and has no grad_fn "
                "(was it computed under no_grad, or from tensors without requires_grad=True?)"
            )
        if g is None:
            if t.numel() != 1:
                raise RuntimeError(
                    f"{op}: grad can be implicitly created only for scalar outputs; the output "
                    f"has shape {tuple(t.shape)}, so pass a gradient of that shape"
                )
            # d(out)/d(out) = 1, filled from the cached scalar 1 without ones()'s checks
            g = creation._fill(Tensor._empty(t._shape, t.dtype, t._device, t._be), 1)
        elif not isinstance(g, Tensor):
            g = creation.tensor(g, dtype=t.dtype, device=t.device)
        if g.shape != t.shape:
            raise RuntimeError(
                f"{op}: gradient has shape {tuple(g.shape)} but the output has shape "
                f"{tuple(t.shape)}"
            )
        if g.device != t.device:
            raise RuntimeError(f"{op}: gradient is on {g.device} but the output on {t.device}")
        out.append(g)
    return out


def backward(tensors, grad_tensors=None, retain_graph=None, create_graph=False, inputs=None):
    """Accumulate d(tensors)/d(leaves) into the leaves' `.grad`.

    Example:
        >>> import singa_tensor as st
        >>> x = st.tensor([1.0, 2.0], requires_grad=True)
        >>> st.autograd.backward((x * x).sum())
        >>> x.grad.tolist()
        [2.0, 4.0]
    """

    if isinstance(tensors, Tensor):
        tensors = (tensors,)
    tensors = tuple(tensors)
    if grad_tensors is None:
        grad_tensors = (None,) * len(tensors)
    elif isinstance(grad_tensors, Tensor):
        grad_tensors = (grad_tensors,)
    if retain_graph is None:
        retain_graph = create_graph
    roots = _root_grads(tensors, grad_tensors, "backward")
    if inputs is not None:
        inputs = (inputs,) if isinstance(inputs, Tensor) else tuple(inputs)
        res = grad(tensors, inputs, roots, retain_graph=retain_graph, create_graph=create_graph,
                   allow_unused=True)
        for t, g in zip(inputs, res):
            if g is not None:
                _accumulate_leaf(t, g, create_graph)
        return
    _run(tensors, roots, retain_graph, create_graph)


def grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False,
         allow_unused=False):
    """Return d(outputs)/d(inputs) without touching `.grad`.

    Example:
        >>> import singa_tensor as st
        >>> x = st.tensor(3.0, requires_grad=True)
        >>> (g,) = st.autograd.grad(x ** 3, x, create_graph=True)
        >>> g.item(), st.autograd.grad(g, x)[0].item()
        (27.0, 18.0)
    """

    if isinstance(outputs, Tensor):
        outputs = (outputs,)
    if isinstance(inputs, Tensor):
        inputs = (inputs,)
    outputs, inputs = tuple(outputs), tuple(inputs)
    if grad_outputs is None:
        grad_outputs = (None,) * len(outputs)
    elif isinstance(grad_outputs, Tensor):
        grad_outputs = (grad_outputs,)
    if len(grad_outputs) != len(outputs):
        raise ValueError(
            f"grad: got {len(grad_outputs)} grad_outputs for {len(outputs)} outputs"
        )
    for t in inputs:
        if not isinstance(t, Tensor):
            raise TypeError(f"grad: inputs must be Tensors, got {type(t).__name__}")
        if not t.requires_grad:
            raise RuntimeError("grad: one of the inputs does not require grad")
    if retain_graph is None:
        retain_graph = create_graph
    roots = _root_grads(outputs, grad_outputs, "grad")
    edges = [_edge(t) for t in inputs]
    capture = {e: None for e in edges}
    _run(outputs, roots, retain_graph, create_graph, capture)
    result = []
    for e in edges:
        g = capture[e]
        if g is None and not allow_unused:
            raise RuntimeError(
                "grad: one of the differentiated tensors appears not to have been used in the "
                "graph; pass allow_unused=True if this is intended"
            )
        if g is not None and not create_graph:
            g = g.detach()
        result.append(g)
    return tuple(result)


# ---- user-defined functions ----------------------------------------------------------------------


class FunctionCtx(Node):
    """The ctx of a custom Function: `save_for_backward`, `saved_tensors`, `needs_input_grad`,
    `mark_non_differentiable`, and any attribute you set."""


class Function:
    """Base class for ops written by users: subclass with static `forward(ctx, *args)` and
    `backward(ctx, *grad_outputs)`, then call `MyFn.apply(*args)`.

    Example:
        >>> import singa_tensor as st
        >>> class Cube(st.autograd.Function):
        ...     @staticmethod
        ...     def forward(ctx, x):
        ...         ctx.save_for_backward(x)
        ...         return x * x * x
        ...     @staticmethod
        ...     def backward(ctx, g):
        ...         (x,) = ctx.saved_tensors
        ...         return g * 3 * x * x
        >>> x = st.tensor(2.0, requires_grad=True)
        >>> Cube.apply(x).backward(); x.grad.item()
        12.0
    """

    @staticmethod
    def forward(ctx, *args, **kwargs):
        raise NotImplementedError("Function subclasses must implement forward")

    @staticmethod
    def backward(ctx, *grads):
        raise NotImplementedError("Function subclasses must implement backward")

    @classmethod
    def apply(cls, *args, **kwargs):
        ex = _execution.current()
        if ex is not None:  # onnx export cannot trace into a user's Function
            return ex.custom_function(cls, args, kwargs, lambda: cls._apply(*args, **kwargs))
        return cls._apply(*args, **kwargs)

    @classmethod
    def _apply(cls, *args, **kwargs):
        ctx = FunctionCtx()
        tensor_args = [a for a in args if isinstance(a, Tensor)]
        needs = any(a.requires_grad for a in tensor_args) and _mode.enabled
        ctx.needs_input_grad = tuple(isinstance(a, Tensor) and a.requires_grad for a in args)
        with no_grad():
            out = cls.forward(ctx, *args, **kwargs)
        outs = out if isinstance(out, tuple) else (out,)
        for o in outs:
            if not isinstance(o, Tensor):
                raise TypeError(
                    f"{cls.__name__}.forward must return Tensors, got {type(o).__name__}"
                )
        if not needs:
            return out
        # outputs that alias inputs must become distinct tensors to carry their own node
        fixed = tuple(o._alias() if any(o is a for a in args) else o for o in outs)
        spec = _FunctionSpec(cls)
        record(spec, ctx, args, fixed if isinstance(out, tuple) else fixed[0])
        return fixed if isinstance(out, tuple) else fixed[0]


class _FunctionSpec:
    def __init__(self, cls):
        self.name = cls.__name__
        self.cls = cls

    def backward(self, ctx, *grads):
        res = self.cls.backward(ctx, *grads)
        if not isinstance(res, tuple):
            res = (res,)
        n = len(ctx.next)
        if len(res) != n:
            raise RuntimeError(
                f"{self.name}.backward returned {len(res)} gradients, but forward took {n} "
                "arguments (return None for the non-tensor ones)"
            )
        return res


def once_differentiable(fn):
    """Decorate a Function.backward that cannot itself be differentiated: it runs without
    recording, and double backward through it raises."""

    @functools.wraps(fn)
    def wrapper(ctx, *grads):
        with no_grad():
            return fn(ctx, *grads)

    return wrapper


# the numerical checks live in their own module; they are part of this one's API
from ._gradcheck import GradcheckError, gradcheck, gradgradcheck  # noqa: E402

__all__ = [
    "Function",
    "GradcheckError",
    "backward",
    "enable_grad",
    "grad",
    "gradcheck",
    "gradgradcheck",
    "is_grad_enabled",
    "no_grad",
    "once_differentiable",
    "set_grad_enabled",
]
