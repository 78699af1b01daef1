"""Stimulus, expected results, coverage and mutations for the rescale unit bench (hw/rescale_unit.py).

Every RESCALE parameter travels with its element, so one vector mixes every legal combination:
input type (int8, uint8, int16, uint16, int32, int48), output type (int8, uint8, int16, uint16,
int32), apply_scale_32 with single or double rounding or apply_scale_16, any shift 2..62, any
multiplier, and the zero points TOSA allows (int8 any, uint8 0..255, uint16 0 or 32768). The
combinations RESCALE's ERROR_IFs forbid are never generated.

Expected results come from firmware_model.tosa_ops.numerics.rescale_values, called once per
group of elements sharing the op-level flags (it takes the flags as scalars, the multiplier, shift
and zero points as arrays), with require=False: the hardware's defined result where the spec's
REQUIREs (e.g. the value range of apply_scale_32 for a given shift) do not hold. The MAC-stage
suite adds firmware_model.golden.mac_unit.rescale_operands, as the golden MAC model does.

Suites (`suites()`): random, corners (shift 2 and 62, the double-round rule around shift 31/32,
rounding ties, extremes, zero-point extremes, saturation both sides), a dense apply_scale_16 and
apply_scale_32 sweep over every shift 2..62, per-channel blocks (numerics' channel_axis), and the
MAC output stage's out-of-REQUIRE operands (negative multipliers, shifts 0, 1, 63).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sim import seeds
from firmware_model.golden.mac_unit import rescale_operands
from firmware_model.tosa_ops import numerics
from firmware_model.tosa_ops.dtypes import DType
from sim.verification.coverage import CoverageModel, CoverPoint, Cross
from hw.rescale_unit import LATENCY
from sim.verification.contract import UnitContract
from sim.verification.unit_bench import Mutation, UnitBench, UnitSpec, VectorRun, assert_results_match, lint_unit

# (label, dtype, unsigned)
IN_KINDS = (("int8", DType.INT8, False), ("uint8", DType.INT8, True), ("int16", DType.INT16, False),
            ("uint16", DType.INT16, True), ("int32", DType.INT32, False), ("int48", DType.INT48, False))
OUT_KINDS = (("int8", DType.INT8, False), ("uint8", DType.INT8, True), ("int16", DType.INT16, False),
             ("uint16", DType.INT16, True), ("int32", DType.INT32, False))
ROUNDING = ("single32", "double32", "scale16")
SAT = ("none", "low", "high")


def _zp_choices(label: str) -> tuple[int, int] | None:
    """(lowest, highest) zero point TOSA allows for a kind; None: only 0."""
    return {"int8": (-128, 127), "uint8": (0, 255), "uint16": (0, 32768)}.get(label)


def _range(label: str) -> tuple[int, int]:
    kind = {k[0]: k for k in IN_KINDS + OUT_KINDS}[label]
    _, dt, uns = kind
    return (0, dt.umax) if uns else (dt.min, dt.max)


def legal(in_kind: int, out_kind: int, rounding: int) -> bool:
    """RESCALE's ERROR_IFs for one combination (indices into IN_KINDS, OUT_KINDS, ROUNDING)."""
    il, idt, iu = IN_KINDS[in_kind]
    ol, odt, ou = OUT_KINDS[out_kind]
    if iu and ou:
        return False
    if odt == DType.INT32 and iu:
        return False
    if idt in (DType.INT32, DType.INT48) and ou:
        return False
    if idt == DType.INT48 and ROUNDING[rounding] != "scale16":
        return False
    return True


LEGAL = [(i, o, r) for i in range(len(IN_KINDS)) for o in range(len(OUT_KINDS)) for r in range(3)
         if legal(i, o, r)]


