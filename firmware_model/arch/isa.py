"""The NPU instruction set: the one definition of the command stream's encodings.

The compiler emits it, the golden model and the RTL execute it, the bench disassembles it;
nothing else spells out an opcode, a register number or a bit position. docs/isa.md is the
prose description of the same facts.

A program is a sequence of 64-bit little-endian command words:

    63      56 55      48 47             32 31                              0
    +---------+----------+-----------------+---------------------------------+
    | opcode  |   sub    |      imm16      |             value32             |
    +---------+----------+-----------------+---------------------------------+

Parameters live in a file of 32-bit registers written by SET commands (`sub` = register number,
`value32` = the value); an operation command (DMA, MAC, ...) then runs with the registers as they
are. Registers keep their values across operations, so consecutive tiles only re-send what
changes. `sub` of an operation selects its mode (which SRAM a DMA targets, which MAC mode).
"""

from __future__ import annotations

import enum
import struct
from dataclasses import dataclass
from typing import Iterable

import numpy as np

from firmware_model.arch.fields import FieldTable
from firmware_model.errors import IsaError
from firmware_model.tosa_ops.dtypes import DType

ISA_VERSION = 8          # 2: the DMA runs beside the compute units (docs/isa.md, "Timing");
                         # 3: VAR CHECK and MARK, for variables kept in external memory;
                         # 4: ELTWISE A_FROM_OUTPUT; a queued transfer's latency runs from its push;
                         #    commands that complete at decode chain (one clock each)
                         # 5: the command processor looks ahead while a compute command runs
                         #    (SET, NOP, MARK, DMA_AHEAD transfers); every cycle count moves
                         # 6: ELTWISE B_FROM_OUTPUT; POOL reads IFM_SRAM (its input box from the
                         #    output SRAM with OUTPUT)
                         # 7: MAC CONV2D_LANE_PAIRS (two output pixels a beat over a half-full
                         #    last input-channel block), CONV2D_ROW_PAIRS (... over a half-full
                         #    last output-channel block), CONV2D_PAIRS (both)
                         # 8: MAC DEPTHWISE_PACKED (the kernel's taps in raster order, mac.cols a
                         #    step, up to three kernel rows' windows side by side)
WORD_BYTES = 8

# The command word (the diagram above), from bit 0 up. The encoder below and the command
# processor's view of a fetched word (hw/command_processor.py) both read this table.
COMMAND_WORD = FieldTable("command word", [("value", 32, False), ("imm", 16, False), ("sub", 8, False),
                                           ("opcode", 8, False)])
assert COMMAND_WORD.nbytes == WORD_BYTES

# The element types the SRAMs and external memory hold, and their sizes: int48 travels in 8 bytes.
ELEMENT_BYTES = {dt: dt.size_bytes for dt in (DType.INT8, DType.INT16, DType.INT32, DType.INT48)}

# A parameter record of the parameter SRAM, one per output channel, from bit 0 (byte 0) up: the
# bias (int48), the output stage's multiplier (int32) and shift (int8). The compiler encodes
# records with it, the golden model decodes them, the RTL's parameter SRAM words are its layout.
PARAM_RECORD = FieldTable("parameter record", [("bias", 48, True), ("multiplier", 32, True), ("shift", 8, True)])
PARAM_RECORD_BYTES = PARAM_RECORD.nbytes     # 11


def encode_param_records(bias, multiplier, shift) -> bytes:
    """Parameter records for output channels (bias int48, multiplier int32, shift int8), as bytes."""
    return PARAM_RECORD.encode(bias=bias, multiplier=multiplier, shift=shift).tobytes()


