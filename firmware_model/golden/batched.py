"""The decoded program's MAC and ELTWISE tiles run a segment at a time, many tiles per numpy call
(issue 16).

decoded.py runs a program's data steps one by one; a network tiled for a small NPU has tens of
thousands of MAC tiles (blazeface on tiny: ~28,000, each with its DMA transfers), and each tile
is a few dozen numpy calls on a few hundred bytes. This module turns runs of those steps into
segments that compute the same bytes with a few numpy calls per distinct tile shape:

- **where every byte comes from.** Between the start of a segment and its end, a DMA transfer or
  a FILL only moves bytes, so each SRAM byte the segment reads is a byte the segment found (in
  an SRAM or in external memory), a FILL value, or a byte a MAC tile of the segment computed.
  The compile walks the steps once with a *code* per SRAM byte saying which (`_Segment`): a
  DMA_LOAD copies codes of external memory, a DMA_STORE records the codes it writes to external
  memory, a FILL writes a constant's code, a MAC tile reads the codes under its input, weight,
  parameter and table bytes (an ELTWISE its A, B, record and table bytes) and writes fresh codes
  over its output bytes;
- **a segment ends** where that would stop being true: before a DMA_LOAD that reads external
  bytes a DMA_STORE of the segment wrote, before a MAC tile that reads bytes a tile of the
  segment computed, and at every other command (POOL, VAR, HOST, END, a fault, a MAC with a
  raw int48 result), which runs as decoded.py runs it;
- **an invocation of a segment** gathers the bytes it found into one array (the values of its
  codes), computes its MAC tiles grouped by their registers other than the addresses
  (`_Group`: the distinct input boxes and weight blocks gathered once, one matrix product per
  set of tiles sharing their weight blocks, one accumulator finish and one output stage for the
  group, with execute_mac's primitives; ELTWISE commands likewise, `_EltGroup`, through
  eltwise_unit.prepare_eltwise_values on their stacked operands), and then writes what the
  steps leave: each SRAM byte whose code changed and each external byte a DMA_STORE wrote (the last store of a byte wins).

Equal to running the steps one by one (tests/firmware_model/golden/test_decoded.py runs every
network, random program, fault and REQUIRE refusal both ways with segments made at once):

- the memories: the segment writes nothing until its computations are done, then exactly the
  bytes the steps leave;
- the REQUIRE monitor: a group shows the probe the same values as its tiles would, stacked; if a
  check fails inside a segment (or anything raises), nothing has been written and the segment's
  steps, and every step after it, run one by one as decoded.py runs them, so the failure and
  everything after it are run_steps';
- what a segment cannot express is left to the steps: a decode with a fault, a transfer or tile
  whose bytes overlap themselves; and a segment not worth its gathers stays steps (fewer than
  MIN_TILES tiles, fewer than MIN_TILES_PER_GROUP tiles per group, or more than
  MAX_BYTES_PER_TILE bytes gathered and written per tile: a large NPU's big tiles), as does an
  ELTWISE command of fewer than ELT_MIN_COUNT elements (its Python-integer step is cheaper).

The segments are made at the decode's BATCH_AFTER-th run (its steps' runs before that are one
by one) and kept with the decode, like its steps.
"""

from __future__ import annotations

import numpy as np

from firmware_model.arch.config import ACC_BITS
from firmware_model.arch.isa import (DEPTHWISE_MODES, ELEMENT_BYTES, LANE_PAIR_MODES, OUTPUT_STAGE_REGS,
                                     PIXEL_PAIR_MODES, MacMode, Opcode, Reg, Sram,
                                     decode_param_records)
from firmware_model.arch.registers import Registers
from firmware_model.golden.mac_unit import (accumulate, accumulator_bound, blocks_in_channel_order, exact_dot,
                                           lanes_per_word, pixel_pair_weights, record_operands)
from firmware_model.golden.eltwise_unit import SMALL_COUNT
from firmware_model.golden.memories import memory_bytes
from firmware_model.golden.output_stage import Scale32Operands, prepare_output_stage
from firmware_model.tosa_ops.dtypes import DType, wrap

BATCH_AFTER = 1         # runs of a decode one by one before its segments are made (tests: 0)
MIN_TILES = 4           # MAC tiles a segment needs to be run as one
# Bytes a segment gathers and writes per tile (through index arrays), at most: a tile of the steps
# one by one costs ~30 us of numpy calls whatever its size, an index ~1-2 ns, and large tiles
# (a large NPU's) are cheaper as the steps' strided copies (blazeface on large: 24 segments of
# 20,000-900,000 bytes a tile made an invocation 1.6x slower; on tiny 270-1,750 bytes a tile).
MAX_BYTES_PER_TILE = 8192
# Tiles per group, on average, at least: a group costs about what a tile one by one costs, so a
# segment of one tile per group only saves its DMA steps (mlp on default: no faster).
MIN_TILES_PER_GROUP = 2

# Elements an ELTWISE command needs to join a segment: one of at most SMALL_COUNT elements runs in
# Python integers as a step (eltwise_unit.prepare_eltwise_small), cheaper than its share of a
# group's numpy calls (mlp's four ten-element table lookups: 60 us as a segment, ~32 us as steps).
ELT_MIN_COUNT = SMALL_COUNT + 1


