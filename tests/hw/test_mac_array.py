"""The MAC array (hw/mac_array.py) against the golden arithmetic (firmware_model.golden.mac_unit:
mac_block_sums, accumulate), bit for bit.

amaranth.sim: the Python design driven directly, at several geometries, random programs with idle
clocks between beats and the back-to-back accumulator case. Verilator and Icarus: the generated
Verilog (default NPU geometry) in the vector harness (sim/verification/gateware/mac_harness.py adapts it) runs every
suite of sim/vectors/mac_array.py in one simulator process, each suite one free-running run with
its accumulators preloaded by backdoor. Coverage from what ran; mutations of the generated
Verilog must be caught; the unit's Verilog must lint clean. The golden int16 path itself is
checked against the TOSA CONV2D kernel.
"""

from __future__ import annotations


import numpy as np
import pytest

from sim import seeds
from firmware_model.errors import GoldenModelError
from firmware_model.arch.isa import OutMode, Reg, Sram
from firmware_model.golden.mac_unit import execute_mac, lanes_per_word
from firmware_model.arch.isa import encode_param_records
from firmware_model.golden.memories import Memories
from firmware_model.arch.config import load_config
from firmware_model.tosa_ops.dtypes import DType
from firmware_model.tosa_ops.registry import OpCall, TensorSpec, run_op
from sim.vectors import mac_array as mv
from sim.verification.unit_bench import assert_runs_match

SIMULATORS = ("verilator", "icarus")
SEED = 20240613
SCALE = {"verilator": 1.0, "icarus": 0.4}      # Icarus simulates the 8x8 array at a few k clocks/s


@pytest.fixture(scope="module", params=SIMULATORS)
def rtl(request):
    """(simulator, suites, results): every suite in one simulator process."""
    suites = mv.suites(SEED, scale=SCALE[request.param])
    return request.param, suites, mv.run_suites(request.param, suites)


def _check(rtl, label: str):
    _, suites, results = rtl
    s = next(s for s in suites if s.run.label == label)
    return s, assert_runs_match(results, [s.run])[0]


@pytest.mark.rtl
def test_mac_array_random(rtl):
    s, _ = _check(rtl, "random")
    assert len(s.program) > 500


@pytest.mark.rtl
def test_mac_array_int16(rtl):
    s, _ = _check(rtl, "int16")
    assert all(s.program.int16)


@pytest.mark.rtl
def test_mac_array_corners(rtl):
    """Extremes of every operand and zero point, accumulation across both int48 limits,
    back-to-back vectors on one accumulator, `first` after accumulation, a row reloaded mid-block."""
    s, res = _check(rtl, "corners")
    p = s.program
    final = mv.expected_accumulators(p)
    big = p.depth - 4
    assert (final[big] < 0).all() and (final[big + 1] > 0).all(), "the corner program must wrap both ways"


@pytest.mark.rtl
def test_mac_array_backpressure(rtl):
    s, res = _check(rtl, "backpressure")
    assert res.cycles > len(s.program) + len(s.program.reads()) + 2


@pytest.mark.rtl
def test_mac_array_throughput(rtl):
    """One weight row or vector per clock, one accumulator read per clock: rows + N operations and
    D reads take rows + N + 1 + D + 1 clocks (one clock to change from the operation phase to the
    read phase, one from the last read's address to its word); the first word arrives in clock
    rows + N + 3 (its address in rows + N + 2)."""
    s, res = _check(rtl, "throughput")
    n, d = mv.THROUGHPUT
    rows = s.program.rows
    assert res.cycles == rows + n + 1 + d + 1, f"{res.cycles} clocks"
    assert res.first_out == rows + n + 3


@pytest.mark.rtl
def test_mac_array_coverage(rtl):
    simulator, suites, results = rtl
    assert results.ok
    cov = mv.coverage_model()
    for s in suites:
        assert results.by_label(s.run.label).ok
        cov.sample(mv.coverage_sample(s.program))
    cov.save_and_check("mac_array", simulator)


# ---------------------------------------------------------------------------------------------
# amaranth.sim: the Python design, driven directly

