"""Cycle model of the NPU: how many clocks each command takes.

This is the performance model the golden model counts with and the architects' estimates come
from. For the units that exist in RTL the formulas are the RTL's own schedule (a test checks them
against the simulated cycle counters exactly); for the others they describe the intended
hardware and say so.
"""

from __future__ import annotations

from firmware_model.arch.config import NpuConfig

# Command processor: every command is fetched and decoded in two clocks before its unit runs.
COMMAND_OVERHEAD = 2

# MAC sequencer (hw/mac_sequencer.py): SETUP + CHECK + DONE, and the output pipeline's drain
# (rescale unit latency 4, bias stage, write) after each block of output channels.
MAC_FIXED = 3
MAC_OUTPUT_DRAIN = 6


def mac_command_cycles(cfg: NpuConfig, *, ofm_h: int, ofm_w: int, ofm_c: int, kernel_h: int,
                       kernel_w: int, ifm_cblocks: int) -> int:
    """Clocks of a MAC command from its start to its done pulse.

    Per block of `rows` output channels: for each reduction step (kernel position x input-channel
    block) a weight-block load (rows + 1) and a pass over the P output pixels (P + 2: the
    accumulate pipeline is three clocks deep) with one clock to advance; then the output stage: per pixel one accumulator read and one clock per
    channel lane, and the drain.
    """
    rows = cfg.mac_rows
    pixels = ofm_h * ofm_w
    steps = kernel_h * kernel_w * ifm_cblocks
    n_ocb = -(-ofm_c // rows)
    return (MAC_FIXED
            + n_ocb * (steps * (rows + pixels + 4) + pixels + MAC_OUTPUT_DRAIN)
            + pixels * ofm_c)


def dma_cycles(cfg: NpuConfig, *, len0: int, len1: int, len2: int) -> int:
    """Clocks of a DMA transfer of len2 x len1 runs of len0 bytes (model, no RTL yet).

    One latency per transfer, then each run moves at `ext_bandwidth` bytes per clock.
    """
    beats_per_run = -(-len0 // cfg.ext_bandwidth)
    return cfg.ext_latency + len1 * len2 * max(beats_per_run, 1)


def fill_cycles(cfg: NpuConfig, *, len0: int, len1: int, len2: int) -> int:
    """Clocks of a FILL: one SRAM word per clock."""
    words_per_run = -(-len0 // cfg.word_bytes)
    return len1 * len2 * max(words_per_run, 1)


# The host CPU is modelled, not simulated: an assumed cost of a fixed hand-over plus one NPU
# clock per output element. It keeps host-heavy graphs from looking free; it is not a CPU model.
HOST_OP_OVERHEAD = 200


def host_op_cycles(output_elements: int) -> int:
    return HOST_OP_OVERHEAD + output_elements


# Variable SRAM (VAR command, model, no RTL yet): a transfer between the slot and external memory
# costs what a one-run DMA of its bytes costs; an INIT that finds its slot written only checks the
# flag (one clock).
VAR_FLAG_CHECK = 1


def var_cycles(cfg: NpuConfig, *, nbytes: int, transfer: bool) -> int:
    if not transfer:
        return VAR_FLAG_CHECK
    return dma_cycles(cfg, len0=nbytes, len1=1, len2=1)


# Elementwise unit (ELTWISE): one element enters its pipeline per clock. The pipeline is fixed:
# read A and B (A from the input SRAM, B from the weight SRAM: one read port each) 1, zero point
# and left shift 1, input rescale 4 (the rescale unit's latency), the operation 2, output-stage
# rescale 4, clamp 1, table lookup 2 (entry read, interpolation), output write 1 = 16 clocks; a
# stage a command does not use still takes its clocks. Plus SETUP and DONE.
ELT_FIXED = 2
ELT_PIPELINE = 16


def eltwise_command_cycles(count: int) -> int:
    """Clocks of an ELTWISE command over `count` elements, from its start to its done pulse."""
    return ELT_FIXED + count + ELT_PIPELINE


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