def settings() -> tuple:
    """What decides which segments a decode gets (its made segments are kept with these)."""
    return MIN_TILES, MIN_TILES_PER_GROUP, MAX_BYTES_PER_TILE, ELT_MIN_COUNT


# A byte's code: where the value a segment holds in that byte comes from.
SRAM0 = 256             # [0, 256): the constant byte itself (FILL); SRAM0 + _BASE[s] + a: SRAM s byte a as found
EXT0 = 1 << 40          # EXT0 + a: external memory byte a as found
SCR0 = 1 << 50          # SCR0 + k: byte k of the segment's computed tile outputs

# Registers a MAC group's tiles may differ in (their data's addresses).
_ADDRESS_REGS = frozenset(int(r) for r in (Reg.IFM_ADDR, Reg.WGT_ADDR, Reg.PARAM_ADDR, Reg.OFM_ADDR))
_ELT_ADDRESS_REGS = frozenset(int(r) for r in (Reg.ELT_A_ADDR, Reg.ELT_B_ADDR, Reg.ELT_OUT_ADDR, Reg.PARAM_ADDR))


class NotBatchable(Exception):
    """The decode has something the segments do not express: it runs step by step."""


def _box_positions(base: int, len0: int, len1: int, len2: int, stride1: int, stride2: int,
                   written: bool = False) -> np.ndarray:
    """The byte addresses of a DMA pattern in the order it moves them (i2, i1, i0); read-only,
    kept by the pattern (a program repeats its patterns). `written`: the pattern a transfer writes,
    whose bytes must be distinct (a byte written twice would need the transfer's write order: not
    expressed); a pattern read may repeat bytes (overlapping windows)."""
    key = (base, len0, len1, len2, stride1, stride2)
    made = _BOXES.get(key)
    if made is None:
        pos = (base + np.arange(len2, dtype=np.int64)[:, None, None] * stride2
               + np.arange(len1, dtype=np.int64)[None, :, None] * stride1
               + np.arange(len0, dtype=np.int64)[None, None, :]).reshape(-1)
        runs_apart = (len1 == 1 or stride1 >= len0) and (len2 == 1 or stride2 >= (len1 - 1) * stride1 + len0)
        pos.flags.writeable = False
        if len(_BOXES) >= 1 << 16:
            _BOXES.clear()
        made = _BOXES[key] = (pos, runs_apart or len(np.unique(pos)) == len(pos))
    if written and not made[1]:
        raise NotBatchable("a transfer writes a byte twice")
    return made[0]


_BOXES: dict[tuple, np.ndarray] = {}


def _computed(codes: np.ndarray) -> bool:
    """Whether any of these bytes is one a tile of the segment computed."""
    return bool(codes.size) and codes.max() >= SCR0


class _Tile:
    """A compute command of a segment: the codes of the bytes it reads (x, w, p: the MAC's input
    vectors, weight block and records, or ELTWISE's A, B and records), its table's, and where its
    `n_out` output bytes start among the segment's computed bytes."""
    __slots__ = ("pc", "key", "x", "w", "p", "lut", "out", "n_out")

    def __init__(self, pc, key, x, w, p, lut, out, n_out):
        self.pc, self.key, self.x, self.w, self.p, self.lut, self.out, self.n_out = pc, key, x, w, p, lut, out, n_out