def test_mac_array_back_to_back_amaranth_sim():
    """Vectors for one accumulator on consecutive clocks (the transparent read of the write one
    clock before), and a read-back in the clock right after the last write."""
    geometry = (2, 4, 4)
    p = mv.MacProgram(*geometry)
    for r in range(2):
        p.weight_row(r, [1 + r, 2, 3, 4], zp=0, int16=False)
    for k in range(5):
        p.vector([k, 1, 0x80, 0x7F], zp=-3, int16=False, acc=1, first=(k == 0))
    p.read_addrs = np.array([1, 1, 0])
    got = mv.simulate(geometry, p, seeds.rng(0))
    assert np.array_equal(got, mv.expected_accumulators(p)[p.reads()])
    assert got[0, 0] != 0


def _word(v) -> list[int]:
    """A word's bytes as the array's ports take them."""
    return [int(b) & 0xFF for b in v]


async def _load_weight_rows(ctx, dut, w: np.ndarray, wzp: int) -> None:
    """Weight rows w (rows x cols int8) into the array's active block, one a clock."""
    for r in range(len(w)):
        ctx.set(dut.w.payload, {"data": _word(w[r]), "row": r, "zp": wzp, "int16": 0})
        ctx.set(dut.w.valid, 1)
        await ctx.tick()
    ctx.set(dut.w.valid, 0)


def _run_window_script(dut, rows: int, w: np.ndarray, wzp: int, zp: int, modes: dict, script: list,
                       want: np.ndarray, written: set) -> None:
    """Drive a window-mode array (`modes`: its mode inputs, set once) with `script`, one clock
    each: (the clock's other inputs by name, the three words or None, beat accumulator or None,
    first); then read every written accumulator and compare it with `want`."""
    from amaranth.sim import Simulator

    cols = dut.cols
    got = {}

    async def tb(ctx):
        await _load_weight_rows(ctx, dut, w, wzp)
        ctx.set(dut.dw, 1)
        for name, value in modes.items():
            ctx.set(getattr(dut, name), value)
        for inputs, words, acc, first in script:
            for name, value in inputs.items():
                ctx.set(getattr(dut, name), value)
            ctx.set(dut.win_shift, words is not None)
            ctx.set(dut.x.valid, acc is not None)
            words = words if words is not None else [np.zeros(cols, dtype=np.int64)] * 3
            ctx.set(dut.x.payload, {"data": _word(words[0]), "zp": zp, "int16": 0, "acc": acc or 0, "first": int(first)})
            ctx.set(dut.x2_data, _word(words[1]))
            ctx.set(dut.x3_data, _word(words[2]))
            await ctx.tick()
        ctx.set(dut.x.valid, 0)
        ctx.set(dut.win_shift, 0)
        await ctx.tick()
        for a in sorted(written):
            ctx.set(dut.rd_addr, a)
            await ctx.tick()
            v = ctx.get(dut.rd_data)
            got[a] = [int(v[r]) for r in range(rows)]

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(tb)
    sim.run()
    assert written, "the script made no beat"
    for a in sorted(written):
        assert got[a] == want[a].tolist(), f"accumulator {a}: {got[a]} != {want[a].tolist()}"


