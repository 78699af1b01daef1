"""The golden backend refuses the inputs the interpreter refuses (the REQUIRE monitor,
firmware_model/golden/require_monitor.py), and answers the same as it on the others.

Each graph is built with the IR and written with the project's writer, then run through both
backends of sim.oracles.backends on the tiny and default configurations: on a good input both
give the same bits; on a bad one both raise TosaUnpredictable with the same message, naming the
same TOSA op — which the golden model ran on an NPU unit (the failing op has a check in an NPU
layer of the manifest), not on the host.
"""

from __future__ import annotations

import numpy as np
import pytest

from compiler.ir import Block, Graph, Operator, Region, Tensor
from compiler.tosa_io import read_tosa
from compiler.tosa_io.writer import write_tosa
from firmware_model.arch.config import load_config
from firmware_model.errors import TosaUnpredictable
from firmware_model.golden.model import GoldenModel
from firmware_model.tosa_ops.dtypes import DType
from sim.oracles.backends import open_session

I8, I16, I32, I48 = DType.INT8, DType.INT16, DType.INT32, DType.INT48
CONFIGS = ("tiny", "default")
ROUND = {"single": 1, "double": 3}


class G:
    """A small graph under construction (the IR's tensors and operators)."""

    def __init__(self):
        self.tensors: dict[str, Tensor] = {}
        self.ops: list[Operator] = []
        self.inputs: list[str] = []
        self.n = 0

    def _name(self, stem="t") -> str:
        self.n += 1
        return f"{stem}{self.n}"

    def input(self, shape, dt, name=None) -> str:
        name = name or self._name("in")
        self.tensors[name] = Tensor(name, list(shape), dt)
        self.inputs.append(name)
        return name

    def const(self, values, dt, shape=None) -> str:
        data = np.asarray(values).astype(dt.storage)
        data = data.reshape(shape if shape is not None else data.shape)
        name = self._name("c")
        self.tensors[name] = Tensor(name, list(data.shape), dt, data=data)
        self.ops.append(Operator("CONST", [], [name]))
        return name

    def op(self, op, ins, shape, dt, attrs=None) -> str:
        out = self._name(op.lower())
        self.tensors[out] = Tensor(out, list(shape), dt)
        self.ops.append(Operator(op, list(ins), [out], attrs=dict(attrs or {})))
        return out

    def shape(self, name):
        return tuple(self.tensors[name].shape)

    def dtype(self, name):
        return self.tensors[name].dtype

    def rescale(self, x, m, s, izp, ozp, out_dt, *, scale32=True, rounding="single", per_channel=False,
                in_u=False, out_u=False) -> str:
        mult = self.const(np.atleast_1d(m), I32 if scale32 else I16)
        shift = self.const(np.atleast_1d(s), I8)
        zi, zo = self.const([izp], self.dtype(x)), self.const([ozp], out_dt)
        return self.op("RESCALE", [x, mult, shift, zi, zo], self.shape(x), out_dt,
                       {"scale32": scale32, "rounding_mode": ROUND[rounding], "per_channel": per_channel,
                        "input_unsigned": in_u, "output_unsigned": out_u})

    def binary(self, op, a, b, dt=I32, attrs=None) -> str:
        shape = tuple(max(p, q) for p, q in zip(self.shape(a), self.shape(b)))
        if op in ("MAXIMUM", "MINIMUM"):
            attrs = {"nan_mode": 1}
        if op == "ARITHMETIC_RIGHT_SHIFT" and attrs is None:
            attrs = {"round": False}
        return self.op(op, [a, b], shape, dt, attrs)

    def mul(self, a, b, shift) -> str:
        return self.op("MUL", [a, b, self.const([shift], I8)], self.shape(a), I32)

    def conv(self, x, w, bias, izp, wzp, *, depthwise=False, pad=(1, 1, 1, 1)) -> str:
        n, h, wd, c = self.shape(x)
        if depthwise:
            kh, kw, _, m = w.shape
            oc = c * m
        else:
            oc, kh, kw, _ = w.shape
        oh, ow = h + pad[0] + pad[1] - kh + 1, wd + pad[2] + pad[3] - kw + 1
        acc = I32 if self.dtype(x) == I8 else I48
        ins = [x, self.const(w, I8), self.const(bias, acc), self.const([izp], self.dtype(x)), self.const([wzp], I8)]
        return self.op("DEPTHWISE_CONV2D" if depthwise else "CONV2D", ins, (n, oh, ow, oc), acc,
                       {"pad": list(pad), "stride": [1, 1], "dilation": [1, 1], "local_bound": False,
                        "acc_type": int(acc)})

    def matmul(self, a, b, azp, bzp) -> str:
        (n, h, _), (_, _, w) = self.shape(a), self.shape(b)
        return self.op("MATMUL", [a, b, self.const([azp], I8), self.const([bzp], I8)], (n, h, w), I32)

    def avg_pool(self, x, kernel, izp, ozp, pad=(0, 0, 0, 0)) -> str:
        n, h, w, c = self.shape(x)
        dt = self.dtype(x)
        oh, ow = h + pad[0] + pad[1] - kernel[0] + 1, w + pad[2] + pad[3] - kernel[1] + 1
        return self.op("AVG_POOL2D", [x, self.const([izp], dt), self.const([ozp], dt)], (n, oh, ow, c), dt,
                       {"kernel": list(kernel), "stride": [1, 1], "pad": list(pad), "acc_type": int(I32)})

    def reduce_sum(self, x, axis) -> str:
        shape = tuple(1 if i == axis else d for i, d in enumerate(self.shape(x)))
        return self.op("REDUCE_SUM", [x], shape, self.dtype(x), {"axis": axis})

    def table(self, x, tab) -> str:
        t = self.const(tab, self.dtype(x))
        return self.op("TABLE", [x, t], self.shape(x), I8 if self.dtype(x) == I8 else I32)

    def clamp(self, x, lo, hi) -> str:
        return self.op("CLAMP", [x], self.shape(x), self.dtype(x), {"min_val": lo, "max_val": hi, "nan_mode": 1})

    def write(self, path, outputs) -> str:
        b = Block("main", operators=self.ops, tensors=dict(self.tensors), inputs=list(self.inputs),
                  outputs=list(outputs))
        write_tosa(Graph([Region("main", [b])]), path)
        return str(path)


