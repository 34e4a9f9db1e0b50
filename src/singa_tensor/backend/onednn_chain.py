"""Inference through a run of convolutions and max poolings on oneDNN, keeping the values
between them in the layouts oneDNN's primitives compute in.

A convolution on its own (`onednn.Conv2d`) takes and gives plain NCHW buffers: its blocked
primitive needs a reorder of its input and one of its output on every call, and a ReLU or a
pooling after it is a pass of its own. For inference through a chain such as conv -> ReLU ->
max pool -> conv -> ReLU, this module builds one `Chain`: each convolution (forward inference,
its ReLU as a post-op) and each max pooling reads the previous primitive's output in whatever
layout that primitive chose, so only the chain's input and output are reordered. Weights are
reordered into the convolution's layout on every run, or once per storage and version for
weights marked as never written (`ops.conv_onednn.keep_weights`).

`chain_plan(n, c, h, w, stages, threads)` returns the cached Chain of one input shape and
stage list, or None when oneDNN is off, missing, or has only reference code for a stage.
"""

from __future__ import annotations

import threading

from .. import dtype as _dt
from . import cpu as _cpu
from . import onednn as _o

calls = {"run": 0}  # runs of Chain plans (tests read it to see which path ran)


class ConvStage(tuple):
    """A convolution of the chain: (out channels, kernel h, kernel w, (stride h, w),
    (pad top, bottom, left, right), (dilation h, w), groups, has bias, ReLU after it)."""

    __slots__ = ()


class PoolStage(tuple):
    """A max pooling of the chain: (kernel h, kernel w, (stride h, w), (pad top, bottom, left,
    right), (dilation h, w), (out h, out w)); windows reading padding ignore it."""

    __slots__ = ()


def _conv_out(n, k, s, p0, p1, d) -> int:
    return (n + p0 + p1 - ((k - 1) * d + 1)) // s + 1


