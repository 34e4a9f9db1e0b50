"""The op registry and the helpers every op family uses to call kernels.

An op is one `OpSpec` subclass, registered with `@register`:

    forward(ctx, *args, **attrs)   computes outputs through backend kernels
    backward(ctx, *grads)          input gradients, written with Tensor ops
    reference(*arrays, **attrs)    the numpy definition the tests compare against
    onnx                           the ONNX operator name, or None
    samples()                      (optional) argument sets for the registry-driven tests

`spec.fn` is the public function (`st.exp`); a composite op (`composite = True`) is a plain
composition of other ops, so it needs neither kernel nor backward.

A public function becomes a Tensor method where it is defined, by `tensor_method` (a decorator)
or `bind_method`: `x.exp()`, the in-place `x.exp_()`, operators such as `__add__` and the
reflected `__radd__`. `METHODS` holds every such declaration; `bind_methods()` (run once, when
`singa_tensor.ops` has imported every family) sets them on Tensor.
"""

from __future__ import annotations

import functools
import inspect
from typing import Callable

from .. import _execution
from .. import autograd as _ag
from .. import dtype as _dt
from ..tensor import Tensor

REGISTRY: dict[str, type[OpSpec]] = {}

# what changes how ops run for a while (onnx export's tracer, graph mode's recorder): None in
# eager execution, which keeps apply() and kernel() on their fast paths (they test
# _execution.running_count first: `ex = _execution.running_count and execution()`)
execution = _execution.current


class OpSpec:
    name: str = ""
    onnx: str | None = None
    differentiable: bool = True
    twice_differentiable: bool = True
    composite: bool = False
    # hints for the registry-driven tests
    kind: str = "custom"  # "unary", "binary", "reduce" or "custom"
    domain: tuple = (-3.0, 3.0)  # where values are drawn for tests
    dtypes: tuple = ("float32", "float64")
    grad_domain: tuple | None = None  # where finite differences are well-behaved
    fn: Callable

    @staticmethod
    def forward(ctx, *args, **attrs):  # pragma: no cover - overridden
        raise NotImplementedError

    @staticmethod
    def backward(ctx, *grads):  # pragma: no cover - overridden
        raise NotImplementedError

    @staticmethod
    def reference(*args, **attrs):  # pragma: no cover - overridden
        raise NotImplementedError

    @staticmethod
    def samples():
        return []

    @classmethod
    def onnx_export(cls, b, args, attrs, outs):
        """Emit this op's ONNX node(s) into builder b; NotImplemented when it has no form at
        b.opset (the exporter then emits the op's traced children or names the op).

        The default covers ops whose ONNX node takes the same tensors and no attributes; a
        spec with attributes overrides it next to its forward. For a composite, args is the
        dict of the public function's bound arguments."""
        if cls.onnx is None or attrs or cls.composite:
            return NotImplemented
        if cls.kind not in ("unary", "binary") and any(a.__class__ is not Tensor for a in args):
            return NotImplemented
        b.node(cls.onnx, [b.value(a) for a in args if a.__class__ is Tensor], outputs=outs)


# ---- Tensor methods ----------------------------------------------------------------------------


class MethodDecl:
    """One Tensor method an op declares: `name` on Tensor calls `fn` (with self first), or,
    for `how="reflected"`, fn(other, self); `how="inplace_unary"|"inplace_binary"|"inplace"`
    computes with fn and writes the result into self (see ops/inplace.py); `label` names an
    in-place op in its error messages (`x += 1` reports "add_")."""

    __slots__ = ("name", "fn", "how", "label")

    def __init__(self, name: str, fn: Callable, how: str, label: str):
        self.name, self.fn, self.how, self.label = name, fn, how, label


METHODS: dict[str, MethodDecl] = {}
_HOW = ("plain", "reflected", "inplace_unary", "inplace_binary", "inplace")


