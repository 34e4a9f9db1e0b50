"""The call helper of the fused elementwise kernel (`st_fused_<dtype>`), which graph mode uses
to run a chain of elementwise ops as one kernel call.

A program is a list of instructions over numbered registers, each holding one element per
lane; the kernel runs it for every element position i in [0, n):

    ("load", dst, j, _)      dst = input j at position i (see below)
    ("const", dst, _, c)     dst = consts[c]
    (unary op, dst, a, c)    dst = op(reg a; consts[c], consts[c + 1])   alpha, beta of the
                                                                        unary kernel
    (binary op, dst, a, b)   dst = op(reg a, reg b)

Input j is (pointer, inner, period) and is read at index (i // inner) % period: (1, n) is a
full-length input, (1, 1) a scalar, (1, C) a row bias, (H*W, C) a channel bias. Output k is
(pointer, reg): reg is written to pointer[i] for every i (contiguous, n elements).

Every instruction computes exactly what the op's own kernel computes and rounds to the dtype,
so a fused chain gives bit for bit the results of running its ops one by one. Unary ops that
take no parameters may point c at len(consts): two zeros follow the constants.
"""

from __future__ import annotations

import operator
from typing import Callable

from ..backend import cpu as _abi  # the opcodes and limits are one header's, on every backend

__all__: list[str] = []  # a helper of graph mode, not a public op

_PREFIX_UNARY, _PREFIX_BINARY = "ST_FUSED_U_", "ST_FUSED_B_"
_UNARY_CODES = {k[len(_PREFIX_UNARY):]: getattr(_abi.lib, k) for k in dir(_abi.lib)
                if k.startswith(_PREFIX_UNARY)}
_BINARY_CODES = {k[len(_PREFIX_BINARY):]: getattr(_abi.lib, k) for k in dir(_abi.lib)
                 if k.startswith(_PREFIX_BINARY)}
_LOAD, _CONST = _abi.lib.ST_FUSED_LOAD, _abi.lib.ST_FUSED_CONST

FUSIBLE_UNARY: frozenset[str] = frozenset(_UNARY_CODES)
FUSIBLE_BINARY: frozenset[str] = frozenset(_BINARY_CODES)
MAX_INSTR: int = _abi.lib.ST_FUSED_MAX_INSTR
MAX_INPUTS: int = _abi.lib.ST_FUSED_MAX_INPUTS
MAX_OUTPUTS: int = _abi.lib.ST_FUSED_MAX_OUTPUTS
MAX_REGS: int = _abi.lib.ST_FUSED_MAX_REGS
MAX_CONSTS: int = _abi.lib.ST_FUSED_MAX_CONSTS

# the C type of the constants: the dtype's own, float for the 16-bit floats (whose kernels take
# the unary parameters in float, as the unfused kernels do)
_C_TYPE = {"float32": "float", "float64": "double", "float16": "float", "bfloat16": "float"}


def opcode(name: str, binary: bool) -> int:
    """The kernel's opcode of an op: a unary kernel's name ("exp", "affine", ...) or, with
    binary=True, a binary one ("add", ...); "load" and "const" are the two data moves.

    Example:
        >>> from singa_tensor.ops.fused import opcode
        >>> opcode("load", False), opcode("const", False)
        (0, 1)
    """
    if name == "load":
        return _LOAD
    if name == "const":
        return _CONST
    codes = _BINARY_CODES if binary else _UNARY_CODES
    code = codes.get(name)
    if code is None:
        kind = "binary" if binary else "unary"
        raise ValueError(f"fused: {name!r} is not a fusible {kind} op (fusible: "
                         f"{', '.join(sorted(codes))})")
    return code


def _index(what: str, value, lo: int, hi: int) -> int:
    """value as an int in [lo, hi), or a ValueError naming what it is."""
    try:
        v = operator.index(value)
    except TypeError:
        raise ValueError(f"fused: {what} must be an integer, got {value!r}") from None
    if isinstance(value, bool) or not lo <= v < hi:
        raise ValueError(f"fused: {what} is {value!r}, outside [{lo}, {hi})")
    return v


def _count(what: str, items, limit: int, least: int = 0) -> int:
    n = len(items)
    if not least <= n <= limit:
        raise ValueError(f"fused: {n} {what}, expected {least} to {limit}")
    return n


