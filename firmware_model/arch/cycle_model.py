"""Cycle model of the NPU: how many clocks each command takes, and when each command runs.

This is the performance model the golden model counts with and the architects' estimates come
from. Every formula is the RTL's own schedule; the co-simulation checks the RTL's cycle counter
against it at every tile and at the end of every invocation, exactly.

Two engines run at once: the command processor, which runs the compute units (MAC, ELTWISE,
POOL) one command at a time, and the DMA engine, which runs DMA_LOAD, DMA_STORE and FILL from a
queue of DMA_QUEUE_DEPTH descriptors. `Timeline` follows both (docs/isa.md, "Timing").
"""

from __future__ import annotations

from collections import deque

import numpy as np

from firmware_model.arch.config import LUT_ENTRY_BYTES, NpuConfig
from firmware_model.arch.isa import PARAM_RECORD_BYTES, LutMode, MacMode, PoolMode, Sram, depthwise_rows, packed_groups
from firmware_model.tosa_ops.dtypes import DType

# Command processor (hw/command_processor.py): a command's DECODE clock, with a FETCH clock before
# it unless the command before chained (Timeline).
DECODE_CLOCKS = 1

# DMA engine (hw/dma_engine.py): descriptors waiting in its queue; a DMA command finding the queue
# full stalls the command processor until a slot frees.
DMA_QUEUE_DEPTH = 4
# A transfer keeps the engine busy `latency + beats + DMA_TAIL` clocks from the clock it is popped
# (the last beat's write, the return to IDLE); an empty transfer only its pop clock.
DMA_TAIL = 2
# An empty transfer (a length of 0) takes only its pop clock, from IDLE.
EMPTY_TRANSFER_CYCLES = 1


def sram_word_bytes(cfg: NpuConfig, sram: Sram) -> int:
    """Bytes of one word of an SRAM as the DMA writes it: a MAC-array word (input, weight, output,
    variable, and the LUT SRAM's mac.cols / 2 entries: a table loads at the external bandwidth),
    a parameter record."""
    if sram == _PARAM:
        return PARAM_RECORD_BYTES
    return cfg.word_bytes


_PARAM, _LUT = Sram.PARAM, Sram.LUT