def bind_method(fn: Callable, *names: str, inplace: str | tuple = (), reflected: str | tuple = (),
                inplace_kind: str = "inplace_unary") -> Callable:
    """Declare `fn` (a public op function taking the tensor first) as the Tensor method(s)
    `names` (default: fn's own name), with in-place variants `inplace` (e.g. "exp_") and
    reflected operators `reflected` (e.g. "__radd__"). Returns fn.

    inplace_kind says how an in-place variant runs: "inplace_unary" (fn's extra arguments
    pass through), "inplace_binary" (one operand, an `alpha=` scale and a kernel fast path)
    or "inplace" (fn runs on self as is, e.g. scatter_).

    Example:
        >>> from singa_tensor.ops._registry import METHODS
        >>> METHODS["exp_"].fn.__name__, METHODS["__radd__"].how
        ('exp', 'reflected')
    """
    if inplace_kind not in _HOW[2:]:
        raise ValueError(f"bind_method: unknown inplace_kind {inplace_kind!r}")
    decls = [(n, "plain") for n in (names or (fn.__name__,))]
    decls += [(n, inplace_kind) for n in ((inplace,) if isinstance(inplace, str) else inplace)]
    decls += [(n, "reflected") for n in ((reflected,) if isinstance(reflected, str)
                                         else reflected)]
    plain_inplace = [n for n, how in decls if how == inplace_kind and not n.startswith("__")]
    for name, how in decls:
        if name in METHODS:
            raise ValueError(f"Tensor.{name} is declared twice ({METHODS[name].fn.__name__} "
                             f"and {fn.__name__})")
        label = plain_inplace[0] if name.startswith("__") and plain_inplace else name
        METHODS[name] = MethodDecl(name, fn, how, label)
        if _inplace_method is not None:
            _bind(METHODS[name])
    return fn


def declare_methods(fn: Callable, name: str, method: bool | str | tuple = False,
                    inplace: bool | str | tuple = False, reflected: str | tuple = (),
                    inplace_kind: str = "inplace_unary") -> Callable:
    """The op helpers' keywords (unary_op, binary_op, composite) as `bind_method` calls: method
    True (the op's own name) or the names (aliases, operators), inplace True ("<name>_") or the
    names of its in-place variants, reflected operators. Returns fn."""
    def names_of(v, own: str) -> tuple:
        return (own,) if v is True else ((v,) if isinstance(v, str) else tuple(v or ()))

    names, inplace_names = names_of(method, name), names_of(inplace, name + "_")
    if names or inplace_names or reflected:
        bind_method(fn, *names, inplace=inplace_names, reflected=reflected,
                    inplace_kind=inplace_kind)
    return fn


def tensor_method(*names: str, inplace: str | tuple = (), reflected: str | tuple = (),
                  inplace_kind: str = "inplace_unary") -> Callable:
    """Decorator form of `bind_method`: `@tensor_method(inplace="clamp_")` above `def clamp`."""
    return lambda fn: bind_method(fn, *names, inplace=inplace, reflected=reflected,
                                  inplace_kind=inplace_kind)


def bind_methods(inplace_method: Callable) -> None:
    """Set every declared method on Tensor; methods declared later (an extension's ops) are set
    as they are declared. inplace_method(fn, name, kind) builds an in-place variant
    (ops/inplace.py owns how in-place writes work)."""
    global _inplace_method
    _inplace_method = inplace_method
    for d in METHODS.values():
        _bind(d)


_inplace_method: Callable | None = None


def _bind(d: MethodDecl) -> None:
    if d.name in Tensor.__dict__ and d.name not in _bound:
        raise ValueError(f"Tensor.{d.name}: declared by {d.fn.__name__} but Tensor defines it "
                         f"itself")
    if d.how == "plain":
        method = d.fn
    elif d.how == "reflected":
        method = _reflected(d.fn, d.name)
    else:
        method = _inplace_method(d.fn, d.label, d.how)
    setattr(Tensor, d.name, method)
    _bound.add(d.name)


_bound: set = set()


def _reflected(fn: Callable, name: str) -> Callable:
    def method(self, other):
        return fn(other, self)

    method.__name__ = name
    method.__doc__ = f"{fn.__name__}(other, self)."
    return method


