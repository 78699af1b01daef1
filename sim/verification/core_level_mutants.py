"""Core-level RTL mutants: design bugs in the parts of the core that have no bench of their own.

Each unit's contract (sim/verification/contract.py) mutates the unit's datapath; this catalogue
mutates what glues the units into a core: the command processor and its register file, the DMA
engine, the MAC / elementwise / pooling sequencers, the output writer, the output stage's control
in the core and the VAR handling between the DMA engine and the variable SRAM. Each mutant is a
regular-expression edit of the core's generated Verilog (a `Mutation`, with the exact number of
matches it must have in the part's module, so an RTL change that moves the pattern fails loudly
instead of silently testing nothing) and a line saying which bug it models.

sim/verification/core_mutants.py runs them with the unit mutants (`make core-mutants`);
docs/mutants.md has the table and the campaign's scores.
"""

from __future__ import annotations

from dataclasses import dataclass

from sim.verification.unit_bench import Mutation

# part -> the core module(s) it is (names as Amaranth gives them; `npu_core` is the core's own
# top module: the SRAM ports, the VAR request path and the output stage's control)
PART_MODULES = {
    "command_processor": r"\\npu_core\.cp",
    "register_file": r"\\npu_core\.cp",
    "dma_engine": r"\\npu_core\.dma",
    "mac_sequencer": r"\\npu_core\.mac",
    "mac_window": r"\\npu_core\.mac\.mac_array",
    "eltwise_sequencer": r"\\npu_core\.eltwise",
    "pool_sequencer": r"\\npu_core\.pool",
    "output_writer": r"\\npu_core\.output_writer",
    "vector_writer": r"\\npu_core\.vector_writer",
    "output_control": r"npu_core",
    "sram_ports": r"npu_core",
    "var_handling": r"npu_core",
}

# part -> the programs (sim/verification/core_mutants.RUNS) that exercise it, cheapest first; the
# campaign runs the regression networks after them
PART_RUNS = {
    "command_processor": ("mac8", "cp_edges", "variables", "var_fault"),
    "register_file": ("mac8", "eltwise", "pool"),
    "dma_engine": ("mac8", "cp_edges"),
    "mac_sequencer": ("mac8", "mac16"),
    "mac_window": ("mac8",),
    "eltwise_sequencer": ("eltwise", "eltwise_corners"),
    "pool_sequencer": ("pool", "pool_corners", "pool_strides"),
    "output_writer": ("mac8", "eltwise", "pool"),
    "vector_writer": ("mac8", "mac16"),
    "output_control": ("mac8", "mac16"),
    "sram_ports": ("eltwise", "mac8", "pool"),
    "var_handling": ("variables", "var_fault"),
}

_N = r"\\\$\d+"          # a Yosys temporary's name: \$123


@dataclass(frozen=True)
class CoreMutant:
    part: str
    mutation: Mutation

    @property
    def name(self) -> str:
        return self.mutation.name

    @property
    def description(self) -> str:
        return self.mutation.description


def _m(part: str, name: str, description: str, pattern: str, replacement: str, count: int = 1) -> CoreMutant:
    if part not in PART_MODULES:
        raise KeyError(f"mutant {name!r}: unknown part {part!r}")
    return CoreMutant(part, Mutation(name, description, pattern, replacement, count))


def _set_enable(reg: int, width: int, wrong: int) -> tuple[str, str]:
    """The register file's write-enable decode of register `reg` (`cmd_data[55:48] == N` feeding
    `write_register & ...`), made to decode register `wrong` instead."""
    const = f"{width}'h{reg:x}"
    return (rf"(assign {_N}  = cmd_data\[55:48\] == ){const};\n(  assign {_N}  = write_register & )",
            rf"\g<1>{width}'h{wrong:x};\n\g<2>")