class Chain:
    """The primitives of one chain for one float32 NCHW input shape (see the module doc).

    `run(x, y, kept, *params)`: x and y buffer pointers (input, output), kept a tuple with,
    per convolution, the weight storage to keep reordered or None, params the weight and bias
    pointers of each convolution in order (bias NULL when it has none)."""

    def __init__(self, lib, n: int, c: int, h: int, w: int, stages: tuple):
        self.lib = lib
        self._lock = threading.Lock()
        self._kept: dict = {}
        self.src_shape = (n, c, h, w)
        user_src = _o._memory(lib, _o._plain_md(lib, self.src_shape))
        self.user_src = user_src
        cur_md, cur_mem = _o._plain_md(lib, self.src_shape), user_src
        # the run: ("step", _Step) executes, ("weights", i, op) reorders weights i
        self.plan: list = []
        self.scratch: list = []  # (memory, bytes) bound to a fresh buffer each run
        self.convs: list = []  # per convolution: (weights _Operand, bias memory or None)
        self.impl: list = []
        self._keep = []
        for stage in stages:
            if isinstance(stage, ConvStage):
                o, kh, kw, stride, pads, dil, groups, bias, relu = stage
                oh = _conv_out(h, kh, stride[0], pads[0], pads[1], dil[0])
                ow = _conv_out(w, kw, stride[1], pads[2], pads[3], dil[1])
                wshape = (o, c, kh, kw) if groups == 1 else \
                    (groups, o // groups, c // groups, kh, kw)
                attr = _o._ffi.NULL
                if relu:
                    ops = _o._ffi.new("dnnl_post_ops_t *")
                    _o._check(lib.dnnl_post_ops_create(ops), "dnnl_post_ops_create")
                    ops = _o._ffi.gc(ops[0], lib.dnnl_post_ops_destroy)
                    _o._check(lib.dnnl_post_ops_append_eltwise(ops, _o._ELTWISE_RELU, 0.0, 0.0),
                              "dnnl_post_ops_append_eltwise")
                    a = _o._ffi.new("dnnl_primitive_attr_t *")
                    _o._check(lib.dnnl_primitive_attr_create(a), "dnnl_primitive_attr_create")
                    attr = _o._ffi.gc(a[0], lib.dnnl_primitive_attr_destroy)
                    _o._check(lib.dnnl_primitive_attr_set_post_ops(attr, ops),
                              "dnnl_primitive_attr_set_post_ops")
                    self._keep.append(ops)
                pd = _o._ffi.new("dnnl_primitive_desc_t *")
                _o._check(lib.dnnl_convolution_forward_primitive_desc_create(
                    pd, _o._engine, _o._FORWARD_INFERENCE, _o._CONVOLUTION_DIRECT,
                    _o._any_md(lib, (n, c, h, w)), _o._any_md(lib, wshape),
                    _o._plain_md(lib, (o,)) if bias else _o._ffi.NULL,
                    _o._any_md(lib, (n, o, oh, ow)), _o._dims(stride),
                    _o._dims((dil[0] - 1, dil[1] - 1)), _o._dims((pads[0], pads[2])),
                    _o._dims((pads[1], pads[3])), attr),
                    "dnnl_convolution_forward_primitive_desc_create")
                pd = _o._ffi.gc(pd[0], lib.dnnl_primitive_desc_destroy)
                self._check_impl(lib, pd, "convolution")
                src_md = lib.dnnl_primitive_desc_query_md(pd, _o._Q_SRC, 0)
                cur_mem = self._into(lib, cur_md, cur_mem, src_md)
                wei = _o._Operand(lib, _o._plain_md(lib, wshape),
                                  lib.dnnl_primitive_desc_query_md(pd, _o._Q_WEIGHTS, 0), True)
                dst_md = lib.dnnl_primitive_desc_query_md(pd, _o._Q_DST, 0)
                dst = _o._memory(lib, dst_md)
                self.scratch.append((dst, lib.dnnl_memory_desc_get_size(dst_md)))
                if wei.reorder is not None:
                    self.scratch.append((wei.inner, wei.nbytes))
                    self.plan.append(("weights", len(self.convs), wei))
                args = [(_o._ARG_SRC, cur_mem), (_o._ARG_WEIGHTS, wei.inner),
                        (_o._ARG_DST, dst)]
                bias_mem = None
                if bias:
                    bias_mem = _o._memory(lib, _o._plain_md(lib, (o,)))
                    args.append((_o._ARG_BIAS, bias_mem))
                self.plan.append(("step", _o._Step(lib, pd, args)))
                self.convs.append((wei, bias_mem))
                cur_md, cur_mem, c, h, w = dst_md, dst, o, oh, ow
            else:
                kh, kw, stride, pads, dil, (oh, ow) = stage
                pd = _o._ffi.new("dnnl_primitive_desc_t *")
                # the end padding that gives the output size asked for (ceil_mode's overhang)
                pb = (oh - 1) * stride[0] + (kh - 1) * dil[0] + 1 - h - pads[0]
                pr = (ow - 1) * stride[1] + (kw - 1) * dil[1] + 1 - w - pads[2]
                _o._check(lib.dnnl_pooling_forward_primitive_desc_create(
                    pd, _o._engine, _o._FORWARD_INFERENCE, _o._POOLING_MAX, cur_md,
                    _o._any_md(lib, (n, c, oh, ow)), _o._dims(stride), _o._dims((kh, kw)),
                    _o._dims((dil[0] - 1, dil[1] - 1)), _o._dims((pads[0], pads[2])),
                    _o._dims((max(pb, 0), max(pr, 0))), _o._ffi.NULL),
                    "dnnl_pooling_forward_primitive_desc_create")
                pd = _o._ffi.gc(pd[0], lib.dnnl_primitive_desc_destroy)
                self._check_impl(lib, pd, "pooling")
                dst_md = lib.dnnl_primitive_desc_query_md(pd, _o._Q_DST, 0)
                dst = _o._memory(lib, dst_md)
                self.scratch.append((dst, lib.dnnl_memory_desc_get_size(dst_md)))
                self.plan.append(("step", _o._Step(lib, pd, [(_o._ARG_SRC, cur_mem),
                                                             (_o._ARG_DST, dst)])))
                cur_md, cur_mem, h, w = dst_md, dst, oh, ow
        self.dst_shape = (n, c, h, w)
        plain = _o._plain_md(lib, self.dst_shape)
        self.user_dst = _o._memory(lib, plain)
        if lib.dnnl_memory_desc_equal(cur_md, plain):
            # the last primitive writes the caller's buffer: bind its memory to it
            self.scratch = [(m, b) for m, b in self.scratch if m is not cur_mem]
            self.user_dst = cur_mem
        else:
            self.plan.append(("step", self._reorder(lib, cur_md, cur_mem, plain,
                                                    self.user_dst)))

    def _check_impl(self, lib, pd, what: str) -> None:
        name = _o._impl_name(lib, pd)
        self.impl.append(name)
        if name.startswith("ref"):
            raise _o.OnednnError(f"oneDNN: only reference code for this {what}")

    @staticmethod
    def _reorder(lib, src_md, src_mem, dst_md, dst_mem):
        pd = _o._ffi.new("dnnl_primitive_desc_t *")
        _o._check(lib.dnnl_reorder_primitive_desc_create(pd, src_md, _o._engine, dst_md,
                                                         _o._engine, _o._ffi.NULL),
                  "dnnl_reorder_primitive_desc_create")
        pd = _o._ffi.gc(pd[0], lib.dnnl_primitive_desc_destroy)
        return _o._Step(lib, pd, [(_o._ARG_SRC, src_mem), (_o._ARG_DST, dst_mem)])

    def _into(self, lib, cur_md, cur_mem, want_md):
        """The memory holding the current value in want_md's layout (a reorder when needed)."""
        if lib.dnnl_memory_desc_equal(cur_md, want_md):
            return cur_mem
        mem = _o._memory(lib, want_md)
        self.scratch.append((mem, lib.dnnl_memory_desc_get_size(want_md)))
        self.plan.append(("step", self._reorder(lib, cur_md, cur_mem, want_md, mem)))
        return mem

    def run(self, x, y, kept, *params) -> None:
        lib, stream = self.lib, _o._stream
        buffers = {id(m): _cpu.empty((nbytes + 3) // 4, _dt.float32)
                   for m, nbytes in self.scratch}
        calls["run"] += 1
        with self._lock:
            lib.dnnl_memory_set_data_handle(self.user_src, x)
            lib.dnnl_memory_set_data_handle(self.user_dst, y)
            for m, _ in self.scratch:
                lib.dnnl_memory_set_data_handle(m, buffers[id(m)].ptr)
            held = []  # kept weight buffers in use this run
            for i, (wei, bias_mem) in enumerate(self.convs):
                lib.dnnl_memory_set_data_handle(wei.user, params[2 * i])
                if bias_mem is not None:
                    lib.dnnl_memory_set_data_handle(bias_mem, params[2 * i + 1])
            for item in self.plan:
                if item[0] == "weights":
                    _, i, wei = item
                    storage = kept[i] if kept is not None else None
                    if storage is not None:
                        buf = _o.kept_weights(lib, self._kept, wei, storage,
                                              params[2 * i])
                        held.append(buf)
                        lib.dnnl_memory_set_data_handle(wei.inner, buf.ptr)
                        continue
                    s = wei.reorder
                else:
                    s = item[1]
                _o._check(lib.dnnl_primitive_execute(s.prim, stream, s.n, s.args),
                          "dnnl_primitive_execute")
            lib.dnnl_stream_wait(stream)


_chains: dict = {}
_MAX_CHAINS = 256


def chain_plan(n: int, c: int, h: int, w: int, stages: tuple, threads: int) -> Chain | None:
    """The Chain of a float32 NCHW input of shape (n, c, h, w) through stages (ConvStage and
    PoolStage tuples), or None when oneDNN is off or missing or a stage has no native code.

    Example:
        >>> from singa_tensor.backend.onednn_chain import ConvStage, chain_plan
        >>> conv = ConvStage((8, 3, 3, (1, 1), (1, 1, 1, 1), (1, 1), 1, True, True))
        >>> plan = chain_plan(1, 4, 6, 6, (conv,), 1)
        >>> plan is None or plan.dst_shape == (1, 8, 6, 6)
        True
    """
    if not _o.enabled():
        return None
    key = (n, c, h, w, stages, threads)
    plan = _chains.get(key, False)
    if plan is not False:
        return plan
    lib = _o._load()
    if lib is None:
        return None
    try:
        plan = Chain(lib, n, c, h, w, stages)
    except _o.OnednnError:
        plan = None
    if len(_chains) >= _MAX_CHAINS:
        _chains.clear()
    _chains[key] = plan
    return plan