def feed(g: G, *arrays) -> dict[str, np.ndarray]:
    return {name: np.asarray(a).astype(g.dtype(name).storage) for name, a in zip(g.inputs, arrays)}


def outcome(model: str, inputs: dict, backend: str, config: str = "default"):
    graph = read_tosa(model)
    session = open_session(graph, backend, config=config, input_shapes={n: a.shape for n, a in inputs.items()})
    try:
        return session, session.run(inputs)
    except TosaUnpredictable as e:
        return session, e


def agree(model: str, good: dict | None, bad: dict | None, op: str | None = None, *, configs=CONFIGS,
          on_npu: bool = True) -> None:
    """Both backends answer `good` with the same bits and refuse `bad` with the same message naming
    `op` (which the golden model ran on the NPU, when `on_npu`)."""
    for config in configs:
        if good is not None:
            _, want = outcome(model, good, "interp")
            assert isinstance(want, dict), f"the interpreter refuses the good input: {want}"
            _, got = outcome(model, good, "golden", config)
            assert isinstance(got, dict), f"{config}: golden refuses the good input: {got}"
            for name, w in want.items():
                assert got[name].dtype == w.dtype and np.array_equal(got[name], w), f"{config}: {name} differs"
        if bad is not None:
            _, e_int = outcome(model, bad, "interp")
            session, e_gold = outcome(model, bad, "golden", config)
            assert isinstance(e_int, TosaUnpredictable), "the interpreter accepts the bad input"
            assert isinstance(e_gold, TosaUnpredictable), f"{config}: golden accepts the bad input"
            assert e_int.op == op, str(e_int)
            assert str(e_gold) == str(e_int), f"{config}:\n golden {e_gold}\n interp {e_int}"
            if on_npu:
                index = int(e_int.where.rsplit(" op #", 1)[1].split(" ")[0])
                checked = [(r["op"], r["index"]) for layer in session.program.manifest["layers"]
                           if layer["kind"] == "npu" for r in layer.get("requires", [])]
                assert (op, index) in checked, f"{config}: {op} #{index} is not checked on the NPU: {checked}"


