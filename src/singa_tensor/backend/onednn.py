"""oneDNN for the CPU backend: NCHW conv2d forward, backward-data and backward-weights (with
the bias gradient) in float32, bfloat16 or float16, and the larger float32 matrix products
and those of the two 16-bit floats (bfloat16 x bfloat16 -> bfloat16, accumulated in float32),
run by Intel's oneDNN library when it is installed and has native code for them on this CPU.

The library comes from PyPI (`pip install onednn-cpu-gomp`, in the `dev` and `demo` extras) and
is loaded at run time through cffi's ABI mode: the build does not change, and without the
package the im2col path runs as before. The wheel's `libdnnl.so.3` is built on GNU OpenMP, the
same `libgomp` our kernels use, so oneDNN's parallel regions run on our thread pool with the
thread count `st.set_num_threads` sets (`omp_get_max_threads`), under the same
`OMP_WAIT_POLICY`. A build on another threading runtime (TBB, SYCL) would bring a second pool
that fights ours, so it is refused and the im2col path stays.

oneDNN (convolutions and matrix products) is off when the environment variable
`SINGA_TENSOR_ONEDNN=0` is set at import, or while `st.backends.mkldnn.enabled` is False.
`SINGA_TENSOR_ONEDNN_LIB` names a `libdnnl.so` to load instead of the packaged one.

Each convolution geometry (shapes, stride, padding, dilation, groups, bias, thread count) gets
one `Conv2d` plan, made on its first use and cached: its primitives are created once (oneDNN
chooses the memory format it computes in, usually a channel-blocked one), with reorders between
our NCHW buffers and that format. A plan's three entry points take raw buffer pointers only, so
graph mode records and replays them like any kernel. `calls` counts how often each entry point
ran, which tells which path a convolution took.

A matrix product (`matmul_plan`) gets one `Matmul` per call shape (sizes, transposes, leading
dimensions, batch strides): oneDNN reads the operands where they lie through strided memory
descriptors. Which products go there is the CPU backend's rule (`cpu.kernel`): 16-bit ones from
2^17 multiply-adds, float32 ones from 2^22 (with at least 16 rows and columns), where oneDNN
took 0.69-1.01x OpenBLAS's time (bench/bench_cpu_paths.py). Where oneDNN has only its
reference code for a dtype (an AVX2 CPU has no bfloat16 or float16 arithmetic), there is no
plan and the library's own kernel runs.

Example:
    >>> from singa_tensor.backend import onednn
    >>> isinstance(onednn.is_available(), bool)
    True
"""

from __future__ import annotations

import os
import threading
import weakref

import cffi

from .. import dtype as _dt
from . import cpu as _cpu