def register(cls):
    if not cls.name:
        raise ValueError(f"{cls.__name__} has no name")
    if cls.name in REGISTRY:
        raise ValueError(f"op {cls.name} registered twice")
    REGISTRY[cls.name] = cls
    cls.node_class = node_class(cls)
    return cls


def node_class(spec) -> type:
    """The graph-node type of an op: spec and name live on the class, not on every node."""
    return type(f"{spec.name}Backward", (_ag.Node,), {"spec": spec, "name": spec.name})


def apply(spec, *args, **attrs):
    """Run spec's forward and, when gradients are wanted, record it in the graph."""
    if _execution.autocast_count:  # an autocast region may cast the arguments (amp/)
        state = _execution.autocast_state()
        if state is not None:
            args = state.cast_args(spec, args)
    nc = spec.__dict__.get("node_class")
    ctx = nc() if nc is not None else _ag.Node()
    ex = _execution.running_count and execution()
    if not ex:
        out = spec.forward(ctx, *args, **attrs)
    else:  # graph mode checks the result came from recorded kernels; onnx export records it
        out = ex.run_op(spec, ctx, args, attrs)
    if _ag._mode.enabled and spec.differentiable:
        for a in args:
            if a.__class__ is Tensor and a.requires_grad:
                _ag.record(spec, ctx, args, out)
                break
    return out


def _autocast_call(name: str, fn: Callable, args: tuple, kwargs: dict):
    """fn(*args, **kwargs) for composite op `name` in this thread's autocast region (amp/): its
    arguments cast as the region's lists say and, when a list names it, its body run without
    further casts (the ops inside see the dtypes its entry chose)."""
    state = _execution.autocast_state()
    if state is None:
        return fn(*args, **kwargs)
    args, ruled = state.cast_entry(REGISTRY[name], args)
    if not ruled:
        return fn(*args, **kwargs)
    with _execution.autocast_suspended():
        return fn(*args, **kwargs)


def _autocast_entry(name: str, fn: Callable) -> Callable:
    """fn, with its arguments handed to the autocast region's casts first (while one is open:
    PyTorch's autocast lists name composites such as addmm and conv2d as wholes)."""

    @functools.wraps(fn)
    def run(*args, **kwargs):
        if _execution.autocast_count:
            return _autocast_call(name, fn, args, kwargs)
        return fn(*args, **kwargs)

    return run


def traced(name: str):
    """Decorator for the public function of composite op `name`: while onnx export traces,
    the call becomes one node of the trace with the ops it runs as children, so it can export
    as its own ONNX op (LayerNormalization) or, where it has none, as those children."""

    def wrap(fn):
        sig = inspect.signature(fn)

        @functools.wraps(fn)
        def run(*args, **kwargs):
            if _execution.autocast_count:
                return _autocast_call(name, body, args, kwargs)
            return body(*args, **kwargs)

        def body(*args, **kwargs):
            ex = _execution.running_count and execution()
            if not ex or not ex.tracing:
                return fn(*args, **kwargs)
            bound = sig.bind(*args, **kwargs)
            bound.apply_defaults()
            return ex.scope(REGISTRY[name], bound.arguments, lambda: fn(*args, **kwargs))

        return run

    return wrap