# ---- ELTWISE: ADD, SUB, MUL, shifts ----------------------------------------------------------

@pytest.mark.parametrize("op", ["ADD", "SUB"])
def test_add_sub_overflow(tmp_path, op):
    g = G()
    a, b = g.input((3, 50), I32), g.input((3, 50), I32)
    model = g.write(tmp_path / "m.tosa", [g.binary(op, a, b)])
    rng = np.random.default_rng(1)
    x, y = rng.integers(-(1 << 30), 1 << 30, (2, 3, 50))
    bad_x, bad_y = x.copy(), y.copy()
    bad_x[2, 45], bad_y[2, 45] = (1 << 31) - 5, 9 if op == "ADD" else -9     # the last tile on tiny
    agree(model, feed(g, x, y), feed(g, bad_x, bad_y), op)


def test_mul_rounded_product_and_wrapping_product(tmp_path):
    g = G()
    a, b = g.input((2, 40), I32), g.input((2, 40), I32)
    model = g.write(tmp_path / "m.tosa", [g.mul(a, b, 8), g.mul(a, b, 0)])
    rng = np.random.default_rng(2)
    x, y = rng.integers(-(1 << 15), 1 << 15, (2, 2, 40))
    bad_x, bad_y = x.copy(), y.copy()
    bad_x[1, 39], bad_y[1, 39] = 1 << 30, 1 << 10        # (2^40 + 2^7) >> 8 = 2^32
    agree(model, feed(g, x, y), feed(g, bad_x, bad_y), "MUL")
    # shift 0: apply_mul_s keeps the low 32 bits, no REQUIRE: both answer, the same
    wrap_x, wrap_y = x.copy(), y.copy()
    wrap_x[0, :], wrap_y[0, :] = (1 << 31) - 1, 3
    g2 = G()
    a, b = g2.input((2, 40), I32), g2.input((2, 40), I32)
    agree(g2.write(tmp_path / "m0.tosa", [g2.mul(a, b, 0)]), feed(g2, wrap_x, wrap_y), None)


@pytest.mark.parametrize("op, dt, bad_amount, attrs", [
    ("LOGICAL_LEFT_SHIFT", I16, 16, None),
    ("LOGICAL_RIGHT_SHIFT", I8, -1, None),
    ("ARITHMETIC_RIGHT_SHIFT", I32, 32, {"round": True}),
])
def test_shift_amount_out_of_range(tmp_path, op, dt, bad_amount, attrs):
    g = G()
    x, n = g.input((4, 30), dt), g.input((4, 30), dt)
    model = g.write(tmp_path / "m.tosa", [g.binary(op, x, n, dt, attrs)])
    rng = np.random.default_rng(3)
    values = rng.integers(dt.min, dt.max + 1, (4, 30))
    amounts = rng.integers(0, dt.bits, (4, 30))
    bad = amounts.copy()
    bad[3, 29] = bad_amount
    agree(model, feed(g, values, amounts), feed(g, values, bad), op)


# ---- RESCALE: stand-alone, in an operand's chain, in the output stage ----------------------