# the C API of oneDNN v3 that the plans use; handles are opaque, enums are passed as ints
_CDEF = """
typedef struct dnnl_engine *dnnl_engine_t;
typedef struct dnnl_stream *dnnl_stream_t;
typedef struct dnnl_memory_desc *dnnl_memory_desc_t;
typedef const struct dnnl_memory_desc *const_dnnl_memory_desc_t;
typedef struct dnnl_memory *dnnl_memory_t;
typedef struct dnnl_primitive_desc *dnnl_primitive_desc_t;
typedef const struct dnnl_primitive_desc *const_dnnl_primitive_desc_t;
typedef struct dnnl_primitive *dnnl_primitive_t;
typedef const struct dnnl_primitive *const_dnnl_primitive_t;
typedef const struct dnnl_primitive_attr *const_dnnl_primitive_attr_t;
typedef int64_t dnnl_dim_t;
typedef dnnl_dim_t dnnl_dims_t[12];
typedef struct { int arg; dnnl_memory_t memory; } dnnl_exec_arg_t;
typedef struct {
    int major; int minor; int patch; const char *hash; unsigned cpu_runtime; unsigned gpu_runtime;
} dnnl_version_t;

const dnnl_version_t *dnnl_version(void);
int dnnl_engine_create(dnnl_engine_t *engine, int kind, size_t index);
int dnnl_stream_create(dnnl_stream_t *stream, dnnl_engine_t engine, unsigned flags);
int dnnl_stream_wait(dnnl_stream_t stream);
int dnnl_memory_desc_create_with_strides(dnnl_memory_desc_t *md, int ndims,
    const dnnl_dims_t dims, int data_type, const dnnl_dims_t strides);
int dnnl_memory_desc_create_with_tag(dnnl_memory_desc_t *md, int ndims, const dnnl_dims_t dims,
    int data_type, int tag);
int dnnl_memory_desc_destroy(dnnl_memory_desc_t md);
int dnnl_memory_desc_equal(const_dnnl_memory_desc_t lhs, const_dnnl_memory_desc_t rhs);
size_t dnnl_memory_desc_get_size(const_dnnl_memory_desc_t md);
int dnnl_memory_create(dnnl_memory_t *memory, const_dnnl_memory_desc_t md, dnnl_engine_t engine,
    void *handle);
int dnnl_memory_set_data_handle(dnnl_memory_t memory, void *handle);
int dnnl_memory_destroy(dnnl_memory_t memory);
int dnnl_convolution_forward_primitive_desc_create(dnnl_primitive_desc_t *pd,
    dnnl_engine_t engine, int prop_kind, int alg_kind, const_dnnl_memory_desc_t src_desc,
    const_dnnl_memory_desc_t weights_desc, const_dnnl_memory_desc_t bias_desc,
    const_dnnl_memory_desc_t dst_desc, const dnnl_dims_t strides, const dnnl_dims_t dilates,
    const dnnl_dims_t padding_l, const dnnl_dims_t padding_r, const_dnnl_primitive_attr_t attr);
int dnnl_convolution_backward_data_primitive_desc_create(dnnl_primitive_desc_t *pd,
    dnnl_engine_t engine, int alg_kind, const_dnnl_memory_desc_t diff_src_desc,
    const_dnnl_memory_desc_t weights_desc, const_dnnl_memory_desc_t diff_dst_desc,
    const dnnl_dims_t strides, const dnnl_dims_t dilates, const dnnl_dims_t padding_l,
    const dnnl_dims_t padding_r, const_dnnl_primitive_desc_t hint_fwd_pd,
    const_dnnl_primitive_attr_t attr);
int dnnl_convolution_backward_weights_primitive_desc_create(dnnl_primitive_desc_t *pd,
    dnnl_engine_t engine, int alg_kind, const_dnnl_memory_desc_t src_desc,
    const_dnnl_memory_desc_t diff_weights_desc, const_dnnl_memory_desc_t diff_bias_desc,
    const_dnnl_memory_desc_t diff_dst_desc, const dnnl_dims_t strides, const dnnl_dims_t dilates,
    const dnnl_dims_t padding_l, const dnnl_dims_t padding_r,
    const_dnnl_primitive_desc_t hint_fwd_pd, const_dnnl_primitive_attr_t attr);
int dnnl_reorder_primitive_desc_create(dnnl_primitive_desc_t *pd,
    const_dnnl_memory_desc_t src_desc, dnnl_engine_t src_engine,
    const_dnnl_memory_desc_t dst_desc, dnnl_engine_t dst_engine,
    const_dnnl_primitive_attr_t attr);
const_dnnl_memory_desc_t dnnl_primitive_desc_query_md(const_dnnl_primitive_desc_t pd, int what,
    int index);
int dnnl_primitive_desc_query(const_dnnl_primitive_desc_t pd, int what, int index,
    void *result);
int dnnl_primitive_desc_destroy(dnnl_primitive_desc_t pd);
int dnnl_primitive_create(dnnl_primitive_t *primitive, const_dnnl_primitive_desc_t pd);
int dnnl_primitive_execute(const_dnnl_primitive_t primitive, dnnl_stream_t stream, int nargs,
    const dnnl_exec_arg_t *args);
int dnnl_primitive_destroy(dnnl_primitive_t primitive);
typedef struct dnnl_primitive_attr *dnnl_primitive_attr_t;
typedef struct dnnl_post_ops *dnnl_post_ops_t;
typedef const struct dnnl_post_ops *const_dnnl_post_ops_t;
int dnnl_matmul_primitive_desc_create(dnnl_primitive_desc_t *pd, dnnl_engine_t engine,
    const_dnnl_memory_desc_t src_desc, const_dnnl_memory_desc_t weights_desc,
    const_dnnl_memory_desc_t bias_desc, const_dnnl_memory_desc_t dst_desc,
    const_dnnl_primitive_attr_t attr);
int dnnl_primitive_attr_create(dnnl_primitive_attr_t *attr);
int dnnl_primitive_attr_destroy(dnnl_primitive_attr_t attr);
int dnnl_primitive_attr_set_post_ops(dnnl_primitive_attr_t attr, const_dnnl_post_ops_t post_ops);
int dnnl_post_ops_create(dnnl_post_ops_t *post_ops);
int dnnl_post_ops_destroy(dnnl_post_ops_t post_ops);
int dnnl_post_ops_append_sum(dnnl_post_ops_t post_ops, float scale, int32_t zero_point,
    int data_type);
int dnnl_post_ops_append_eltwise(dnnl_post_ops_t post_ops, int alg_kind, float alpha,
    float beta);
int dnnl_pooling_forward_primitive_desc_create(dnnl_primitive_desc_t *pd, dnnl_engine_t engine,
    int prop_kind, int alg_kind, const_dnnl_memory_desc_t src_desc,
    const_dnnl_memory_desc_t dst_desc, const dnnl_dims_t strides, const dnnl_dims_t kernel,
    const dnnl_dims_t dilation, const dnnl_dims_t padding_l, const dnnl_dims_t padding_r,
    const_dnnl_primitive_attr_t attr);
"""

