"""MAC commands prepared once (mac_prepared.prepare_depthwise / prepare_conv, what the decoded
program runs) against execute_mac: the same output SRAM and the same probe calls, on random
tiles (sim/vectors/random_tiles: DEPTHWISE kernel rows of one to three window passes, strides
past a short pass; CONV2D int8 and int16, raw int48 results; dilations, zero points, both
rescales, tables, clamps; CONV2D tiles run as MATMUL too) on every configuration, and on zero
points at their extremes with the weights, inputs and biases that make the sums largest."""

from __future__ import annotations

import numpy as np
import pytest

from firmware_model.arch.config import load_config
from firmware_model.arch.isa import PARAM_RECORD_BYTES, MacMode, OutMode, Reg, Sram, decode_param_records, encode_param_records
from firmware_model.golden.mac_prepared import prepare_conv, prepare_depthwise
from firmware_model.golden.mac_unit import execute_mac, mac_plan
from firmware_model.errors import GoldenModelError
from firmware_model.golden.memories import Memories
from firmware_model.tosa_ops.dtypes import DType
from sim.vectors.random_tiles import random_tile


class Recorder:
    def __init__(self):
        self.seen = []

    def __call__(self, point, *arrays):
        self.seen.append((point, [np.array(a, dtype=np.int64, copy=True) for a in arrays]))


def _memories(cfg, tile) -> Memories:
    mem = Memories(cfg)
    for s, (image, _) in tile["images"].items():
        mem.sram[s][:] = image
    mem.sram[Sram.OUTPUT][:] = tile["output_before"]
    return mem


def _both(cfg, mem, regs, mode=MacMode.DEPTHWISE):
    plan = mac_plan(cfg, regs, mode)
    want, got = _copy(cfg, mem), _copy(cfg, mem)
    pa, pb = Recorder(), Recorder()
    execute_mac(cfg, want, regs, mode, pa, plan)
    run = (prepare_depthwise if mode == MacMode.DEPTHWISE else prepare_conv)(cfg, regs, mode, plan)
    run(got, pb)
    assert np.array_equal(got.sram[Sram.OUTPUT], want.sram[Sram.OUTPUT])
    assert [p for p, _ in pa.seen] == [p for p, _ in pb.seen]
    for (_, x), (_, y) in zip(pa.seen, pb.seen):
        assert all(np.array_equal(np.broadcast_to(u, np.broadcast_shapes(u.shape, v.shape)),
                                  np.broadcast_to(v, np.broadcast_shapes(u.shape, v.shape))) for u, v in zip(x, y))
    again = _copy(cfg, mem)                         # the kept weights and records, a second run
    run(again, None)
    assert np.array_equal(again.sram[Sram.OUTPUT], want.sram[Sram.OUTPUT])


def _copy(cfg, mem: Memories) -> Memories:
    out = Memories(cfg)
    for s, a in mem.sram.items():
        out.sram[s][:] = a
    return out


@pytest.mark.parametrize("config", ["tiny", "default", "large"])
@pytest.mark.parametrize("seed", range(8))
def test_prepared_depthwise_equals_execute_mac(config, seed):
    cfg = load_config(config)
    rng = np.random.default_rng(seed)
    done = 0
    while done < 12:
        tile = random_tile(cfg, rng, done)
        if tile["mode"] != MacMode.DEPTHWISE:
            continue
        _both(cfg, _memories(cfg, tile), tile["regs"])
        done += 1