def test_standalone_rescale_value_range(tmp_path):
    """RESCALE int32 -> int8 per channel: apply_scale_32 REQUIREs |value| < 2^(shift - 1)."""
    g = G()
    x = g.input((1, 6, 8, 2), I32)
    out = g.rescale(x, [1 << 30, 1 << 30], [12, 36], 0, 3, I8, per_channel=True, rounding="double")
    model = g.write(tmp_path / "m.tosa", [out])
    rng = np.random.default_rng(4)
    good = rng.integers(-2047, 2048, (1, 6, 8, 2))
    good[..., 1] = rng.integers(-(1 << 31), 1 << 31, (1, 6, 8))     # channel 1's shift takes any int32
    bad = good.copy()
    bad[0, 5, 7, 0] = 2048
    agree(model, feed(g, good), feed(g, bad), "RESCALE")


def test_rescale_scale16_result_and_output_zero_point(tmp_path):
    """RESCALE int48 -> int8 with apply_scale_16: REQUIRE the scaled value fits int32, then the
    output zero point's add; when both fail in different tiles the interpreter's order wins
    (apply_scale_16 checks every element before the add)."""
    g = G()
    x = g.input((1, 300), I48)
    model = g.write(tmp_path / "m.tosa", [g.rescale(x, 1, 2, 0, 100, I8, scale32=False)])
    rng = np.random.default_rng(5)
    good = rng.integers(-(1 << 32), 1 << 32, (1, 300))
    add_fails = good.copy()
    add_fails[0, 3] = 4 * ((1 << 31) - 10)                  # result 2^31 - 10, + 100 overflows
    both_fail = add_fails.copy()
    both_fail[0, 299] = 1 << 35                            # result 2^33: does not fit int32
    agree(model, feed(g, good), feed(g, add_fails), "RESCALE")
    _, e = outcome(model, feed(g, add_fails), "interp")
    assert "apply_add_s" in e.rule
    agree(model, None, feed(g, both_fail), "RESCALE")
    _, e = outcome(model, feed(g, both_fail), "interp")
    assert "apply_scale_16" in e.rule


def test_rescale_chain_of_an_add_operand(tmp_path):
    """TFLite's quantised ADD operand chain: x - zp through a pure-shift RESCALE (A0) and a general
    RESCALE (A1), each with its own value-range REQUIRE; the other operand one RESCALE (B0)."""
    g = G()
    x, y = g.input((2, 20), I8), g.input((2, 20), I8)
    a = g.rescale(g.rescale(x, 1 << 30, 10, 5, 0, I32), (1 << 30) + 12345, 22, 0, 0, I32)   # |x1| < 2^21
    b = g.rescale(y, 8, 2, -3, 0, I32)                                                   # |y + 3| < 2
    model = g.write(tmp_path / "m.tosa", [g.binary("ADD", a, b)])
    rng = np.random.default_rng(6)
    good_x = 5 + rng.integers(-2, 2, (2, 20))       # x - 5 in [-2, 1]: (x - 5) << 20 in [-2^21, 2^20]
    good_y = -3 + rng.integers(-1, 2, (2, 20))
    bad_x = good_x.copy()
    bad_x[1, 19] = 7                                # (7 - 5) << 20 = 2^21
    bad_y = good_y.copy()
    bad_y[0, 0] = 0
    agree(model, feed(g, good_x, good_y), feed(g, bad_x, good_y), "RESCALE")
    agree(model, None, feed(g, good_x, bad_y), "RESCALE")
    for inputs, which in ((feed(g, bad_x, good_y), a), (feed(g, good_x, bad_y), b)):
        _, e = outcome(model, inputs, "golden", "tiny")
        assert e.where.endswith(f"-> {which}"), e     # the second RESCALE of x; the RESCALE of y


def test_output_stage_rescale_after_add(tmp_path):
    g = G()
    a, b = g.input((1, 64), I32), g.input((1, 1), I32)
    model = g.write(tmp_path / "m.tosa", [g.rescale(g.binary("ADD", a, b), 1 << 30, 8, 0, -7, I8)])
    rng = np.random.default_rng(7)
    good = rng.integers(-100, 100, (1, 64))
    bad = good.copy()
    bad[0, 63] = 200                                # 200 + 20 >= 2^7
    agree(model, feed(g, good, [[20]]), feed(g, bad, [[20]]), "RESCALE")