# enum values of the v3 C API (dnnl_types.h, dnnl_common_types.h, dnnl_config.h)
_F16, _BF16, _F32, _CPU, _STREAM_IN_ORDER, _FORMAT_ANY = 1, 2, 3, 1, 1, 1
_DATA_TYPES = {"float32": _F32, "bfloat16": _BF16, "float16": _F16}
_FORWARD_TRAINING, _FORWARD_INFERENCE, _CONVOLUTION_DIRECT = 64, 96, 1
_ELTWISE_RELU, _POOLING_MAX = 0x20, 0x1FF
_Q_IMPL_INFO, _Q_SRC, _Q_DIFF_SRC, _Q_WEIGHTS, _Q_DIFF_WEIGHTS, _Q_DST, _Q_DIFF_DST = (
    8, 129, 130, 131, 132, 133, 134)
_ARG_SRC, _ARG_DST, _ARG_WEIGHTS, _ARG_BIAS = 1, 17, 33, 41
_ARG_DIFF_SRC, _ARG_DIFF_DST, _ARG_DIFF_WEIGHTS, _ARG_DIFF_BIAS = 129, 145, 161, 169
_RUNTIME_OMP = 2

# the distributions that ship a libdnnl built on GNU OpenMP
_PACKAGES = ("onednn-cpu-gomp",)

_state = {"enabled": os.environ.get("SINGA_TENSOR_ONEDNN", "1").strip() != "0"}
_lib = None  # the loaded library, False once loading failed
_why = None  # why it is not available
_load_lock = threading.Lock()
_ffi = None  # the cffi declarations, made on the first load (parsing them takes ~40 ms)
_engine = _stream = None

# how often each entry point ran (tests read it to see which path a convolution took)
calls = {"forward": 0, "backward_data": 0, "backward_weights": 0}
matmul_calls = {"run": 0}  # runs of Matmul plans


class OnednnError(RuntimeError):
    """A oneDNN call failed (status code and the call in the message)."""


def _library_path() -> str | None:
    own = os.environ.get("SINGA_TENSOR_ONEDNN_LIB")
    if own:
        return own
    import importlib.metadata  # at the first convolution, not at import (~10 ms)

    for dist in _PACKAGES:
        try:
            files = importlib.metadata.distribution(dist).files or ()
        except importlib.metadata.PackageNotFoundError:
            continue
        for f in files:
            if f.name == "libdnnl.so.3":
                return str(f.locate())
    return None


def _load():
    """The library, or None (with the reason in _why) when it cannot be used here."""
    global _lib, _why, _engine, _stream, _ffi
    if _lib is not None:
        return _lib or None
    with _load_lock:
        if _lib is not None:
            return _lib or None
        path = _library_path()
        if path is None:
            _why = f"no oneDNN package is installed (pip install {_PACKAGES[0]})"
            _lib = False
            return None
        if _ffi is None:
            ffi = cffi.FFI()
            ffi.cdef(_CDEF)
            _ffi = ffi
        try:
            lib = _ffi.dlopen(path)
            version = lib.dnnl_version()
            if version.major != 3:
                raise OSError(f"oneDNN {version.major}.{version.minor} found, v3 needed")
            if version.cpu_runtime != _RUNTIME_OMP:
                raise OSError("this libdnnl is not built on OpenMP: its threads would compete "
                              "with the OpenMP pool of our kernels")
            engine = _ffi.new("dnnl_engine_t *")
            _check(lib.dnnl_engine_create(engine, _CPU, 0), "dnnl_engine_create")
            stream = _ffi.new("dnnl_stream_t *")
            _check(lib.dnnl_stream_create(stream, engine[0], _STREAM_IN_ORDER),
                   "dnnl_stream_create")
        except (OSError, OnednnError) as e:
            _why = f"{path}: {e}"
            _lib = False
            return None
        _engine, _stream = engine[0], stream[0]
        _lib = lib
        return lib


def _check(status: int, what: str) -> None:
    if status != 0:
        raise OnednnError(f"oneDNN: {what} failed with status {status}")


def is_available() -> bool:
    """Whether a usable oneDNN library is installed (loads it on the first call).

    Example:
        >>> from singa_tensor.backend import onednn
        >>> onednn.is_available() in (True, False)
        True
    """
    return _load() is not None


def unavailable_reason() -> str | None:
    """Why oneDNN is not available (None when it is).

    Example:
        >>> from singa_tensor.backend import onednn
        >>> onednn.is_available() or isinstance(onednn.unavailable_reason(), str)
        True
    """
    return None if _load() is not None else _why


def enabled() -> bool:
    """Whether convolutions may use oneDNN (`st.backends.mkldnn.enabled`).

    Example:
        >>> from singa_tensor.backend import onednn
        >>> isinstance(onednn.enabled(), bool)
        True
    """
    return _state["enabled"]


