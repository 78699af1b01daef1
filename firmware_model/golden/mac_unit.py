"""The MAC array and its output stage: what one MAC command computes, bit for bit.

Operands (see docs/isa.md for the layouts):
- input SRAM: the tile's input pixels, pixel (y, x) channel block b at word
  IFM_ADDR/L + y*IFM_ROW_STRIDE/L + x*IFM_PIX_STRIDE/L + b, each word L int8 channels;
- weight SRAM: blocks of rows x L int8 weights in the order (output-channel block, ky, kx, b),
  row r of a block is output channel ocb*rows + r;
- parameter SRAM: one 11-byte record per output channel (bias int48, multiplier int32, shift int8);
- output SRAM: element (oy, ox, c) at byte OFM_ADDR + oy*OFM_ROW_STRIDE + ox*OFM_PIX_STRIDE + c*size.

Arithmetic, per output element:
    acc    = sum over ky, kx, ic of (x - IFM_ZP) * (w - WGT_ZP)          (int48 accumulator lanes)
    value  = wrap32(wrap32(acc) + bias)                                   (int8 inputs: int32 acc_t)
    value  = saturate48(acc + bias)                                       (int16 inputs: int48 acc_t)

    out    = the output stage (firmware_model/golden/output_stage.py: RESCALE, CLAMP, TABLE) of value,
             except a raw int48 result (OFM_DTYPE INT48), stored as it is in 8 bytes
using the project's numeric primitives with require=False: the hardware computes the same
arithmetic whether or not the TOSA REQUIREs hold.

int16 inputs (the TOSA int16 extension, int16 x int8 -> int48): an input word holds mac.cols/2
int16 elements, little-endian (element i in bytes 2i, 2i+1); IFM_CBLOCKS counts such words; a
weight row holds its mac.cols/2 int8 weights in bytes 0 .. cols/2-1 (the upper half is ignored);
IFM_ZP must be 0 (TOSA allows an input zero point for int8 only). `mac_block_sums` is the array's
arithmetic on words (the primitives execute_mac uses too), the expected values of the MAC-array
unit bench (docs/units.md).

`mac_plan` is the command without its data: MAC_RULES (arch/checks.py), the byte ranges it reads
and writes, its cycles and lane slots, from the registers alone. execute_mac calls it first and
computes on what it found; the timing-only model (timing_model.py) calls it alone.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from firmware_model.arch.checks import MAC_RULES, first_violation
from firmware_model.arch.config import ACC_BITS, NpuConfig
from firmware_model.arch.cycle_model import (depthwise_kernel_steps, depthwise_passes, depthwise_windows,
                                             element_write_clocks, mac_command_timing, mac_stream_clocks,
                                             uses_vector_output)
from firmware_model.arch.isa import (DEPTHWISE_MODES, ELEMENT_BYTES, LANE_PAIR_MODES, PARAM_RECORD_BYTES,
                                     PIXEL_PAIR_MODES, ROW_PAIR_MODES, MacMode, Sram,
                                     decode_param_records, depthwise_group_lanes, depthwise_rows, lane_pair_blocks,
                                     packed_groups)
from firmware_model.arch.registers import Registers
from firmware_model.errors import GoldenModelError
from firmware_model.golden.memories import Memories, box_span, check_range
from firmware_model.tosa_ops.dtypes import DType, wrap



def lanes_per_word(cols: int, ifm_dtype: DType) -> int:
    """Input elements in one `cols`-byte SRAM word: cols int8 lanes or cols/2 int16 lanes."""
    if ifm_dtype == DType.INT8:
        return cols
    if ifm_dtype == DType.INT16:
        return cols // 2
    raise ValueError(f"the MAC array takes int8 or int16 inputs, not {DType(ifm_dtype).name}")


def input_elements(words: np.ndarray, ifm_dtype: DType) -> np.ndarray:
    """The input elements of SRAM words (uint8, shape (..., cols)) as int64 (..., lanes):
    int8 lanes, or int16 lanes little-endian (element i in bytes 2i and 2i+1)."""
    words = np.ascontiguousarray(words, dtype=np.uint8)
    lanes_per_word(words.shape[-1], ifm_dtype)
    if ifm_dtype == DType.INT8:
        return words.view(np.int8).astype(np.int64)
    return words.view("<i2").astype(np.int64)


def weight_elements(rows: np.ndarray, ifm_dtype: DType) -> np.ndarray:
    """The int8 weights of weight-SRAM rows (uint8, shape (..., cols)) as int64 (..., lanes): all
    cols bytes for int8 inputs; for int16 inputs bytes 0 .. cols/2-1 (one weight per int16 lane)."""
    rows = np.ascontiguousarray(rows, dtype=np.uint8)
    lanes = lanes_per_word(rows.shape[-1], ifm_dtype)
    return rows[..., :lanes].view(np.int8).astype(np.int64)


def mac_block_sums(x_words: np.ndarray, w_rows: np.ndarray, *, ifm_dtype: DType, input_zp: int,
                   weight_zp: int) -> np.ndarray:
    """What the MAC array computes for input words (n, cols) and one weight block (rows, cols):
    sums[i, r] = sum over lanes l of (x[i, l] - input_zp) * (w[r, l] - weight_zp), exact (int64).
    int16 inputs take no zero point (TOSA: input_zp must be 0 for int16)."""
    if ifm_dtype == DType.INT16 and input_zp != 0:
        raise ValueError("int16 inputs have no input zero point (TOSA ERROR_IF input_zp != 0)")
    x = input_elements(x_words, ifm_dtype) - np.int64(input_zp)
    w = weight_elements(w_rows, ifm_dtype) - np.int64(weight_zp)
    return x @ w.T


def accumulate(acc: np.ndarray | int, sums: np.ndarray) -> np.ndarray:
    """One accumulation into the array's int48 accumulator lanes (two's-complement wrap)."""
    return wrap(np.asarray(acc, dtype=np.int64) + np.asarray(sums, dtype=np.int64), ACC_BITS)


def finish_accumulator(acc: np.ndarray, bias: np.ndarray, ifm_dtype: DType) -> np.ndarray:
    """The output stage's bias add: int8 inputs wrap to int32 (TOSA acc_t int32); int16 inputs add
    in int64 and saturate to int48 once (the reference model's behaviour, docs/kernels.md)."""
    acc, bias = np.asarray(acc, dtype=np.int64), np.asarray(bias, dtype=np.int64)
    if ifm_dtype == DType.INT16:
        return np.clip(acc + bias, DType.INT48.min, DType.INT48.max)
    return wrap(wrap(acc, 32) + wrap(bias, 32), 32)


@dataclass
class MacRegion:
    """Where a MAC command read and wrote: [start, stop) byte ranges per SRAM."""
    input: tuple[int, int]
    weight: tuple[int, int]
    param: tuple[int, int]
    output: tuple[int, int]
    lut: tuple[int, int] | None = None   # LUT SRAM bytes read by a fused table
    input_sram: Sram = Sram.INPUT        # where `input` lies (IFM_SRAM: INPUT, or OUTPUT)

    @property
    def input_name(self) -> str:
        """The counters' memory name of the input's SRAM."""
        return "input" if self.input_sram == Sram.INPUT else "output"


@dataclass
class MacResult:
    cycles: int
    macs: int                 # multiply-accumulates the array performed (padding lanes included)
    region: MacRegion
    out_shape: tuple[int, int, int]
    out_bytes: int            # bytes written to the output SRAM
    plan: "MacPlan | None" = None   # the accounting these came from (mac_plan)


def rescale_operands(value, multiplier, scale32: bool) -> tuple[np.ndarray, np.ndarray]:
    """The (value, multiplier) the rescale datapath multiplies (hw/rescale_unit.py): an int32 value
    by a 31-bit multiplier for apply_scale_32, an int48 value by a 15-bit one for apply_scale_16.
    Equal to the inputs whenever TOSA's REQUIREs (multiplier >= 0) and ERROR_IFs hold."""
    v, m = np.asarray(value, dtype=np.int64), np.asarray(multiplier, dtype=np.int64)
    if scale32:
        return wrap(v, 32), m & 0x7FFFFFFF
    return wrap(v, 48), m & 0x7FFF


def exact_dot(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """x @ w on integer operands of the MAC array (int64, or float64 holding integers), exactly,
    through a float64 matrix product: each product is below 2^16 (int8 x int8 with zero points)
    or 2^23 (int16 x int8), so every partial sum of fewer than 2^30 terms is an integer below
    2^53, which float64 holds exactly."""
    if x.shape[-1] >= 1 << 30:
        return x.astype(np.int64) @ w.astype(np.int64)
    return (x.astype(np.float64, copy=False) @ w.astype(np.float64, copy=False)).astype(np.int64)


@dataclass(slots=True)
class MacPlan:
    """What a MAC command costs and touches, from its registers alone (mac_plan): the accounting
    execute_mac reports and the timing-only model counts."""
    cycles: int               # cycle_model.mac_command_timing: without a preload
    preload: tuple            # (mac.rows, its preload window or None): Timeline.unit's `mac`
    macs: int                 # lane slots the array spends (padding lanes and channels included)
    stream: int               # cycle_model.mac_stream_clocks: its steps' input streams alone
    region: MacRegion         # the bytes it reads and writes, per SRAM
    out_shape: tuple[int, int, int]
    out_bytes: int
    stage: "object | None"    # output_stage.StagePlan; None for a raw int48 result

    @property
    def reads(self) -> list[tuple[str, tuple[int, int]]]:
        """(memory, range) of the SRAM ranges the golden model counts as read (the table's bytes
        are not counted)."""
        return [(self.region.input_name, self.region.input), ("weight", self.region.weight),
                ("param", self.region.param)]


def mac_plan(cfg: NpuConfig, regs, mode: int) -> MacPlan:
    """The MAC command's checks (arch/checks.py MAC_RULES, then the byte ranges in the order the
    datapath reads them), cycles, lane slots and regions, from the registers (a dict or a
    `Registers` view) and the mode; a refused command raises its GoldenModelError."""
    R, L = cfg.mac_rows, cfg.mac_cols
    r = regs if isinstance(regs, Registers) else Registers(regs)
    broken = first_violation(MAC_RULES, r, mode, cfg)
    if broken is not None:
        raise GoldenModelError(broken.message("MAC", r, mode), broken.status)
    ifm_dtype, ofm_dtype = DType(r.ifm_dtype), DType(r.ofm_dtype)
    oh, ow, oc = r.ofm_h, r.ofm_w, r.ofm_c
    kh, kw, cb = r.kernel_h, r.kernel_w, r.ifm_cblocks
    n_ocb = -(-oc // R)
    esize = ELEMENT_BYTES[ofm_dtype]

    # The input word of (oy, ox, ky, kx, b) is
    #   IFM_ADDR/L + (oy*STRIDE_H + ky*DILATION_H)*row + (ox*STRIDE_W + kx*DILATION_W)*pix + b,
    # every stride non-negative, so the first and last words bound the range the tile reads.
    word0 = r.ifm_addr // L
    row_w, pix_w = r.ifm_row_stride // L, r.ifm_pix_stride // L
    lo = word0
    hi = (word0 + ((oh - 1) * r.stride_h + (kh - 1) * r.dilation_h) * row_w
          + ((ow - 1) * r.stride_w + (kw - 1) * r.dilation_w) * pix_w + cb)
    in_sram = Sram.OUTPUT if r.ifm_sram == Sram.OUTPUT else Sram.INPUT
    check_range(cfg, in_sram, lo * L, hi * L, "MAC input")
    depthwise = mode in DEPTHWISE_MODES
    lane_pairs, row_pairs = mode in LANE_PAIR_MODES, mode in ROW_PAIR_MODES
    steps = len(depthwise_windows(cfg, mode, kh, kw, r.dilation_w)) if depthwise else kh * kw * cb
    shape = dict(ofm_h=oh, ofm_w=ow, ofm_c=oc, kernel_h=kh, kernel_w=kw, ifm_cblocks=cb,
                 window=mode if depthwise else None, stride_w=r.stride_w, dilation_w=r.dilation_w,
                 lane_pairs=lane_pairs, row_pairs=row_pairs)
    stream = mac_stream_clocks(cfg, **shape)
    # the array's beats the blocks take: a window-mode step one per output pixel (its stream also
    # fills each row's window); a CONV2D or MATMUL step one per stream clock (a paired one: per
    # pixel pair)
    beats = n_ocb * steps * oh * ow if depthwise else stream
    wword0 = r.wgt_addr // L
    n_wwords = n_ocb * steps * R
    check_range(cfg, Sram.WEIGHT, wword0 * L, (wword0 + n_wwords) * L, "MAC weights")
    p0 = r.param_addr
    check_range(cfg, Sram.PARAM, p0 * PARAM_RECORD_BYTES, (p0 + oc) * PARAM_RECORD_BYTES, "MAC parameters")
    stage = None
    if ofm_dtype != DType.INT48:
        # Imported here: output_stage builds on this module's parameter records.
        from firmware_model.golden.output_stage import stage_plan

        stage = stage_plan(cfg, r, "MAC")
    first, last = box_span(oh, ow, oc, r.ofm_addr, r.ofm_row_stride, r.ofm_pix_stride, ofm_dtype)
    check_range(cfg, Sram.OUTPUT, first, last, "MAC output")
    cycles, preload_open = mac_command_timing(
        cfg, **shape, write_clocks=element_write_clocks(cfg, esize), vector=uses_vector_output(ofm_dtype, r.lut_mode),
        ofm_addr=r.ofm_addr, ofm_row_stride=r.ofm_row_stride, ofm_pix_stride=r.ofm_pix_stride, element_bytes=esize)
    return MacPlan(
        cycles=cycles, preload=(R, preload_open), stream=stream,
        macs=beats * R * lanes_per_word(L, ifm_dtype),
        region=MacRegion(input=(lo * L, hi * L), weight=(wword0 * L, (wword0 + n_wwords) * L),
                         param=(p0 * PARAM_RECORD_BYTES, (p0 + oc) * PARAM_RECORD_BYTES),
                         output=(first, last), lut=stage.lut_range if stage is not None else None,
                         input_sram=in_sram),
        out_shape=(oh, ow, oc), out_bytes=oh * ow * oc * esize, stage=stage)


def execute_mac(cfg: NpuConfig, mem: Memories, regs: dict[int, int], mode: int, probe=None,
                plan=None) -> MacResult:
    """One MAC command (its checks and accounting: mac_plan). A `probe` (the golden model's
    REQUIRE monitor) is shown the output stage's input; it changes nothing."""
    if plan is None:            # else the plan of these registers, made before (mac_plan)
        plan = mac_plan(cfg, regs, mode)
    R, L = cfg.mac_rows, cfg.mac_cols
    r = Registers(regs)
    ifm_dtype = DType(r.ifm_dtype)
    oh, ow, oc = plan.out_shape
    kh, kw, cb = r.kernel_h, r.kernel_w, r.ifm_cblocks
    n_ocb = -(-oc // R)

    if mode in DEPTHWISE_MODES:
        acc = depthwise_sums(cfg, mem, r, plan, mode)
        return _finish_mac(cfg, mem, regs, r, plan, acc, probe)

    # Input vectors: a strided view of the SRAM over the words mac_plan checked (the im2col
    # matrix without an index array).
    word0 = r.ifm_addr // L
    row_w, pix_w = r.ifm_row_stride // L, r.ifm_pix_stride // L
    sh, sw, dh, dw = r.stride_h, r.stride_w, r.dilation_h, r.dilation_w
    lanes = lanes_per_word(L, ifm_dtype)
    esz = L // lanes                                                           # bytes per input element
    row_b, pix_b = row_w * L, pix_w * L
    vectors = np.ndarray((oh, ow, kh, kw, cb * lanes), dtype=np.int8 if esz == 1 else "<i2",
                         buffer=mem.sram[plan.region.input_sram], offset=word0 * L,
                         strides=(sh * row_b, sw * pix_b, dh * row_b, dw * pix_b, esz))
    # Float64 holds every operand and partial sum exactly (see exact_dot).
    x = vectors.astype(np.float64).reshape(oh * ow, kh * kw * cb * lanes)
    x -= r.ifm_zp

    wa, wb = plan.region.weight
    w_rows = mem.sram[Sram.WEIGHT][wa:wb].reshape(n_ocb, kh * kw * cb, R, L)
    if mode in LANE_PAIR_MODES:
        w_rows = blocks_in_channel_order(w_rows, kh * kw, cb, axis=1)
    w = w_rows[..., :lanes].view(np.int8).astype(np.float64)                  # weight_elements' lanes
    w = w.transpose(1, 3, 0, 2).reshape(kh * kw * cb * lanes, n_ocb * R)
    w -= r.wgt_zp

    # Products are exact; the accumulator lanes hold 48 bits.
    if mode in PIXEL_PAIR_MODES:
        acc = pixel_pair_dot(x, *pixel_pair_weights(w, mode, kh * kw, cb, L, R, n_ocb))
    else:
        acc = exact_dot(x, w)
    acc = accumulate(0, acc)[:, :oc]                                          # (P, oc)
    return _finish_mac(cfg, mem, regs, r, plan, acc, probe)


def blocks_in_channel_order(steps: np.ndarray, positions: int, cb: int, axis: int) -> np.ndarray:
    """A CONV2D_LANE_PAIRS command's weight blocks, which lie in its step order along `axis`
    (positions x cb blocks: at each kernel position the last input-channel block first,
    isa.lane_pair_blocks), in the order (kernel position, input-channel block)."""
    at_step = np.argsort(lane_pair_blocks(cb))             # the step of each block
    index = (np.arange(positions)[:, None] * cb + at_step[None, :]).reshape(-1)
    return np.take(steps, index, axis=axis)


def pixel_pair_weights(w: np.ndarray, mode: int, positions: int, cb: int, cols: int, rows: int,
                       n_ocb: int) -> tuple[np.ndarray, np.ndarray]:
    """The weight matrices of a CONV2D_LANE_PAIRS, _ROW_PAIRS or _PAIRS command (docs/isa.md) for
    its even and its odd output pixels (raster order in the tile), from execute_mac's (K, n)
    matrix, K = positions x cb x cols in the order (kernel position, input-channel block, lane),
    n = groups x n_ocb x rows (a batch of tiles' weights side by side):
    - lane pairs (every block but a row-paired one): a step of the last input-channel block
      multiplies the low half of a pixel's word, lanes 0 .. cols/2-1, by weight lanes
      0 .. cols/2-1 for an even pixel and by lanes cols/2 .. cols-1 for an odd one; its upper
      input lanes meet nothing;
    - row pairs (the last block of output channels, at most rows/2 of them): an even pixel's
      channel r takes weight row r, an odd pixel's row rows/2 + r, each on its own whole word."""
    K = w.shape[0]
    blocks = w.reshape(positions, cb, cols, -1, n_ocb, rows)
    even, odd = blocks.copy(), blocks.copy()
    paired_rows = mode in ROW_PAIR_MODES
    if mode in LANE_PAIR_MODES:
        h, lp = cols // 2, slice(0, n_ocb - 1 if paired_rows else n_ocb)
        even[:, cb - 1, h:, :, lp] = 0
        odd[:, cb - 1, :h, :, lp] = blocks[:, cb - 1, h:, :, lp]
        odd[:, cb - 1, h:, :, lp] = 0
    if paired_rows:
        h = rows // 2
        odd[..., n_ocb - 1, :h] = blocks[..., n_ocb - 1, h:2 * h]
    return even.reshape(K, -1), odd.reshape(K, -1)


def pixel_pair_dot(x: np.ndarray, even: np.ndarray, odd: np.ndarray) -> np.ndarray:
    """The sums (P, n) of a command whose even and odd output pixels meet their own weight
    matrices (pixel_pair_weights)."""
    acc = np.empty((x.shape[0], even.shape[1]), dtype=np.int64)
    acc[0::2] = exact_dot(x[0::2], even)
    acc[1::2] = exact_dot(x[1::2], odd)
    return acc


def depthwise_lanes(cfg: NpuConfig, mode: int, kernel_h: int, kernel_w: int,
                    dilation_w: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Where a window-mode command's weight lanes look, per step (weight block) and lane l: the
    kernel row, the input pixel offset in the row's span, and whether the lane is inside its pass
    (lanes past a pass's length hold nothing: they contribute zero).

    - DEPTHWISE: a step per kernel row ky and window pass j (cycle_model.depthwise_passes, in
      the order (ky, j)); lane l sees offset j * mac.cols + (length_j - 1 - l) of row ky (the
      window's newest word is lane 0);
    - DEPTHWISE_PAIRED and DEPTHWISE_TRIPLE: a step per k = 2 or 3 kernel rows (ks .. ks + k - 1);
      the row's span (at most n = isa.depthwise_group_lanes(mac.cols, k) pixels) is one pass in
      each group of n lanes: lane g*n + l (l < n, g < k) sees offset span - 1 - l of row ks + g
      (none when that row is past KERNEL_H: the last step takes the rows left); the lanes past
      k*n hold nothing;
    - DEPTHWISE_PACKED: a step per mac.cols taps of the kernel in raster order (isa.packed_groups):
      its windows (kernel row, first offset t, length n) side by side from lane 0, lane b + l of
      a window starting at lane b seeing offset t + n - 1 - l of its row; the lanes past the
      kernel's last tap hold nothing.

    Returns (kernel_row, offset, inside), each of shape (steps, mac.cols); outside lanes read row 0,
    offset 0."""
    L = cfg.mac_cols
    lane = np.arange(L)
    k = depthwise_rows(mode)
    if mode == MacMode.DEPTHWISE_PACKED:
        span = (kernel_w - 1) * dilation_w + 1
        steps = packed_groups(L, kernel_h, span)
        row = np.zeros((len(steps), L), dtype=np.int64)
        offset = np.zeros((len(steps), L), dtype=np.int64)
        inside = np.zeros((len(steps), L), dtype=bool)
        for s, groups in enumerate(steps):
            b = 0
            for ky, t, n in groups:
                row[s, b:b + n] = ky
                offset[s, b:b + n] = t + n - 1 - np.arange(n)
                inside[s, b:b + n] = True
                b += n
    elif k > 1:
        n = depthwise_group_lanes(L, k)
        span = (kernel_w - 1) * dilation_w + 1
        steps = depthwise_kernel_steps(kernel_h, k)
        group = lane // n
        row = k * np.arange(steps)[:, None] + group[None, :]
        offset = np.broadcast_to(span - 1 - lane % n, (steps, L))
        inside = ((lane % n < span) & (group < k))[None, :] & (row < kernel_h)
    else:
        lengths = depthwise_passes(cfg, kernel_w, dilation_w)
        offset = np.array([j * L + n - 1 - lane for j, n in enumerate(lengths)], dtype=np.int64)
        inside = np.array([lane < n for n in lengths])
        row = np.repeat(np.arange(kernel_h), len(lengths))[:, None] + 0 * lane
        offset, inside = np.tile(offset, (kernel_h, 1)), np.tile(inside, (kernel_h, 1))
    return np.where(inside, row, 0), np.where(inside, offset, 0), inside


def box_holds_pixel(r: Registers, by: np.ndarray, bx: np.ndarray) -> np.ndarray | None:
    """Whether input-box row `by`, column `bx` (broadcast together) hold a pixel of a window-mode
    command (IFM_PAD_TOP, IFM_PAD_LEFT, IFM_IN_H, IFM_IN_W: docs/isa.md); every other position
    reads as IFM_ZP. None when IFM_IN_H is 0: the whole box holds pixels."""
    if r.ifm_in_h == 0:
        return None
    by, bx = np.asarray(by, dtype=np.int64), np.asarray(bx, dtype=np.int64)
    return ((by >= r.ifm_pad_top) & (by < r.ifm_pad_top + r.ifm_in_h)
            & (bx >= r.ifm_pad_left) & (bx < r.ifm_pad_left + r.ifm_in_w))


def depthwise_sums(cfg: NpuConfig, mem: Memories, r: Registers, plan: "MacPlan", mode: int) -> np.ndarray:
    """A window-mode (DEPTHWISE, _PAIRED, _TRIPLE, _PACKED) command's accumulators (P, OFM_C), docs/isa.md: for each
    step i (weight block), row r of the block takes channel r mod mac.cols of the input words at
    the lanes' kernel rows and offsets (depthwise_lanes),
        acc[p, r] += sum over lanes l inside step i of
                     (x[oy*SH + row_i(l)*DH, ox*SW + offset_i(l), r mod cols] - IFM_ZP) * (w[i][r, l] - WGT_ZP)
    wrapped to int48, where x at a box position without a pixel (box_holds_pixel) is IFM_ZP."""
    R, L = cfg.mac_rows, cfg.mac_cols
    oh, ow, oc = plan.out_shape
    kh = r.kernel_h
    krow, offset, inside = depthwise_lanes(cfg, mode, kh, r.kernel_w, r.dilation_w)
    steps = len(offset)
    span = (r.kernel_w - 1) * r.dilation_w + 1
    row_b, pix_b = (r.ifm_row_stride // L) * L, (r.ifm_pix_stride // L) * L
    # The words each output pixel's window passes read, (oh, ow, kh, span, L) int8 bytes.
    words = np.ndarray((oh, ow, kh, span, L), dtype=np.int8, buffer=mem.sram[plan.region.input_sram],
                       offset=(r.ifm_addr // L) * L,
                       strides=(r.stride_h * row_b, r.stride_w * pix_b, r.dilation_h * row_b, pix_b, 1))
    chan = np.arange(R) % L
    # x[p, i, l, row]: lanes outside a pass read row 0, offset 0 and are multiplied by zero below.
    x = words[:, :, krow, offset][..., chan].astype(np.float64).reshape(oh * ow, steps * L, R)
    x -= r.ifm_zp
    # a box position without a pixel reads as IFM_ZP: its operand is 0
    real = box_holds_pixel(r, (np.arange(oh) * r.stride_h)[:, None, None, None] + (krow * r.dilation_h)[None, None],
                           (np.arange(ow) * r.stride_w)[None, :, None, None] + offset[None, None])
    if real is not None:
        x *= real.reshape(oh * ow, steps * L, 1)
    wa, wb = plan.region.weight
    w = mem.sram[Sram.WEIGHT][wa:wb].view(np.int8).reshape(steps, R, L).astype(np.float64)
    w -= r.wgt_zp
    w *= inside[:, None, :]
    w = w.transpose(0, 2, 1).reshape(steps * L, R)
    # Each product is below 2^16 and a sum has fewer than 2^30 of them: float64 is exact.
    acc = np.einsum("pkr,kr->pr", x, w).astype(np.int64)
    return accumulate(0, acc)[:, :oc]


def _finish_mac(cfg: NpuConfig, mem: Memories, regs: dict[int, int], r: Registers, plan: "MacPlan",
                acc: np.ndarray, probe) -> MacResult:
    """The accumulators (P, OFM_C) through the bias add and the output stage into the output SRAM."""
    ifm_dtype, ofm_dtype = DType(r.ifm_dtype), DType(r.ofm_dtype)
    oh, ow, oc = plan.out_shape
    esize = ELEMENT_BYTES[ofm_dtype]
    pa, pb = plan.region.param
    bias, multiplier, shift = decode_param_records(mem.sram[Sram.PARAM][pa:pb])
    value = finish_accumulator(acc, bias, ifm_dtype)
    if plan.stage is None:
        out = value     # the raw int48 accumulator: 32-bit stage registers cannot bound it
    else:
        # The shared output stage (rescale, clamp, table), one implementation for every unit.
        from firmware_model.golden.output_stage import apply_output_stage

        out, _ = apply_output_stage(mem, regs, value, multiplier, shift, unit="MAC", probe=probe, plan=plan.stage)

    # Store the elements into the output SRAM, little-endian: element (oy, ox, c) at
    # OFM_ADDR + oy*OFM_ROW_STRIDE + ox*OFM_PIX_STRIDE + c*size.
    raw = np.ascontiguousarray(out.reshape(oh, ow, oc).astype(f"<i{esize}")).view(np.uint8)
    dst = np.ndarray((oh, ow, oc * esize), np.uint8, buffer=mem.sram[Sram.OUTPUT], offset=plan.region.output[0],
                     strides=(r.ofm_row_stride, r.ofm_pix_stride, 1))
    dst[...] = raw.reshape(oh, ow, oc * esize)
    return MacResult(cycles=plan.cycles, macs=plan.macs, region=plan.region, out_shape=plan.out_shape,
                     out_bytes=plan.out_bytes, plan=plan)


# apply_scale_32's operands and the bias of each parameter block a prepared MAC reads, by the
# block's bytes (a layer's tiles read the same records at every invocation).
_RECORD_OPERANDS: dict[tuple, tuple] = {}
_RECORD_OPERANDS_MAX = 4096


def record_operands(raw: np.ndarray, ifm_dtype: DType, stage) -> tuple:
    """The parameter records `raw` (bytes) as a prepared MAC uses them: (bias, multiplier, shift,
    scale32 operands or None), the bias already wrapped to int32 for int8 inputs (the
    finish_accumulator term wrap32(bias)). Kept by the bytes; the arrays are read-only."""
    scale32 = stage is not None and stage.rescale and stage.scale32
    key = (raw.tobytes(), ifm_dtype == DType.INT16, scale32 and stage.double_round, scale32)
    hit = _RECORD_OPERANDS.get(key)
    if hit is None:
        from firmware_model.golden.output_stage import scale32_operands

        bias, multiplier, shift = decode_param_records(raw)
        if ifm_dtype != DType.INT16:
            bias = wrap(bias, 32)
        ops = scale32_operands(multiplier, shift, stage.double_round) if scale32 else None
        hit = (bias, multiplier, shift, ops)
        for a in (bias, *(() if ops is None else (ops.multiplier, ops.shift, ops.round))):
            a.flags.writeable = False
        if len(_RECORD_OPERANDS) >= _RECORD_OPERANDS_MAX:
            _RECORD_OPERANDS.clear()
        _RECORD_OPERANDS[key] = hit
    return hit


def accumulator_bound(k: int, ifm_dtype: DType, ifm_zp: int, wgt_zp: int) -> int:
    """An upper bound of |sum of k products (x - IFM_ZP) * (w - WGT_ZP)| over every input and
    weight element of the types: what proves a wrap of the exact sum changes nothing."""
    lo, hi = (DType.INT16.min, DType.INT16.max) if ifm_dtype == DType.INT16 else (DType.INT8.min, DType.INT8.max)
    x = max(abs(lo - ifm_zp), abs(hi - ifm_zp))
    w = max(abs(DType.INT8.min - wgt_zp), abs(DType.INT8.max - wgt_zp))
    return k * x * w