# ---- MAC: CONV2D, DEPTHWISE_CONV2D, MATMUL -------------------------------------------------------

def conv_rescale_require_case(tmp_path):
    """CONV2D -> RESCALE (per channel) -> CLAMP whose channel 0's shift of 12 REQUIREs its biased
    accumulator within +-2^11: (graph, model, an input that keeps it, one that breaks it at the
    corner). Also test_decoded's refused MAC segment."""
    g = G()
    x = g.input((1, 6, 6, 3), I8)
    rng = np.random.default_rng(8)
    w = rng.integers(-20, 20, (4, 3, 3, 3))
    w[0] = 1
    out = g.rescale(g.conv(x, w, [10, -20, 30, 2000], -128, 0), [1 << 30] * 4, [12, 36, 36, 36], 0, 0, I8,
                    per_channel=True)
    model = g.write(tmp_path / "m.tosa", [g.clamp(out, -100, 100)])
    good = -128 + rng.integers(0, 21, (1, 6, 6, 3))                  # 27 taps of x - zp <= 20, + 10
    bad = good.copy()
    bad[0, 4:, 4:, :] = 127                                          # 12 taps of 255 at the corner
    return g, model, good, bad


def test_conv_output_stage_rescale(tmp_path):
    """CONV2D -> RESCALE (per channel) -> CLAMP on the MAC: channel 0's shift of 12 REQUIREs its
    biased accumulator within +-2^11."""
    g, model, good, bad = conv_rescale_require_case(tmp_path)
    agree(model, feed(g, good), feed(g, bad), "RESCALE")


def test_conv_accumulator_and_bias_wrap_alike(tmp_path):
    """The convolution kernels wrap the int32 accumulator and bias add (as Arm's reference model;
    no REQUIRE is checked there): the golden model agrees and refuses nothing."""
    g = G()
    x = g.input((1, 4, 4, 8), I8)
    w = np.full((2, 3, 3, 8), 127)
    model = g.write(tmp_path / "m.tosa", [g.conv(x, w, [(1 << 31) - 100, -(1 << 31) + 5], -128, -128)])
    agree(model, feed(g, np.full((1, 4, 4, 8), 127)), None)
    agree(model, feed(g, np.random.default_rng(9).integers(-128, 128, (1, 4, 4, 8))), None)


def test_depthwise_output_stage_rescale(tmp_path):
    g = G()
    x = g.input((1, 5, 5, 4), I8)
    w = np.random.default_rng(10).integers(-3, 4, (3, 3, 4, 1))
    w[..., 2, 0] = 1
    out = g.rescale(g.conv(x, w, [0, 0, 0, 0], 0, 0, depthwise=True), [1 << 30] * 4, [36, 36, 10, 36], 0, 0, I8,
                    per_channel=True)
    model = g.write(tmp_path / "m.tosa", [out])
    good = np.random.default_rng(11).integers(-20, 21, (1, 5, 5, 4))
    good[..., 2] = np.random.default_rng(12).integers(-20, 21, (1, 5, 5)) // 10      # channel 2: |sum| < 2^9
    bad = good.copy()
    bad[0, 1:4, 1:4, 2] = 100
    agree(model, feed(g, good), feed(g, bad), "RESCALE")


def test_matmul_output_stage_rescale(tmp_path):
    g = G()
    a, b = g.input((1, 5, 8), I8), g.input((1, 8, 6), I8)
    model = g.write(tmp_path / "m.tosa", [g.rescale(g.matmul(a, b, 3, -2), 1 << 30, 14, 0, 0, I8)])
    rng = np.random.default_rng(13)
    good_a, good_b = 3 + rng.integers(-8, 8, (1, 5, 8)), -2 + rng.integers(-8, 8, (1, 8, 6))
    bad_a = good_a.copy()
    bad_a[0, 4] = 127
    bad_b = good_b.copy()
    bad_b[0, :, 5] = 127                                            # 8 * 124 * 129 >= 2^13
    agree(model, feed(g, good_a, good_b), feed(g, bad_a, bad_b), "RESCALE")