CORE_LEVEL_MUTANTS: tuple[CoreMutant, ...] = (
    # ---- command processor ----
    _m("command_processor", "compute_ignores_dma_queue",
       "a compute command starts (and a MAC's block is preloaded) while DMA loads are still in flight "
       "(no stall on the DMA queue)",
       rf"(assign {_N}  = )dma_outstanding <= cmd_data\[31:0\];", r"\g<1>1'h1;"),
    _m("command_processor", "slack_one_more",
       "a compute command leaves one DMA transfer more running than its slack allows (and a MAC's "
       "block is preloaded one transfer early)",
       r"(= dma_outstanding <= )cmd_data\[31:0\];", r"\1(cmd_data[31:0] + 1'h1);"),
    _m("command_processor", "end_ignores_dma_queue",
       "END finishes the invocation before the last DMA_STORE has drained",
       rf"(assign {_N}  = )dma_idle;", r"\g<1>1'h1;"),
    _m("command_processor", "barrier_ignores_dma_queue",
       "BARRIER does not wait for the DMA engine to go idle",
       r"(8'h60:\n\s+)advance = dma_idle;", r"\1advance = 1'h1;"),
    _m("command_processor", "unit_error_ignored",
       "a compute unit's error status is dropped: the invocation goes on after a failed command",
       rf"(assign {_N}  = )\| unit_status;", r"\g<1>1'h0;", count=2),
    _m("command_processor", "dma_range_end_exclusive",
       "a DMA that ends exactly at the last byte of an SRAM is refused (ADDRESS_RANGE off by one)",
       rf"(assign {_N}  = dma_sram_end) > sram_size;", r"\1 >= sram_size;"),
    _m("command_processor", "overrun_reported_ok",
       "a stream that runs out without END ends with status OK instead of COMMAND_OVERRUN",
       rf"(3'h1:\n\s+begin\n\s+if \({_N} \) begin\n\s+if \({_N} \) begin\n\s+{_N}  = )8'h06;", r"\g<1>8'h00;"),
    _m("command_processor", "view_follows_sets_in_a_run",
       "the units' copy of the registers takes the SETs decoded while a unit runs: the running command sees the next tile's registers",
       rf"(assign {_N}  = write_register) & {_N} ;(\n  assign {_N}  = {_N}  \| done_now;)", r"\1;\2"),
    _m("command_processor", "lookahead_in_done_clock",
       "a SET also decodes in the running unit's done clock, when the units' copy takes the registers (that SET's value is lost to it)",
       rf"(assign {_N}  = )~ done_now;", r"\g<1>1'h1;"),
    _m("command_processor", "dma_pushed_during_a_run",
       "a DMA command decodes while a compute command runs: its store reads results not yet written",
       r"(end else if \()running(\) begin\n(?:.*\n){1,16}?\s+(?:dma__valid = 1'h1|advance = dma__ready);)",
       r"\g<1>running & ~(cmd_data[63:56] == 8'h11)\2", count=2),
    _m("command_processor", "ahead_transfer_waits",
       "a DMA_AHEAD transfer waits for the running unit's done like any other (no lookahead push)",
       rf"(assign {_N}  = {_N}  )& ahead_dma;", r"\g<1>& 1'h0;", count=2),
    _m("command_processor", "ahead_flag_on_every_transfer",
       "every DMA command pushes while a unit runs, flagged DMA_AHEAD or not: a store reads results not yet written",
       rf"(assign {_N}  = )cmd_data\[32\];", r"\g<1>1'h1;"),
    _m("command_processor", "var_init_always_copies",
       "VAR INIT copies the initial value again into a slot already written (the state resets every invocation)",
       rf"(assign {_N}  = {_N}  & )slot_written;", r"\g<1>1'h0;", count=2),
    _m("command_processor", "var_read_unwritten_allowed",
       "VAR READ / CHECK of a slot never written is not refused (no VAR_READ_BEFORE_WRITE)",
       rf"(assign {_N}  = )~ slot_written;", r"\g<1>1'h0;", count=2),
    _m("command_processor", "chain_fetches_same_word",
       "a command that chains fetches its own word again instead of the next one's",
       r"(assign \\\$\d+  = \\\$\d+  )\+ chain;", r"\g<1>;"),
    # ---- register file ----
    _m("register_file", "ofm_zp_enable_on_ofm_dtype",
       "the write enable of OFM_ZP is decoded from OFM_DTYPE's number: SET OFM_DTYPE also writes OFM_ZP, SET OFM_ZP writes nothing",
       *_set_enable(23, 5, 22)),
    _m("register_file", "dma_len1_enable_on_len0",
       "the write enable of DMA_LEN1 is decoded from DMA_LEN0's number (stuck to the previous register)",
       *_set_enable(35, 6, 34)),
    # ---- DMA engine ----
    _m("dma_engine", "latency_one_short",
       "the external-memory latency wait ends one clock early",
       r"(assign \\\$\d+  = lat) == 1'h1;", r"\1 == 2'h2;"),
    _m("dma_engine", "queue_latency_frozen",
       "the queued transfers' latency counters never count down: each pays its whole latency after its pop",
       r"(assign \\\$\d+  = )\| (queue_latency\d);", r"\g<1>1'h0;", count=4),
    _m("dma_engine", "popped_without_latency",
       "a popped transfer starts its beats at once, whatever is left of its latency",
       r"(assign \\\$\d+  = )front_latency <= 1'h1;", r"\g<1>1'h1;", count=2),
    _m("dma_engine", "last_run_dropped",
       "the DMA's run count is off by one: the last LEN1 run of a transfer is not moved",
       rf"(assign {_N}  = \\\$signal\$\d+  \+ )1'h1;\n(  assign {_N}  = {_N}  < d\[149:118\];)",
       r"\g<1>2'h2;\n\g<2>"),
    _m("dma_engine", "ext_run_uses_sram_stride",
       "the external address of the next run advances by the SRAM stride (DMA_EXT_STRIDE1 ignored)",
       rf"(assign {_N}  = \\\$signal\$\d+  \+ )d\[213:182\];", r"\g<1>d[277:246];", count=2),
    _m("dma_engine", "planes_dropped",
       "LEN2 is ignored: only the first plane of a 3-D transfer moves",
       rf"(assign {_N}  = {_N}  < )d\[181:150\];", r"\g<1>1'h1;"),
    _m("dma_engine", "queue_overrun",
       "the descriptor queue takes a push when full: the newest descriptor overwrites the oldest",
       r"assign push__ready = count < (\d+'h\w+);", r"assign push__ready = count <= \1;"),
    _m("dma_engine", "store_drops_last_byte",
       "a DMA_STORE beat writes one byte fewer than it moves (the byte-enable mask is one short)",
       rf"assign ext__wen = ({_N})  \? ({_N})  :", r"assign ext__wen = \1  ? (\2  >> 1) :"),
    # ---- MAC sequencer ----
    _m("mac_sequencer", "skips_last_channel_block",
       "the MAC sequencer skips the last input-channel block of the reduction",
       rf"(assign ({_N})  = icb \+ 1'h1;\n(?:.*\n){{0,4}}?  assign {_N}  = )\2 \[31:0\] >= op_ifm_cblocks;",
       r"\g<1>(\g<2> [31:0] + 1'h1) >= op_ifm_cblocks;"),
    _m("mac_sequencer", "skips_last_kernel_row",
       "the MAC sequencer skips the last kernel row (a block's steps end a kernel row early)",
       rf"(assign {_N}  = )({_N})  >= op_kernel_h;", r"\g<1>(\g<2>  + 1'h1) >= op_kernel_h;", count=2),
    _m("mac_sequencer", "preload_without_next_mac",
       "the MAC sequencer preloads a block whether or not a MAC command waits ready (from whatever "
       "WGT_ADDR holds), and the next MAC swaps it in",
       rf"(assign {_N}  = pl_open) & next_mac;", r"\1;"),
    _m("mac_sequencer", "preload_records_of_running_command",
       "the weight preload reads the running command's parameter records, not the next command's",
       r"(= )pl_param( \+ kl;)", r"\1op_param_addr\2"),
    _m("mac_sequencer", "skips_last_output_block",
       "the MAC sequencer stops before the last block of output channels",
       rf"(assign more_ocb = )({_N})  < n_ocb;", r"\g<1>(\g<2>  + 1'h1) < n_ocb;"),
    _m("mac_sequencer", "partial_block_all_lanes",
       "a partial last output-channel block writes all lanes (past OFM_C)",
       rf"(assign {_N}  = )\$signed\({_N} \) > \$signed\(\d+'h\w+\);\n(  assign {_N}  = op_ofm_c - )",
       r"\g<1>1'h1;\n\g<2>"),
    _m("mac_sequencer", "out_row_uses_pix_stride",
       "the output's next row starts OFM_PIX_STRIDE after the row, not OFM_ROW_STRIDE",
       r"(= out_row \+ )op_ofm_row_stride;", r"\1op_ofm_pix_stride;"),
    _m("mac_sequencer", "kernel_row_uses_column_step",
       "the next kernel row's input address steps by the column dilation step",
       r"(= ky_base \+ )ky_adv;", r"\1kx_step;", count=2),
    _m("mac_sequencer", "halves_not_alternated",
       "with overlapping blocks, the next block accumulates into the half the output engine is still draining",
       rf"(assign {_N}  = )acc_half \^ overlap;", r"\g<1>acc_half;"),
    _m("mac_sequencer", "prefetch_row_skewed",
       "the weight prefetch reads each row one word late (the shadow block's row r holds row r+1)",
       rf"(assign {_N}  = )kl_base \+ kl;", r"\g<1>kl_base + kl + 1'h1;"),
    _m("mac_sequencer", "early_engine_ungated",
       "a one-block command's output engine drains pixels the last step has not accumulated yet",
       rf"(assign {_N}  = ){_N}  < avail;", r"\g<1>1'h1;", count=2),
    _m("mac_sequencer", "row_pair_output_one_pixel_a_clock",
       "a one-block CONV2D_ROW_PAIRS command's output engine drains one pixel a clock, not a pair "
       "(the command takes the wrong clocks)",
       r"(assign \\\$\d+  = )early & rp_mode;", r"\g<1>1'h0;"),
    _m("mac_sequencer", "row_pair_odd_pixel_own_records",
       "a drained pixel pair's odd pixel is rescaled with its upper lanes' own records, not with its "
       "channels' (every upper lane's multiplier: the tiny core's 2)",
       r"(assign \\\$\d+  = )v2_pair \? lane_mult_\d+ : (lane_mult_\d+;)", r"\g<1>\g<2>", count=2),
    _m("mac_sequencer", "row_pair_odd_pixel_at_even_address",
       "a drained pixel pair's odd pixel is stored at the even pixel's address",
       r"(assign \\\$\d+  = )oe_pix \+ op_ofm_pix_stride;", r"\g<1>oe_pix;"),
    _m("mac_sequencer", "step_on_swaps_early",
       "a stream running on into the next step swaps its weights in with the last read, under the "
       "step's last beat",
       r"swap = swap_next;", r"swap = swap_next | step_on;"),
    _m("mac_sequencer", "dw_pixel_step_uses_stride",
       "a DEPTHWISE stream steps to a pixel's next word by the pixel stride step (STRIDE_W words), "
       "not by one word",
       r"(assign (\\\$\d+)  = two_px \? \\\$\d+  : \{ 1'h0, pix_step \};\n  assign \\\$\d+  = )dwm \? \\\$\d+  : \\\$\d+ ;",
       r"\g<1>\g<2> ;"),
    _m("mac_sequencer", "dw_two_words_advance_one",
       "a DEPTHWISE clock that reads two words moves the stream on by one word: the next clock reads "
       "the second word again",
       r"(assign \\\$\d+  = )two \? \\\$\d+  : (\{ 1'h0, pix_words \});", r"\g<1>\g<2>;", 2),
    _m("mac_sequencer", "dw_second_word_not_next",
       "a DEPTHWISE clock that reads two words reads the same word through both ports",
       r"(assign \\\$\d+  = )two \? pix_words : 32'd0;", r"\g<1>32'd0;"),
    _m("mac_sequencer", "dw_two_words_counted_as_one",
       "a DEPTHWISE clock that reads two words counts one toward the next beat: beats come late",
       r"(assign \\\$\d+  = )two \? 2'h2 : 2'h1;", r"\g<1>2'h1;"),
    _m("mac_sequencer", "pad_rows_not_checked",
       "a window-mode word above or below the image's rows (IFM_PAD_TOP, IFM_IN_H) is read from the "
       "SRAM instead of as IFM_ZP (the first port, and the second's next-column word)",
       r"(assign \\\$\d+  = )row_y - op_ifm_pad_top;", r"\g<1>32'd0;", 2),
    _m("mac_sequencer", "pad_left_ignored",
       "a window-mode read compares its box column with IFM_IN_W as if IFM_PAD_LEFT were 0 (the first "
       "port, the paired and triple second row, the next-column word, the third port)",
       r"(assign \\\$\d+  = )(col_x|\\\$\d+ ) - op_ifm_pad_left;", r"\g<1>\g<2>;", 4),
    _m("mac_sequencer", "pad_second_row_as_first",
       "DEPTHWISE_PAIRED / _TRIPLE / _PACKED: the second kernel row's word is padded as the first row's is",
       r"(assign \\\$\d+  = )row_y \+ op_dilation_h;", r"\g<1>row_y;", 2),
    _m("mac_sequencer", "pad_column_not_advanced",
       "a window-mode stream's box column stays put while it reads a row's words: the padding "
       "follows the row's first word",
       r"(assign \\\$\d+  = )col_x \+ two;", r"\g<1>col_x - 1'h1;", 2),
    _m("mac_sequencer", "pad_reads_sram_word",
       "the first port's padded word comes from the SRAM (the mask is computed and dropped)",
       r"(assign \\\$\d+  = )s1_pad1 \? \{[^}]*\} : ifm_data;", r"\g<1>ifm_data;"),
    _m("mac_sequencer", "pad_third_port_unmasked",
       "DEPTHWISE_TRIPLE: the third kernel row's word is never padded",
       r"assign x3_data = s1_pad3 \? \{[^}]*\} : ifm_data3;", r"assign x3_data = ifm_data3;"),
    _m("mac_sequencer", "dw_beat_every_word",
       "after a DEPTHWISE beat the next pixel's beat comes one word later, whatever STRIDE_W",
       r"(end else begin\n\s+\\\$\d+  = )op_stride_w;", r"\g<1>32'd1;"),
    _m("mac_sequencer", "dw_pass_length_not_shrunk",
       "the span left for the next DEPTHWISE window pass does not shrink: every pass takes mac.cols lanes",
       r"(assign \\\$\d+  = rem - )\d+'h\w+;", r"\g<1>1'h0;"),
    _m("mac_sequencer", "dw_last_pass_skipped",
       "the DEPTHWISE pass count rounds down: a kernel row's last, partial window pass is skipped",
       r"(assign \\\$\d+  = span \+ )\d+'h\w+;", r"\g<1>1'h0;"),
    _m("mac_sequencer", "pair_steps_one_row",
       "a DEPTHWISE_PAIRED step advances one kernel row instead of two: rows are taken twice, the "
       "block's weights overrun",
       r"(assign \\\$\d+  = )pair \? 2'h2 : 2'h1;", r"\g<1>2'h1;"),
    _m("mac_sequencer", "pair_second_row_not_offset",
       "DEPTHWISE_PAIRED's second port reads the first kernel row's word, not the row DILATION_H below",
       r"(assign \\\$\d+  = )second \? ky_step : (\\\$\d+ );", r"\g<1>\g<2>;"),
    _m("mac_sequencer", "pair_lone_row_unmasked",
       "the last step of an odd KERNEL_H keeps the upper window half's lanes: the first row's words "
       "read again add to the sum",
       r"(assign \\\$\d+  = )second \? (\\\$\d+ \[\d+:0\]) : \d+'h0;", r"\g<1>\g<2>;"),
    _m("mac_sequencer", "triple_steps_two_rows",
       "a DEPTHWISE_TRIPLE step advances two kernel rows instead of three: rows are taken twice, the "
       "block's weights overrun",
       r"(assign \\\$\d+  = )triple \? 2'h3 : ", r"\g<1>triple ? 2'h2 : "),
    _m("mac_sequencer", "triple_third_row_one_below",
       "DEPTHWISE_TRIPLE's third port reads the word DILATION_H rows below the first kernel row's (the "
       "second row's), not 2 x DILATION_H",
       r"(assign \\\$\d+  = third_row \? )\\\$\d+  : (\d+'h0+;)", r"\g<1>ky_step : \g<2>"),
    _m("mac_sequencer", "triple_short_step_unmasked",
       "the last step of a KERNEL_H that is no multiple of 3 keeps the third window group's lanes: the "
       "first row's words read again add to the sum",
       r"(assign \\\$\d+  = )third_row \? (\\\$\d+ \[\d+:0\]) : \d+'h0;", r"\g<1>\g<2>;"),
    _m("mac_sequencer", "packed_window_not_held",
       "DEPTHWISE_PACKED: every window's port reads from an output row's first clock, a shorter window's "
       "too, and on between beats: its words run ahead of the longest window's",
       r"(assign \\\$\d+  = )primed \| \\\$\d+ ;", r"\g<1>1'h1;", 3),
    _m("mac_sequencer", "packed_row_wrap_not_addressed",
       "DEPTHWISE_PACKED: a step whose cursor passes a kernel row's end starts its first window's words "
       "on the same row, mac.cols pixels on, instead of on the next row",
       r"(assign \\\$\d+  = \\\$\d+  \? )span_adv( : 32'd0;)", r"\g<1>32'd0\g<2>"),
    _m("mac_sequencer", "packed_second_window_column_as_first",
       "DEPTHWISE_PACKED: the second window's words are padded by the first window's box column",
       r"(assign \\\$\d+  = )col1 - op_ifm_pad_left;", r"\g<1>col_x - op_ifm_pad_left;"),
    _m("mac_sequencer", "lane_pair_second_word_not_offset",
       "a CONV2D_LANE_PAIRS step's second port reads the even pixel's word again, not the next pixel's",
       r"(assign \\\$\d+  = )two_px \? pix_step : (\\\$\d+ );", r"\g<1>\g<2>;"),
    _m("mac_sequencer", "lane_pair_block_not_first",
       "a CONV2D_LANE_PAIRS kernel position starts at input-channel block 0, not at the lane-paired last "
       "block: the steps meet the wrong weight blocks and the paired block is never run",
       rf"(assign {_N}  = )lp_mode \? {_N}  : (33'h0+;)", r"\g<1>\g<2>"),
    _m("mac_sequencer", "row_pair_block_not_paired",
       "a CONV2D_ROW_PAIRS command's last output block streams one pixel a beat (its upper rows' "
       "copies of the lower rows' channels computed for nothing): the command takes the wrong clocks",
       r"(assign rp_block = )rp_mode & \\\$\d+ ;", r"\g<1>1'h0;"),
    _m("mac_sequencer", "lane_pair_pointer_one_pixel",
       "a CONV2D_LANE_PAIRS step's input pointer advances one pixel a beat, not two: the pairs read "
       "the wrong words",
       r"(assign \\\$\d+  = )two_px \? \\\$\d+  : (\{ 1'h0, pix_step \});", r"\g<1>\g<2>;"),
    # ---- the MAC array's window (DEPTHWISE mode) and accumulator pairs, inside the core ----
    _m("mac_window", "lane_pair_upper_lane_own_word",
       "in a lane-paired beat, the upper half's first lane multiplies the even pixel's word, not the "
       "odd pixel's",
       r"(assign xp_2 = )lane_pair \? x2_0 : (x_2;)", r"\g<1>\g<2>"),
    _m("mac_window", "lane_pair_writes_one_pixel",
       "a lane-paired beat writes only the even pixel's accumulators: the odd pixel keeps its old sum "
       "(every row of the tiny core's 4)",
       r"(assign \\\$\d+  = )s1_pair \? \{ 1'h0, \\\$\d+ \[47:0\] \} : (\\\$\d+ );", r"\g<1>\g<2>;", count=4),
    _m("mac_window", "row_pair_upper_rows_even_word",
       "in a row-paired beat the upper rows' first lane multiplies the even pixel's word, not the odd pixel's",
       r"(assign xu_0 = )row_pair \? x2_0 : (x_0;)", r"\g<1>\g<2>"),
    _m("mac_window", "row_pair_odd_pixel_unwritten",
       "a row-paired beat leaves the odd pixel's accumulators as they were (every lower lane: the tiny "
       "core's 2)",
       r"(assign \\\$\d+  = )s1_rows \? \{ 1'h0, \\\$\d+ \[47:0\] \} : (\\\$\d+ );", r"\g<1>\g<2>;",
       count=2),
    _m("mac_window", "acc_output_half_swapped",
       "the output engine's accumulator read takes the other pixel of the word (each pair's pixels swapped)",
       r"(assign out_data = )out_half \?", r"\g<1>~out_half ?"),
    _m("mac_window", "lane1_past_length_kept",
       "window lane 1 of channel 0 is not cleared past the pass length: a stale word adds to the sum",
       r"(assign wview_1_0 = )\\\$\d+  \? (\\\$\d+)  : 10'h000;", r"\g<1>\g<2> ;"),
    _m("mac_window", "lane1_does_not_shift",
       "window lane 1 of channel 0 keeps its word when the window shifts, instead of taking lane 0's",
       r"= win_shift \? (?:win_0_0|\\\$\d+ ) : win_1_0;", r"= win_1_0;"),
    _m("mac_window", "packed_second_window_chained",
       "packed, the second window's first lane (channel 0) shifts in the first window's oldest word "
       "instead of its own kernel row's",
       r"(assign \\\$\d+  = )grp1_at_(\d+) \? x2_0 : (\\\$\d+ );", r"\g<1>\g<3>;", 4),
    _m("mac_window", "upper_half_takes_lower_word",
       "paired, the upper window half's first lane (channel 0) shifts in the lower half's oldest word "
       "instead of the second kernel row's",
       r"= pair \? x2_0 : (win_\d+_0|\\\$\d+ );", r"= \g<1>;"),
    _m("mac_window", "third_group_takes_second_row",
       "triple, the third window group's first lane (channel 0) shifts in the second kernel row's word "
       "instead of the third's",
       r"= triple \? x3_0 : ", r"= triple ? x2_0 : "),
    _m("mac_window", "two_words_in_order",
       "a two-word shift puts the first word (channel 0) at lane 0 instead of the newer second",
       r"= win_double \? x2_0 : x_0;", r"= x_0;"),
    _m("mac_window", "row1_reads_channel0",
       "in the window mode, row 1 multiplies channel 0 of the newest word instead of its own channel",
       r"(assign xr_1_0 = dw \? )wview_0_1( : x_0;)", r"\g<1>wview_0_0\g<2>"),
    # ---- elementwise sequencer ----
    _m("eltwise_sequencer", "b_pointer_uses_a_step",
       "operand B's address advances by A's step (wrong for a scalar B or different element sizes)",
       r"(assign \\\$\d+  = \\\$signal  \+ (\\\$signal\$\d+) ;\n  assign \\\$\d+  = \\\$signal\$\d+  \+ )b_step;",
       r"\1\2 ;"),
    _m("eltwise_sequencer", "channel_wrap_late",
       "the per-channel parameter record wraps one channel late",
       rf"(assign {_N}  = )({_N})  == channels;", r"\g<1>\g<2>  == (channels + 1'h1);"),
    _m("eltwise_sequencer", "last_element_dropped",
       "the element count is off by one: the last element is never issued",
       rf"(assign {_N}  = )left == 1'h1;", r"\g<1>left == 2'h2;"),
    _m("eltwise_sequencer", "drain_one_short",
       "DONE comes one clock before the last result is written",
       rf"(assign {_N}  = {_N}  == )drain_len;", r"\g<1>(drain_len - 1'h1);"),
    # ---- pooling sequencer ----
    _m("pool_sequencer", "bottom_padding_edge",
       "a tap one row below the input box is read as data (bottom padding edge off by one)",
       r"(assign \\\$\d+  = \$signed\(\\\$\d+ \[39:0\]\)) >= (\$signed\(\{ 1'h0, regs\[1823:1792\] \}\));",
       r"\1 > \2;"),
    _m("pool_sequencer", "left_padding_ignored",
       "taps left of the input box are not masked as padding",
       rf"(assign {_N}  = )\$signed\({_N} \[39:0\]\) < \$signed\(1'h0\);\n(  assign {_N}  = {_N}  \| {_N} ;\n"
       rf"  assign {_N}  = \$signed\({_N} \[39:0\]\) >= )",
       r"\g<1>1'h0;\n\g<2>"),
    _m("pool_sequencer", "window_column_uses_stride_h",
       "the window's column origin (for the padding test) advances by STRIDE_H",
       r"(= \$signed\(tap_x0\) \+ \$signed\(\{ 1'h0, )regs\[415:384\]( \}\);)", r"\1regs[383:352]\2"),
    _m("pool_sequencer", "skips_last_output_row",
       "the pooling sequencer stops before the last output row",
       rf"(assign more_rows = )({_N})  < regs\[607:576\];", r"\g<1>(\g<2>  + 1'h1) < regs[607:576];"),
    _m("pool_sequencer", "out_row_uses_pix_stride",
       "the output's next row advances by OFM_PIX_STRIDE, not OFM_ROW_STRIDE",
       r"(= out_row \+ )regs\[543:512\];", r"\1regs[575:544];"),
    _m("pool_sequencer", "out_channel_step_one_byte",
       "the output channel offset advances by one byte, not the output element size",
       r"(= out_c \+ )esize;", r"\g<1>1'h1;"),
    # the vector path (blocks of channels per tap)
    # the elementwise sequencer's vector path
    _m("eltwise_sequencer", "vec_b_step_one_element",
       "the vector path advances B by one element per vector instead of a vector's",
       rf"(assign {_N}  = )b_step << vec_lanes_lg;", r"\g<1>b_step;"),
    _m("eltwise_sequencer", "vec_out_step_one_element",
       "the vector path advances the output by one element per vector instead of a vector's",
       rf"(assign {_N}  = )esize << vec_lanes_lg;", r"\g<1>esize;"),
    _m("eltwise_sequencer", "vec_gap_ignored",
       "the next vector does not wait for the vector writer to store the last one's words",
       rf"(assign {_N}  = {_N} \[15:0\]) > 1'h1;", r"\1 > 32'hffffffff;"),
    _m("pool_sequencer", "vec_lane0_max_stuck",
       "the vector path's lane 0 never takes a larger tap: its maximum stays the initial int32 minimum",
       rf"(assign {_N}  = )\$signed\(vec_x_0\) > \$signed\(vec_max_0\);", r"\g<1>1'h0;"),
    _m("pool_sequencer", "vec_lane0_padding_summed",
       "the vector path's lane 0 adds padding taps to its sum",
       rf"(assign {_N}  = \$signed\(vec_x_0\) - \$signed\(regs\[159:128\]\);\n  assign {_N}  = )\\\$signal  \? ",
       r"\g<1>1'h0 ? "),
    _m("pool_sequencer", "vec_records_skewed",
       "the vector path reads lane j's record from channel j + 1",
       rf"(assign {_N}  = {_N}  \+ )vec_record;", r"\g<1>vec_record + 1'h1;"),
    _m("pool_sequencer", "vec_gap_ignored",
       "the next window does not wait for the vector writer to store the last one's words",
       rf"(assign {_N}  = {_N} \[15:0\]) > vec_taps;", r"\1 > 32'hffffffff;"),
    # ---- output writer and the output stage's control in the core ----
    _m("output_writer", "int16_low_byte_only",
       "an int16 result's byte enables cover its low byte only",
       r"\? 8'h03 :", r"? 8'h01 :"),
    _m("output_control", "mac_int32_written_as_int48",
       "the writer stores a MAC's int32 results as 8-byte elements (overwriting the next one)",
       rf"(assign {_N}  = {_N}  \? )4'h4( : {_N} ;\n  assign mac_esize = {_N}  \? 4'h8 : )", r"\g<1>4'h8\g<2>"),
    # ---- the MAC's vector writer (a pixel's lanes per clock) ----
    _m("vector_writer", "int8_packed_as_int16",
       "int8 results are packed two bytes apart, as int16 ones (the element-size decode is wrong)",
       r"assign esize_1 = esize == 1'h1;", r"assign esize_1 = 1'h0;"),
    _m("vector_writer", "pair_second_pixel_dropped",
       "a pixel pair's second pixel is never written (the second write port stays idle)",
       rf"assign sram2__en = {_N}  \? {_N}  : (\d+)'h0;", r"assign sram2__en = \1'h0;"),
    _m("vector_writer", "unaligned_bytes_not_shifted",
       "a pixel that starts inside a word is written from the word's first byte (its bytes are not "
       "shifted to their offset; the byte enables are)",
       rf"assign ({_N})  = \\packed  << ({_N}) ;", r"assign \1  = \\packed ;"),
    _m("vector_writer", "last_word_dropped",
       "the last word of a pixel that spans several words is not written",
       rf"assign sram__en = ({_N})  \? ({_N})  : (\d+)'h0;",
       r"assign sram__en = (\1  & (words_left != 16'h1)) ? \2  : \3'h0;"),
    # ---- VAR handling between the DMA engine and the variable SRAM ----
    # ---- the SRAM ports of the core ----
    _m("sram_ports", "a_from_output_ignored",
       "ELTWISE ignores A_FROM_OUTPUT: A is always read from the input SRAM",
       r"assign a_data = a_from_output \? a_rd__data : in_rd__data;", r"assign a_data = in_rd__data;"),
    _m("sram_ports", "b_from_output_ignored",
       "ELTWISE ignores B_FROM_OUTPUT: B is always read from the weight SRAM",
       r"assign b_data = b_from_output \? a_rd2__data : wgt_data;", r"assign b_data = wgt_data;"),
    _m("sram_ports", "b_from_output_at_mac_address",
       "with B_FROM_OUTPUT the output SRAM's second MAC port reads at the MAC's address, not B's",
       rf"assign a_rd2__addr = {_N}  \? b_addr : in_rd2__addr;", r"assign a_rd2__addr = in_rd2__addr;"),
    _m("sram_ports", "pool_box_from_input_sram",
       "a POOL with IFM_SRAM OUTPUT takes its input box from the input SRAM",
       r"assign i_data = ifm_from_output \? a_rd__data : in_rd__data;", r"assign i_data = in_rd__data;"),
    _m("sram_ports", "pool_box_at_eltwise_address",
       "with IFM_SRAM OUTPUT the POOL's reads of the output SRAM go to ELTWISE's A address",
       r"a_rd__addr = i_addr;", r"a_rd__addr = a_addr;"),
    _m("sram_ports", "ifm_from_output_ignored",
       "a MAC with IFM_SRAM OUTPUT takes its input words from the input SRAM's port",
       r"assign ifm_data = ifm_from_output \? a_rd__data : in_rd__data;", r"assign ifm_data = in_rd__data;"),
    _m("sram_ports", "second_port_from_input_sram",
       "a window-mode MAC with IFM_SRAM OUTPUT takes its second port's words (the next column, the "
       "next kernel row) from the input SRAM",
       r"assign ifm_data2 = ifm_from_output \? a_rd2__data : in_rd2__data;", r"assign ifm_data2 = in_rd2__data;"),
    _m("sram_ports", "third_port_from_input_sram",
       "DEPTHWISE_TRIPLE with IFM_SRAM OUTPUT takes its third kernel row's words from the input SRAM",
       r"assign ifm_data3 = ifm_from_output \? a_rd3__data : in_rd3__data;", r"assign ifm_data3 = in_rd3__data;"),
    _m("sram_ports", "mac_output_read_at_eltwise_address",
       "the output SRAM's second read port follows ELTWISE's A address while a MAC runs",
       r"a_rd__addr = ifm_addr;", r"a_rd__addr = a_addr;"),
    _m("var_handling", "var_transfer_raw",
       "VAR transfers reach the variable SRAM as raw accesses: a VAR WRITE sets no written flag",
       rf"(assign {_N}  = )~ {_N} \[0\];\n(  assign {_N}  = ~ var_mark;)", r"\g<1>1'h1;\n\g<2>"),
    _m("var_handling", "var_mark_dropped",
       "VAR MARK never reaches the variable SRAM (its slot's flag is not set)",
       rf"assign req__valid = ({_N})  \| var_mark;", r"assign req__valid = \1 ;"),
    _m("var_handling", "var_mark_slot_from_dma",
       "VAR MARK sets the flag of the DMA's last slot instead of VAR_SLOT's",
       rf"= var_mark \? regs\[2015:1984\] : (\{{ 24'h000000, {_N} \[8:1\] \}});", r"= var_mark ? \1 : \1;"),
)


def catalogue() -> tuple[CoreMutant, ...]:
    names = [(m.part, m.name) for m in CORE_LEVEL_MUTANTS]
    if len(set(names)) != len(names):
        raise ValueError("two core-level mutants share a part and a name")
    return CORE_LEVEL_MUTANTS