class _Segment:
    """A run of steps being compiled: the code of each SRAM byte (copied on a first write), the
    stores, the tiles. `sizes`/`base`: each SRAM's size and its codes' offset."""

    def __init__(self, compiler, first: int):
        self.c = compiler
        self.first = first              # index of its first step in the decode's steps
        self.prov: dict[Sram, np.ndarray] = {}
        self.stores: list[tuple[np.ndarray, np.ndarray]] = []
        self.stored: list[np.ndarray] = []
        self.tiles: list[_Tile] = []
        self.scratch = 0
        self.steps = 0

    def codes(self, s: Sram) -> np.ndarray:
        p = self.prov.get(s)
        return self.c.identity[s] if p is None else p

    def writable(self, s: Sram) -> np.ndarray:
        p = self.prov.get(s)
        if p is None:
            p = self.prov[s] = self.c.identity[s].copy()
        return p

    def load(self, sram: Sram, plan) -> bool:
        """A DMA_LOAD; False when it reads external bytes the segment stored (the segment ends)."""
        if not plan.bytes:
            return True
        epos = _box_positions(*plan.ext)
        if self.stored and self.c.ext_mask[epos].any():
            return False
        self.writable(sram)[_box_positions(*plan.on_chip, written=True)] = EXT0 + epos
        return True

    def store(self, sram: Sram, plan) -> None:
        if plan.bytes:
            epos = _box_positions(*plan.ext, written=True)
            self.stores.append((epos, self.codes(sram)[_box_positions(*plan.on_chip)]))
            self.c.ext_mask[epos] = True
            self.stored.append(epos)

    def fill(self, sram: Sram, value: int, plan) -> None:
        if plan.bytes:
            self.writable(sram)[_box_positions(*plan.on_chip, written=True)] = value & 0xFF

    def mac(self, pc: int, regs: dict, sub: int, plan, probe_class) -> bool:
        """A MAC tile with an output stage; False when it reads bytes a tile of the segment
        computed (the segment ends)."""
        shape = self.c.mac_shape(regs, sub, plan)
        key0, xpos, out = shape
        x = self.codes(Sram.INPUT)[xpos]
        w = self.codes(Sram.WEIGHT)[plan.region.weight[0]:plan.region.weight[1]]
        p = self.codes(Sram.PARAM)[plan.region.param[0]:plan.region.param[1]]
        lut = None
        if plan.stage.lut_range is not None:
            lut = self.codes(Sram.LUT)[plan.stage.lut_range[0]:plan.stage.lut_range[1]].copy()
        # (Not reached with this ISA: a segment's MACs do not read the output SRAM (IFM_SRAM OUTPUT
        # runs as a step), so computed bytes reach their inputs only through a DMA_STORE and a
        # DMA_LOAD, where `load` ends the segment. Kept so that the segment's rule stays true
        # whatever the units read.)
        if _computed(x) or _computed(w) or _computed(p) or (lut is not None and _computed(lut)):
            return False
        self._output(pc, (key0, None if lut is None else lut.tobytes(), probe_class), x, w.copy(), p.copy(), lut, out)
        return True

    def _output(self, pc, key, x, w, p, lut, out: np.ndarray) -> None:
        self.writable(Sram.OUTPUT)[out] = SCR0 + self.scratch + np.arange(len(out), dtype=np.int64)
        self.tiles.append(_Tile(pc, key, x, w, p, lut, self.scratch, len(out)))
        self.scratch += len(out)

    def eltwise(self, pc: int, regs: dict, sub: int, plan, probe_class) -> bool:
        """An ELTWISE command: its A, B, records and table as found (their ranges, eltwise_plan)."""
        rg = plan.regions
        codes = {}
        for name, s in (("input", Sram.INPUT), ("a_output", Sram.OUTPUT), ("weight", Sram.WEIGHT),
                        ("b_output", Sram.OUTPUT), ("param", Sram.PARAM), ("lut", Sram.LUT)):
            if name in rg:
                codes[name] = self.codes(s)[rg[name][0]:rg[name][1]].copy()
                if _computed(codes[name]):       # (not reached: as for the MAC, see mac)
                    return False
        lut = codes.get("lut")
        key = (Opcode.ELTWISE, sub, tuple(sorted((k, v) for k, v in regs.items() if k not in _ELT_ADDRESS_REGS)),
               None if lut is None else lut.tobytes(), probe_class)
        empty = np.empty(0, dtype=np.int64)
        self._output(pc, key, codes[plan.a_key], codes.get(plan.b_key, empty), codes.get("param", empty), lut,
                     np.arange(*rg["output"], dtype=np.int64))
        return True

    def sram_written(self) -> int:
        """SRAM bytes whose code changed (what finish writes back: Segment.sram_writes)."""
        return sum(int(np.count_nonzero(p != self.c.identity[s])) for s, p in self.prov.items())

    def close(self) -> None:
        for epos in self.stored:
            self.c.ext_mask[epos] = False