@dataclass
class Elements:
    """A block of elements with every field the unit takes, as the integers TOSA reads them."""
    in_kind: np.ndarray
    out_kind: np.ndarray
    rounding: np.ndarray
    value: np.ndarray        # the input as read (uint16 as 0..65535)
    input_zp: np.ndarray
    output_zp: np.ndarray
    multiplier: np.ndarray
    shift: np.ndarray
    per_channel: np.ndarray  # 1 where the block was a per-channel RESCALE

    def __len__(self):
        return len(self.value)

    def __getitem__(self, index) -> "Elements":
        return Elements(*(getattr(self, f)[index] for f in Elements.__dataclass_fields__))

    @staticmethod
    def concat(blocks: list["Elements"]) -> "Elements":
        return Elements(*(np.concatenate([getattr(b, f) for b in blocks]) for f in Elements.__dataclass_fields__))

    def fields(self) -> dict[str, np.ndarray]:
        """The unit's payload fields (tag = element index)."""
        idt = np.array([k[1] for k in IN_KINDS])[self.in_kind]
        iu = np.array([k[2] for k in IN_KINDS])[self.in_kind]
        odt = np.array([k[1] for k in OUT_KINDS])[self.out_kind]
        ou = np.array([k[2] for k in OUT_KINDS])[self.out_kind]
        return {"value": self.value, "in_dtype": idt, "input_unsigned": iu, "input_zp": self.input_zp,
                "multiplier": self.multiplier, "shift": self.shift, "output_zp": self.output_zp,
                "scale32": self.rounding != 2, "double_round": self.rounding == 1,
                "out_dtype": odt, "output_unsigned": ou, "tag": np.arange(len(self))}


# ---------------------------------------------------------------------------------------------
# Expected results: the golden primitives, per group of op-level flags

def _groups(e: Elements):
    keys = e.out_kind * 3 + e.rounding
    for key in np.unique(keys):
        idx = np.flatnonzero(keys == key)
        out_kind, rounding = divmod(int(key), 3)
        yield idx, OUT_KINDS[out_kind], ROUNDING[rounding]


def expected(e: Elements, out_override: tuple | None = None) -> np.ndarray:
    """numerics.rescale_values for every element (require=False: the hardware's defined result)."""
    result = np.zeros(len(e), dtype=np.int64)
    for idx, (_, odt, ou), rnd in _groups(e):
        if out_override is not None:
            odt, ou = out_override
        result[idx] = numerics.rescale_values(
            e.value[idx], multiplier=e.multiplier[idx], shift=e.shift[idx], input_zp=e.input_zp[idx],
            output_zp=e.output_zp[idx], out_dtype=odt, scale32=rnd != "scale16",
            double_round=rnd == "double32", output_unsigned=ou, require=False)
    return result


def saturation(e: Elements) -> np.ndarray:
    """0: in range, 1: saturated low, 2: saturated high — the golden int32 result (before the
    clip to the output type) against the output type's range."""
    wide = expected(e, out_override=(DType.INT32, False))
    lo = np.array([_range(k[0])[0] for k in OUT_KINDS])[e.out_kind]
    hi = np.array([_range(k[0])[1] for k in OUT_KINDS])[e.out_kind]
    return np.where(wide < lo, 1, np.where(wide > hi, 2, 0))


def double_round_effect(e: Elements) -> np.ndarray:
    """True where double rounding gave a different result than single rounding would."""
    eff = np.zeros(len(e), dtype=bool)
    idx = np.flatnonzero(e.rounding == 1)
    if idx.size:
        single = e.rounding.copy()
        single[idx] = 0
        alt = Elements(**{**e.__dict__, "rounding": single})
        eff[idx] = expected(e)[idx] != expected(alt)[idx]
    return eff


# ---------------------------------------------------------------------------------------------
# Stimulus

def _draw_values(rng, labels: list[str], n_extreme: float = 0.3) -> np.ndarray:
    out = np.zeros(len(labels), dtype=np.int64)
    for label in set(labels):
        idx = np.flatnonzero(np.array(labels) == label)
        lo, hi = _range(label)
        v = rng.integers(lo, hi, idx.size, endpoint=True)
        ext = np.array([lo, lo + 1, -1 if lo < 0 else 1, 0, 1, hi - 1, hi])
        pick = rng.random(idx.size) < n_extreme
        v[pick] = rng.choice(ext, pick.sum())
        out[idx] = v
    return out