def run_beats(word_bytes: int, cap: int, offset, len0: int):
    """Beats of a run of `len0` bytes starting `offset` bytes into an SRAM word: per word touched,
    ceil(its bytes / cap). `offset` may be an array (one run each)."""
    offset = np.asarray(offset, dtype=np.int64)
    first = np.minimum(len0, word_bytes - offset)
    rest = len0 - first
    full, tail = rest // word_bytes, rest % word_bytes
    per_word = -(-word_bytes // cap)
    return -(-first // cap) + full * per_word + -(-tail // cap)


def dma_beats(cfg: NpuConfig, sram: Sram, *, sram_addr: int, len0: int, len1: int, len2: int,
              sram_stride1: int = 0, sram_stride2: int = 0, fill: bool = False) -> int:
    """Beats of a transfer: each moves the bytes of one run inside one SRAM word, at most
    `ext.bandwidth` of them (FILL: no cap), so a run's beats depend on where it starts in a word."""
    if not (len0 and len1 and len2):
        return 0
    wb = sram_word_bytes(cfg, sram)
    cap = wb if fill else cfg.ext_bandwidth
    if (len1 == 1 or sram_stride1 % wb == 0) and (len2 == 1 or sram_stride2 % wb == 0):
        # every run starts at the same offset in its word: the same sum without an array per run
        offset = sram_addr % wb
        first = min(len0, wb - offset)
        full, tail = divmod(len0 - first, wb)
        return len1 * len2 * (-(-first // cap) + full * -(-wb // cap) + -(-tail // cap))
    starts = (sram_addr + np.arange(len2, dtype=np.int64)[:, None] * sram_stride2
              + np.arange(len1, dtype=np.int64)[None, :] * sram_stride1)
    return int(np.sum(run_beats(wb, cap, starts % wb, len0)))


def dma_busy_cycles(cfg: NpuConfig, sram: Sram, *, fill: bool = False, **geometry) -> int:
    """Clocks the DMA engine spends on a transfer, from the clock it is popped from the queue to
    the clock it can pop the next: ext.latency (not for FILL) + beats + DMA_TAIL, or 1 when empty."""
    beats = dma_beats(cfg, sram, fill=fill, **geometry)
    if beats == 0:
        return EMPTY_TRANSFER_CYCLES
    return (0 if fill else cfg.ext_latency) + beats + DMA_TAIL


class Timeline:
    """When each command runs, in clocks from the first fetch of an invocation (clock 0).

    The command processor fetches a command at clock f and decodes it at f + 1. A command that
    completes in its decode clock fetches the next one in that clock (it *chains*: the next
    decode follows at once); after the others a FETCH clock comes first. `fetch` is the clock of
    the next fetch:
    - SET, NOP, MARK: chained, one clock each, also while a compute command runs (lookahead:
      from the clock after its start; in its done clock nothing decodes, so a SET due then
      decodes the clock after);
    - DMA_LOAD / DMA_STORE / FILL (flagged DMA_AHEAD: also while a compute command runs, as a
      SET): pushed into the DMA queue at the decode clock, or at the first
      clock a slot is free (the queue holds DMA_QUEUE_DEPTH descriptors: a slot frees the clock
      after a pop); chained at the push. The engine pops a descriptor the clock after
      its push, when it is idle, and is idle again `busy` clocks later (dma_busy_cycles); or,
      while a transfer is in flight, in that one's last (DRAIN) clock. A queued transfer's
      latency runs from the clock after its push, beside the transfers before it (`dma`);
    - every other command decodes once the compute command before it (if any) is done: at the
      clock after its done at the earliest;
    - MAC, ELTWISE, POOL: at the decode clock, or when at most `slack` transfers (the command's
      value32: the latest ones pushed) are still outstanding if that is later — slack 0: the DMA
      engine idle with an empty queue — the unit starts (and chains: the next command decodes the
      clock after); it reports done `unit` clocks later (its own formula below). A MAC command
      that waits in decode, ready but for a MAC command running, lets that one preload its first
      weight block once its own preload window is open: from the clock both hold (at the latest
      the running command's done clock), the rows' load takes `rows` + 2 clocks and the command
      then skips what it would have waited of its first weight load (`rows`, less what is left
      of the preload; `unit`'s `mac`);
    - BARRIER, HOST, END: wait for the DMA engine likewise; BARRIER then chains; END's clock + 1
      is the invocation's cycle count; HOST hands over to the host at that clock (host time is
      not NPU time), and the next fetch follows its return;
    - VAR: waits for the DMA engine, then a transfer (if any) runs on it: pushed at the clock it
      may start, the next fetch the clock after the engine is idle again; without a transfer it
      chains.
    """

    def __init__(self, latency: int = 0, queue_depth: int = DMA_QUEUE_DEPTH):
        self.latency = latency         # ext.latency
        self.queue_depth = queue_depth
        self.fetch = 0                 # clock of the next fetch
        self.dma_idle = 0              # clock from which the engine is idle with an empty queue
        self.pops: deque = deque(maxlen=queue_depth)   # pop clocks of the latest transfers
        # completion clocks of the latest transfers (at most queue_depth + 1 are ever outstanding)
        self.done_at: deque = deque(maxlen=queue_depth + 3)
        self.stall = 0                 # clocks the command processor waited (queue full, DMA busy)
        self.unit_done = -1            # done clock of the compute command running (or the last one)
        self.preload_from = None       # ... a MAC's: the clock its preload window opens (None: none)
        # decode clocks the command processor spent while a compute unit ran: the unit's clocks
        # already count them (command_plan.count_hidden takes them off the command clocks)
        self.hidden = 0

    @property
    def reached(self) -> int:
        """The clock by which the command processor has finished every command so far: the next
        fetch, or the clock after the running compute command's done if that is later."""
        return max(self.fetch, self.unit_done + 1)

    def _decode(self) -> int:
        return max(self.fetch + 1, self.unit_done + 1)

    def _wait_dma(self, decode: int) -> int:
        start = max(decode, self.dma_idle)
        self.stall += start - decode
        return start

    def simple(self) -> int:
        """SET, NOP, MARK: the decode clock (chained)."""
        d = self.fetch + 1
        if d == self.unit_done:
            d += 1
        elif d < self.unit_done:
            self.hidden += 1
        self.fetch = d
        return d

    def simple_run(self, n: int) -> None:
        """`n` SET, NOP or MARK commands in a row: what n calls of simple() do."""
        end = self.fetch + n * DECODE_CLOCKS
        if self.fetch < self.unit_done:
            self.hidden += min(n, self.unit_done - 1 - self.fetch)
            if self.unit_done <= end:
                end += 1
        self.fetch = end

    def dma(self, busy: int, fill: bool = False, ahead: bool = False) -> tuple[int, int]:
        """A DMA command whose transfer alone keeps the engine `busy` clocks (dma_busy_cycles):
        (pop clock, idle clock).

        The external memory takes the request of every queued transfer, so a transfer's latency
        runs from the clock after its push, while the ones before it are in flight. The engine
        pops it in the DRAIN clock of the one before (or from IDLE), and its beats start the
        clock after, or when its latency is over if that is later. An empty transfer waits for
        the engine to be idle. An `ahead` one (DMA_AHEAD) decodes while a compute command runs,
        as a SET does: pushed in its decode clock or when a queue slot frees, but not in the unit's
        done clock; its clocks under the unit are the unit's (`hidden`, not `stall`)."""
        d = self.fetch + 1 if ahead else self._decode()
        push = d
        if len(self.pops) == self.queue_depth:
            push = max(d, self.pops[0] + 1)
        if push == self.unit_done:
            push += 1
        under = max(0, min(push - 1, self.unit_done) - d + 1)     # waiting clocks under the unit
        self.stall += push - d - under
        if push < self.unit_done:
            self.hidden += 1
        prev_idle = self.dma_idle
        if busy == EMPTY_TRANSFER_CYCLES:               # empty: the pop clock, from IDLE
            pop = max(push + 1, prev_idle)
            self.dma_idle = pop + 1
        else:
            latency = 0 if fill else self.latency
            pop = max(push + 1, prev_idle - 1)          # from IDLE, or in the DRAIN clock before
            beats_start = pop + 1 if fill else max(pop + 1, push + latency + 2)
            self.dma_idle = beats_start + busy - latency - 1
        self.pops.append(pop)
        self.done_at.append(self.dma_idle)
        self.fetch = push
        return pop, self.dma_idle

    def unit(self, cycles: int, slack: int = 0, mac: tuple[int, int | None] | None = None) -> tuple[int, int]:
        """A compute command of `cycles` clocks that may leave the latest `slack` transfers running:
        (start clock, done clock). A MAC command gives `mac` = (rows, its preload window:
        mac_command_timing's clock from its start, or None): when it reaches decode while a MAC
        command with an open window runs, and is ready (its slack met) by that one's done clock,
        its first weight block is preloaded from the clock all three hold, `go`: the load's rows
        are in at go + rows + 2. Instead of its own weight load (rows + 1 clocks from start + 3,
        after SETUP and CHECK) the command swaps the block in once it is in, in one clock from
        start + 3 at the earliest: its first read comes min(rows, start + 1 - go) clocks
        earlier."""
        decoded = self.fetch + 1                 # the decode clock, while a unit runs
        d = self._decode()
        if slack == 0:
            ready = self.dma_idle
            start = self._wait_dma(d)
        else:
            # the (slack+1)-th latest transfer must have finished; transfers finish in order
            ready = self.done_at[-slack - 1] if slack < len(self.done_at) else 0
            start = max(d, ready)
            self.stall += start - d
        saved = 0
        if mac is not None and self.preload_from is not None:
            go = max(self.preload_from, decoded, ready)
            if go <= self.unit_done:
                saved = min(mac[0], start + 1 - go)
        done = start + cycles - saved
        self.preload_from = (start - saved + mac[1]) if mac is not None and mac[1] is not None else None
        self.unit_done = done
        self.fetch = start
        return start, done

    def barrier(self) -> int:
        """BARRIER: the clock the command processor goes on (chained)."""
        w = self._wait_dma(self._decode())
        self.fetch = w
        return w

    def host(self) -> int:
        """HOST: the clock the command processor hands over to the host (host time excluded);
        the next fetch follows."""
        w = self._wait_dma(self._decode())
        self.fetch = w + 1
        return w

    def end(self) -> int:
        """END: the invocation's cycle count (also `fetch`, where a next invocation would start)."""
        self.fetch = self._wait_dma(self._decode()) + 1
        return self.fetch

    def var(self, busy: int | None) -> tuple[int, int]:
        """A VAR command: its transfer keeps the engine `busy` clocks (None: no transfer, an INIT
        of a written slot): (start clock, done clock)."""
        w = self._wait_dma(self._decode())
        if busy is None:
            self.fetch = w
            return w, w
        pop = w + 1
        self.dma_idle = pop + busy
        self.pops.append(pop)
        self.done_at.append(self.dma_idle)
        self.fetch = self.dma_idle + 1
        return w, self.dma_idle


# MAC sequencer (hw/mac_sequencer.py): SETUP + CHECK + DONE, and the output pipeline's drain
# (bias stage 1, the output stage 7: rescale 4, clamp 1, table 2, write 1) after each block of
# output channels.
MAC_FIXED = 3
MAC_OUTPUT_DRAIN = 9
# The vector output path (hw/vector_output_stage.py, hw/vector_writer.py): a pixel's lanes leave
# together; after the last pixel's write clocks, the accumulator read 1, the bias stage 1, the
# vector stage 5 (rescale 4, clamp 1) and the writer's register 1.
MAC_VECTOR_DRAIN = 8


def vector_write_words(word_bytes: int, addr, nbytes):
    """Output-SRAM words that `nbytes` contiguous bytes from byte address `addr` touch: the vector
    writer's clocks for one pixel. `addr` and `nbytes` may be arrays."""
    return (np.asarray(addr, dtype=np.int64) % word_bytes + nbytes + word_bytes - 1) // word_bytes


def uses_vector_output(ofm_dtype, lut_mode):
    """Whether a MAC command stores through the vector path: not with a table (one LUT read port)
    nor an 8-byte int48 element. Written with `&` so that it holds for register values (a bool)
    and for Amaranth values alike: hw/mac_sequencer.py elaborates this same function at SETUP."""
    return (lut_mode == LutMode.OFF) & (ofm_dtype != DType.INT48)


def element_write_clocks(cfg: NpuConfig, element_bytes: int) -> int:
    """Clocks to store one output element: one word write, two for an 8-byte (int48) element on
    a 4-byte word."""
    return max(1, -(-element_bytes // cfg.word_bytes))


def mac_command_cycles(cfg: NpuConfig, **command) -> int:
    """Clocks of a MAC command from its start to its done pulse (mac_command_timing), when no
    preload gives it its first weight block."""
    return mac_command_timing(cfg, **command)[0]


def mac_command_timing(cfg: NpuConfig, *, ofm_h: int, ofm_w: int, ofm_c: int, kernel_h: int,
                       kernel_w: int, ifm_cblocks: int, write_clocks: int = 1, vector: bool = False,
                       ofm_addr: int = 0, ofm_row_stride: int = 0, ofm_pix_stride: int = 0,
                       element_bytes: int = 1, window: int | None = None, stride_w: int = 1,
                       dilation_w: int = 1, lane_pairs: bool = False,
                       row_pairs: bool = False) -> tuple[int, int | None]:
    """(cycles, preload window) of a MAC command: its clocks from its start to its done pulse, and
    the clock (from its start) from which it may preload the next MAC command's first weight
    block (Timeline.unit), None on the scalar path (whose output loop reads the parameter port).
    The window opens the clock after the command's last block goes to the output engine: with
    its last step's first read for one block (mac_early_output_cycles' T), after the last
    accumulation for several.

    Per block of `rows` output channels: the reduction steps (kernel position x input-channel
    block), each a pass over the P output pixels with the weights prefetched
    (mac_block_cycles); then the output:
    - scalar path: per pixel one accumulator read and `write_clocks` per channel lane
      (element_write_clocks), and the drain;
    - `vector` path (uses_vector_output): an output engine drains each block's accumulators, per
      pixel the words its lanes' bytes touch in the output SRAM (vector_write_words, from
      OFM_ADDR and the strides), plus the drain: O_b clocks for block b. It runs beside the next
      block's accumulation when the tile fits half the accumulators (the blocks alternate
      halves), else the next block waits for it; each hand-over takes a clock, and the command
      ends when the engine has finished the last block.

    A window-mode command (`window`: its MacMode, DEPTHWISE, _PAIRED, _TRIPLE or _PACKED) takes
    the steps of depthwise_windows, each streaming its input words (depthwise_stream_clocks)
    instead of one vector per pixel.
    With `lane_pairs` (MacMode.CONV2D_LANE_PAIRS) the steps of the last input-channel block stream
    two output pixels a beat (conv_streams); with `row_pairs` (CONV2D_ROW_PAIRS, CONV2D_PAIRS)
    every step of the last block of output channels does (row_pair_streams).

    A vector-path command of one block of output channels starts its output engine with the
    block's last step (mac_early_output_cycles): the engine drains each pixel as soon as the last
    step has accumulated it, behind the stream instead of after it; a row-paired one (at most
    R/2 channels) drains a pixel pair at a time, the odd pixel through the output SRAM's second
    write port in the same clocks (the pair's larger word count).
    """
    rows = cfg.mac_rows
    pixels = ofm_h * ofm_w
    streams, last_streams, n_ocb = mac_command_streams(
        cfg, ofm_h=ofm_h, ofm_w=ofm_w, ofm_c=ofm_c, kernel_h=kernel_h, kernel_w=kernel_w, ifm_cblocks=ifm_cblocks,
        window=window, stride_w=stride_w, dilation_w=dilation_w, lane_pairs=lane_pairs, row_pairs=row_pairs)
    if not vector:
        return (MAC_FIXED + (n_ocb - 1) * (mac_block_cycles(cfg, streams) + pixels + MAC_OUTPUT_DRAIN)
                + mac_block_cycles(cfg, last_streams) + pixels + MAC_OUTPUT_DRAIN + pixels * ofm_c * write_clocks,
                None)
    pix = (ofm_addr + np.arange(ofm_h, dtype=np.int64)[:, None] * ofm_row_stride
           + np.arange(ofm_w, dtype=np.int64)[None, :] * ofm_pix_stride)
    if n_ocb == 1:
        pixel_words = vector_write_words(cfg.word_bytes, pix, ofm_c * element_bytes).reshape(-1)
        if window is not None:
            last_window = depthwise_windows(cfg, window, kernel_h, kernel_w, dilation_w)[-1]
            first, step = depthwise_beat_clocks(*last_window, stride_w)
            beats = (np.arange(ofm_h, dtype=np.int64)[:, None] * (first + (ofm_w - 1) * step)
                     + (first - 1) + np.arange(ofm_w, dtype=np.int64)[None, :] * step).reshape(-1)
        else:
            # a paired last step (row pairs, or lane pairs of one block: the only step of a kernel
            # position) accumulates pixels 2i and 2i+1 with its beat i
            paired = row_pairs or (lane_pairs and ifm_cblocks == 1)
            beats = np.arange(pixels, dtype=np.int64) // (2 if paired else 1)
            if row_pairs:
                # the engine takes a pixel pair a clock, the odd pixel through the second write
                # port: the pair's larger word count (OFM_W, so P, is even: rule 'pixel pairs')
                beats, pixel_words = beats[::2], pixel_words.reshape(-1, 2).max(axis=1)
        return (mac_early_output_cycles(cfg, last_streams, beats, pixel_words),
                early_output_start(cfg, last_streams))
    words = [int(vector_write_words(cfg.word_bytes, pix + ocb * rows * element_bytes,
                                    min(rows, ofm_c - ocb * rows) * element_bytes).sum()) for ocb in range(n_ocb)]
    total = mac_vector_cycles(cfg, pixels, streams, words, last_streams)
    return total, total - (words[-1] + MAC_VECTOR_DRAIN) - 1


def mac_command_streams(cfg: NpuConfig, *, ofm_h: int, ofm_w: int, ofm_c: int, kernel_h: int, kernel_w: int,
                        ifm_cblocks: int, window: int | None = None, stride_w: int = 1, dilation_w: int = 1,
                        lane_pairs: bool = False, row_pairs: bool = False) -> tuple[list[int], list[int], int]:
    """(the stream clocks of each step of a block of output channels, those of the last block,
    the number of blocks) of a MAC command (mac_command_timing's arguments): a window-mode step
    streams its input words (depthwise_stream_clocks), a CONV2D or MATMUL step one vector per
    output pixel or pixel pair (conv_streams), and a row-paired command's last block two pixels a
    beat in every step (row_pair_streams)."""
    pixels = ofm_h * ofm_w
    if window is not None:
        windows = depthwise_windows(cfg, window, kernel_h, kernel_w, dilation_w)
        streams = [depthwise_stream_clocks(ofm_h, ofm_w, stride_w, n, two) for n, two in windows]
    else:
        streams = conv_streams(kernel_h, kernel_w, ifm_cblocks, pixels, lane_pairs)
    return streams, row_pair_streams(streams, pixels) if row_pairs else streams, -(-ofm_c // cfg.mac_rows)


def mac_stream_clocks(cfg: NpuConfig, **command) -> int:
    """The clocks a MAC command's steps stream their inputs, over all its blocks
    (mac_command_streams): the array's reads alone, without the weight loads, the pipeline's
    ends, the output and the fixed clocks. No command of this mapping takes fewer, so useful MACs
    over these clocks times the array's MACs is the ceiling of its utilisation on this array
    (the benchmark's "mapping" limit)."""
    streams, last_streams, n_ocb = mac_command_streams(cfg, **command)
    return (n_ocb - 1) * sum(streams) + sum(last_streams)


def row_pair_streams(streams: list[int], pixels: int) -> list[int]:
    """The steps of a block whose beats take two output pixels each (the last block of a
    CONV2D_ROW_PAIRS or CONV2D_PAIRS command): ceil(P / 2) clocks every one."""
    return len(streams) * [-(-pixels // 2)]


def conv_streams(kernel_h: int, kernel_w: int, ifm_cblocks: int, pixels: int, lane_pairs: bool = False) -> list[int]:
    """Stream clocks of each step of a CONV2D or MATMUL block, in the order (ky, kx, input-channel
    block): one input vector per output pixel, P; with `lane_pairs` (MacMode.CONV2D_LANE_PAIRS) a
    step of the last input-channel block takes two pixels a beat, ceil(P / 2) (the rule 'pixel
    pairs' makes OFM_W, so P, even), and comes first at its kernel position
    (isa.lane_pair_blocks)."""
    if lane_pairs:
        return kernel_h * kernel_w * ([-(-pixels // 2)] + (ifm_cblocks - 1) * [pixels])
    return kernel_h * kernel_w * ifm_cblocks * [pixels]


def early_output_start(cfg: NpuConfig, streams: list[int]) -> int:
    """T: the clock (from the command's start) of the last step's first read in a command of one
    block of output channels, its steps streaming `streams` clocks: SETUP, CHECK, the first
    weight load and the steps before."""
    return 2 + (cfg.mac_rows + 1) + sum(mac_step_clocks(cfg, s) for s in streams[:-1])


def mac_early_output_cycles(cfg: NpuConfig, streams: list[int], beats: np.ndarray, words: np.ndarray) -> int:
    """A vector-path MAC command of one block: the output engine starts as the block's last step
    starts streaming, at T = 2 + (rows + 1) + sum over the steps before of mac_step_clocks(S_i)
    clocks from the command's start (SETUP, CHECK, the first weight load, the steps), and takes
    pixel p (raster order) at the earliest when the last step has accumulated it, 3 clocks after
    the stream's read `beats[p]` that completes it (its beat, the accumulator write, the
    counter), and `words[p-1]` clocks after pixel p-1:

        u_p = max(u_(p-1) + words_(p-1), T + beats_p + 3)

    The engine is idle MAC_VECTOR_DRAIN clocks after u_last + words_last; the command ends two
    clocks after both the engine is idle and the accumulation has ended (A + 3: SETUP, CHECK, the
    block, its hand-over)."""
    start = early_output_start(cfg, streams)
    ready = start + beats + 3
    before = np.concatenate(([0], np.cumsum(words)[:-1]))           # words of the pixels before p
    issue = before + np.maximum.accumulate(ready - before)
    idle = int(issue[-1] + words[-1]) + MAC_VECTOR_DRAIN
    return max(mac_block_cycles(cfg, streams) + 3, idle) + 2


def depthwise_passes(cfg: NpuConfig, kernel_w: int, dilation_w: int) -> list[int]:
    """The window passes of a DEPTHWISE command's kernel row: the row's taps span
    (KERNEL_W - 1) * DILATION_W + 1 input pixels, taken mac.cols pixels (the window's lanes) a
    pass; the length of each pass, in input pixels."""
    L = cfg.mac_cols
    span = (kernel_w - 1) * dilation_w + 1
    return [min(L, span - j) for j in range(0, span, L)]


def depthwise_kernel_steps(kernel_h: int, rows: int = 1) -> int:
    """Kernel-row steps of a DEPTHWISE command: one per `rows` kernel rows (isa.depthwise_rows:
    DEPTHWISE 1; DEPTHWISE_PAIRED 2 and DEPTHWISE_TRIPLE 3, the lanes split into groups that read
    as many input rows at once), the last step taking the rows left."""
    return -(-kernel_h // rows)


def depthwise_windows(cfg: NpuConfig, mode: int, kernel_h: int, kernel_w: int, dilation_w: int) -> list[tuple[int, bool]]:
    """The steps of a window-mode command, each as (its window's length: the input words an
    output row's first beat needs, whether its words come two a clock):
    - DEPTHWISE: a step per kernel row and window pass (depthwise_passes), two words a clock (its
      one window takes the second read port too);
    - DEPTHWISE_PAIRED, _TRIPLE: a step per two or three kernel rows (depthwise_kernel_steps), the
      row's span long, one word a clock (each row's window has its own port);
    - DEPTHWISE_PACKED: a step per mac.cols taps in raster order (isa.packed_groups), as long as
      its longest window, one word a clock (a port per window; a shorter window starts reading
      later and ends on the same beat)."""
    span = (kernel_w - 1) * dilation_w + 1
    if mode == MacMode.DEPTHWISE_PACKED:
        return [(max(n for _, _, n in groups), False) for groups in packed_groups(cfg.mac_cols, kernel_h, span)]
    rows = depthwise_rows(mode)
    if rows > 1:
        return depthwise_kernel_steps(kernel_h, rows) * [(span, False)]
    return kernel_h * [(n, True) for n in depthwise_passes(cfg, kernel_w, dilation_w)]


def depthwise_stream_clocks(ofm_h: int, ofm_w: int, stride_w: int, length: int, two: bool) -> int:
    """Clocks a window-mode step streams its input words: per output row, the window's `length`
    words for the first pixel, then STRIDE_W more per pixel (the window shifts them in), each
    beat on the clock of a pixel's last word. With `two` (DEPTHWISE: one window, the second read
    port free) the words come two a clock while a beat still needs two or more:
    ceil(length / 2) clocks for the first pixel, ceil(STRIDE_W / 2) for each next one; else one a
    clock (depthwise_windows)."""
    first, step = depthwise_beat_clocks(length, two, stride_w)
    return ofm_h * (first + (ofm_w - 1) * step)


def depthwise_beat_clocks(length: int, two: bool, stride_w: int) -> tuple[int, int]:
    """(clocks to an output row's first beat, clocks between its beats) of a window-mode step
    (depthwise_stream_clocks)."""
    if two:
        return -(-length // 2), -(-stride_w // 2)
    return length, stride_w


def mac_step_clocks(cfg: NpuConfig, stream: int) -> int:
    """Clocks from a step's first read to the next step's, when a next one follows in the block:
    a stream of at least rows + 2 clocks has the next step's weights prefetched (rows + 1 clocks
    from its start) by its last read, and the next step streams from the following clock; a
    shorter one drains its pipeline (2), advances (1) and swaps to the weights once they are in
    (1): max(S + 4, rows + 2)."""
    rows = cfg.mac_rows
    return stream if stream >= rows + 2 else max(stream + 4, rows + 2)


def mac_block_cycles(cfg: NpuConfig, streams: list[int]) -> int:
    """One block of output channels' accumulation, from its steps' stream clocks (a CONV2D or
    MATMUL step streams one input vector per output pixel, P; a DEPTHWISE step its input words):
    the first step's weight load (rows + 1), each step but the last to the next
    (mac_step_clocks), and the last step's stream (S + 2, the accumulate pipeline) and its
    advance (1)."""
    rows = cfg.mac_rows
    return (rows + 1) + sum(mac_step_clocks(cfg, s) for s in streams[:-1]) + (streams[-1] + 3)


def mac_vector_cycles(cfg: NpuConfig, pixels: int, streams: list[int], words: list[int],
                      last_streams: list[int] | None = None) -> int:
    """A vector-path MAC command's clocks from its steps' stream clocks (mac_block_cycles; the last
    block's `last_streams` when they differ) and its blocks' write words (`words[b]`: the
    output-SRAM words block b's pixels touch): each block's accumulation, and the output engine's
    O_b = words + the drain, beside the next block's accumulation when `pixels` fit half the
    accumulators."""
    block = mac_block_cycles(cfg, streams)
    blocks = [block] * (len(words) - 1) + [mac_block_cycles(cfg, last_streams or streams)]
    drains = [w + MAC_VECTOR_DRAIN for w in words]
    overlap = pixels <= cfg.acc_depth // 2
    between = sum((1 + max(a, o)) if overlap else (2 + o + a) for a, o in zip(blocks[1:], drains[:-1]))
    return MAC_FIXED + 2 + blocks[0] + between + drains[-1]


# The host CPU is modelled, not simulated: an assumed cost of a fixed hand-over plus one NPU
# clock per output element. It keeps host-heavy graphs from looking free; it is not a CPU model.
HOST_OP_OVERHEAD = 200


def host_op_cycles(output_elements: int) -> int:
    return HOST_OP_OVERHEAD + output_elements


# Variable SRAM (VAR command): a transfer between the slot and external memory runs on the DMA
# engine as a one-run transfer of VAR_BYTES into the variable SRAM (dma_busy_cycles); an INIT that
# finds its slot written moves nothing.
def var_busy_cycles(cfg: NpuConfig, *, sram_addr: int, nbytes: int) -> int:
    return dma_busy_cycles(cfg, Sram.VARIABLE, sram_addr=sram_addr, len0=nbytes, len1=1, len2=1)


# Elementwise unit (ELTWISE): one element enters its pipeline per clock. The pipeline is fixed:
# read A and B (A from the input SRAM, B from the weight SRAM: one read port each) 1, zero point
# and left shift 1, input rescale 4 (the rescale unit's latency), the operation 2, output-stage
# rescale 4, clamp 1, table lookup 2 (entry read, interpolation), output write 1 = 16 clocks; a
# stage a command does not use still takes its clocks. Plus SETUP and DONE.
ELT_FIXED = 2
ELT_PIPELINE = 16


def eltwise_command_cycles(count: int, element_clocks: int = 1) -> int:
    """Clocks of an ELTWISE command over `count` elements, from its start to its done pulse;
    `element_clocks` per element (2 when an 8-byte element spans two 4-byte words: its words are
    read on two clocks, it is written on two, the last one's second half one clock later)."""
    return ELT_FIXED + count * element_clocks + ELT_PIPELINE + element_clocks - 1


# Pooling unit (POOL): one window tap per clock. For each output element (row-major over OFM_H x
# OFM_W x OFM_C) the sequencer visits all KERNEL_H x KERNEL_W taps, padding taps included (they
# are masked, not skipped), so every element takes the same time. The result pipeline overlaps
# the next element's taps: reciprocal_scale of the real-tap count (a 32-stage pipelined divider)
# 32, apply_scale_32 4, zero point and saturation 1, clamp 1, table lookup 2, write 1 = 41, plus
# the tap read 1 = 42 after the last tap. Plus SETUP and DONE.
POOL_FIXED = 2
POOL_PIPELINE = 42


def pool_command_cycles(*, ofm_h: int, ofm_w: int, ofm_c: int, kernel_h: int, kernel_w: int) -> int:
    """Clocks of a POOL command, from its start to its done pulse."""
    return POOL_FIXED + ofm_h * ofm_w * ofm_c * kernel_h * kernel_w + POOL_PIPELINE


# Pooling unit, vector path (hw/pool_sequencer.py): a window over a block of channels read from
# one input-SRAM word per tap, the block's results rescaled and clamped side by side by the vector
# output stage and stored by the vector writer (as the MAC's vector path). Blocks of channels are
# the outer loop; with RESCALE a block first reads its channels' records, one per clock. A
# window's taps take one clock each; the next window waits until the writer has stored this
# one's words. After the last tap: the read 1, the window register 1, the vector stage 5, the
# writer's register 1, then the words. AVG: the window's reciprocal_scale comes from the scalar
# unit's divider, fed the same taps: the read 1, the unit's front 33 (window 1, divider 32), the
# vector stage 5, the writer's register 1, then the words (the lanes' sums wait in a FIFO).
VPOOL_PIPELINE = 8
VPOOL_AVG_PIPELINE = 40


def pool_vector_lanes(cfg: NpuConfig, *, in_size: int, ifm_addr: int, ifm_row_stride: int,
                      ifm_pix_stride: int) -> int:
    """Channels a vector POOL reduces at once, 0 when none: every pixel starts at a multiple of
    `align` bytes (the lowest set bit of IFM_ADDR | IFM_ROW_STRIDE | IFM_PIX_STRIDE below the word
    size, else the word), so blocks of align / size channels never cross a word; at most the
    vector stage's lanes (mac.rows)."""
    return min(cfg.mac_rows, _alignment(cfg.word_bytes, ifm_addr | ifm_row_stride | ifm_pix_stride) // in_size)


def pool_uses_vector(cfg: NpuConfig, *, mode: int, lut_mode: int, in_size: int, out_size: int,
                     ifm_addr: int, ifm_row_stride: int, ifm_pix_stride: int) -> bool:
    """Whether a POOL command takes the vector path: no table (one LUT read port), no 8-byte
    output (the writer's two-clock case), and pixels aligned to at least one element
    (pool_vector_lanes). hw/pool_sequencer.py decides the same at SETUP."""
    lanes = pool_vector_lanes(cfg, in_size=in_size, ifm_addr=ifm_addr, ifm_row_stride=ifm_row_stride,
                              ifm_pix_stride=ifm_pix_stride)
    return lut_mode == LutMode.OFF and out_size != 8 and lanes > 0


def pool_vector_cycles(cfg: NpuConfig, *, lanes: int, ofm_h: int, ofm_w: int, ofm_c: int, kernel_h: int,
                       kernel_w: int, out_size: int, ofm_addr: int, ofm_row_stride: int, ofm_pix_stride: int,
                       rescale: bool, avg: bool = False) -> int:
    """Clocks of a vector-path POOL command (pool_uses_vector) from its start to its done pulse:
    per block of `lanes` channels (the last one the rest) its records when it rescales, then per
    window max(taps, the words its results touch) — the last window its taps, the pipeline (AVG's
    the longer) and its words."""
    taps = kernel_h * kernel_w
    c0 = np.arange(0, ofm_c, lanes, dtype=np.int64)
    n = np.minimum(lanes, ofm_c - c0)                                          # channels per block
    addr = (ofm_addr + np.arange(ofm_h, dtype=np.int64)[None, :, None] * ofm_row_stride
            + np.arange(ofm_w, dtype=np.int64)[None, None, :] * ofm_pix_stride + (c0 * out_size)[:, None, None])
    words = vector_write_words(cfg.word_bytes, addr, (n * out_size)[:, None, None]).ravel()
    records = int(n.sum()) if rescale else 0
    pipeline = VPOOL_AVG_PIPELINE if avg else VPOOL_PIPELINE
    return POOL_FIXED + records + int(np.maximum(words[:-1], taps).sum()) + taps + pipeline + int(words[-1])


# Elementwise unit, vector path (hw/eltwise_sequencer.py): `lanes` elements per clock, one word of
# A and one of B read for all of them, each lane an elementwise front (hw/eltwise_unit.py), the
# results rescaled and clamped side by side by the vector output stage and stored by the vector
# writer. The next vector waits until the writer has stored this one's words. After the last
# vector's read: the read 1, the front 7, the vector stage 5, the writer's register 1, then its
# words.
VELT_PIPELINE = 14


def _alignment(word_bytes: int, addr: int) -> int:
    """The largest power of two (at most the word) dividing `addr`'s offset in its word."""
    low = addr & (word_bytes - 1)
    return low & -low if low else word_bytes


def eltwise_vector_lanes(cfg: NpuConfig, *, a_size: int, b_size: int, a_addr: int, b_addr: int,
                         a_scalar: bool, b_scalar: bool) -> int:
    """Elements a vector ELTWISE computes at once, 0 when none: a block of each streamed operand
    (A; B unless `b_size` is 0, a unary operation) must lie in one word, so `lanes` divides its
    address's alignment in elements; at most the vector stage's lanes (mac.rows). A scalar
    operand is one element read for every lane."""
    lanes = cfg.mac_rows
    for size, addr, scalar in ((a_size, a_addr, a_scalar), (b_size, b_addr, b_scalar)):
        if size and not scalar:
            lanes = min(lanes, _alignment(cfg.word_bytes, addr) // size)
    return lanes


def eltwise_uses_vector(*, lanes: int, lut_mode: int, channels: int, sizes: list[int]) -> bool:
    """Whether an ELTWISE command takes the vector path: no table (one LUT read port), one record
    for every element (ELT_CHANNELS 0 or 1), no 8-byte element (operands and result: the scalar
    path's two-clock case), and lanes (eltwise_vector_lanes) to run on."""
    return lanes > 0 and lut_mode == LutMode.OFF and channels <= 1 and max(sizes) <= 4


def eltwise_vector_cycles(cfg: NpuConfig, *, lanes: int, count: int, out_addr: int, out_size: int) -> int:
    """Clocks of a vector-path ELTWISE command from its start to its done pulse: per vector of
    `lanes` elements (the last one the rest) max(1, the words its results touch), the last one 1,
    the pipeline and its words."""
    first = np.arange(0, count, lanes, dtype=np.int64)
    n = np.minimum(lanes, count - first)
    words = vector_write_words(cfg.word_bytes, out_addr + first * out_size, n * out_size)
    return ELT_FIXED + int(np.maximum(words[:-1], 1).sum()) + 1 + VELT_PIPELINE + int(words[-1])