def composite(name: str, reference: Callable, *, onnx: str | None = None, kind: str = "custom",
              dtypes: tuple = ("float32", "float64"), domain: tuple = (-3.0, 3.0),
              grad_domain: tuple | None = None, samples: Callable | None = None,
              differentiable: bool = True, twice_differentiable: bool = True,
              method: bool | str | tuple = False, inplace: bool | str | tuple = False,
              reflected: str | tuple = ()) -> Callable:
    """Decorator: declare a plain function that composes other ops as registry op `name`.

    It needs no kernel and no backward (autograd records the ops it runs); `reference` is its
    numpy definition, which the registry-driven tests compare with, and `kind`/`samples` say
    how they draw inputs ("unary", "binary" or "reduce" are drawn automatically; "custom" ops
    give `samples()`, a list of (args, kwargs) with numpy arrays for tensors). With `onnx`, the
    export traces it as one node that a spec's `onnx_export` can write; otherwise its parts
    export. method/inplace/reflected: its Tensor methods (True: the op's name, "<name>_").
    Put the function's name in its module's `__all__` to make it `st.<name>`.

    Example:
        >>> import numpy as np
        >>> import singa_tensor as st
        >>> from singa_tensor.ops import composite
        >>> @composite("_doc_softsign", lambda x: x / (1 + np.abs(x)), kind="unary")
        ... def _doc_softsign(x):
        ...     return x / (1 + x.abs())
        >>> _doc_softsign(st.tensor([1.0, -3.0])).tolist()
        [0.5, -0.75]
        >>> _ = REGISTRY.pop("_doc_softsign")  # a documentation example, not a library op
    """

    def declare(fn: Callable) -> Callable:
        public = traced(name)(fn) if onnx is not None else _autocast_entry(name, fn)
        if getattr(fn, "rounds_once", False):  # ops/_lowp.py: the 16-bit floats via float32
            dtypes_ = ("float16", "bfloat16", *dtypes)
        else:
            dtypes_ = dtypes
        attrs = {"name": name, "onnx": onnx, "kind": kind, "composite": True, "dtypes": dtypes_,
                 "domain": domain, "grad_domain": grad_domain, "differentiable": differentiable,
                 "twice_differentiable": twice_differentiable,
                 "reference": staticmethod(reference), "fn": staticmethod(public)}
        if samples is not None:
            attrs["samples"] = staticmethod(samples)
        spec = type("".join(p.title() for p in name.split("_")) or name, (OpSpec,), attrs)
        register(spec)
        return declare_methods(public, name, method, inplace, reflected)

    return declare


# ---- kernel calling ----------------------------------------------------------------------------

_kernel_cache: dict = {}


def kernel(t: Tensor, op: str, dtype=None):
    """The backend function st_<op>_<dtype> for t's device; a clear error if it has none."""
    dtype = dtype or t.dtype
    be = t._be
    key = (be, op, dtype)
    fn = _kernel_cache.get(key)
    if fn is None:
        fn = be.kernel(f"st_{op}_{dtype.suffix}")
        if fn is None:
            raise TypeError(f"{op}: not implemented for dtype {dtype.name} on {t.device}")
        _kernel_cache[key] = fn
    ex = _execution.running_count and execution()
    if ex:
        return ex.kernel(fn, f"st_{op}_{dtype.suffix}", be)
    return fn


def kernel_symbol(t: Tensor, symbol: str):
    """The backend function named symbol for t's device (None if it has none), for kernels
    whose names do not follow st_<op>_<dtype of t>."""
    fn = t._be.kernel(symbol)
    ex = _execution.running_count and execution()
    if fn is not None and ex:
        return ex.kernel(fn, symbol, t._be)
    return fn


def host_decision(read: Callable, decide: Callable):
    """read(), a host read of tensor values whose only use is the decision decide(value) (for
    example, whether indices are in bounds). Outside graph capture this is just read(); while
    a graph captures, the decision (not the raw values) becomes the replay's guard, so new
    values that decide the same way replay instead of re-recording."""
    ex = execution()
    if ex is None:
        return read()
    return ex.decision(read, decide)


def ptr(t: Tensor):
    off = t._offset
    return t._storage.ptr + off if off else t._storage.ptr


def empty_like_shape(t: Tensor, shape: tuple, dtype=None) -> Tensor:
    return Tensor._empty(shape, dtype or t.dtype, t._device, t._be)


_arrays: dict = {}


def int64s(t: Tensor, values: tuple):
    """An int64 array for kernel arguments (small, cached: shapes repeat)."""
    arr = _arrays.get(values)
    if arr is None:
        if len(_arrays) > 4096:
            _arrays.clear()
        arr = _arrays[values] = t._be.int64_array(values)
    return arr