def _draw_zp(rng, labels: list[str]) -> np.ndarray:
    out = np.zeros(len(labels), dtype=np.int64)
    for i, label in enumerate(labels):
        c = _zp_choices(label)
        if c is None:
            continue
        lo, hi = c
        if label == "uint16":
            out[i] = rng.choice([lo, hi])
        else:
            r = rng.random()
            out[i] = lo if r < 0.2 else hi if r < 0.4 else 0 if r < 0.5 else rng.integers(lo, hi, endpoint=True)
    return out


def _draw_scale(rng, e_in: np.ndarray, e_out: np.ndarray, rounding: np.ndarray):
    """Multiplier and shift: mostly gains that map the input range onto the output range (so
    results land in range, near the edges and beyond), some log-uniform anywhere."""
    n = len(rounding)
    s32 = rounding != 2
    mbits = np.where(s32, 31, 15)
    in_bits = np.array([_range(k[0])[1] - _range(k[0])[0] for k in IN_KINDS], dtype=np.float64)[e_in]
    out_bits = np.array([_range(k[0])[1] - _range(k[0])[0] for k in OUT_KINDS], dtype=np.float64)[e_out]
    gain_exp = np.log2(out_bits + 1) - np.log2(in_bits + 1) + rng.uniform(-3, 3, n)
    shift = np.clip(np.round(mbits - 1 - gain_exp), 2, 62).astype(np.int64)
    mult = rng.integers(0, 1 << 62, n) % (1 << (mbits - 1)) + (1 << (mbits - 1))   # top bit set
    wide = rng.random(n) < 0.35
    shift[wide] = rng.integers(2, 63, wide.sum())
    mbits_w = rng.integers(0, mbits[wide] + 1)
    mult[wide] = rng.integers(0, 1 << 62, wide.sum()) % np.left_shift(1, mbits_w)
    mult = np.minimum(mult, np.left_shift(1, mbits) - 1)
    return mult, shift


def random_elements(rng, n: int, *, per_channel: bool = False) -> Elements:
    combos = np.array(LEGAL)[rng.integers(0, len(LEGAL), n)]
    in_kind, out_kind, rounding = combos[:, 0], combos[:, 1], combos[:, 2]
    in_labels = [IN_KINDS[i][0] for i in in_kind]
    out_labels = [OUT_KINDS[o][0] for o in out_kind]
    mult, shift = _draw_scale(rng, in_kind, out_kind, rounding)
    return Elements(in_kind, out_kind, rounding, _draw_values(rng, in_labels), _draw_zp(rng, in_labels),
                    _draw_zp(rng, out_labels), mult, shift, np.full(n, int(per_channel)))


def _block(in_kind, out_kind, rounding, value, multiplier, shift, input_zp=0, output_zp=0) -> Elements:
    value = np.atleast_1d(np.asarray(value, dtype=np.int64))
    n = len(value)
    full = lambda v: np.broadcast_to(np.asarray(v, dtype=np.int64), (n,)).copy()  # noqa: E731
    return Elements(full(in_kind), full(out_kind), full(rounding), value, full(input_zp), full(output_zp),
                    full(multiplier), full(shift), full(0))


def _kind(label, kinds):
    return [k[0] for k in kinds].index(label)