# ---- POOL: AVG_POOL2D, REDUCE_SUM --------------------------------------------------------------

def test_avg_pool_extremes_agree(tmp_path):
    """AVG_POOL2D's REQUIREs cannot fail for what the NPU runs (int8/int16 sums within int32):
    both backends answer extreme inputs alike."""
    for dt, izp, ozp in ((I8, -128, 127), (I16, 0, 0)):
        g = G()
        x = g.input((1, 7, 7, 3), dt)
        model = g.write(tmp_path / f"m{dt.name}.tosa", [g.avg_pool(x, (3, 3), izp, ozp, (1, 1, 1, 1))])
        for v in (dt.min, dt.max):
            agree(model, feed(g, np.full((1, 7, 7, 3), v)), None)


def test_reduce_sum_partial_sum(tmp_path):
    """REDUCE_SUM: a partial sum leaves int32 and the total comes back (the NPU's wrapped sum is
    the right total, but the spec's REQUIRE fails on the partial sum)."""
    g = G()
    x = g.input((2, 5, 3), I32)
    model = g.write(tmp_path / "m.tosa", [g.reduce_sum(x, 1)])
    rng = np.random.default_rng(14)
    good = rng.integers(-(1 << 28), 1 << 28, (2, 5, 3))
    bad = good.copy()
    bad[1, :, 2] = [(1 << 31) - 1, 1, -10, 0, 0]
    agree(model, feed(g, good), feed(g, bad), "REDUCE_SUM")


def test_reduce_sum_chain_second_op(tmp_path):
    """Two REDUCE_SUMs on neighbouring axes run as one window; the spec's order is per op: here
    only the second op's partial sums overflow."""
    g = G()
    x = g.input((1, 2, 3, 2), I32)
    s1 = g.reduce_sum(x, 1)
    model = g.write(tmp_path / "m.tosa", [g.reduce_sum(s1, 2)])
    good = np.full((1, 2, 3, 2), 1000)
    bad = good.copy()
    bad[0, 0, :, 1] = (1 << 30) - 1
    bad[0, 1, :, 1] = 0
    agree(model, feed(g, good), feed(g, bad), "REDUCE_SUM")
    _, e = outcome(model, feed(g, bad), "interp")
    assert "op #1 " in e.where, e


def test_reduce_sum_input_rescale(tmp_path):
    """The RESCALE (x - zp, a pure shift by 0) feeding a REDUCE_SUM runs in the POOL's input: its
    value range |x - zp| < 2^(shift - 1) is checked on the box the command reads."""
    g = G()
    x = g.input((1, 4, 4, 3), I8)
    s = g.reduce_sum(g.reduce_sum(g.rescale(x, 4, 2, 10, 0, I32), 1), 2)
    model = g.write(tmp_path / "m.tosa", [s])
    good = 10 + np.random.default_rng(15).integers(-2, 2, (1, 4, 4, 3))
    bad = good.copy()
    bad[0, 3, 3, 2] = 12
    agree(model, feed(g, good), feed(g, bad), "RESCALE")


# ---- the output stage's table and clamp ------------------------------------------------------------

def test_table16_slope(tmp_path):
    tab = np.linspace(-20000, 20000, 513).astype(np.int64)
    tab[300], tab[301] = -20000, 20000                      # slope 40000 between entries 300 and 301
    g = G()
    x = g.input((1, 200), I16)
    model = g.write(tmp_path / "m.tosa", [g.table(x, tab)])
    rng = np.random.default_rng(16)
    good = rng.integers(-32768, 300 * 128 - 32768, (1, 200))
    bad = good.copy()
    bad[0, 150] = 300 * 128 - 32768 + 17
    agree(model, feed(g, good), feed(g, bad), "TABLE")