def _pack_program(instrs, nconst: int, nin: int) -> tuple[list[int], set[int]]:
    """The flat (opcode, dst, a, b) list of a validated program, and the registers it writes.
    A register is read only after an instruction has written it: the kernel's register file
    is not initialized."""
    prog: list[int] = []
    written: set[int] = set()
    for k, ins in enumerate(instrs):
        if not isinstance(ins, (tuple, list)) or len(ins) != 4:
            raise ValueError(f"fused: instruction {k} must be (op, dst, a, b), got {ins!r}")
        name, dst, a, b = ins
        where = f"instruction {k} ({name!r})"

        def reg(value, role, where=where):
            r = _index(f"{where} {role} register", value, 0, MAX_REGS)
            if r not in written:
                raise ValueError(f"fused: {where} reads register {r} before any instruction "
                                 "writes it")
            return r

        if name == "load":
            code, a, b = _LOAD, _index(f"{where} input index", a, 0, nin), 0
        elif name == "const":
            code, a, b = _CONST, 0, _index(f"{where} constant index", b, 0, nconst)
        elif name in _UNARY_CODES:
            # b and b + 1 are read; the two zeros after the constants are valid
            code, a, b = (_UNARY_CODES[name], reg(a, "source"),
                          _index(f"{where} constant index", b, 0, nconst + 1))
        elif name in _BINARY_CODES:
            code, a, b = _BINARY_CODES[name], reg(a, "first source"), reg(b, "second source")
        else:
            raise ValueError(f"fused: {where} is not a fusible op (unary: "
                             f"{', '.join(sorted(FUSIBLE_UNARY))}; binary: "
                             f"{', '.join(sorted(FUSIBLE_BINARY))}; or load, const)")
        dst = _index(f"{where} destination register", dst, 0, MAX_REGS)
        written.add(dst)
        prog += (code, dst, a, b)
    return prog, written


def fused_call(be, dtype, instrs, consts, inputs, outputs, n) -> tuple[Callable, tuple]:
    """(kernel, args) so that kernel(*args) runs the program; args hold every cffi array it
    needs alive. instrs: list of (op_name_or_'load'_or_'const', dst, a, b); consts: list of
    floats; inputs: list of (pointer, inner, period); outputs: list of (pointer, reg). Validates
    the limits and register/const/input indices with clear ValueErrors naming 'fused'.

    The pointers are what `ops._registry.ptr(t)` returns for be's device; the caller keeps
    their tensors alive while the call may run. An output may share a full-length input's
    buffer, not a broadcast input's.

    Example:
        >>> import singa_tensor as st
        >>> from singa_tensor.ops._registry import ptr
        >>> from singa_tensor.ops.fused import fused_call
        >>> x, y = st.tensor([1.0, 4.0]), st.empty(2)
        >>> prog = [("load", 0, 0, 0), ("sqrt", 1, 0, 0), ("add", 1, 1, 0)]
        >>> kernel, args = fused_call(x._be, st.float32, prog, [], [(ptr(x), 1, 2)],
        ...                           [(ptr(y), 1)], 2)
        >>> kernel(*args)
        >>> y.tolist()
        [2.0, 6.0]
    """
    if dtype.name not in _C_TYPE:
        raise TypeError(f"fused: programs run in float32, float64, float16 or bfloat16, got "
                        f"{dtype.name}")
    n = _index("the element count n", n, 0, 1 << 62)
    _count("instructions", instrs, MAX_INSTR)
    nin = _count("inputs", inputs, MAX_INPUTS)
    nout = _count("outputs", outputs, MAX_OUTPUTS, least=1)
    nconst = _count("constants", consts, MAX_CONSTS)
    prog, written = _pack_program(instrs, nconst, nin)

    shape: list[int] = []
    for j, spec in enumerate(inputs):
        if not isinstance(spec, (tuple, list)) or len(spec) != 3:
            raise ValueError(f"fused: input {j} must be (pointer, inner, period), got {spec!r}")
        shape.append(_index(f"input {j} inner", spec[1], 1, 1 << 62))
        shape.append(_index(f"input {j} period", spec[2], 1, 1 << 62))
    out_regs: list[int] = []
    for k, spec in enumerate(outputs):
        if not isinstance(spec, (tuple, list)) or len(spec) != 2:
            raise ValueError(f"fused: output {k} must be (pointer, reg), got {spec!r}")
        r = _index(f"output {k} register", spec[1], 0, MAX_REGS)
        if r not in written:
            raise ValueError(f"fused: output {k} reads register {r}, which no instruction "
                             "writes")
        out_regs.append(r)

    kernel = be.kernel("st_fused_" + dtype.suffix)
    if kernel is None:  # pragma: no cover - every backend builds it
        raise TypeError(f"fused: no fused kernel for {dtype.name} on the {be.name} backend")
    ffi = be.ffi
    try:
        values = [float(c) for c in consts] + [0.0, 0.0]
    except (TypeError, ValueError):
        raise ValueError(f"fused: constants must be numbers, got {list(consts)!r}") from None
    args = (
        ffi.new("int32_t[]", prog), len(instrs),
        ffi.new(_C_TYPE[dtype.name] + "[]", values),
        be.pointer_array([p for p, _, _ in inputs]), be.int64_array(shape or [0]), nin,
        be.pointer_array([p for p, _ in outputs]), ffi.new("int32_t[]", out_regs), nout,
        n,
    )
    return kernel, args