def corner_elements(rng) -> Elements:
    I = lambda s: _kind(s, IN_KINDS)   # noqa: E731
    O = lambda s: _kind(s, OUT_KINDS)  # noqa: E731
    blocks = []
    # shift 2 and 62, both scale modes, extreme values and multipliers
    for rnd in (0, 1, 2):
        ik = I("int48") if rnd == 2 else I("int32")
        lo, hi = _range(IN_KINDS[ik][0])
        mmax = (1 << 15) - 1 if rnd == 2 else (1 << 31) - 1
        vals = np.array([lo, lo + 1, -3, -2, -1, 0, 1, 2, 3, hi - 1, hi])
        for sh in (2, 3, 61, 62):
            for m in (0, 1, mmax // 2, mmax):
                blocks.append(_block(ik, O("int32"), rnd, vals, m, sh))
                blocks.append(_block(ik, O("int8"), rnd, vals, m, sh, output_zp=-128))
                blocks.append(_block(ik, O("int8"), rnd, vals, m, sh, output_zp=127))
                blocks.append(_block(ik, O("int16"), rnd, vals, m, sh))
                if rnd == 2:
                    blocks.append(_block(ik, O("uint16"), rnd, vals, m, sh, output_zp=32768))
    # the double-round rule around shift 31/32: with multiplier 2^30, value q * 2^(shift - 30) + r
    # puts the fraction of value * multiplier just below, at or above the single-round tie, where
    # the extra +-2^30 decides the result (and at shift <= 31, where it must not be applied)
    for sh in range(28, 62):
        step = max(sh - 30, 0)
        qmax = 1 << max(0, 30 - step)
        q = rng.integers(-qmax, qmax, 4)
        tie = 1 << (sh - 31) if sh >= 31 else 0
        for r in (tie - 2, tie - 1, tie, tie + 1, tie + 2, tie + 3):
            v = np.clip((q << step) + r, -(1 << 31), (1 << 31) - 1)
            for m in (1 << 30, (1 << 31) - 1):
                for rnd in (0, 1):
                    blocks.append(_block(I("int32"), O("int32"), rnd, v, m, sh))
    # rounding ties (x.5 exactly) for every shift an int32 can reach with multiplier 1
    for sh in range(2, 32):
        k = rng.integers(-(1 << max(0, 30 - sh)), 1 << max(0, 30 - sh), 8)
        v = (2 * k + 1) << (sh - 1)
        v = v[(v >= -(1 << 31)) & (v < (1 << 31))]
        for rnd in (0, 1, 2):
            blocks.append(_block(I("int32"), O("int32"), rnd, v, 1, sh))
    # zero-point extremes and saturation on both sides, for every input/output kind
    for ik, ok, rnd in LEGAL:
        il, ol = IN_KINDS[ik][0], OUT_KINDS[ok][0]
        lo, hi = _range(il)
        vals = np.array([lo, lo + 1, (lo + hi) // 2, hi - 1, hi])
        izps = _zp_choices(il) or (0, 0)
        ozps = _zp_choices(ol) or (0, 0)
        mbits = 15 if rnd == 2 else 31
        for izp in sorted(set(izps)):
            for ozp in sorted(set(ozps)):
                # a large gain (saturates both ways), unity-ish, and a tiny one (rounds to ~0)
                for m, sh in (((1 << (mbits - 1)), mbits - 1 - 8), ((1 << (mbits - 1)), mbits - 1),
                              ((1 << (mbits - 1)) + 12345 % (1 << (mbits - 1)), 62)):
                    blocks.append(_block(ik, ok, rnd, vals, m, max(2, sh), izp, ozp))
    return Elements.concat(blocks)


def sweep_elements(rng) -> Elements:
    """Every shift 2..62: apply_scale_16 on int48 values (extremes, powers of two, random) with
    multipliers 0, 1, 2^14 (int32 out) and 32767, random (int16 out); apply_scale_32 on int32
    with both roundings."""
    blocks = []
    v48 = np.concatenate([[-(1 << 47), -(1 << 47) + 1, -1, 0, 1, (1 << 47) - 1],
                          [(1 << k) for k in range(0, 47, 6)], [-(1 << k) for k in range(0, 47, 6)],
                          rng.integers(-(1 << 47), 1 << 47, 8)])
    v32 = np.concatenate([[-(1 << 31), -(1 << 31) + 1, -1, 0, 1, (1 << 31) - 1],
                          rng.integers(-(1 << 31), 1 << 31, 10)])
    i48, i32, o32 = _kind("int48", IN_KINDS), _kind("int32", IN_KINDS), _kind("int32", OUT_KINDS)
    o16 = _kind("int16", OUT_KINDS)
    for sh in range(2, 63):
        for m in (0, 1, 1 << 14):
            blocks.append(_block(i48, o32, 2, v48, m, sh))
        for m in ((1 << 15) - 1, int(rng.integers(0, 1 << 15))):     # int16 out: saturates too
            blocks.append(_block(i48, o16, 2, v48, m, sh))
        for m in (1, 1 << 30, (1 << 31) - 1, int(rng.integers(0, 1 << 31))):
            for rnd in (0, 1):
                blocks.append(_block(i32, o32, rnd, v32, m, sh))
    return Elements.concat(blocks)


def per_channel_blocks(rng, n_blocks: int = 8, rows: int = 24, channels: int = 16):
    """Per-channel RESCALEs: (rows, channels) tensors, one (multiplier, shift) per channel, the
    expected result from numerics.rescale_values with channel_axis=1. Returns (Elements, expected)."""
    blocks, exp = [], []
    for _ in range(n_blocks):
        ik, ok, rnd = LEGAL[int(rng.integers(0, len(LEGAL)))]
        mult, shift = _draw_scale(rng, np.full(channels, ik), np.full(channels, ok), np.full(channels, rnd))
        il, ol = IN_KINDS[ik][0], OUT_KINDS[ok][0]
        values = _draw_values(rng, [il] * (rows * channels)).reshape(rows, channels)
        izp = int(_draw_zp(rng, [il])[0])
        ozp = int(_draw_zp(rng, [ol])[0])
        _, odt, ou = OUT_KINDS[ok]
        exp.append(numerics.rescale_values(values, multiplier=mult, shift=shift, input_zp=izp, output_zp=ozp,
                                           out_dtype=odt, scale32=rnd != 2, double_round=rnd == 1,
                                           output_unsigned=ou, channel_axis=1, require=False).reshape(-1))
        e = _block(ik, ok, rnd, values.reshape(-1), np.tile(mult, rows), np.tile(shift, rows), izp, ozp)
        e.per_channel[:] = 1
        blocks.append(e)
    return Elements.concat(blocks), np.concatenate(exp)


def mac_stage_elements(rng, n: int):
    """The MAC output stage's view: int32 values, any int32 multiplier (negative ones too), shift
    0..63, as hw/mac_sequencer.py feeds the unit. Expected: rescale_operands + rescale_values, as
    firmware_model.golden.mac_unit.execute_mac computes it. Returns (Elements, expected)."""
    i32 = _kind("int32", IN_KINDS)
    out_kind = rng.choice([_kind(s, OUT_KINDS) for s in ("int8", "uint8", "int16", "uint16", "int32")], n)
    rounding = rng.integers(0, 3, n)
    value = rng.integers(-(1 << 31), 1 << 31, n)
    mult = rng.integers(-(1 << 31), 1 << 31, n)
    shift = rng.integers(0, 64, n)
    ozp = np.where(np.isin(out_kind, [_kind("int8", OUT_KINDS)]), rng.integers(-128, 128, n), 0)
    e = Elements(np.full(n, i32), out_kind, rounding, value, np.zeros(n, np.int64), ozp, mult, shift,
                 np.zeros(n, np.int64))
    exp = np.zeros(n, dtype=np.int64)
    for idx, (_, odt, ou), rnd in _groups(e):
        v, m = rescale_operands(value[idx], mult[idx], rnd != "scale16")
        exp[idx] = numerics.rescale_values(v, multiplier=m, shift=shift[idx], input_zp=0, output_zp=ozp[idx],
                                           out_dtype=odt, scale32=rnd != "scale16",
                                           double_round=rnd == "double32", output_unsigned=ou, require=False)
    return e, exp


# ---------------------------------------------------------------------------------------------
# The bench: spec, runs, coverage, mutations, lint

SPEC = UnitSpec("rescale_bench", lambda: _unit(), depth=32768, unit_name="rescale_unit")


def _unit():
    from hw.rescale_unit import RescaleUnit

    return RescaleUnit()


def bench() -> UnitBench:
    return UnitBench.shared(SPEC)


def make_run(label: str, e: Elements, exp: np.ndarray | None = None, **kw) -> VectorRun:
    exp = expected(e) if exp is None else exp
    return VectorRun(inputs={"i": e.fields()}, n_out={"o": len(e)},
                     expected={"o": {"result": exp, "tag": np.arange(len(e))}}, label=label, **kw)


def suites(seed: int, n_random: int = 4096) -> list[tuple[VectorRun, Elements]]:
    """The runs of a full check, with the elements each one played (for coverage)."""
    rng = seeds.rng(seed)
    runs = []
    rand = random_elements(rng, n_random)
    runs.append((make_run("random", rand), rand))
    corners = corner_elements(rng)
    runs.append((make_run("corners", corners), corners))
    sweep = sweep_elements(rng)
    runs.append((make_run("shift_sweep", sweep), sweep))
    pc, pc_exp = per_channel_blocks(rng)
    runs.append((make_run("per_channel", pc, pc_exp), pc))
    mac, mac_exp = mac_stage_elements(rng, 1024)
    runs.append((make_run("mac_stage", mac, mac_exp), mac))
    # back-pressure and gaps: the random vector again, with the harness throttling both sides
    stall = rand
    runs.append((make_run("backpressure", stall, valid_pattern=0x9D2C5680 | 1, ready_pattern=0xB6E3D1A5), stall))
    return runs


def coverage_model() -> CoverageModel:
    shift_bins = {"2": (2, 2), "3..15": (3, 15), "16..30": (16, 30), "31": (31, 31), "32": (32, 32),
                  "33..47": (33, 47), "48..61": (48, 61), "62": (62, 62)}
    zp_classes = {"min": 0, "max": 1, "zero": 2, "between": 3}
    zp_ok = {"int8": {"min", "max", "zero", "between"}, "uint8": {"min", "max", "between"},
             "uint16": {"min", "max"}}

    def zp_ignore(combo):
        kind, cls = combo
        return cls not in zp_ok.get(kind, {"zero"})

    def rounding_shift_sat_ignore(combo):
        rnd, sh, sat = combo
        # apply_scale_16 multiplies at most |-2^47 * (2^15 - 1)| < 2^62: with shift 62 the scaled
        # value is 0 or -1, and no legal output zero point lifts 0 above its type's maximum.
        return sat == "high" and sh == "62" and rnd == "scale16"

    return CoverageModel("rescale_unit", [
        CoverPoint.values("rounding", "rounding", {r: i for i, r in enumerate(ROUNDING)}),
        CoverPoint.ranges("shift", "shift", shift_bins),
        CoverPoint.values("saturation", "sat", {s: i for i, s in enumerate(SAT)}),
        CoverPoint.values("in_type", "in_kind", {k[0]: i for i, k in enumerate(IN_KINDS)}),
        CoverPoint.values("out_type", "out_kind", {k[0]: i for i, k in enumerate(OUT_KINDS)}),
        CoverPoint.values("input_zp", "izp_class", zp_classes),
        CoverPoint.values("output_zp", "ozp_class", zp_classes),
        CoverPoint.values("per_channel", "per_channel", {"per-tensor": 0, "per-channel": 1}),
        CoverPoint.values("double_round_effect", "dr_effect", {"changed the result": 1}),
        CoverPoint.values("sign", "neg", {"negative value": 1, "non-negative value": 0}),
    ], crosses=[
        Cross("rounding x shift x saturation", ["rounding", "shift", "saturation"], ignore=rounding_shift_sat_ignore),
        Cross("in_type x input_zp", ["in_type", "input_zp"], ignore=zp_ignore),
        Cross("out_type x output_zp", ["out_type", "output_zp"], ignore=zp_ignore),
        # int32 results wrap inside apply_scale (static_cast<int32_t>) and int32 outputs take no
        # zero point: an int32 output is never out of its range.
        Cross("out_type x saturation", ["out_type", "saturation"],
              ignore=lambda c: c[0] == "int32" and c[1] != "none"),
        Cross("rounding x per_channel", ["rounding", "per_channel"]),
        Cross("in_type x rounding", ["in_type", "rounding"],
              ignore=lambda c: c[0] == "int48" and c[1] != "scale16"),
    ])


def _zp_class(zp: np.ndarray, kind: np.ndarray, kinds) -> np.ndarray:
    """0: the lowest zero point the kind allows, 1: the highest, 2: zero, 3: in between."""
    lo = np.array([(_zp_choices(k[0]) or (0, 0))[0] for k in kinds])[kind]
    hi = np.array([(_zp_choices(k[0]) or (0, 0))[1] for k in kinds])[kind]
    single = lo == hi
    return np.where(single, 2, np.where(zp == lo, 0, np.where(zp == hi, 1, np.where(zp == 0, 2, 3))))


def coverage_sample(e: Elements) -> dict:
    return {"rounding": e.rounding, "shift": e.shift, "sat": saturation(e), "in_kind": e.in_kind,
            "out_kind": e.out_kind, "izp_class": _zp_class(e.input_zp, e.in_kind, IN_KINDS),
            "ozp_class": _zp_class(e.output_zp, e.out_kind, OUT_KINDS),
            "per_channel": e.per_channel, "dr_effect": double_round_effect(e).astype(np.int64),
            "neg": (e.value < 0).astype(np.int64)}


# Faults injected into the generated Verilog (hw/rescale_unit.py names the signals they edit).
MUTATIONS = (
    Mutation("drop_double_round", "the double-round term is never added",
             r"^(\s*)dr_term = \\\$\d+ ;", r"\1dr_term = 32'd0;"),
    Mutation("double_round_threshold", "double rounding applied from shift 33 instead of 32",
             r"> 5'h1f;", "> 6'h20;"),
    Mutation("round_bit_off_by_one", "rounding term 1 << shift instead of 1 << (shift - 1)",
             r"^(\s*)round_bit = \\\$(\d+) \[63:0\];", r"\1round_bit = { \\$\2 [62:0], 1'h0 };"),
    Mutation("shift_off_by_one", "the arithmetic shift right goes one bit too far",
             r">>> (s2_shift);", r">>> (\1 + 6'h01);"),
    Mutation("int16_saturation_bound", "int16 saturates high at 32766",
             r"16'hffff : 16'h7fff;", "16'hffff : 16'h7ffe;"),
    Mutation("uint8_saturation_bound", "uint8 saturates at the int8 bound 127",
             r"8'hff : 8'h7f;", "8'h7f : 8'h7f;"),
    Mutation("uint16_read_signed", "uint16 inputs are sign-extended",
             r"\? \{ 1'h0, i__payload\[15:0\] \}", "? { i__payload[15], i__payload[15:0] }"),
)

# The rescale unit needs no lint waivers beyond sim.verification.unit_bench's generator waivers.
LINT_WAIVERS = ()


# Benchmark vectors (sim.benchmarks.units): random elements at full speed.
BENCHMARK_SIZES = {"verilator": 32768, "icarus": 8192, "amaranth": 512}


def benchmark_runs(simulator: str, seed: int = 7) -> list[VectorRun]:
    rng = seeds.rng(seed)
    return [make_run("benchmark", random_elements(rng, BENCHMARK_SIZES[simulator]))]


# ---------------------------------------------------------------------------------------------
# The unit contract (sim/verification/contract.py)

SEED = 20240611


def _amaranth_check() -> None:
    """A short mixed vector through the Python design, with and without stalls."""
    rng = seeds.rng(SEED)
    e = Elements.concat([random_elements(rng, 160), corner_elements(rng)[::97]])
    runs = [make_run("random", e), make_run("stalls", e, valid_pattern=0x6DB6DB6D, ready_pattern=0xA5A5F00F)]
    results = bench().run_amaranth(runs)
    assert_results_match(results, runs)
    assert results.runs[0].cycles == len(e) + LATENCY


CONTRACT = UnitContract(
    unit="rescale_unit", mutations=MUTATIONS,
    mutant_runs=lambda: [r for r, _ in suites(SEED) if r.label in ("random", "corners")],
    run=lambda simulator, runs, mutation=None: bench().run(simulator, runs, mutation=mutation),
    lint=lambda: lint_unit(bench(), LINT_WAIVERS),
    amaranth=_amaranth_check,
)
