"""The fused elementwise kernel (graph mode): random programs give exactly (bit for bit) what the
same ops give one kernel at a time through the public functions, and every bad program is a
ValueError naming `fused` before any kernel runs."""

from __future__ import annotations

import numpy as np
import pytest

import singa_tensor as st
from singa_tensor.ops import elementwise as E
from singa_tensor.ops._registry import ptr
from singa_tensor.ops.fused import (
    FUSIBLE_BINARY,
    FUSIBLE_UNARY,
    MAX_CONSTS,
    MAX_INPUTS,
    MAX_INSTR,
    MAX_OUTPUTS,
    MAX_REGS,
    fused_call,
    opcode,
)

from .helpers import to_numpy

# float16/bfloat16 programs round every instruction's result, as their unfused kernels do
DTYPES = {"float32": st.float32, "float64": st.float64, "float16": st.float16,
          "bfloat16": st.bfloat16}

# ---- running a program: fused, and one public op at a time -------------------------------------


def _broadcast(arr: np.ndarray, inner: int, period: int, n: int) -> np.ndarray:
    return arr[(np.arange(n) // inner) % period]


def run_fused(dtype, instrs, consts, inputs, out_regs, n):
    """inputs: [(array, inner, period)]; returns the output arrays."""
    xs = [(st.tensor(a, dtype=dtype), inner, period) for a, inner, period in inputs]
    ys = [st.empty(n, dtype=dtype) for _ in out_regs]
    kernel, args = fused_call(xs[0][0]._be if xs else ys[0]._be, dtype, instrs, consts,
                              [(ptr(x), i, p) for x, i, p in xs],
                              [(ptr(y), r) for y, r in zip(ys, out_regs)], n)
    kernel(*args)
    return [to_numpy(y) for y in ys]


def _unary_public(name, x, a, b):
    """The public function that runs unary kernel `name` with parameters (a, b)."""
    if name == "clamp":
        return st.clamp(x, a, b)
    if name == "pow_scalar":
        return st.pow(x, a)
    if name in ("leaky_relu", "elu"):
        return st.op_registry[name].fn(x, a)
    if name == "softplus":
        return st.op_registry[name].fn(x, a, b)
    if name == "polygamma":
        return st.polygamma(int(a), x)
    if name == "affine":  # no public function: the kernel through the unary runner
        return E._run_unary(x, "affine", a, b)
    return st.op_registry[name].fn(x)


_BINARY_PUBLIC = {"add": st.add, "sub": st.sub, "mul": st.mul, "div": st.div, "pow": st.pow,
                  "maximum": st.maximum, "minimum": st.minimum}


def run_unfused(dtype, instrs, consts, inputs, out_regs, n):
    c = [*consts, 0.0, 0.0]
    regs = {}
    for name, dst, a, b in instrs:
        if name == "load":
            arr, inner, period = inputs[a]
            regs[dst] = st.tensor(_broadcast(arr, inner, period, n), dtype=dtype)
        elif name == "const":
            regs[dst] = st.full((n,), c[b], dtype=dtype)
        elif name in FUSIBLE_UNARY:
            regs[dst] = _unary_public(name, regs[a], c[b], c[b + 1])
        else:
            regs[dst] = _BINARY_PUBLIC[name](regs[a], regs[b])
        assert regs[dst].dtype is dtype and regs[dst].shape == (n,)
    return [to_numpy(regs[r]) for r in out_regs]


# ---- random programs -------------------------------------------------------------------------
# Parameters of the unary ops that take them, and ops whose argument needs a domain: the
# generator first maps the source into it with ops of the program itself.
PARAMS = {
    "leaky_relu": lambda g: (float(g.uniform(0.01, 0.3)), 0.0),
    "elu": lambda g: (float(g.uniform(0.5, 2.0)), 0.0),
    "softplus": lambda g: (float(g.choice([1.0, 2.0, 0.5])), float(g.choice([20.0, 1.0]))),
    "clamp": lambda g: (float(g.uniform(-1.5, 0.0)), float(g.uniform(0.0, 1.5))),
    "pow_scalar": lambda g: (float(g.choice([2.0, 1.0, 0.5, 3.0, -1.5, 2.5])), 0.0),
    "affine": lambda g: (float(g.uniform(-2.0, 2.0)), float(g.uniform(-1.0, 1.0))),
    "polygamma": lambda g: (float(g.choice([0.0, 1.0, 2.0, 3.0])), 0.0),
}
POSITIVE = {"log", "sqrt", "rsqrt", "log1p", "reciprocal", "pow_scalar"}
BOUNDED = {"exp", "expm1", "tan", "sin", "cos"}


class Program:
    def __init__(self, g: np.random.Generator, nin: int):
        self.g = g
        self.instrs: list[tuple] = []
        self.consts: list[float] = []
        self.live: list[int] = []
        for j in range(nin):
            self.emit("load", j, 0)

    def fresh(self) -> int:
        # mostly new registers, sometimes overwriting a live one (possibly the source)
        if self.live and self.g.random() < 0.3:
            return int(self.g.choice(self.live))
        return int(self.g.integers(0, MAX_REGS))

    def emit(self, name, a, b, dst=None) -> int:
        dst = self.fresh() if dst is None else dst
        self.instrs.append((name, dst, a, b))
        if dst not in self.live:
            self.live.append(dst)
        return dst

    def const(self, value: float) -> int:
        self.consts.append(value)
        return len(self.consts) - 1

    def params(self, name) -> int:
        if name not in PARAMS:  # parameterless: point at the two zeros after the constants
            return len(self.consts) if self.g.random() < 0.5 else 0
        a, b = PARAMS[name](self.g)
        k = self.const(a)
        self.const(b)
        return k

    def positive(self, r: int) -> int:  # (0.05, 2.05)
        r = self.emit("sigmoid", r, 0)
        k = self.const(2.0)
        self.const(0.05)
        return self.emit("affine", r, k)

    def bounded(self, r: int) -> int:  # (-3, 3)
        r = self.emit("tanh", r, 0)
        k = self.const(3.0)
        self.const(0.0)
        return self.emit("affine", r, k)

    def step(self):
        g = self.g
        src = int(g.choice(self.live))
        if g.random() < 0.35:
            name = str(g.choice(sorted(FUSIBLE_BINARY)))
            other = int(g.choice(self.live)) if g.random() < 0.8 else \
                self.emit("const", 0, self.const(float(g.uniform(-2, 2))))
            if name == "pow":
                src, other = self.positive(src), self.bounded(other)
            elif name == "div":
                other = self.positive(other)
            self.emit(name, src, other)
            return
        name = str(g.choice(sorted(FUSIBLE_UNARY)))
        if name in POSITIVE:
            src = self.positive(src)
        elif name in BOUNDED:
            src = self.bounded(src)
        self.emit(name, src, self.params(name))


def random_case(seed: int, n: int):
    g = np.random.default_rng(seed)
    nin = int(g.integers(1, 5))
    inputs = []
    for j in range(nin):
        mode = ["full", "scalar", "row", "channel", "odd"][j if j < 2 else int(g.integers(0, 5))]
        inner, period = {
            "full": (1, n),
            "scalar": (1, 1),
            "row": (1, int(g.integers(1, 12))),
            "channel": (int(g.integers(1, 40)), int(g.integers(1, 8))),
            "odd": (int(g.integers(n, n + 5)), int(g.integers(1, 3))),  # inner past the end
        }[mode]
        inputs.append((g.uniform(-3, 3, size=period), inner, period))
    p = Program(g, nin)
    target = int(g.integers(1, 21))
    while len(p.instrs) < target + nin:
        p.step()
    p.instrs = p.instrs[:MAX_INSTR]
    written = sorted({i[1] for i in p.instrs})
    outs = [p.instrs[-1][1]] + [int(r) for r in g.choice(written, int(g.integers(0, 3)))]
    return p.instrs, p.consts, inputs, outs


def assert_exact(got: np.ndarray, want: np.ndarray, what: str):
    assert got.dtype == want.dtype, what
    same = np.array_equal(got, want, equal_nan=True)
    if not same:
        bad = np.flatnonzero(~((got == want) | (np.isnan(got) & np.isnan(want))))
        raise AssertionError(f"{what}: {bad.size} elements differ, first at {bad[0]}: "
                             f"{got[bad[0]]!r} vs {want[bad[0]]!r}")


@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("n", [1, 7, 256, 1000, 100003])
def test_random_programs_match_the_unfused_ops_exactly(dtype, n):
    d = DTYPES[dtype]
    cases = 3 if n > 10000 else 25
    finite = total = 0
    for seed in range(cases):
        instrs, consts, inputs, outs = random_case(1000 * n + seed, n)
        got = run_fused(d, instrs, consts, inputs, outs, n)
        want = run_unfused(d, instrs, consts, inputs, outs, n)
        for k, (a, b) in enumerate(zip(got, want)):
            assert_exact(a, b, f"seed {seed} output {k} of {instrs} consts {consts}")
            finite += int(np.isfinite(b).sum())
            total += b.size
    assert finite > 0.8 * total  # the programs compute numbers, not mostly NaN


@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.filterwarnings("ignore:overflow encountered in cast")  # -1e30 as float16 is -inf
def test_every_fusible_op_once(dtype):
    d = DTYPES[dtype]
    g = np.random.default_rng(7)
    n = 1000
    x = g.uniform(-3, 3, size=n)
    y = g.uniform(0.1, 2.0, size=n)
    x[:8] = [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-40, -1e30, 88.5]
    for name in sorted(FUSIBLE_UNARY):
        a, b = PARAMS[name](g) if name in PARAMS else (0.0, 0.0)
        prog = [("load", 3, 0, 0), (name, 3, 3, 0)]  # the source register is the destination
        got = run_fused(d, prog, [a, b], [(x, 1, n)], [3], n)
        want = run_unfused(d, prog, [a, b], [(x, 1, n)], [3], n)
        assert_exact(got[0], want[0], name)
    for name in sorted(FUSIBLE_BINARY):
        prog = [("load", 0, 0, 0), ("load", 1, 1, 0), (name, 2, 1, 0)]
        inputs = [(x, 1, n), (y, 1, n)]
        assert_exact(run_fused(d, prog, [], inputs, [2], n)[0],
                     run_unfused(d, prog, [], inputs, [2], n)[0], name)


def test_several_outputs_and_outputs_of_input_registers():
    n = 300
    x = np.linspace(-2, 2, n)
    prog = [("load", 0, 0, 0), ("exp", 1, 0, 0), ("mul", 1, 1, 0), ("neg", 0, 0, 0),
            ("const", 5, 0, 1), ("add", 6, 0, 5)]
    got = run_fused(st.float64, prog, [1.0, 0.5], [(x, 1, n)], [0, 1, 6, 1, 5], n)
    np.testing.assert_array_equal(got[0], -x)
    t = st.tensor(x)  # the library's own exp: numpy's picks a kernel per CPU (AVX-512: 1 ulp off)
    np.testing.assert_array_equal(got[1], to_numpy(st.exp(t) * t))
    np.testing.assert_array_equal(got[2], -x + 0.5)
    np.testing.assert_array_equal(got[3], got[1])
    np.testing.assert_array_equal(got[4], np.full(n, 0.5))
    # a loaded register written straight out is a copy of the broadcast input
    c = np.array([1.0, 2.0, 3.0])
    got = run_fused(st.float32, [("load", 9, 0, 0)], [], [(c, 4, 3)], [9], 25)
    np.testing.assert_array_equal(got[0], np.repeat(np.tile(c, 3), 4)[:25].astype(np.float32))


def test_output_may_overwrite_a_full_length_input():
    n = 5000
    x = st.tensor(np.linspace(-1, 1, n))
    ref = to_numpy(x) * 2.0 + 1.0
    kernel, args = fused_call(x._be, st.float64, [("load", 0, 0, 0), ("affine", 0, 0, 0)],
                              [2.0, 1.0], [(ptr(x), 1, n)], [(ptr(x), 0)], n)
    kernel(*args)
    np.testing.assert_array_equal(to_numpy(x), ref)
    # the input, overwritten by output 0, is also output 1 unchanged: that output still gets the
    # values read before the overwrite
    old = to_numpy(x)
    y = st.empty(n, dtype=st.float64)
    kernel, args = fused_call(x._be, st.float64, [("load", 0, 0, 0), ("exp", 1, 0, 0)], [],
                              [(ptr(x), 1, n)], [(ptr(x), 1), (ptr(y), 0)], n)
    kernel(*args)
    np.testing.assert_array_equal(to_numpy(y), old)
    np.testing.assert_array_equal(to_numpy(x), to_numpy(st.exp(st.tensor(old))))


def test_n_zero_runs_nothing():
    y = st.zeros(3)
    kernel, args = fused_call(y._be, st.float32, [("const", 0, 0, 0)], [5.0], [],
                              [(ptr(y), 0)], 0)
    kernel(*args)
    assert y.tolist() == [0.0, 0.0, 0.0]


def test_opcode_table():
    assert opcode("load", False) == 0 and opcode("const", True) == 1
    unary = [opcode(u, False) for u in sorted(FUSIBLE_UNARY)]
    binary = [opcode(b, True) for b in sorted(FUSIBLE_BINARY)]
    codes = sorted(unary + binary)
    assert codes == list(range(2, 2 + len(codes)))  # dense, after load and const
    assert min(binary) > max(unary)
    assert opcode("neg", False) == 2 and opcode("add", True) == 2 + len(FUSIBLE_UNARY)
    assert FUSIBLE_BINARY == {"add", "sub", "mul", "div", "pow", "maximum", "minimum"}
    # every fusible unary op is a unary kernel of the registry (affine is kernel-only)
    for u in FUSIBLE_UNARY - {"affine"}:
        assert st.op_registry[u].kind == "unary", u
    assert {"exp", "relu", "affine", "clamp", "pow_scalar"} <= FUSIBLE_UNARY
    with pytest.raises(ValueError, match="fused: 'add' is not a fusible unary op"):
        opcode("add", False)
    with pytest.raises(ValueError, match="fused: 'exp' is not a fusible binary op"):
        opcode("exp", True)


# ---- validation --------------------------------------------------------------------------------


def _call(instrs=(("load", 0, 0, 0),), consts=(), nin=1, outs=((0),), n=4, dtype=st.float32,
          inputs=None):
    x = st.zeros(4, dtype=dtype)
    y = st.empty(4, dtype=dtype)
    if inputs is None:
        inputs = [(ptr(x), 1, 4)] * nin
    return fused_call(x._be, dtype, list(instrs), list(consts), inputs,
                      [(ptr(y), r) for r in outs], n)


LOAD = ("load", 0, 0, 0)
BAD = [
    ({"instrs": [LOAD] * (MAX_INSTR + 1)}, f"{MAX_INSTR + 1} instructions, expected 0 to"),
    ({"nin": MAX_INPUTS + 1}, f"{MAX_INPUTS + 1} inputs, expected 0 to {MAX_INPUTS}"),
    ({"outs": [0] * (MAX_OUTPUTS + 1)}, f"{MAX_OUTPUTS + 1} outputs, expected 1 to"),
    ({"outs": []}, "0 outputs, expected 1 to"),
    ({"consts": [0.0] * (MAX_CONSTS + 1)}, f"{MAX_CONSTS + 1} constants"),
    ({"instrs": [("load", MAX_REGS, 0, 0)]}, rf"destination register is {MAX_REGS}, outside"),
    ({"instrs": [("load", -1, 0, 0)]}, r"destination register is -1, outside \[0, 32\)"),
    ({"instrs": [("load", 0, 1, 0)]}, r"input index is 1, outside \[0, 1\)"),
    ({"instrs": [("load", 0, 0, 0)], "nin": 0}, r"input index is 0, outside \[0, 0\)"),
    ({"instrs": [("const", 0, 0, 1)], "consts": [1.0]}, r"constant index is 1, outside"),
    ({"instrs": [LOAD, ("elu", 0, 0, 2)], "consts": [1.0]}, r"constant index is 2, outside"),
    ({"instrs": [LOAD, ("exp", 1, 0, -1)]}, r"constant index is -1"),
    ({"instrs": [LOAD, ("exp", 1, MAX_REGS, 0)]}, "source register is 32, outside"),
    ({"instrs": [LOAD, ("exp", 1, 2, 0)]}, "reads register 2 before any instruction writes"),
    ({"instrs": [LOAD, ("add", 1, 0, 3)]}, "reads register 3 before any instruction writes"),
    ({"instrs": [LOAD, ("add", 1, 5, 0)]}, "reads register 5 before"),
    ({"instrs": [LOAD, ("exp", 0, 0, 0)], "outs": [1]}, "output 0 reads register 1, which no"),
    ({"outs": [MAX_REGS]}, "output 0 register is 32, outside"),
    ({"instrs": [LOAD, ("floor_divide", 1, 0, 0)]}, "'floor_divide'.* is not a fusible op"),
    ({"instrs": [LOAD, ("bogus", 1, 0, 0)]}, "'bogus'.* is not a fusible op"),
    ({"instrs": [("load", 0, 0)]}, "instruction 0 must be"),
    ({"instrs": [("load", 0.5, 0, 0)]}, "destination register must be an integer"),
    ({"instrs": [("load", True, 0, 0)]}, "destination register is True"),
    ({"n": -1}, "element count n is -1"),
    ({"n": 2.0}, "element count n must be an integer"),
    ({"consts": ["x"], "instrs": [("const", 0, 0, 0)]}, "constants must be numbers"),
]


@pytest.mark.parametrize("kwargs,message", BAD)
def test_bad_programs_raise_value_errors_naming_fused(kwargs, message):
    with pytest.raises(ValueError, match="fused: .*" + message):
        _call(**kwargs)


def test_bad_inputs_raise_value_errors_naming_fused():
    x = st.zeros(4)
    p = ptr(x)
    for spec, message in [((p, 0, 4), "input 0 inner is 0, outside"),
                          ((p, 1, 0), "input 0 period is 0, outside"),
                          ((p, 1), "input 0 must be"), ((p, 1, -3), "input 0 period is -3")]:
        with pytest.raises(ValueError, match="fused: " + message):
            _call(inputs=[spec])
    with pytest.raises(ValueError, match="fused: output 0 must be"):
        fused_call(x._be, st.float32, [LOAD], [], [(p, 1, 4)], [(p,)], 4)


def test_only_float_programs():
    x = st.zeros(4)
    with pytest.raises(TypeError, match="fused: programs run in float32, float64, float16 or "
                                        "bfloat16, got int32"):
        fused_call(x._be, st.int32, [LOAD], [], [(ptr(x), 1, 4)], [(ptr(x), 0)], 4)