def _distinct_rows(arrays: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """(index of each array among the distinct ones, the distinct arrays stacked), first seen first."""
    index: dict[bytes, int] = {}
    ids, rows = [], []
    for a in arrays:
        k = a.tobytes()
        i = index.get(k)
        if i is None:
            i = index[k] = len(rows)
            rows.append(a)
        ids.append(i)
    return np.array(ids), np.stack(rows)


class _Group:
    """The MAC tiles of a segment with the same registers but addresses (and the same table and
    REQUIRE probe): execute_mac on all of them at once."""

    def __init__(self, cfg, tiles: list[_Tile], first_regs: dict, sub: int, plan, vindex, out0: int):
        R, L = cfg.mac_rows, cfg.mac_cols
        r = Registers(first_regs)
        self.pc = tiles[0].pc
        self.ifm_dtype = ifm_dtype = DType(r.ifm_dtype)
        oh, ow, oc = plan.out_shape
        kh, kw, cb = r.kernel_h, r.kernel_w, r.ifm_cblocks
        self.n_ocb = n_ocb = -(-oc // R)
        self.lanes = lanes = lanes_per_word(L, ifm_dtype)
        self.in_dtype = np.dtype(np.int8 if L // lanes == 1 else "<i2")
        self.P, self.K, self.oc, self.R, self.L = oh * ow, kh * kw * cb * lanes, oc, R, L
        self.kblocks = kh * kw * cb
        # pixel pairs (CONV2D_LANE_PAIRS, _ROW_PAIRS, _PAIRS): the odd pixels meet other weights
        self.sub, self.positions, self.cb = sub, kh * kw, cb
        self.ifm_zp, self.wgt_zp = r.ifm_zp, r.wgt_zp
        self.bound = bound = accumulator_bound(self.K, ifm_dtype, self.ifm_zp, self.wgt_zp)
        self.acc_wraps = bound >= 1 << (ACC_BITS - 1)
        self.acc32_wraps = bound >= 1 << 31
        self.out_dtype = f"<i{ELEMENT_BYTES[DType(r.ofm_dtype)]}"
        self.stage = prepare_output_stage({int(k): first_regs.get(int(k), 0) for k in OUTPUT_STAGE_REGS},
                                          plan.stage, "MAC")
        self.stage_plan = plan.stage
        self.lut_range = plan.stage.lut_range
        self.lut = None if tiles[0].lut is None else vindex(tiles[0].lut)

        x_id, xs = _distinct_rows([t.x for t in tiles])
        w_id, ws = _distinct_rows([t.w for t in tiles])
        self.p_id, ps = _distinct_rows([t.p for t in tiles])
        self.x, self.w, self.p = vindex(xs), vindex(ws), vindex(ps)     # (distinct, bytes) value indices
        self.w_get, self.p_get = _getter(self.w), _getter(self.p)
        self._w_memo = self._p_memo = None
        # Tiles sharing an input box and tiles sharing a weight block: the input boxes with the same
        # set of weight blocks make one matrix product (a layer's spatial tiles times its channel blocks).
        by_x: dict[int, list[int]] = {}
        for t, (xi, wi) in enumerate(zip(x_id, w_id)):
            by_x.setdefault(int(xi), []).append(t)
        parts: dict[tuple, list[int]] = {}
        for xi, ts in by_x.items():
            parts.setdefault(tuple(sorted(set(int(w_id[t]) for t in ts))), []).append(xi)
        self.parts = []
        for wset, xis in parts.items():
            xpos = {xi: k for k, xi in enumerate(xis)}
            wpos = {wi: k for k, wi in enumerate(wset)}
            ts = [t for xi in xis for t in by_x[xi]]
            self.parts.append((np.array(xis), np.array(wset), np.array(ts),
                               np.array([xpos[int(x_id[t])] for t in ts]), np.array([wpos[int(w_id[t])] for t in ts])))
        self.G = len(tiles)
        self.out0, self.out1 = out0, out0 + self.G * self.P * oc * ELEMENT_BYTES[DType(r.ofm_dtype)]
        xis, wset, ts, xpos, wpos = self.parts[0]
        self.single = (len(self.parts) == 1 and len(wset) == 1 and len(xis) == self.G
                       and np.array_equal(ts, np.arange(self.G)) and np.array_equal(xpos, np.arange(self.G)))
        # one input box for every tile, tile t with weight block t (a fully connected layer's
        # channel blocks): one product whose column blocks are the tiles, in order
        self.shared_x = (len(self.parts) == 1 and len(xis) == 1 and len(wset) == self.G
                         and np.array_equal(ts, np.arange(self.G)) and np.array_equal(wpos, np.arange(self.G)))

    def sizes(self) -> int:
        return self.x.size + self.w.size + self.p.size

    def _products(self, x: np.ndarray, weights: list[np.ndarray]) -> np.ndarray:
        """The tiles' sums (G, P', oc) from the input boxes' vectors x (boxes, P', K) and each
        part's weight matrix."""
        nx, P, K = x.shape
        oc = self.oc
        if self.single:                     # one input box per tile, one weight block: no reordering
            return exact_dot(x.reshape(-1, K), weights[0]).reshape(nx, P, -1)[:, :, :oc]
        if self.shared_x:                   # the box's product with every tile's block: (P, G, N) -> (G, P, oc)
            return exact_dot(x.reshape(-1, K), weights[0]).reshape(P, self.G, -1)[:, :, :oc].transpose(1, 0, 2)
        N = self.n_ocb * self.R
        acc = np.empty((self.G, P, oc), dtype=np.int64)
        for (xis, wset, ts, xpos, wpos), b in zip(self.parts, weights):
            a = x[xis].reshape(-1, K)
            sums = exact_dot(a, b).reshape(len(xis), P, len(wset), N)
            acc[ts] = sums[xpos, :, wpos, :oc]
        return acc

    def run(self, V: np.ndarray, probe) -> None:
        P, K, oc = self.P, self.K, self.oc
        nx = len(self.x)
        # execute_mac's x and w (float64 holds every operand and partial sum exactly: exact_dot)
        x = V[self.x].view(self.in_dtype).astype(np.float64).reshape(nx, P, K)
        x -= self.ifm_zp
        weights = self._weights(_take(V, self.w_get))
        if self.sub in PIXEL_PAIR_MODES:    # the even pixels and the odd ones (mac_unit.pixel_pair_dot)
            acc = np.empty((self.G, P, oc), dtype=np.int64)
            acc[:, 0::2] = self._products(x[:, 0::2], weights[0])
            acc[:, 1::2] = self._products(x[:, 1::2], weights[1])
        else:
            acc = self._products(x, weights)
        if self.acc_wraps:
            acc = accumulate(0, acc)
        bias, multiplier, shift, ops, bias_fits = self._records(_take(V, self.p_get))
        if self.ifm_dtype == DType.INT16:
            value = np.clip(acc + bias, DType.INT48.min, DType.INT48.max)      # finish_accumulator
        else:                               # finish_accumulator, bias wrapped with its record
            if self.acc32_wraps:
                acc = wrap(acc, 32)
            value = acc + bias
            if not bias_fits:
                value = wrap(value, 32)
        mem = None
        if self.lut is not None:
            mem = _TableOnly(self.lut_range, V[self.lut])
        out = self.stage(mem, value, multiplier, shift, probe, ops, wrapped=self.ifm_dtype != DType.INT16)
        V[self.out0:self.out1] = np.ascontiguousarray(out.astype(self.out_dtype)).view(np.uint8).reshape(-1)

    def _weights(self, raw: np.ndarray) -> list[np.ndarray]:
        """Each part's weight matrix (K, weight blocks x N) as float64 less WGT_ZP, from the
        group's weight bytes (nw, bytes); the last one made is kept with its bytes (a layer's
        weights are the same bytes at every invocation)."""
        key = raw.tobytes()
        if self._w_memo is not None and self._w_memo[0] == key:
            return self._w_memo[1]
        R, L, lanes, K = self.R, self.L, self.lanes, self.K
        nw = len(self.w)
        w_rows = raw.reshape(nw, self.n_ocb, self.kblocks, R, L)
        if self.sub in LANE_PAIR_MODES:
            w_rows = blocks_in_channel_order(w_rows, self.positions, self.cb, axis=2)
        w = w_rows[..., :lanes].view(np.int8).astype(np.float64)
        w = w.transpose(0, 2, 4, 1, 3).reshape(nw, K, self.n_ocb * R)
        w -= self.wgt_zp
        made = [np.ascontiguousarray(w[wset].transpose(1, 0, 2).reshape(K, -1)) for _, wset, _, _, _ in self.parts]
        if self.sub in PIXEL_PAIR_MODES:
            pairs = [pixel_pair_weights(m, self.sub, self.positions, self.cb, L, R, self.n_ocb) for m in made]
            made = ([e for e, _ in pairs], [o for _, o in pairs])
        self._w_memo = (key, made)
        return made

    def _records(self, raw: np.ndarray) -> tuple:
        """The tiles' parameter records as the group computes with them, from its distinct
        parameter blocks' bytes (mac_unit.record_operands: the bias wrapped to int32 for int8
        inputs): the bias and apply_scale_32's operands spread over the group's (G, P, oc)
        values (numpy's broadcasting of a (G, 1, oc) operand runs an inner loop per oc
        elements: 2.3x slower on 2,048 values), the multiplier and shift (G, 1, oc) as the probe
        sees them, and whether acc + bias provably fits int32 (accumulator_bound plus the
        largest |bias|: then finish_accumulator's wrap32 changes nothing). The last one made is
        kept with its bytes."""
        key = raw.tobytes()
        if self._p_memo is not None and self._p_memo[0] == key:
            return self._p_memo[1]
        np_, oc, full = len(self.p), self.oc, (self.G, self.P, self.oc)
        blocks = [record_operands(row, self.ifm_dtype, self.stage_plan) for row in raw]
        per_tile = lambda arrays: np.stack(arrays).reshape(np_, 1, oc)[self.p_id]       # noqa: E731
        spread = lambda arrays: np.ascontiguousarray(np.broadcast_to(per_tile(arrays), full))  # noqa: E731
        bias = spread([b[0] for b in blocks])
        multiplier, shift = per_tile([b[1] for b in blocks]), per_tile([b[2] for b in blocks])
        ops = None
        if blocks[0][3] is not None:
            o = [b[3] for b in blocks]
            ops = Scale32Operands(spread([q.multiplier for q in o]), spread([q.shift for q in o]),
                                  spread([q.round for q in o]),
                                  None if o[0].double is None else spread([q.double for q in o]))
        bias_fits = (self.ifm_dtype != DType.INT16 and not self.acc32_wraps
                     and self.bound + int(np.abs(bias).max(initial=0)) < 1 << 31)
        made = (bias, multiplier, shift, ops, bias_fits)
        self._p_memo = (key, made)
        return made


def _getter(index: np.ndarray):
    """How to read V at `index` (value indices, any shape): the index itself, or where its values
    are consecutive (a block of bytes the segment found together), a slice of V and the shape."""
    flat = index.reshape(-1)
    if flat.size and flat[-1] - flat[0] == flat.size - 1 and (flat.size == 1 or bool(np.all(np.diff(flat) == 1))):
        return slice(int(flat[0]), int(flat[-1]) + 1), index.shape
    return index


def _take(V: np.ndarray, get) -> np.ndarray:
    """V at a _getter's index (a view where it is a slice)."""
    if type(get) is tuple:
        return V[get[0]].reshape(get[1])
    return V[get]


class _EltGroup:
    """The ELTWISE commands of a segment with the same registers but addresses (and the same table
    and REQUIRE probe): eltwise_unit.prepare_eltwise_values on all of them at once."""

    def __init__(self, cfg, tiles: list[_Tile], first_regs: dict, sub: int, plan, vindex, out0: int):
        from firmware_model.golden.eltwise_unit import prepare_eltwise_values

        self.pc = tiles[0].pc
        self.values = prepare_eltwise_values(cfg, first_regs, sub, plan)
        self.x = vindex(np.stack([t.x for t in tiles]))
        self.w = vindex(np.stack([t.w for t in tiles])) if plan.b_dtype is not None else None
        self.p = vindex(np.stack([t.p for t in tiles])) if "param" in plan.regions else None
        self.lut_range = plan.stage.lut_range
        self.lut = None if tiles[0].lut is None else vindex(tiles[0].lut)
        size = ELEMENT_BYTES[plan.ofm_dtype]
        self.out_dtype = f"<i{size}" if size < 8 else "<i8"
        self.G = len(tiles)
        self.out0, self.out1 = out0, out0 + self.G * plan.count * size

    def sizes(self) -> int:
        return self.x.size + (0 if self.w is None else self.w.size) + (0 if self.p is None else self.p.size)

    def run(self, V: np.ndarray, probe) -> None:
        records = None
        if self.p is not None:
            _, multiplier, shift = decode_param_records(V[self.p].reshape(-1))
            records = (multiplier.reshape(self.G, -1), shift.reshape(self.G, -1))
        mem = None if self.lut is None else _TableOnly(self.lut_range, V[self.lut])
        out = self.values(V[self.x], None if self.w is None else V[self.w], records, mem, probe)
        V[self.out0:self.out1] = np.ascontiguousarray(out.astype(self.out_dtype)).view(np.uint8).reshape(-1)


class _TableOnly:
    """The LUT SRAM as a group's tiles found it (the bytes of its table at their addresses)."""

    def __init__(self, rng: tuple[int, int], table: np.ndarray):
        lut = np.zeros(rng[1], dtype=np.uint8)
        lut[rng[0]:rng[1]] = table
        self.sram = {Sram.LUT: lut}


class Segment:
    """A compiled segment (module docstring): what it gathers, its groups, what it writes."""

    def __init__(self, first: int, gathers, groups, size: int, sram_writes, ext_write):
        self.first = first              # its first step's index in the decode's steps
        self.gathers = gathers          # (V slice start, stop, source: "const" | Sram | "ext", index array or values)
        self.groups = groups
        self.size = size
        self.sram_writes = sram_writes  # (Sram, byte addresses, value indices)
        self.ext_write = ext_write      # (byte addresses, value indices) or None
        self._moves = None              # the gathers and writes as _copies (made at the first run)

    def moved(self) -> int:
        """Bytes an invocation gathers and writes through index arrays."""
        return (sum(len(g[3]) for g in self.gathers) + sum(g.sizes() for g in self.groups)
                + sum(len(pos) for _, pos, _ in self.sram_writes) + (len(self.ext_write[0]) if self.ext_write else 0))

    def run(self, mem, monitor, probes) -> bool:
        """Compute and write the segment; False (nothing written, the monitor as it was) when a
        REQUIRE check failed inside or anything raised: its steps are then run one by one."""
        moves = self._moves
        if moves is None:
            moves = self._moves = self._plan_moves()
        gathers, writes = moves
        try:
            V = np.empty(self.size, dtype=np.uint8)
            for src, copy in gathers:
                if src == "const":
                    V[copy[0]:copy[1]] = copy[2]
                else:
                    _move(V, mem.ext if src == "ext" else mem.sram[src], copy)
            for g in self.groups:
                g.run(V, probes.get(g.pc) if probes is not None else None)
        except Exception:                   # noqa: BLE001 - the steps one by one say what happens
            if monitor is not None:
                monitor.failure = None
            return False
        if monitor is not None and monitor.failure is not None:
            monitor.failure = None
            return False
        for dst, copy in writes:
            _move(mem.ext if dst == "ext" else mem.sram[dst], V, copy)
        return True

    def _plan_moves(self) -> tuple[list, list]:
        """The gathers and writes as _copies (made at the segment's first run)."""
        gathers = []
        for a, b, src, idx in self.gathers:
            if src == "const":
                gathers.append((src, (a, b, idx)))
            else:
                gathers.append((src, _copies(np.arange(a, b, dtype=np.intp), np.asarray(idx, dtype=np.intp))))
        writes = [(s, _copies(pos, vi)) for s, pos, vi in self.sram_writes]
        if self.ext_write is not None:
            writes.append(("ext", _copies(*self.ext_write)))
        return gathers, writes


def _copies(dst: np.ndarray, src: np.ndarray):
    """How to do out[dst] = in[src] (positions, same length): as slice copies ("runs", [(dst
    start, src start, length)]) where the positions advance together in few runs (a slice copy
    costs about what 250 bytes through an index do), else through the index arrays ("index",
    dst, src)."""
    dst, src = np.asarray(dst, dtype=np.intp), np.asarray(src, dtype=np.intp)
    if len(dst) == 0:
        return ("runs", [])
    brk = np.flatnonzero((np.diff(dst) != 1) | (np.diff(src) != 1)) + 1
    if len(brk) + 1 <= 1 + len(dst) // 256:
        starts = [0, *brk.tolist()]
        ends = [*brk.tolist(), len(dst)]
        return ("runs", [(int(dst[a]), int(src[a]), b - a) for a, b in zip(starts, ends)])
    return ("index", dst, src)


def _move(out: np.ndarray, inp: np.ndarray, copy) -> None:
    """out[dst] = in[src] as _copies planned it."""
    if copy[0] == "runs":
        for d, s, n in copy[1]:
            out[d:d + n] = inp[s:s + n]
    else:
        out[copy[1]] = inp[copy[2]]


class _Compiler:
    def __init__(self, cfg):
        self.cfg = cfg
        self.base, self.identity, off = {}, {}, SRAM0
        for s in Sram:
            n = memory_bytes(cfg, s)
            self.base[s] = off
            self.identity[s] = np.arange(off, off + n, dtype=np.int64)
            off += n
        self.sram_end = off
        self.ext_mask = np.zeros(cfg.ext_size, dtype=bool)
        self.shapes: dict[int, tuple] = {}

    def mac_shape(self, regs: dict, sub: int, plan) -> tuple:
        """A MAC tile's group key (its mode and registers but the addresses), the byte addresses
        of its input vectors (execute_mac's (oh, ow, kh, kw, cb*lanes) elements as (oh*ow, bytes))
        and of its output elements, in the order execute_mac stores them. Kept per registers
        (the decode shares one dict among the commands with the same values)."""
        made = self.shapes.get(id(regs))
        if made is not None and made[0] is regs:
            return made[1]
        L = self.cfg.mac_cols
        r = Registers(regs)
        oh, ow, oc = plan.out_shape
        kh, kw, cb = r.kernel_h, r.kernel_w, r.ifm_cblocks
        row_b, pix_b = (r.ifm_row_stride // L) * L, (r.ifm_pix_stride // L) * L
        ar = lambda n: np.arange(n, dtype=np.int64)       # noqa: E731
        xpos = ((r.ifm_addr // L) * L
                + (ar(oh) * (r.stride_h * row_b))[:, None, None, None, None]
                + (ar(ow) * (r.stride_w * pix_b))[None, :, None, None, None]
                + (ar(kh) * (r.dilation_h * row_b))[None, None, :, None, None]
                + (ar(kw) * (r.dilation_w * pix_b))[None, None, None, :, None]
                + ar(cb * L)[None, None, None, None, :]).reshape(oh * ow, -1)
        esize = ELEMENT_BYTES[DType(r.ofm_dtype)]
        row, pix, n = r.ofm_row_stride, r.ofm_pix_stride, oc * esize
        out = (r.ofm_addr + (ar(oh) * row)[:, None, None] + (ar(ow) * pix)[None, :, None]
               + ar(n)[None, None, :]).reshape(-1)
        if not ((ow == 1 or pix >= n) and (oh == 1 or row >= (ow - 1) * pix + n)) and len(np.unique(out)) != len(out):
            raise NotBatchable("a MAC tile writes a byte twice")
        key = (sub, tuple(sorted((k, v) for k, v in regs.items() if k not in _ADDRESS_REGS)))
        shape = (key, xpos, out)
        self.shapes[id(regs)] = (regs, shape)
        return shape

    def finish(self, seg: _Segment, steps: list):
        """The Segment of a compiled run of steps."""
        cfg = self.cfg
        groups: dict[tuple, list[_Tile]] = {}
        for t in seg.tiles:
            groups.setdefault(t.key, []).append(t)
        # the codes the segment reads: its tiles' and what it writes
        sram_changed = []
        for s, p in seg.prov.items():
            pos = np.flatnonzero(p != self.identity[s])
            if len(pos):
                sram_changed.append((s, pos, p[pos]))
        ext_pos = ext_codes = None
        if seg.stores:
            ep = np.concatenate([e for e, _ in seg.stores])
            ec = np.concatenate([c for _, c in seg.stores])
            rev_pos, first_rev = np.unique(ep[::-1], return_index=True)    # the last store of each byte
            ext_pos, ext_codes = rev_pos, ec[::-1][first_rev]
        reads = [t.x.reshape(-1) for t in seg.tiles] + [t.w for t in seg.tiles] + [t.p for t in seg.tiles]
        reads += [t.lut for t in seg.tiles if t.lut is not None]
        reads += [c for _, _, c in sram_changed] + ([ext_codes] if ext_codes is not None else [])
        codes = np.concatenate(reads)
        known = np.unique(codes[codes < SCR0])
        n_known = len(known)
        # scratch: each group's outputs together, in the group's tile order
        remap = np.empty(seg.scratch, dtype=np.int64)
        out0, order = n_known, []
        for key, tiles in groups.items():
            for t in tiles:
                n = t.n_out
                remap[t.out:t.out + n] = out0 + np.arange(n)
                out0 += n
            order.append((key, tiles))

        def vindex(c: np.ndarray) -> np.ndarray:
            """Value indices of codes, as np.intp: numpy gathers through an index array of its own
            index type without converting it (an int32 index made a gather of 18,000 bytes 3.5x
            slower: 36 us against 10.6)."""
            c = np.asarray(c, dtype=np.int64)
            scr = c >= SCR0
            out = np.searchsorted(known, np.where(scr, 0, c))
            if scr.any():
                out = np.where(scr, remap[np.where(scr, c - SCR0, 0)], out)
            return out.astype(np.intp)

        made, start = [], n_known
        for key, tiles in order:
            pc0 = tiles[0].pc
            step = self.steps_by_pc[pc0]
            make = _EltGroup if step[2] == Opcode.ELTWISE else _Group
            g = make(cfg, tiles, step[4], step[3], step[5], vindex, start)
            start = g.out1
            made.append(g)
        gathers = []
        lo = 0
        const_end = int(np.searchsorted(known, SRAM0))
        if const_end:
            gathers.append((0, const_end, "const", known[:const_end].astype(np.uint8)))
        lo = const_end
        for s in Sram:
            a = self.base[s]
            hi = int(np.searchsorted(known, a + memory_bytes(cfg, s)))
            if hi > lo:
                gathers.append((lo, hi, s, known[lo:hi] - a))
            lo = hi
        hi = len(known)
        if hi > lo:
            gathers.append((lo, hi, "ext", known[lo:hi] - EXT0))
        sram_writes = [(s, pos, vindex(c)) for s, pos, c in sram_changed]
        ext_write = None if ext_pos is None else (ext_pos, vindex(ext_codes))
        return Segment(seg.first, gathers, made, start, sram_writes, ext_write)


def _small(cfg, step) -> bool:
    """Whether a compute command's bytes (a MAC's input vectors, weights and records; an
    ELTWISE's ranges) are few enough to be worth a segment: at most 8 x MAX_BYTES_PER_TILE (the
    distinct input boxes a segment gathers are fewer than its tiles'). A bigger one stays a
    step, and is not compiled (blazeface on large: 0.5 s of compile for no segment)."""
    plan = step[5]
    if step[2] == Opcode.MAC:
        oh, ow, oc = plan.out_shape
        w = plan.region.weight[1] - plan.region.weight[0]
        rows = -(-oc // cfg.mac_rows) * cfg.mac_rows
        n = oh * ow * (w // rows if rows else 0) + w + plan.region.param[1] - plan.region.param[0]
    else:
        n = sum(b - a for a, b in plan.regions.values())
    return n <= 8 * MAX_BYTES_PER_TILE


def compile_steps(cfg, steps: list, probe_class) -> list | None:
    """The decode's steps with its segments (S_BATCH steps) in place of the runs they compute;
    None when the decode is not expressed (NotBatchable) or has no segment worth making.
    `probe_class(pc)`: which tiles share a REQUIRE probe (an id; None without one)."""
    from firmware_model.golden import decoded as D

    if any(s[0] == D.S_FAULT for s in steps):
        return None
    comp = _Compiler(cfg)
    comp.steps_by_pc = {s[1]: s for s in steps if s[0] == D.S_UNIT}
    out: list = []
    made = 0
    seg = None

    def close(seg, upto: int) -> None:
        nonlocal made
        seg.close()
        # the SRAM bytes the segment writes back are part of what it moves: a first bound, before
        # the work of finish (a large NPU's segments stop here)
        if len(seg.tiles) >= MIN_TILES and seg.sram_written() <= MAX_BYTES_PER_TILE * len(seg.tiles):
            made_seg = comp.finish(seg, steps)
            if (made_seg.moved() <= MAX_BYTES_PER_TILE * len(seg.tiles)
                    and len(seg.tiles) >= MIN_TILES_PER_GROUP * len(made_seg.groups)):
                out.append((D.S_BATCH, steps[seg.first][1], None, made_seg, seg.first))
                made += 1
                return
        out.extend(steps[seg.first:upto])

    try:
        i = 0
        while i < len(steps):
            step = steps[i]
            kind = step[0]
            # (a DEPTHWISE tile's rows read different channels: no shared input vectors; it runs as a step)
            # (nor one reading its input from the output SRAM: a segment's MACs read the input SRAM)
            mac = (kind == D.S_UNIT and step[2] == Opcode.MAC and step[3] not in DEPTHWISE_MODES
                   and step[5].region.input_sram == Sram.INPUT and step[5].stage is not None
                   and _small(cfg, step))
            elt = (kind == D.S_UNIT and step[2] == Opcode.ELTWISE and step[5].count >= ELT_MIN_COUNT
                   and _small(cfg, step))
            if seg is None:
                if kind in (D.S_DMA, D.S_FILL) or mac or elt:
                    seg = _Segment(comp, i)
                else:
                    out.append(step)
                    i += 1
                    continue
            ok = True
            if kind == D.S_DMA:
                ok = seg.load(step[3], step[5]) if step[4] else (seg.store(step[3], step[5]) or True)
            elif kind == D.S_FILL:
                seg.fill(step[3], step[4], step[5])
            elif mac:
                ok = seg.mac(step[1], step[4], step[3], step[5], probe_class(step[1]))
            elif elt:
                ok = seg.eltwise(step[1], step[4], step[3], step[5], probe_class(step[1]))
            elif kind == D.S_CHECK:
                pass
            else:
                close(seg, i)
                seg = None
                continue            # the step itself, outside a segment
            if not ok:
                close(seg, i)
                seg = None
                continue            # the step starts the next segment
            i += 1
        if seg is not None:
            close(seg, len(steps))
    except NotBatchable:
        return None
    return out if made else None