def test_clamp_has_no_data_require(tmp_path):
    g = G()
    x = g.input((3, 17), I16)
    model = g.write(tmp_path / "m.tosa", [g.clamp(x, -5, 1000)])
    agree(model, feed(g, np.random.default_rng(17).integers(-32768, 32768, (3, 17))), None)


# ---- host ops, order, the switch, the command line ----------------------------------------------

def test_host_op_refuses_with_the_interpreters_message(tmp_path):
    g = G()
    a, b = g.input((2, 5), I32), g.input((2, 5), I32)
    model = g.write(tmp_path / "m.tosa", [g.binary("INTDIV", a, b)])
    good = np.arange(1, 11).reshape(2, 5)
    bad = good.copy()
    bad[1, 4] = 0
    agree(model, feed(g, good * 7, good), feed(g, good, bad), "INTDIV", on_npu=False)


def test_first_failing_op_in_graph_order_wins(tmp_path):
    """%N RESCALE feeds an ADD placed after another failing ADD: the NPU runs the other ADD's
    layer first, but the interpreter stops at the RESCALE, which comes first in the graph."""
    g = G()
    x, c, d, e = g.input((1, 30), I32), g.input((1, 30), I32), g.input((1, 30), I32), g.input((1, 30), I32)
    r = g.rescale(x, 1 << 30, 6, 0, 0, I32)                 # |x| < 32
    s1 = g.binary("ADD", c, d)
    s2 = g.binary("ADD", r, e)
    model = g.write(tmp_path / "m.tosa", [s1, s2])
    small = np.ones((1, 30))
    big = np.full((1, 30), (1 << 31) - 1)
    agree(model, feed(g, small, small, small, small), feed(g, small * 40, big, big, small), "RESCALE")
    session, _ = outcome(model, feed(g, small, small, small, small), "golden", "tiny")
    kinds = [layer["op"] for layer in session.program.manifest["layers"]]
    assert len(kinds) == 2 and "<<" not in kinds[0] and "<<" in kinds[1], kinds   # the ADD of c, d runs first
    _, err = outcome(model, feed(g, small, big, big, small), "golden", "tiny")
    assert err.op == "ADD" and "op #" in err.where


def test_monitor_switched_off_gives_the_datapaths_answer(tmp_path):
    g = G()
    a, b = g.input((1, 4), I32), g.input((1, 4), I32)
    model = g.write(tmp_path / "m.tosa", [g.binary("ADD", a, b)])
    from compiler.pipeline import compile_graph

    cfg = load_config("tiny")
    program = compile_graph(read_tosa(model), cfg).program
    bad = feed(g, np.full((1, 4), (1 << 31) - 1), np.full((1, 4), 2))
    with pytest.raises(TosaUnpredictable, match="ADD"):
        GoldenModel(program, cfg).invoke(bad)
    out = GoldenModel(program, cfg, requires=False).invoke(bad)
    assert np.array_equal(list(out.values())[0], np.full((1, 4), -(1 << 31) + 1, np.int32))


def test_variables_roll_back_when_the_monitor_refuses(tmp_path):
    """A refused invocation changes no variable (the driver's rollback, as for a fault)."""
    g = G()
    x = g.input((1, 8), I32)
    g.tensors["acc"] = Tensor("acc", [1, 8], I32, data=np.zeros((1, 8), np.int32), is_variable=True,
                              variable_name="acc")
    old = g.op("IDENTITY", ["acc"], (1, 8), I32)
    g.ops[-1].attr_kind = "VariableReadAttribute"
    new = g.binary("ADD", old, x)
    g.ops.append(Operator("IDENTITY", [new], ["acc"], attr_kind="VariableWriteAttribute"))
    model = g.write(tmp_path / "m.tosa", [old])
    for config in CONFIGS:
        interp, golden = (open_session(read_tosa(model), b, config=config) for b in ("interp", "golden"))
        step, huge = feed(g, np.full((1, 8), 5)), feed(g, np.full((1, 8), (1 << 31) - 3))
        for s in (interp, golden):
            s.run(step)
            with pytest.raises(TosaUnpredictable, match="ADD"):
                s.run(huge)
            assert np.array_equal(s.run(step)[old], np.full((1, 8), 5, np.int32))