@pytest.mark.parametrize("rows_a_step", [1, 2, 3], ids=["DEPTHWISE", "PAIRED", "TRIPLE"])
@pytest.mark.parametrize("geometry", [(4, 4, 8), (8, 8, 8), (6, 4, 8), (16, 16, 8)])
def test_mac_array_window_mode_amaranth_sim(geometry, rows_a_step):
    """The window modes (MacMode.DEPTHWISE, and with `pair` / `triple` DEPTHWISE_PAIRED and
    DEPTHWISE_TRIPLE): the window is one group of lanes, or two halves, or three groups of
    cols // 3 lanes (the lanes past them hold zero), each shifting in its own word (`x`, `x2_data`,
    `x3_data`) one a clock (DEPTHWISE: some clocks two, `win_double`), some clocks idle, each group's pass length changing between runs (lanes
    past it read zero; a length of 0 masks the group, as for a step past the last kernel row);
    beats on the shifted windows with row r taking channel r mod cols; the accumulators equal the
    windows' definition computed here (rows > cols included: rows past cols repeat the
    channels)."""
    from amaranth.sim import Simulator

    from firmware_model.arch.isa import depthwise_group_lanes
    from hw.mac_array import MacArray

    rows, cols, depth = geometry
    k = rows_a_step
    n = depthwise_group_lanes(cols, k)
    rng = seeds.rng(sum(geometry) + 100 * (k - 1), "mac array window")
    dut = MacArray(rows, cols, depth, window=True)
    wzp, zp = int(rng.integers(-128, 128)), int(rng.integers(-128, 128))
    w = rng.integers(-128, 128, (rows, cols))
    want = np.zeros((depth, rows), dtype=np.int64)
    written = set()
    windows = np.zeros((k, n, cols), dtype=np.int64)       # per group: factors, lane x channel
    script = []                                            # (words or None, lengths, beat acc or None, first)
    for run in range(12):
        # the first group's length is 1 .. n; the others' 0 .. n (0: no kernel row there)
        lengths = [int(rng.integers(1, n + 1))] + [int(rng.integers(0, n + 1)) for _ in range(k - 1)]
        for _ in range(int(rng.integers(1, 2 * cols))):
            shift = bool(rng.integers(0, 5))
            words = [rng.integers(-128, 128, cols) for _ in range(3)] if shift else None
            # one row a step: a third of the shifts take two words (the second, newer, at lane 0)
            double = bool(shift and k == 1 and rng.integers(0, 3) == 0)
            acc = int(rng.integers(0, depth)) if shift and rng.integers(0, 2) else None
            first = acc is not None and (acc not in written or rng.integers(0, 3) == 0)
            script.append(({"win_double": double, "win_len": lengths[0], "win_len_hi": lengths[1] if k > 1 else 0,
                            "win_len_3": lengths[2] if k > 2 else 0}, words, acc, first))
            if double:
                windows[0] = np.concatenate([(words[1] - zp)[None, :], (words[0] - zp)[None, :], windows[0][:-2]])
                windows[0][lengths[0]:] = 0
            elif shift:
                for g in range(k):
                    windows[g] = np.concatenate([(words[g] - zp)[None, :], windows[g][:-1]])
                    windows[g][lengths[g]:] = 0
            if acc is not None:
                window = np.zeros((cols, cols), dtype=np.int64)
                window[:k * n] = windows.reshape(k * n, cols)
                factors = window[:, np.arange(rows) % cols].T       # (rows, lanes)
                sums = (factors * (w - wzp)).sum(axis=1)
                want[acc] = sums if first else want[acc] + sums
                written.add(acc)
    _run_window_script(dut, rows, w, wzp, zp, {"pair": k == 2, "triple": k == 3}, script, want, written)


@pytest.mark.parametrize("geometry", [(4, 4, 8), (8, 8, 8), (6, 8, 8), (16, 16, 8)])
def test_mac_array_packed_windows_amaranth_sim(geometry):
    """The packed window mode (MacMode.DEPTHWISE_PACKED): up to three windows side by side, of
    lengths that change between runs (the second from lane `grp1`, the third from `grp2`, the lanes
    from `win_len` on zero), each shifting in its own word (`x`, `x2_data`, `x3_data`), some clocks
    idle; beats on the shifted windows with row r taking channel r mod cols; the accumulators equal
    the windows computed here."""
    from amaranth.sim import Simulator

    from hw.mac_array import MacArray

    rows, cols, depth = geometry
    rng = seeds.rng(sum(geometry), "mac array packed windows")
    dut = MacArray(rows, cols, depth, window=True)
    wzp, zp = int(rng.integers(-128, 128)), int(rng.integers(-128, 128))
    w = rng.integers(-128, 128, (rows, cols))
    want = np.zeros((depth, rows), dtype=np.int64)
    written = set()
    window = np.zeros((cols, cols), dtype=np.int64)          # lane x channel factors
    script = []
    for run in range(16):
        # one to three windows filling 1 .. cols lanes
        cuts = sorted(int(v) for v in rng.choice(np.arange(1, cols), min(cols - 1, int(rng.integers(0, 3))),
                                                  replace=False))
        used = int(rng.integers(cuts[-1] + 1 if cuts else 1, cols + 1))
        grp = cuts + [cols] * (2 - len(cuts))
        for _ in range(int(rng.integers(1, 2 * cols))):
            shift = bool(rng.integers(0, 5))
            words = [rng.integers(-128, 128, cols) for _ in range(3)]
            acc = int(rng.integers(0, depth)) if shift and rng.integers(0, 2) else None
            first = acc is not None and (acc not in written or rng.integers(0, 3) == 0)
            script.append(({"grp1": grp[0], "grp2": grp[1], "win_len": used}, words if shift else None, acc, first))
            # on a shift, lane l takes its window's word where a window starts (lane 0, `grp1`,
            # `grp2`), else the lane below's value; the lanes from `used` on read zero (and keep
            # zero once shifted)
            view = np.zeros_like(window)
            for lane in range(used):
                if shift:
                    g = int(lane >= grp[0]) + int(lane >= grp[1])
                    view[lane] = words[g] - zp if lane in (0, grp[0], grp[1]) else window[lane - 1]
                else:
                    view[lane] = window[lane]
            if shift:
                window = view.copy()
            if acc is not None:
                factors = view[:, np.arange(rows) % cols].T
                sums = (factors * (w - wzp)).sum(axis=1)
                want[acc] = sums if first else want[acc] + sums
                written.add(acc)
    _run_window_script(dut, rows, w, wzp, zp, {"packed": 1}, script, want, written)