def contiguous(t: Tensor) -> Tensor:
    """t itself when contiguous, else a contiguous copy (no autograd: a kernel helper)."""
    if t._contig:
        return t
    out = Tensor._empty(t._shape, t.dtype, t._device, t._be)
    copy_into(t, out)
    return out


def copy_into(src: Tensor, dst: Tensor) -> None:
    """dst[...] = src elementwise; src broadcast to dst's shape; same dtype."""
    if src._be is not dst._be:  # a kernel must never see another device's pointer
        check_same_device("copy", src, dst)
    shape = dst._shape
    nd = len(shape)
    ss = broadcast_strides(src, shape)
    fn = t_kernel_copy(dst)
    if nd == 0:
        shape, ss, ds = (1,), (0,), (0,)
        nd = 1
    else:
        ds = dst._strides
    fn(ptr(src), ptr(dst), nd, int64s(dst, shape), int64s(dst, ss), int64s(dst, ds))
    dst._storage.version += 1


def t_kernel_copy(t: Tensor):
    key = (t._be, "copy", t.dtype.itemsize)
    fn = _kernel_cache.get(key)
    if fn is None:
        fn = _kernel_cache[key] = t._be.kernel(t._be.copy_symbol(t.dtype))
    ex = _execution.running_count and execution()
    if ex:
        return ex.kernel(fn, t._be.copy_symbol(t.dtype), t._be)
    return fn


def broadcast_shapes(*shapes, op: str = "broadcast") -> tuple:
    """numpy broadcasting of shapes, with an error that names the op and the shapes."""
    nd = max(len(s) for s in shapes)
    out = []
    for i in range(nd):
        size = 1
        for s in shapes:
            j = i - (nd - len(s))
            if j < 0:
                continue
            d = s[j]
            if d != 1:
                if size != 1 and d != size:
                    raise ValueError(
                        f"{op}: shapes {' and '.join(str(tuple(x)) for x in shapes)} cannot be "
                        f"broadcast together (dimension {i - nd} is {size} vs {d})"
                    )
                size = d
        out.append(size)
    return tuple(out)


def broadcast_strides(t: Tensor, shape: tuple) -> tuple:
    """t's strides for a view broadcast to shape (0 on stretched dimensions)."""
    nd = len(shape)
    off = nd - len(t._shape)
    out = [0] * nd
    for i, (n, s) in enumerate(zip(t._shape, t._strides)):
        out[off + i] = 0 if n == 1 and shape[off + i] != 1 else s
    return tuple(out)


def check_same_device(op: str, *tensors) -> None:
    dev = None
    for t in tensors:
        if t.__class__ is Tensor:
            if dev is None:
                dev = t._device
            elif t._device != dev:
                raise RuntimeError(
                    f"{op}: expected all tensors to be on the same device, but found at least "
                    f"two devices, {dev} and {t._device}"
                )


def as_tensor_like(value, like: Tensor, dtype=None) -> Tensor:
    """A Python scalar (or sequence) as a tensor on like's device."""
    from .. import creation

    return creation.tensor(value, dtype=dtype or like.dtype, device=like._device)


def expect_tensor(op: str, x, name: str = "input") -> Tensor:
    if x.__class__ is not Tensor:
        raise TypeError(f"{op}: {name} must be a Tensor, got {type(x).__name__}")
    return x


def float_dtype_for(t: Tensor):
    """The dtype a float op computes in for t: its own if float32/64, float32 otherwise."""
    d = t.dtype
    if d is _dt.float32 or d is _dt.float64:
        return d
    return _dt.float32


__all__ = [
    "METHODS",
    "REGISTRY",
    "OpSpec",
    "apply",
    "bind_method",
    "composite",
    "declare_methods",
    "broadcast_shapes",
    "broadcast_strides",
    "contiguous",
    "copy_into",
    "empty_like_shape",
    "int64s",
    "host_decision",
    "kernel",
    "kernel_symbol",
    "ptr",
    "register",
    "tensor_method",
    "traced",
]