def test_npu_run_golden_refuses_in_one_line(tmp_path, capsys):
    from sim.cli.main import main

    g = G()
    a, b = g.input((1, 4), I32, "a"), g.input((1, 4), I32, "b")
    model = g.write(tmp_path / "m.tosa", [g.binary("ADD", a, b)])
    np.save(tmp_path / "a.npy", np.full((1, 4), (1 << 31) - 1, np.int32))
    np.save(tmp_path / "b.npy", np.ones((1, 4), np.int32))
    lines = {}
    for backend in ("interp", "golden"):
        code = main(["run", model, "-i", f"a={tmp_path / 'a.npy'}", "-i", f"b={tmp_path / 'b.npy'}",
                     "-o", str(tmp_path / f"out_{backend}"), "--backend", backend])
        err = capsys.readouterr().err.strip()
        assert code == 2 and "\n" not in err and "Traceback" not in err, err
        assert "ADD (" in err and "REQUIRE apply_add_s: sum fits INT32" in err, err
        lines[backend] = err
        assert not (tmp_path / f"out_{backend}").exists() or not any((tmp_path / f"out_{backend}").iterdir())
    assert lines["interp"] == lines["golden"]


def test_npu_sim_refuses_before_the_rtl(tmp_path, capsys, monkeypatch):
    """`npu sim` runs golden first: an unpredictable input is a user error, the RTL is not built."""
    import sim.rtl.core
    from sim.cli.main import main

    def no_rtl(*args, **kw):
        raise AssertionError("the RTL was asked for")

    monkeypatch.setattr(sim.rtl.core, "cached_core", no_rtl)
    g = G()
    a, b = g.input((1, 4), I32, "a"), g.input((1, 4), I32, "b")
    model = g.write(tmp_path / "m.tosa", [g.binary("SUB", a, b)])
    np.save(tmp_path / "a.npy", np.full((1, 4), -(1 << 31), np.int32))
    np.save(tmp_path / "b.npy", np.ones((1, 4), np.int32))
    code = main(["sim", model, "-i", f"a={tmp_path / 'a.npy'}", "-i", f"b={tmp_path / 'b.npy'}",
                 "--config", "tiny", "--report", str(tmp_path / "report")])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "\n" not in err and "Traceback" not in err, err
    assert "SUB (" in err and "apply_sub_s: difference fits INT32" in err, err


def test_sut_answers_unpredictable_on_both_backends(tmp_path):
    from sim.oracles.tosa_sut import UNPREDICTABLE, VALID, execute_test

    g = G()
    a, b = g.input((2, 3), I32, "a"), g.input((2, 3), I32, "b")
    out = g.binary("ADD", a, b)
    g.write(tmp_path / "test.tosa", [out])
    desc = {"tosa_file": "test.tosa", "ifm_name": ["a", "b"], "ifm_file": ["a.npy", "b.npy"], "ofm_name": [out],
            "ofm_file": ["out.npy"], "expected_failure": False}
    for b_value, expected in ((1, VALID), ((1 << 31) - 1, UNPREDICTABLE)):
        np.save(tmp_path / "a.npy", np.full((2, 3), 1, np.int32))
        np.save(tmp_path / "b.npy", np.full((2, 3), b_value, np.int32))
        for backend in ("interp", "golden"):
            code, msg, _ = execute_test(tmp_path, desc, backend=backend, write=False, config="tiny")
            assert code == expected, (backend, msg)