@pytest.mark.parametrize("geometry", [(4, 4, 8), (8, 8, 16), (6, 8, 8), (16, 16, 8), (3, 4, 9)])
def test_mac_array_lane_pairs_amaranth_sim(geometry):
    """Lane pairs (MacMode.CONV2D_LANE_PAIRS): a `lane_pair` beat at an even accumulator a adds, in
    every row, the low half of the lanes' products (the `x` word's low half) into a and the upper
    half's (the low half of `x2_data`, which those lanes take) into a + 1. Row pairs
    (CONV2D_ROW_PAIRS): a `row_pair` beat at an even a adds row r's sum over the `x` word into
    a's lane r and row rows/2 + r's over `x2_data` into a + 1's lane r (r < rows/2); the upper lanes
    of a take their rows' sums over `x2_data`, those of a + 1 stay (lanes past a row-paired block's
    channels: the unit's own behaviour, no command reads them). The other beats, int8 and int16,
    add the whole row into their own accumulator, at odd addresses too; beats back to back on one
    accumulator word; some clocks idle. Read back through `rd_addr` and the output port. Odd
    rows and an odd accumulator depth (its last word holds one pixel) included."""
    from amaranth.sim import Simulator

    from hw.mac_array import MacArray

    rows, cols, depth = geometry
    h = cols // 2
    rng = seeds.rng(sum(geometry), "mac array lane pairs")
    dut = MacArray(rows, cols, depth, output_port=True, window=True, lane_pairs=True)
    wzp = int(rng.integers(-128, 128))
    w = rng.integers(-128, 128, (rows, cols))
    want = np.zeros((depth, rows), dtype=np.int64)
    written = set()
    script = []          # (x word, x2 word, zp, int16, acc or None, first, lane pair, row pair)
    for _ in range(40 * cols):
        kind = int(rng.integers(0, 8))
        x1, x2 = rng.integers(-128, 128, cols), rng.integers(-128, 128, cols)
        zp = int(rng.integers(-128, 128))
        if kind == 0:                                   # an idle clock
            script.append((x1, x2, zp, 0, None, 0, 0, 0))
            continue
        rowp = kind >= 6
        pair = 3 <= kind < 6 or rowp
        int16 = kind == 1
        acc = int(rng.integers(0, depth // 2)) * 2 if pair else int(rng.integers(0, depth))
        if script and script[-1][4] is not None and rng.integers(0, 3) == 0:
            acc = script[-1][4] & ~1 if pair else script[-1][4] ^ int(rng.integers(0, 2))   # the same word
            acc = min(acc, depth - 2 if pair else depth - 1)       # (an odd depth's last word holds one pixel)
        first = int(rng.integers(0, 4) == 0 or (acc not in written) or (pair and acc + 1 not in written))
        if int16:
            # the block was loaded as int8 rows: lane 2i's low byte meets weight 2i, the high byte
            # (signed, shifted by 8) weight 2i + 1
            zp = 0
            b = x1.astype(np.uint8).astype(np.int64)
            low, high = b[0::2], np.where(b[1::2] >= 128, b[1::2] - 256, b[1::2])
            sums = ((low[None, :] * (w[:, 0::2] - wzp)).sum(axis=1)
                    + 256 * (high[None, :] * (w[:, 1::2] - wzp)).sum(axis=1))
        else:
            sums = ((x1 - zp)[None, :] * (w - wzp)).sum(axis=1)
        if rowp:
            hr = rows // 2
            even = sums.copy()
            even[hr:] = ((x2 - zp)[None, :] * (w[hr:] - wzp)).sum(axis=1)
            odd = np.zeros(rows, dtype=np.int64)
            odd[:hr] = ((x2 - zp)[None, :] * (w[hr:2 * hr] - wzp)).sum(axis=1)
            want[acc] = even if first else want[acc] + even
            base = np.zeros(rows, dtype=np.int64) if first else want[acc + 1].copy()
            base[:hr] += odd[:hr]
            if not first:
                want[acc + 1] = base
            else:
                want[acc + 1][:hr] = odd[:hr]
            written.update((acc, acc + 1))
        elif pair:
            lo = ((x1[:h] - zp)[None, :] * (w[:, :h] - wzp)).sum(axis=1)
            hi = ((x2[:h] - zp)[None, :] * (w[:, h:] - wzp)).sum(axis=1)
            for a, v in ((acc, lo), (acc + 1, hi)):
                want[a] = v if first else want[a] + v
                written.add(a)
        else:
            want[acc] = sums if first else want[acc] + sums
            written.add(acc)
        script.append((x1, x2, zp, int(int16), acc, first, int(pair and not rowp), int(rowp)))
    got, got_out = {}, {}

    async def tb(ctx):
        await _load_weight_rows(ctx, dut, w, wzp)
        for x1, x2, zp, int16, acc, first, pair, rowp in script:
            ctx.set(dut.x.valid, acc is not None)
            ctx.set(dut.x.payload, {"data": _word(x1), "zp": zp, "int16": int16, "acc": acc or 0, "first": first})
            ctx.set(dut.x2_data, _word(x2))
            ctx.set(dut.lane_pair, pair)
            ctx.set(dut.row_pair, rowp)
            await ctx.tick()
        ctx.set(dut.x.valid, 0)
        await ctx.tick()
        await ctx.tick()
        for a in sorted(written):
            ctx.set(dut.rd_addr, a)
            ctx.set(dut.out_addr, a)
            await ctx.tick()
            v, o = ctx.get(dut.rd_data), ctx.get(dut.out_data)
            got[a] = [int(v[r]) for r in range(rows)]
            got_out[a] = [int(o[r]) for r in range(rows)]

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(tb)
    sim.run()
    assert any(s[6] for s in script) and any(s[7] for s in script)
    assert any(s[4] is not None and not s[6] and not s[7] for s in script)
    for a in sorted(written):
        assert got[a] == want[a].tolist(), f"accumulator {a}: {got[a]} != {want[a].tolist()}"
        assert got_out[a] == want[a].tolist(), f"accumulator {a} (output port)"


# ---------------------------------------------------------------------------------------------
# Mutations: faults injected into the generated Verilog must make the bench fail

# ---------------------------------------------------------------------------------------------
# The golden int16 path (firmware_model.golden.mac_unit.execute_mac) against the TOSA CONV2D kernel

CONFIG = load_config(mv.CONFIG)


@pytest.mark.parametrize("seed", range(4))
def test_golden_int16_mac_tile_equals_conv2d_kernel(seed):
    """An int16 x int8 MAC tile laid out as docs/units.md says (cols/2 int16 lanes per word,
    weights in the low half of each weight row, garbage in the high half), raw int48 output:
    equal to the interpreter's CONV2D (int16 x int8 -> int48, the bias add saturating once)."""
    cfg = CONFIG
    R, L = cfg.mac_rows, cfg.mac_cols
    lanes = lanes_per_word(L, DType.INT16)
    rng = seeds.rng(seed)
    kh, kw = (int(v) for v in rng.integers(1, 4, 2))
    sy, sx, dy, dx = (int(v) for v in rng.integers(1, 3, 4))
    oh, ow = (int(v) for v in rng.integers(1, 5, 2))
    ic, oc = int(rng.integers(1, 3 * lanes + 1)), int(rng.integers(2, 2 * R + 1))
    ih, iw = (oh - 1) * sy + (kh - 1) * dy + 1, (ow - 1) * sx + (kw - 1) * dx + 1
    cb, n_ocb = -(-ic // lanes), -(-oc // R)
    wzp = int(rng.choice([0, int(rng.integers(-128, 128))]))
    x = rng.integers(-(1 << 15), 1 << 15, (1, ih, iw, ic)).astype(np.int16)
    if seed == 0:
        x[...] = -(1 << 15)
    w = rng.integers(-128, 128, (oc, kh, kw, ic)).astype(np.int8)
    bias = rng.integers(-(1 << 40), 1 << 40, oc)
    bias[0] = DType.INT48.max - int(rng.integers(0, 1 << 10))     # the int48 saturation, both ends
    bias[1] = DType.INT48.min + int(rng.integers(0, 1 << 10))

    mem = Memories(cfg)
    xin = np.zeros((ih, iw, cb * lanes), np.int16)
    xin[..., :ic] = x[0]
    mem.sram[Sram.INPUT][:xin.nbytes] = xin.view(np.uint8).reshape(-1)
    blocks = rng.integers(0, 256, (n_ocb, kh, kw, cb, R, L)).astype(np.uint8)   # high halves: garbage
    wpad = np.full((n_ocb * R, kh, kw, cb * lanes), wzp, np.int8)
    wpad[:oc, ..., :ic] = w
    wpad = wpad.reshape(n_ocb, R, kh, kw, cb, lanes).transpose(0, 2, 3, 4, 1, 5)
    blocks[..., :lanes] = wpad.view(np.uint8)
    mem.sram[Sram.WEIGHT][:blocks.size] = blocks.reshape(-1)
    params = np.frombuffer(encode_param_records(bias, np.ones(oc), np.zeros(oc)), np.uint8)
    mem.sram[Sram.PARAM][:params.size] = params
    regs = {Reg.IFM_ADDR: 0, Reg.IFM_ROW_STRIDE: iw * cb * L, Reg.IFM_PIX_STRIDE: cb * L,
            Reg.IFM_CBLOCKS: cb, Reg.IFM_ZP: 0, Reg.IFM_DTYPE: DType.INT16, Reg.WGT_ADDR: 0,
            Reg.WGT_ZP: wzp & 0xFFFFFFFF, Reg.KERNEL_H: kh, Reg.KERNEL_W: kw, Reg.STRIDE_H: sy,
            Reg.STRIDE_W: sx, Reg.DILATION_H: dy, Reg.DILATION_W: dx, Reg.OFM_ADDR: 0,
            Reg.OFM_ROW_STRIDE: ow * oc * 8, Reg.OFM_PIX_STRIDE: oc * 8, Reg.OFM_H: oh, Reg.OFM_W: ow,
            Reg.OFM_C: oc, Reg.OFM_DTYPE: DType.INT48, Reg.OUT_MODE: 0, Reg.PARAM_ADDR: 0}
    execute_mac(cfg, mem, regs, 0)
    ours = mem.sram[Sram.OUTPUT][:oh * ow * oc * 8].view("<i8").reshape(1, oh, ow, oc)

    call = OpCall("CONV2D", dict(pad=[0, 0, 0, 0], stride=[sy, sx], dilation=[dy, dx], local_bound=False,
                                 acc_type=int(DType.INT48)),
                  [x, w, bias.astype(np.int64), np.array([0], np.int16), np.array([wzp], np.int8)],
                  [TensorSpec(x.shape, DType.INT16), TensorSpec(w.shape, DType.INT8),
                   TensorSpec(bias.shape, DType.INT48), TensorSpec((1,), DType.INT16),
                   TensorSpec((1,), DType.INT8)],
                  [TensorSpec((1, oh, ow, oc), DType.INT48)])
    (ref,) = run_op(call)
    assert np.array_equal(ours.astype(np.int64), np.asarray(ref, dtype=np.int64))


def test_golden_int16_refuses_input_zero_point_and_rescaled_int48():
    mem = Memories(CONFIG)
    regs = {Reg.IFM_DTYPE: DType.INT16, Reg.IFM_ZP: 3, Reg.OFM_DTYPE: DType.INT48, Reg.OUT_MODE: 0,
            Reg.OFM_H: 1, Reg.OFM_W: 1, Reg.OFM_C: 1, Reg.KERNEL_H: 1, Reg.KERNEL_W: 1, Reg.IFM_CBLOCKS: 1}
    with pytest.raises(GoldenModelError, match="IFM_ZP"):
        execute_mac(CONFIG, mem, regs, 0)
    regs.update({Reg.IFM_ZP: 0, Reg.OUT_MODE: int(OutMode.RESCALE)})
    with pytest.raises(GoldenModelError, match="rescaled int48"):
        execute_mac(CONFIG, mem, regs, 0)