_DECODED_RECORDS: dict[bytes, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
_DECODED_RECORDS_MAX = 4096        # distinct record blocks kept (a network has a few hundred)


def decode_param_records(raw: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-channel (bias, multiplier, shift) as int64 from records held as bytes (uint8).

    The golden model decodes the same parameter SRAM bytes at every tile of a layer and every
    invocation: decodes are kept by their bytes (read-only arrays, shared by the callers)."""
    key = np.ascontiguousarray(raw, dtype=np.uint8).tobytes()
    hit = _DECODED_RECORDS.get(key)
    if hit is None:
        f = PARAM_RECORD.decode(raw)
        hit = (f["bias"], f["multiplier"], f["shift"])
        for a in hit:
            a.flags.writeable = False
        if len(_DECODED_RECORDS) >= _DECODED_RECORDS_MAX:
            _DECODED_RECORDS.clear()
        _DECODED_RECORDS[key] = hit
    return hit


class Opcode(enum.IntEnum):
    NOP = 0x00
    SET = 0x01        # register[sub] = value32
    DMA_LOAD = 0x10   # external memory -> SRAM `sub` (a 3-D strided copy, DMA_* registers)
    DMA_STORE = 0x11  # SRAM `sub` -> external memory
    FILL = 0x12       # SRAM `sub` region (DMA_SRAM_* registers) <- the byte in value32
    MAC = 0x20        # MAC array + output stage, mode `sub` (MacMode)
    ELTWISE = 0x30    # elementwise unit, operation `sub` (EltOp), ELT_* and output-stage registers
    POOL = 0x31       # pooling unit, mode `sub` (PoolMode)
    LUT = 0x32        # reserved: a stand-alone table is ELTWISE COPY with LUT_MODE set
    VAR = 0x40        # variable SRAM access, `sub` (VarOp)
    HOST = 0x50       # run host-CPU operation number value32, then continue
    BARRIER = 0x60    # wait until every unit is idle
    MARK = 0x70       # debug marker: value32 (the tile number) into the status register
    END = 0xFF        # stop and report completion


class Sram(enum.IntEnum):
    """SRAM identifiers in the `sub` field of DMA_LOAD / DMA_STORE / FILL."""
    INPUT = 0
    WEIGHT = 1
    PARAM = 2
    OUTPUT = 3
    VARIABLE = 4
    LUT = 5


class MacMode(enum.IntEnum):
    CONV2D = 0      # every output channel sums over every input channel of the window
    DEPTHWISE = 1   # rows are channels, lanes a window of input pixels along the row (docs/isa.md)
    MATMUL = 2      # a 1x1 convolution whose weights were loaded at run time
    DEPTHWISE_PAIRED = 3   # DEPTHWISE over two kernel rows a step: each half of the lanes a row (docs/isa.md)
    DEPTHWISE_TRIPLE = 4   # DEPTHWISE over three kernel rows a step: each third of the lanes a row
    CONV2D_LANE_PAIRS = 5  # CONV2D whose last input-channel block's steps take two output pixels a beat,
                           # each half of the lanes one pixel's word (docs/isa.md)
    CONV2D_ROW_PAIRS = 6   # CONV2D whose last output-channel block (at most mac.rows/2 channels) takes
                           # two output pixels a beat, each half of the rows one pixel
    CONV2D_PAIRS = 7       # both: lane pairs in the other blocks, row pairs in the last
    DEPTHWISE_PACKED = 8   # DEPTHWISE whose steps take the kernel's taps mac.cols at a time in raster
                           # order, a kernel row split across steps where the lanes run out


LANE_PAIR_MODES = (MacMode.CONV2D_LANE_PAIRS, MacMode.CONV2D_PAIRS)
ROW_PAIR_MODES = (MacMode.CONV2D_ROW_PAIRS, MacMode.CONV2D_PAIRS)
PIXEL_PAIR_MODES = (MacMode.CONV2D_LANE_PAIRS, MacMode.CONV2D_ROW_PAIRS, MacMode.CONV2D_PAIRS)


DEPTHWISE_MODES = (MacMode.DEPTHWISE, MacMode.DEPTHWISE_PAIRED, MacMode.DEPTHWISE_TRIPLE, MacMode.DEPTHWISE_PACKED)
# Kernel rows a step of each window mode takes; each row reads its own input word a clock (one
# input-SRAM read port per row: the input SRAM has three for the MAC).
DEPTHWISE_ROWS = {MacMode.DEPTHWISE: 1, MacMode.DEPTHWISE_PAIRED: 2, MacMode.DEPTHWISE_TRIPLE: 3}


def lane_pair_blocks(cblocks: int) -> list[int]:
    """The input-channel block each step of a kernel position takes in CONV2D_LANE_PAIRS, in
    order: the lane-paired last block first, then the others (the last step of a command is then
    a whole one, which the early output engine trails pixel for pixel, docs/isa.md)."""
    return [cblocks - 1] + list(range(cblocks - 1))


def depthwise_rows(mode: int) -> int:
    """Kernel rows a step of a window mode takes (1 for DEPTHWISE)."""
    return DEPTHWISE_ROWS.get(mode, 1)


def depthwise_mode(rows: int) -> MacMode:
    """The window mode that takes `rows` kernel rows a step (DEPTHWISE_ROWS read backwards)."""
    return next(mode for mode, k in DEPTHWISE_ROWS.items() if k == rows)


def packed_span_fits(cols: int, span: int) -> bool:
    """Does a DEPTHWISE_PACKED step of `cols` taps touch at most three kernel rows (one input-SRAM
    read port each) for a kernel row of `span` input pixels? mac.cols consecutive taps in raster
    order meet at most ceil((cols - 1) / span) + 1 rows: three while cols <= 2 x span + 1."""
    return cols <= 2 * span + 1


def packed_groups(cols: int, kernel_h: int, span: int) -> list[list[tuple[int, int, int]]]:
    """The steps of a DEPTHWISE_PACKED command, each a list of its windows (kernel row, first
    offset in the row's span, length): step s takes the taps s*cols .. s*cols + cols - 1 of the
    kernel in raster order (row by row, each row's `span` input pixels), so a row the lanes run out
    in goes on at the start of the next step. The windows lie side by side from lane 0, each a
    group of lanes (the first group continues the row the step before ended in); the taps past
    the kernel's last leave the last step's lanes empty. packed_span_fits keeps it to three."""
    total = kernel_h * span
    steps = []
    for first in range(0, total, cols):
        groups, tap = [], first
        while tap < min(first + cols, total):
            row, offset = divmod(tap, span)
            n = min(span - offset, first + cols - tap, total - tap)
            groups.append((row, offset, n))
            tap += n
        steps.append(groups)
    return steps


def depthwise_group_lanes(cols: int, rows: int) -> int:
    """Lanes of each kernel row's window in a mode of `rows` kernel rows a step: the whole array
    for one row, else mac.cols // rows (the group g takes lanes g*n .. g*n + n - 1; the lanes past
    the last group hold nothing)."""
    return cols if rows == 1 else cols // rows


class Reg(enum.IntEnum):
    """Register numbers. Addresses are byte addresses within the named SRAM."""
    # Input feature map of a MAC operation (tile-local, in the input SRAM or, IFM_SRAM, the output SRAM)
    IFM_ADDR = 0x00         # input element (row 0, column 0, channel 0) of the tile
    IFM_ROW_STRIDE = 0x01   # bytes between input rows
    IFM_PIX_STRIDE = 0x02   # bytes between input pixels
    IFM_CBLOCKS = 0x03      # input-channel blocks of mac.cols lanes per pixel
    IFM_ZP = 0x04           # input zero point (signed)
    IFM_DTYPE = 0x05        # DType of the input elements
    IFM_SRAM = 0x06         # Sram the MAC reads its input words from: INPUT, or OUTPUT (CONV2D, MATMUL)
    # Weights
    WGT_ADDR = 0x08         # first weight block in the weight SRAM
    WGT_ZP = 0x09           # weight zero point (signed)
    KERNEL_H = 0x0A
    KERNEL_W = 0x0B
    STRIDE_H = 0x0C
    STRIDE_W = 0x0D
    DILATION_H = 0x0E
    DILATION_W = 0x0F
    # Output feature map (in the output SRAM)
    OFM_ADDR = 0x10
    OFM_ROW_STRIDE = 0x11
    OFM_PIX_STRIDE = 0x12
    OFM_H = 0x13
    OFM_W = 0x14
    OFM_C = 0x15            # output channels of the tile (processed mac.rows at a time)
    OFM_DTYPE = 0x16        # DType stored in the output SRAM
    OFM_ZP = 0x17           # output zero point added after rescaling (signed)
    # Output stage
    PARAM_ADDR = 0x18       # parameter record of the tile's first output channel
    OUT_MODE = 0x19         # OutMode bits
    CLAMP_MIN = 0x1A        # signed
    CLAMP_MAX = 0x1B        # signed
    LUT_MODE = 0x1C         # LutMode
    LUT_ADDR = 0x1D         # first entry of the table in the LUT SRAM
    RESCALE_DTYPE = 0x1E    # DType the rescaled value saturates to (the LUT's input type)
    # DMA: a copy of LEN2 x LEN1 runs of LEN0 contiguous bytes
    DMA_EXT_ADDR = 0x20
    DMA_SRAM_ADDR = 0x21
    DMA_LEN0 = 0x22
    DMA_LEN1 = 0x23
    DMA_LEN2 = 0x24
    DMA_EXT_STRIDE1 = 0x25
    DMA_EXT_STRIDE2 = 0x26
    DMA_SRAM_STRIDE1 = 0x27
    DMA_SRAM_STRIDE2 = 0x28
    # Elementwise unit (ELTWISE): out[i] = stage(op(rescale_a(A[i]), rescale_b(B[i]))), i < ELT_COUNT
    ELT_A_ADDR = 0x30       # operand A in the input SRAM (one element when EltMode.A_SCALAR)
    ELT_B_ADDR = 0x31       # operand B in the weight SRAM (one element when EltMode.B_SCALAR)
    ELT_OUT_ADDR = 0x32     # result in the output SRAM
    ELT_COUNT = 0x33        # elements
    ELT_A_DTYPE = 0x34
    ELT_B_DTYPE = 0x35
    ELT_A_ZP = 0x36         # signed; subtracted before A's left shift and input rescale
    ELT_B_ZP = 0x37         # signed
    ELT_A_MULT = 0x38       # A's input rescale (apply_scale_32 to int32)
    ELT_A_SHIFT = 0x39
    ELT_B_MULT = 0x3A
    ELT_B_SHIFT = 0x3B
    ELT_MODE = 0x3C         # EltMode bits
    ELT_SHIFT = 0x3D        # MUL's shift operand
    ELT_CHANNELS = 0x3E     # element i uses output-stage parameter record PARAM_ADDR + i % ELT_CHANNELS
    # Pooling unit (POOL), with the IFM_*, KERNEL_*, STRIDE_* and OFM_* registers: the input box
    # starts POOL_PAD_TOP rows / POOL_PAD_LEFT columns before the image; only POOL_IN_H x POOL_IN_W
    # positions from there are real (the rest is padding, excluded from max and average)
    POOL_PAD_TOP = 0x40
    POOL_PAD_LEFT = 0x41
    POOL_IN_H = 0x42
    POOL_IN_W = 0x43
    # Elementwise unit, continued: (A - ELT_A_ZP) << ELT_A_LSHIFT (wrapping to 32 bits) before A's
    # input rescale (TFLite's quantised ADD: a RESCALE that only shifts, then one that scales)
    ELT_A_LSHIFT = 0x44
    ELT_B_LSHIFT = 0x45
    # Variable SRAM (VAR): a slot is VAR_BYTES at VAR_ADDR with its written flag VAR_SLOT
    VAR_ADDR = 0x48
    VAR_BYTES = 0x49
    VAR_SLOT = 0x4A
    VAR_EXT_ADDR = 0x4B     # external-memory side of the transfer
    # A window-mode MAC command's input box (DEPTHWISE, _PAIRED, _TRIPLE, _PACKED): only IFM_IN_H x IFM_IN_W
    # positions from row IFM_PAD_TOP, column IFM_PAD_LEFT of the box hold pixels; every other
    # position reads as IFM_ZP in each channel (TOSA's padding), whatever its SRAM word holds.
    # IFM_IN_H = 0 (from reset): every position holds a pixel.
    IFM_PAD_TOP = 0x4C
    IFM_PAD_LEFT = 0x4D
    IFM_IN_H = 0x4E
    IFM_IN_W = 0x4F


# Registers whose 32-bit value is read as two's complement.
SIGNED_REGS = frozenset({Reg.IFM_ZP, Reg.WGT_ZP, Reg.OFM_ZP, Reg.CLAMP_MIN, Reg.CLAMP_MAX,
                         Reg.ELT_A_ZP, Reg.ELT_B_ZP})

# The registers a MAC operation reads: the bench re-sends exactly these to an RTL tile.
MAC_REGS = tuple(r for r in Reg if r < Reg.DMA_EXT_ADDR) + (Reg.IFM_PAD_TOP, Reg.IFM_PAD_LEFT, Reg.IFM_IN_H,
                                                            Reg.IFM_IN_W)
# Output-stage registers shared by MAC, ELTWISE and POOL commands.
OUTPUT_STAGE_REGS = (Reg.OFM_DTYPE, Reg.OFM_ZP, Reg.PARAM_ADDR, Reg.OUT_MODE, Reg.CLAMP_MIN, Reg.CLAMP_MAX,
                     Reg.LUT_MODE, Reg.LUT_ADDR, Reg.RESCALE_DTYPE)
# The registers an ELTWISE / a POOL command reads (with the output stage's).
ELT_REGS = tuple(r for r in Reg if Reg.ELT_A_ADDR <= r <= Reg.ELT_CHANNELS) + (Reg.ELT_A_LSHIFT, Reg.ELT_B_LSHIFT) \
    + OUTPUT_STAGE_REGS
POOL_REGS = (Reg.IFM_ADDR, Reg.IFM_ROW_STRIDE, Reg.IFM_PIX_STRIDE, Reg.IFM_ZP, Reg.IFM_DTYPE, Reg.KERNEL_H,
             Reg.KERNEL_W, Reg.STRIDE_H, Reg.STRIDE_W, Reg.OFM_ADDR, Reg.OFM_ROW_STRIDE, Reg.OFM_PIX_STRIDE,
             Reg.OFM_H, Reg.OFM_W, Reg.OFM_C, Reg.POOL_PAD_TOP, Reg.POOL_PAD_LEFT, Reg.POOL_IN_H,
             Reg.POOL_IN_W, Reg.IFM_SRAM) + OUTPUT_STAGE_REGS


class EltOp(enum.IntEnum):
    """`sub` of ELTWISE: the operation on the (rescaled) operands, as the TOSA op of that name."""
    ADD = 0
    SUB = 1
    MUL = 2                  # with ELT_SHIFT
    MINIMUM = 3
    MAXIMUM = 4
    LOGICAL_LEFT_SHIFT = 5
    LOGICAL_RIGHT_SHIFT = 6
    ARITHMETIC_RIGHT_SHIFT = 7   # EltMode.ROUND selects the rounding form
    COPY = 8                 # unary: A through its rescale and the output stage (RESCALE, TABLE, CLAMP)


class EltMode(enum.IntFlag):
    A_RESCALE = 1 << 0       # A := apply_scale_32(A - ELT_A_ZP, ELT_A_MULT, ELT_A_SHIFT) (else A - ELT_A_ZP)
    B_RESCALE = 1 << 1
    B_SCALAR = 1 << 2        # B is one element, used for every i
    ROUND = 1 << 3           # ARITHMETIC_RIGHT_SHIFT rounds
    A_UNSIGNED = 1 << 4      # A's elements are read as unsigned (int8 / int16)
    B_UNSIGNED = 1 << 5
    A_DOUBLE_ROUND = 1 << 6  # A's input rescale uses double rounding
    B_DOUBLE_ROUND = 1 << 7  # B's input rescale uses double rounding
    A_SCALAR = 1 << 8        # A is one element, used for every i
    A_FROM_OUTPUT = 1 << 9   # A is read from the output SRAM (an earlier command's result, kept on chip)
    B_FROM_OUTPUT = 1 << 10  # B likewise, instead of the weight SRAM


class PoolMode(enum.IntEnum):
    MAX = 0
    AVG = 1                  # sum of real positions, scaled by reciprocal_scale(count)
    SUM = 2                  # wrap32 sum of (x - IFM_ZP) over the real positions (REDUCE_SUM)
    MIN = 3                  # minimum over the real positions (REDUCE_MIN)


class VarOp(enum.IntEnum):
    """`sub` of VAR. A slot's written flag survives invocations; only a power-on reset clears it."""
    INIT = 0                 # if the slot is not written: slot := VAR_BYTES from VAR_EXT_ADDR, mark written
    READ = 1                 # external memory at VAR_EXT_ADDR := slot (VAR_READ_BEFORE_WRITE if not written)
    WRITE = 2                # slot := VAR_BYTES from VAR_EXT_ADDR, mark written
    # Flags only, for a variable the compiler keeps in external memory (the DMA moves its bytes):
    CHECK = 3                # VAR_READ_BEFORE_WRITE if the slot is not written; nothing moves
    MARK = 4                 # mark the slot written; nothing moves


# Written flags of the variable SRAM: VAR_SLOT selects one of these (so at most this many variables).
VAR_SLOTS = 32


class OutMode(enum.IntFlag):
    RESCALE = 1 << 0        # apply RESCALE (else: the accumulator plus bias, stored as OFM_DTYPE)
    SCALE32 = 1 << 1        # apply_scale_32 (else apply_scale_16)
    DOUBLE_ROUND = 1 << 2   # double rounding in apply_scale_32
    UNSIGNED_OUT = 1 << 3   # saturate to the unsigned range of RESCALE_DTYPE


class LutMode(enum.IntEnum):
    OFF = 0
    INT8 = 1     # 256 entries, result = table[value + 128]
    INT16 = 2    # 513 entries, interpolated (apply_lookup_s), int32 result


class Status(enum.IntEnum):
    """Completion codes the command processor reports."""
    OK = 0
    BAD_OPCODE = 1
    BAD_REGISTER = 2
    ADDRESS_RANGE = 3
    BAD_MODE = 4
    VAR_READ_BEFORE_WRITE = 5
    COMMAND_OVERRUN = 6   # the program ran past its end without END
    DMA_HAZARD = 7        # a compute command's DMA slack leaves a transfer running over its bytes (golden only)


@dataclass(frozen=True)
class Command:
    opcode: Opcode
    sub: int = 0
    imm: int = 0
    value: int = 0

    def encode(self) -> int:
        if not 0 <= self.sub < 256:
            raise IsaError(f"{self.opcode.name}: sub field {self.sub} does not fit 8 bits")
        if not 0 <= self.imm < 65536:
            raise IsaError(f"{self.opcode.name}: imm field {self.imm} does not fit 16 bits")
        if not -(1 << 31) <= self.value < (1 << 32):
            raise IsaError(f"{self.opcode.name}: value {self.value} does not fit 32 bits")
        return COMMAND_WORD.pack(opcode=int(self.opcode), sub=self.sub, imm=self.imm, value=self.value & 0xFFFFFFFF)

    @staticmethod
    def decode(word: int) -> "Command":
        f = COMMAND_WORD.unpack(word)
        try:
            opcode = Opcode(f["opcode"])
        except ValueError:
            raise IsaError(f"unknown opcode 0x{f['opcode']:02x} in command word 0x{word:016x}") from None
        return Command(opcode, f["sub"], f["imm"], f["value"])

    @property
    def ahead(self) -> bool:
        """A DMA_LOAD, DMA_STORE or FILL flagged DMA_AHEAD."""
        return bool(self.imm & DMA_AHEAD)

    def disassemble(self) -> str:
        if self.opcode == Opcode.SET:
            try:
                reg = Reg(self.sub)
            except ValueError:
                return f"SET r{self.sub:#04x}, {self.value}"
            v = self.value - (1 << 32) if reg in SIGNED_REGS and self.value >= (1 << 31) else self.value
            return f"SET {reg.name}, {v}"
        if self.opcode in (Opcode.DMA_LOAD, Opcode.DMA_STORE, Opcode.FILL):
            text = f"{self.opcode.name} {Sram(self.sub).name}"
            text += f", {self.value}" if self.opcode == Opcode.FILL else ""
            return text + (" AHEAD" if self.ahead else "")
        if self.opcode == Opcode.MAC:
            return f"MAC {MacMode(self.sub).name}"
        if self.opcode in (Opcode.ELTWISE, Opcode.POOL):
            enum_ = EltOp if self.opcode == Opcode.ELTWISE else PoolMode
            try:
                return f"{self.opcode.name} {enum_(self.sub).name}"
            except ValueError:
                return f"{self.opcode.name} {self.sub}"
        if self.opcode == Opcode.VAR and self.sub in VarOp._value2member_map_:
            return f"VAR {VarOp(self.sub).name}"
        if self.opcode in (Opcode.HOST, Opcode.MARK, Opcode.END):
            return f"{self.opcode.name} {self.value}"
        return self.opcode.name


# DMA_LOAD, DMA_STORE, FILL: imm16 bit 0 — the command may decode while a compute command runs
# (docs/isa.md, "Timing"): the compiler's promise that the transfer touches none of that command's
# bytes (command_plan.DmaWindow; the golden model refuses a program that breaks it: DMA_HAZARD).
DMA_AHEAD = 1


def set_reg(reg: Reg, value: int) -> Command:
    """A SET command; negative values of signed registers are stored as two's complement."""
    if reg in SIGNED_REGS:
        if not -(1 << 31) <= value < (1 << 31):
            raise IsaError(f"SET {reg.name}: {value} does not fit a signed 32-bit register")
    elif not 0 <= value < (1 << 32):
        raise IsaError(f"SET {reg.name}: {value} does not fit an unsigned 32-bit register")
    return Command(Opcode.SET, int(reg), 0, value & 0xFFFFFFFF)


def pack(commands: Iterable[Command]) -> bytes:
    return b"".join(struct.pack("<Q", c.encode()) for c in commands)


def unpack(blob: bytes) -> list[Command]:
    if len(blob) % WORD_BYTES:
        raise IsaError(f"a command stream is a whole number of 8-byte words; got {len(blob)} bytes")
    return [Command.decode(w) for (w,) in struct.iter_unpack("<Q", blob)]