@pytest.mark.parametrize("int16", [False, True])
@pytest.mark.parametrize("config", ["tiny", "default", "large"])
@pytest.mark.parametrize("seed", range(6))
def test_prepared_conv_equals_execute_mac(config, seed, int16):
    cfg = load_config(config)
    rng = np.random.default_rng(100 + seed)
    done = 0
    while done < 10:
        tile = random_tile(cfg, rng, done, DType.INT16 if int16 else DType.INT8)
        if tile["mode"] != MacMode.CONV2D:
            continue
        mem = _memories(cfg, tile)
        _both(cfg, mem, tile["regs"], MacMode.CONV2D)
        out_mode = tile["regs"][int(Reg.OUT_MODE)]
        if int16 and out_mode & OutMode.RESCALE:        # int16 sums through apply_scale_32 as well
            _both(cfg, mem, {**tile["regs"], int(Reg.OUT_MODE): out_mode | int(OutMode.SCALE32)}, MacMode.CONV2D)
        try:
            mac_plan(cfg, tile["regs"], MacMode.MATMUL)
        except GoldenModelError:
            pass
        else:
            _both(cfg, mem, tile["regs"], MacMode.MATMUL)
        done += 1


@pytest.mark.parametrize("mode", [MacMode.DEPTHWISE, MacMode.CONV2D])
@pytest.mark.parametrize("zps", [(-128, -128), (127, 127), (-128, 127), (0, 0)])
def test_prepared_mac_at_the_sums_extremes(zps, mode):
    """Inputs and weights at -128/127 against extreme zero points (every product at its largest
    magnitude), biases at and past the int32 range: the bounds that leave wraps out must hold."""
    cfg = load_config("default")
    rng = np.random.default_rng(sum(zps) + 1000)
    done = 0
    while done < 6:
        tile = random_tile(cfg, rng, done)
        if tile["mode"] != mode:
            continue
        regs = dict(tile["regs"])
        regs[int(Reg.IFM_ZP)], regs[int(Reg.WGT_ZP)] = zps[0] & 0xFFFFFFFF, zps[1] & 0xFFFFFFFF
        mem = _memories(cfg, tile)
        for s in (Sram.INPUT, Sram.WEIGHT):
            mem.sram[s][:] = rng.choice(np.array([0x80, 0x7F], dtype=np.uint8), len(mem.sram[s]))
        oc, p0 = regs[int(Reg.OFM_C)], regs[int(Reg.PARAM_ADDR)]
        old = decode_param_records(mem.sram[Sram.PARAM][p0 * PARAM_RECORD_BYTES:(p0 + oc) * PARAM_RECORD_BYTES])
        bias = rng.choice(np.array([(1 << 31) - 1, -(1 << 31), 1 << 40, -(1 << 33), 5]), oc)
        rec = np.frombuffer(encode_param_records(bias, old[1], old[2]), dtype=np.uint8)
        mem.sram[Sram.PARAM][p0 * PARAM_RECORD_BYTES:p0 * PARAM_RECORD_BYTES + len(rec)] = rec
        _both(cfg, mem, regs, mode)
        done += 1


def test_last_bytes_answers_for_the_bytes_given():
    """A prepared command's weights and records are made once per byte string while at most
    LAST_BYTES_KEPT are in use (commands sharing the prepared function read theirs in turn), and
    every answer is make's for the bytes given: keys alternating, more keys than kept (all
    forgotten, then made again), and byte strings of other lengths or one byte apart."""
    from firmware_model.golden import mac_prepared

    def want(raw):
        return int(raw.astype(np.int64).sum()) * 1000 + len(raw)

    made = []
    f = mac_prepared._last_bytes(lambda raw: (made.append(raw.tobytes()), want(raw))[1])
    rng = np.random.default_rng(16)
    keys = [rng.integers(0, 256, size=n, dtype=np.uint8) for n in (4, 4, 5, 16, 16, 1, 3, 4)]
    keys[1][:] = keys[0]
    keys[1][2] ^= 1                                         # one byte apart
    assert len(keys) == mac_prepared.LAST_BYTES_KEPT
    for _ in range(3):                                      # in turn, as commands sharing it read them
        for k in keys:
            assert f(k.copy()) == want(k)
    assert len(made) == len(keys)                           # made once each, then kept
    extra = rng.integers(0, 256, size=6, dtype=np.uint8)
    assert f(extra) == want(extra) and len(made) == len(keys) + 1
    for k in keys:                                          # forgotten when the extra came: made again
        assert f(k) == want(k)
    assert len(made) == 2 * len(keys) + 1