def set_enabled(value: bool) -> None:
    """Allow (True) or forbid (False) oneDNN convolutions; False runs the im2col path.

    Example:
        >>> from singa_tensor.backend import onednn
        >>> was = onednn.enabled(); onednn.set_enabled(False); onednn.enabled()
        False
        >>> onednn.set_enabled(was)
    """
    if not isinstance(value, bool):
        raise TypeError(f"backends.mkldnn.enabled must be a bool, got {type(value).__name__}")
    _state["enabled"] = value


# ---- memory descriptors and primitives -----------------------------------------------------------


def _dims(values) -> object:
    d = _ffi.new("dnnl_dims_t")
    for i, v in enumerate(values):
        d[i] = v
    return d


def _strided_md(lib, shape, strides, dt: int):
    """A descriptor of a buffer of data type dt with the given shape and element strides."""
    md = _ffi.new("dnnl_memory_desc_t *")
    _check(lib.dnnl_memory_desc_create_with_strides(md, len(shape), _dims(shape), dt,
                                                    _dims(strides)),
           "dnnl_memory_desc_create_with_strides")
    return _ffi.gc(md[0], lib.dnnl_memory_desc_destroy)


def _plain_md(lib, shape, dt: int = _F32):
    """A descriptor of a contiguous row-major buffer of shape."""
    strides, n = [], 1
    for s in reversed(shape):
        strides.append(n)
        n *= s
    return _strided_md(lib, shape, list(reversed(strides)), dt)


def _any_md(lib, shape, dt: int = _F32):
    md = _ffi.new("dnnl_memory_desc_t *")
    _check(lib.dnnl_memory_desc_create_with_tag(md, len(shape), _dims(shape), dt, _FORMAT_ANY),
           "dnnl_memory_desc_create_with_tag")
    return _ffi.gc(md[0], lib.dnnl_memory_desc_destroy)


def _memory(lib, md):
    """A memory object without a buffer: each run sets the buffer it works on."""
    m = _ffi.new("dnnl_memory_t *")
    _check(lib.dnnl_memory_create(m, md, _engine, _ffi.NULL), "dnnl_memory_create")
    return _ffi.gc(m[0], lib.dnnl_memory_destroy)


def _primitive(lib, pd):
    p = _ffi.new("dnnl_primitive_t *")
    _check(lib.dnnl_primitive_create(p, pd), "dnnl_primitive_create")
    return _ffi.gc(p[0], lib.dnnl_primitive_destroy)


def _impl_name(lib, pd) -> str:
    out = _ffi.new("const char **")
    if lib.dnnl_primitive_desc_query(pd, _Q_IMPL_INFO, 0, out) != 0 or out[0] == _ffi.NULL:
        return "?"
    return _ffi.string(out[0]).decode()


class _Step:
    """One primitive with its arguments; run() executes it on the bound memories."""

    __slots__ = ("prim", "args", "n", "keep")

    def __init__(self, lib, pd, args: list, keep=()):
        self.prim = _primitive(lib, pd)
        self.n = len(args)
        self.args = _ffi.new("dnnl_exec_arg_t[]", self.n)
        for i, (code, mem) in enumerate(args):
            self.args[i].arg = code
            self.args[i].memory = mem
        self.keep = (pd, [m for _, m in args], keep)  # what the primitive's args point at


class _Operand:
    """One buffer of a convolution: the caller's NCHW memory, and, when oneDNN computes in
    another layout, a memory in that layout (`nbytes`, a buffer from the caching allocator for
    the length of one run: plans hold no memory between runs) with the reorder between the
    two."""

    __slots__ = ("user", "inner", "reorder", "nbytes")

    def __init__(self, lib, user_md, want_md, into: bool):
        self.user = _memory(lib, user_md)
        if lib.dnnl_memory_desc_equal(user_md, want_md):
            self.inner, self.reorder, self.nbytes = self.user, None, 0
            return
        self.inner = _memory(lib, want_md)
        self.nbytes = lib.dnnl_memory_desc_get_size(want_md)
        src, dst = (user_md, want_md) if into else (want_md, user_md)
        pd = _ffi.new("dnnl_primitive_desc_t *")
        _check(lib.dnnl_reorder_primitive_desc_create(pd, src, _engine, dst, _engine,
                                                      _ffi.NULL),
               "dnnl_reorder_primitive_desc_create")
        pd = _ffi.gc(pd[0], lib.dnnl_primitive_desc_destroy)
        a, b = (self.user, self.inner) if into else (self.inner, self.user)
        self.reorder = _Step(lib, pd, [(_ARG_SRC, a), (_ARG_DST, b)])


