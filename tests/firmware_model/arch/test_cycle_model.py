"""cycle_model.mac_stream_clocks: the clocks a MAC command's steps read their inputs, the floor
under its mac_command_timing clocks that the benchmark's 'mapping' limit divides by."""

from __future__ import annotations

import pytest

from firmware_model.arch.config import load_config
from firmware_model.arch.cycle_model import mac_command_timing, mac_stream_clocks
from firmware_model.arch.isa import MacMode


def _both(cfg, **shape):
    return mac_stream_clocks(cfg, **shape), mac_command_timing(cfg, **shape, vector=True, ofm_pix_stride=shape["ofm_c"],
                                                               ofm_row_stride=shape["ofm_w"] * shape["ofm_c"])[0]


@pytest.mark.parametrize("shape,stream", [
    # CONV2D on 8x8: 2 blocks of output channels x 9 taps x 2 input blocks x 64 pixels
    (dict(ofm_h=8, ofm_w=8, ofm_c=16, kernel_h=3, kernel_w=3, ifm_cblocks=2), 2 * 9 * 2 * 64),
    # a last block of 4 <= R/2 channels row-paired: its steps take 32 beats, not 64
    (dict(ofm_h=8, ofm_w=8, ofm_c=12, kernel_h=3, kernel_w=3, ifm_cblocks=2, row_pairs=True), 9 * 2 * 64 + 9 * 2 * 32),
    # a last input block lane-paired: 9 x (32 + 64) beats a block
    (dict(ofm_h=8, ofm_w=8, ofm_c=8, kernel_h=3, kernel_w=3, ifm_cblocks=2, lane_pairs=True), 9 * (32 + 64)),
])
def test_conv_streams_are_their_beats(shape, stream):
    got, cycles = _both(load_config("default"), **shape)
    assert got == stream and cycles > got


def test_window_streams_count_each_rows_fill():
    # 5x5 depthwise, 8x8 outputs, on 16 lanes: DEPTHWISE_TRIPLE takes kernel rows 0-2 then 3-4,
    # each step an output row's 5-word window fill then a word a beat: 8 x (5 + 7) clocks
    cfg = load_config("large")
    shape = dict(ofm_h=8, ofm_w=8, ofm_c=16, kernel_h=5, kernel_w=5, ifm_cblocks=1, window=MacMode.DEPTHWISE_TRIPLE)
    stream, cycles = _both(cfg, **shape)
    assert stream == 2 * 8 * (5 + 7)
    # the command's other clocks (SETUP, CHECK, the first weight load, the pipeline's end, the
    # last pixel's output) do not grow with the stream: four more output rows add their streams only
    taller, taller_cycles = _both(cfg, **{**shape, "ofm_h": 12})
    assert taller == 2 * 12 * (5 + 7) and taller_cycles - taller == cycles - stream > cfg.mac_rows + 1
    # stride 2: each beat waits for two more words; 80 channels: five blocks
    assert mac_stream_clocks(cfg, **{**shape, "stride_w": 2, "ofm_c": 80}) == 5 * 2 * 8 * (5 + 7 * 2)