class Conv2d:
    """The oneDNN primitives of one NCHW convolution geometry and dtype (float32, bfloat16 or
    float16: every buffer, bias included, in that dtype; oneDNN accumulates in float32).

    `forward(x, w, b, y)`, `backward_data(gy, w, gx)` and `backward_weights(x, gy, gw, gb)`
    take buffer pointers (b, gb: NULL without a bias) of contiguous NCHW tensors, weights
    (O, C/groups, kh, kw). Each direction's primitives are made on its first call; for the
    16-bit dtypes all three directions are checked when the plan is made, so that a geometry
    oneDNN computes only by its reference code (or not at all) gets no plan."""

    def __init__(self, lib, n, c, h, w, o, kh, kw, oh, ow, stride, pads, dilation, groups,
                 bias: bool, dtype: str = "float32"):
        self.lib, self.bias, self.groups, self.dtype = lib, bias, groups, dtype
        dt = _DATA_TYPES[dtype]
        self.args = (n, c, h, w, o, kh, kw, oh, ow, stride, pads, dilation, groups)
        self.src_shape, self.dst_shape = (n, c, h, w), (n, o, oh, ow)
        self.weight_shape = (o, c // groups, kh, kw)
        pt, pb, pl, pr = pads
        self.geometry = (_dims(stride), _dims((dilation[0] - 1, dilation[1] - 1)),
                         _dims((pt, pl)), _dims((pb, pr)))
        g = groups
        wshape = (o, c, kh, kw) if g == 1 else (g, o // g, c // g, kh, kw)
        self.shapes = {"src": (n, c, h, w), "wei": wshape, "dst": (n, o, oh, ow), "bias": (o,)}
        self.plain = {k: _plain_md(lib, s, dt) for k, s in self.shapes.items()}
        self.any = {k: _any_md(lib, s, dt) for k, s in self.shapes.items() if k != "bias"}
        self._lock = threading.Lock()
        self._operands: dict = {}  # id(primitive desc) -> its _Operands, in argument order
        # (id(weight storage), address) -> (weakref to the storage, its version, the buffer)
        self._kept: dict = {}
        fwd = _ffi.new("dnnl_primitive_desc_t *")
        _check(lib.dnnl_convolution_forward_primitive_desc_create(
            fwd, _engine, _FORWARD_TRAINING, _CONVOLUTION_DIRECT, self.any["src"],
            self.any["wei"], self.plain["bias"] if bias else _ffi.NULL, self.any["dst"],
            *self.geometry, _ffi.NULL), "dnnl_convolution_forward_primitive_desc_create")
        self._fwd_pd = _ffi.gc(fwd[0], lib.dnnl_primitive_desc_destroy)
        self._fwd = self._bwd_data = self._bwd_weights = None
        self._bwd_data_pd = self._bwd_weights_pd = None
        self.impl: dict[str, str] = {"forward": _impl_name(lib, self._fwd_pd)}
        if dtype != "float32":
            self._backward_data_pd()
            self._backward_weights_pd()
            if any(name.startswith("ref") for name in self.impl.values()):
                # oneDNN's reference loops are far slower than im2col and the 16-bit GEMM
                raise OnednnError(f"oneDNN: only reference code for a {dtype} convolution")

    def variant(self, bias: bool) -> Conv2d:
        """The plan of the same geometry with (True) or without (False) a bias."""
        if bias == self.bias:
            return self
        plan = _plan(self.args, bias, self.threads, self.dtype)
        if plan is None:
            raise OnednnError(f"oneDNN: no convolution of {self.args} without a bias")
        return plan

    def _operand(self, pd, query: int, name: str, into: bool) -> _Operand:
        want = self.lib.dnnl_primitive_desc_query_md(pd, query, 0)
        return _Operand(self.lib, self.plain[name], want, into)

    def _steps(self, pd, ins: list, outs: list, extra: list) -> tuple:
        """(operands, steps to run) for primitive pd: reorders of the inputs into its layout,
        the primitive, reorders of the outputs back. ins/outs: (query, name, arg code)."""
        lib = self.lib
        ops = [self._operand(pd, q, name, True) for q, name, _ in ins]
        ops += [self._operand(pd, q, name, False) for q, name, _ in outs]
        args = [(code, op.inner) for op, (_, _, code) in zip(ops, ins + outs)]
        bias = []
        for code in extra:  # the bias (gradient) stays a plain (O,) vector
            m = _memory(lib, self.plain["bias"])
            bias.append(m)
            args.append((code, m))
        main = _Step(lib, pd, args)
        before = [op.reorder for op in ops[:len(ins)] if op.reorder is not None]
        after = [op.reorder for op in ops[len(ins):] if op.reorder is not None]
        inner = [(op.inner, op.nbytes) for op in ops if op.reorder is not None]
        self._operands[id(pd)] = ops
        return [op.user for op in ops] + bias, inner, before + [main] + after

    def _run(self, mems, inner, steps, ptrs) -> None:
        lib, stream = self.lib, _stream
        scratch = [_cpu.empty((nbytes + 3) // 4, _dt.float32) for _, nbytes in inner]
        with self._lock:
            for m, p in zip(mems, ptrs):
                lib.dnnl_memory_set_data_handle(m, p)
            for (m, _), buf in zip(inner, scratch):
                lib.dnnl_memory_set_data_handle(m, buf.ptr)
            for s in steps:
                _check(lib.dnnl_primitive_execute(s.prim, stream, s.n, s.args),
                       "dnnl_primitive_execute")
            lib.dnnl_stream_wait(stream)

    def forward(self, x, w, b, y, kept=None) -> None:
        """kept: None, or the storage of weights that nothing writes in place between calls
        (an imported model's folded constants): their copy in the primitive's layout is then
        made once per storage and version and reused, instead of reordered on every call."""
        if self._fwd is None:
            extra = [_ARG_BIAS] if self.bias else []
            self._fwd = self._steps(self._fwd_pd, [(_Q_SRC, "src", _ARG_SRC),
                                                   (_Q_WEIGHTS, "wei", _ARG_WEIGHTS)],
                                    [(_Q_DST, "dst", _ARG_DST)], extra)
        calls["forward"] += 1
        ptrs = (x, w, y, b) if self.bias else (x, w, y)
        wei = self._operands[id(self._fwd_pd)][1]
        if kept is None or wei.reorder is None:
            self._run(*self._fwd, ptrs)
            return
        mems, inner, steps = self._fwd
        rest = [(m, n) for m, n in inner if m is not wei.inner]
        scratch = [_cpu.empty((nbytes + 3) // 4, _dt.float32) for _, nbytes in rest]
        lib = self.lib
        with self._lock:
            buf = kept_weights(lib, self._kept, wei, kept, w)
            for m, p in zip(mems, ptrs):
                lib.dnnl_memory_set_data_handle(m, p)
            for (m, _), s in zip(rest, scratch):
                lib.dnnl_memory_set_data_handle(m, s.ptr)
            lib.dnnl_memory_set_data_handle(wei.inner, buf.ptr)
            for s in steps:
                if s is not wei.reorder:
                    _check(lib.dnnl_primitive_execute(s.prim, _stream, s.n, s.args),
                           "dnnl_primitive_execute")
            lib.dnnl_stream_wait(_stream)

    def _backward_data_pd(self):
        if self._bwd_data_pd is None:
            lib = self.lib
            pd = _ffi.new("dnnl_primitive_desc_t *")
            _check(lib.dnnl_convolution_backward_data_primitive_desc_create(
                pd, _engine, _CONVOLUTION_DIRECT, self.any["src"], self.any["wei"],
                self.any["dst"], *self.geometry, self._fwd_pd, _ffi.NULL),
                "dnnl_convolution_backward_data_primitive_desc_create")
            self._bwd_data_pd = _ffi.gc(pd[0], lib.dnnl_primitive_desc_destroy)
            self.impl["backward_data"] = _impl_name(lib, self._bwd_data_pd)
        return self._bwd_data_pd

    def _backward_weights_pd(self):
        if self._bwd_weights_pd is None:
            lib = self.lib
            pd = _ffi.new("dnnl_primitive_desc_t *")
            _check(lib.dnnl_convolution_backward_weights_primitive_desc_create(
                pd, _engine, _CONVOLUTION_DIRECT, self.any["src"], self.any["wei"],
                self.plain["bias"] if self.bias else _ffi.NULL, self.any["dst"],
                *self.geometry, self._fwd_pd, _ffi.NULL),
                "dnnl_convolution_backward_weights_primitive_desc_create")
            self._bwd_weights_pd = _ffi.gc(pd[0], lib.dnnl_primitive_desc_destroy)
            self.impl["backward_weights"] = _impl_name(lib, self._bwd_weights_pd)
        return self._bwd_weights_pd

    def backward_data(self, gy, w, gx) -> None:
        if self._bwd_data is None:
            pd = self._backward_data_pd()
            self._bwd_data = self._steps(pd, [(_Q_DIFF_DST, "dst", _ARG_DIFF_DST),
                                              (_Q_WEIGHTS, "wei", _ARG_WEIGHTS)],
                                         [(_Q_DIFF_SRC, "src", _ARG_DIFF_SRC)], [])
        calls["backward_data"] += 1
        self._run(*self._bwd_data, (gy, w, gx))

    def backward_weights(self, x, gy, gw, gb) -> None:
        if self._bwd_weights is None:
            pd = self._backward_weights_pd()
            extra = [_ARG_DIFF_BIAS] if self.bias else []
            self._bwd_weights = self._steps(pd, [(_Q_SRC, "src", _ARG_SRC),
                                                 (_Q_DIFF_DST, "dst", _ARG_DIFF_DST)],
                                            [(_Q_DIFF_WEIGHTS, "wei", _ARG_DIFF_WEIGHTS)], extra)
        calls["backward_weights"] += 1
        ptrs = (x, gy, gw, gb) if self.bias else (x, gy, gw)
        self._run(*self._bwd_weights, ptrs)


# weights kept in a primitive's layout, per plan: at most this many storages
_MAX_KEPT = 64


def kept_weights(lib, cache: dict, wei: _Operand, storage, w):
    """The buffer holding storage's weights (at pointer w) in the layout of operand wei,
    from cache (a plan's), reordered now if this storage, at this version, has none there
    yet. The caller holds the plan's lock (wei's memories are rebound)."""
    key = (id(storage), int(_ffi.cast("uintptr_t", w)))  # one storage may hold several
    entry = cache.get(key)
    if entry is not None and entry[0]() is storage and entry[1] == storage.version:
        return entry[2]
    buf = _cpu.empty((wei.nbytes + 3) // 4, _dt.float32)
    lib.dnnl_memory_set_data_handle(wei.user, w)
    lib.dnnl_memory_set_data_handle(wei.inner, buf.ptr)
    s = wei.reorder
    _check(lib.dnnl_primitive_execute(s.prim, _stream, s.n, s.args), "dnnl_primitive_execute")
    lib.dnnl_stream_wait(_stream)
    if len(cache) >= _MAX_KEPT:
        cache.pop(next(iter(cache)))
    cache[key] = (weakref.ref(storage), storage.version, buf)
    return buf


_plans: dict[tuple, Conv2d | None] = {}
_MAX_PLANS = 512


def _forget_oldest(cache: dict) -> None:
    """Make room in a plan cache that is full: drop the plan made longest ago (plans in use stay
    alive through their callers). A workload cycling through more shapes than the cache holds
    makes a plan again for each (about 0.25 ms for a matmul), as with no cache."""
    while len(cache) >= _MAX_PLANS:
        cache.pop(next(iter(cache)))


def conv2d_plan(n, c, h, w, o, kh, kw, oh, ow, stride, pads, dilation, groups, bias: bool,
                threads: int, dtype: str = "float32") -> Conv2d | None:
    """The cached plan of one convolution geometry of dtype ("float32", "bfloat16" or
    "float16"); None when oneDNN is off or not installed, or declines the geometry or dtype
    (the im2col path then runs).

    Example:
        >>> from singa_tensor.backend import onednn
        >>> p = onednn.conv2d_plan(1, 3, 8, 8, 4, 3, 3, 8, 8, (1, 1), (1, 1, 1, 1), (1, 1), 1,
        ...                        True, 1)
        >>> p is None or p.dst_shape == (1, 4, 8, 8)
        True
    """
    if not _state["enabled"]:
        return None
    return _plan((n, c, h, w, o, kh, kw, oh, ow, stride, pads, dilation, groups), bias, threads,
                 dtype)


def _plan(args: tuple, bias: bool, threads: int, dtype: str = "float32") -> Conv2d | None:
    key = (args, bias, threads, dtype)
    plan = _plans.get(key, False)
    if plan is not False:
        return plan
    lib = _load()
    if lib is None:
        return None
    try:
        plan = Conv2d(lib, *args, bias, dtype)
        plan.threads = threads
    except OnednnError:  # a geometry no implementation takes: the im2col path
        plan = None
    _forget_oldest(_plans)
    _plans[key] = plan
    return plan


# ---- matrix products --------------------------------------------------------------------------


class Matmul:
    """oneDNN's matmul primitive for one st_gemm call shape of a dtype: C[p] =
    op(A[p]) @ op(B[p]) (+ C[p] when `accumulate`), all three in the dtype, accumulated in
    float32 and rounded once. The operands are described where they lie, by their strides: a
    transposed operand is a column-major matrix, a batch stride of 0 a batch dimension of 1
    that oneDNN broadcasts, so nothing is copied. `run(a, b, c)` takes buffer pointers. With
    `bias` (one product, no batch), C = op(A) @ op(B) + bias, bias a row of n values added to
    every row of C after the sum over k: `run_bias(a, b, bias, c)`."""

    def __init__(self, lib, dtype: str, ta, tb, m, n, k, lda, ldb, ldc, batch, sa, sb, sc,
                 accumulate: bool, bias: bool = False):
        dt = _DATA_TYPES[dtype]
        if bias and (batch != 1 or accumulate):
            raise OnednnError("oneDNN: a matmul bias is planned for one product without C")

        def desc(rows, cols, ld, trans, bstride):
            strides = (1, ld) if trans else (ld, 1)
            if batch == 1:
                return _strided_md(lib, (rows, cols), strides, dt)
            nb = 1 if bstride == 0 else batch
            span = bstride or (cols if trans else rows) * ld
            return _strided_md(lib, (nb, rows, cols), (span,) + strides, dt)

        self.mds = (desc(m, k, lda, ta, sa), desc(k, n, ldb, tb, sb), desc(m, n, ldc, 0, sc))
        attr = _ffi.NULL
        if accumulate:  # C = A @ B + C: the sum post-op adds the old C in float32
            ops = _ffi.new("dnnl_post_ops_t *")
            _check(lib.dnnl_post_ops_create(ops), "dnnl_post_ops_create")
            ops = _ffi.gc(ops[0], lib.dnnl_post_ops_destroy)
            _check(lib.dnnl_post_ops_append_sum(ops, 1.0, 0, 0), "dnnl_post_ops_append_sum")
            a = _ffi.new("dnnl_primitive_attr_t *")
            _check(lib.dnnl_primitive_attr_create(a), "dnnl_primitive_attr_create")
            attr = _ffi.gc(a[0], lib.dnnl_primitive_attr_destroy)
            _check(lib.dnnl_primitive_attr_set_post_ops(attr, ops),
                   "dnnl_primitive_attr_set_post_ops")
        bias_md = _strided_md(lib, (1, n), (n, 1), dt) if bias else _ffi.NULL
        pd = _ffi.new("dnnl_primitive_desc_t *")
        _check(lib.dnnl_matmul_primitive_desc_create(pd, _engine, self.mds[0], self.mds[1],
                                                     bias_md, self.mds[2], attr),
               "dnnl_matmul_primitive_desc_create")
        pd = _ffi.gc(pd[0], lib.dnnl_primitive_desc_destroy)
        self.impl = _impl_name(lib, pd)
        if self.impl.startswith("ref"):
            # oneDNN's reference loops (an ISA without native 16-bit arithmetic) are far
            # slower than widening to float32 for sgemm
            raise OnednnError(f"oneDNN: only reference code for a {dtype} matmul")
        self.mems = [_memory(lib, md) for md in self.mds]
        args = list(zip((_ARG_SRC, _ARG_WEIGHTS, _ARG_DST), self.mems))
        if bias:
            self.bias_mem = _memory(lib, bias_md)
            args.append((_ARG_BIAS, self.bias_mem))
        self.step = _Step(lib, pd, args)
        self.lib = lib
        self._lock = threading.Lock()

    def run_bias(self, a, b, bias, c) -> None:
        """C = op(A) @ op(B) + bias, for a plan made with `bias`."""
        lib = self.lib
        with self._lock:
            lib.dnnl_memory_set_data_handle(self.bias_mem, bias)
            self._execute(a, b, c)

    def run(self, a, b, c) -> None:
        with self._lock:
            self._execute(a, b, c)

    def _execute(self, a, b, c) -> None:  # under the lock
        lib, s = self.lib, self.step
        matmul_calls["run"] += 1
        for m, p in zip(self.mems, (a, b, c)):
            lib.dnnl_memory_set_data_handle(m, p)
        _check(lib.dnnl_primitive_execute(s.prim, _stream, s.n, s.args),
               "dnnl_primitive_execute")
        lib.dnnl_stream_wait(_stream)


_matmuls: dict[tuple, Matmul | None] = {}


def matmul_plan(dtype: str, ta, tb, m, n, k, lda, ldb, ldc, batch, sa, sb, sc,
                accumulate: bool, threads: int, bias: bool = False) -> Matmul | None:
    """The cached oneDNN matmul for one st_gemm call of a "float32", "bfloat16" or "float16"
    product (alpha 1, beta 0 or, with `accumulate`, 1; with `bias`, plus a row added to every
    row of C); None when oneDNN is off, not installed, or has only reference code for it on
    this CPU (then the library's own kernel runs).

    Example:
        >>> from singa_tensor.backend import onednn
        >>> p = onednn.matmul_plan("bfloat16", 0, 0, 4, 5, 3, 3, 5, 5, 1, 0, 0, 0, False, 1)
        >>> p is None or p.impl != ""
        True
    """
    if not _state["enabled"]:
        return None
    key = (dtype, ta, tb, m, n, k, lda, ldb, ldc, batch, sa, sb, sc, accumulate, threads, bias)
    plan = _matmuls.get(key, False)
    if plan is not False:
        return plan
    lib = _load()
    if lib is None:
        return None
    try:
        plan = Matmul(lib, dtype, ta, tb, m, n, k, lda, ldb, ldc, batch, sa, sb, sc, accumulate,
                      bias)
    except OnednnError:
        plan = None
    _forget_oldest(_matmuls)
    _matmuls[key] = plan
    return plan


def clear_plans() -> None:
    """Forget the cached plans (their primitives go when nothing uses them any more).

    Example:
        >>> from singa_tensor.backend import onednn
        >>> onednn.clear_plans()
    """
    _plans.clear()
    _matmuls.clear()
