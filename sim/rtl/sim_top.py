"""The simulated system around the core: clock, external memory, and the bench's back doors.

`npu_sim_top` (behavioural Verilog, simulation only; it is the bench's, not the NPU's) instantiates
the Amaranth core `npu_core` and

- generates the clock inside the HDL (`always #5 clk = ~clk`): the simulator runs free, with no
  Python callback per edge (Verilator builds with `--timing`);
- models the external memory of the configuration: module `npu_sim_ext_memory` (instance `ext`,
  array `ext.mem`), words of 16 or more bytes (a power of two >= the DMA bandwidth) covering
  `external.size` bytes. The command port reads
  one 8-byte command per clock; the DMA port reads or writes `bandwidth` bytes at any byte
  address (two words at most), the data of a read arriving the clock after;
- fills the variable SRAM with garbage at the first clock (an SRAM's power-up contents: the
  core's reset walk must clear them);
- makes the reset itself (rst high for clocks 2..4; `booted` after clock 7) and registers what
  the bench drives (`start_in`, `host_ack_in`, `prog_addr_in`, `prog_words_in`) before the core:
  Verilator re-evaluates, at every step, all logic reading a signal that VPI may write, and rst
  alone reaches every register's next value;
- marks only what the bench touches public: `/*verilator public_flat_rw*/` what it drives,
  `public_flat_rd` what it reads (the core's status and flags); memories only through the back
  doors below. Verilator builds without `--public-flat-rw` (every signal
  public keeps it from optimising the design);
- loads and dumps memories in bulk for the bench: a new value of the count `bd_req` asks for
  operation `bd_op` on memory `bd_mem` (0 external, 1 the output SRAM, 2 the variable SRAM):
  op 1 reads `bd_load.hex` into it ($readmemh, words with @address lines: only what it names
  changes), op 2 writes its words `bd_lo` .. `bd_hi` to `bd_dump.hex` ($writememh), op 3 sets
  the variable SRAM's written flags to `bd_flags` (on the falling edge, where no other process
  writes them); each in the clock it is seen. Files are in the simulator's working directory
  (the job folder);
- dumps each tile's output range for the scoreboard (`tile_dump`): in the clock after `unit_event`
  the words `tile_lo` .. `tile_hi` of the output SRAM go to `tile.hex`; that clock's $writememh
  sees the SRAM as it was at the tile's end. The bench sets the range when unit_event rises.
"""

from __future__ import annotations

from firmware_model.arch.config import NpuConfig
from firmware_model.arch.isa import VAR_SLOTS

TOP = "npu_sim_top"
CORE = "npu_core"
EXT_MODULE = "npu_sim_ext_memory"
CLOCK_HALF_PERIOD_NS = 5
LOAD_FILE = "bd_load.hex"
DUMP_FILE = "bd_dump.hex"
TILE_FILE = "tile.hex"
# bd_mem values
EXTERNAL, OUTPUT_SRAM, VARIABLE_SRAM = 0, 1, 2


def ext_word_bytes(cfg: NpuConfig) -> int:
    e = 16
    while e < cfg.ext_bandwidth:
        e *= 2
    return e


def sim_top_verilog(cfg: NpuConfig) -> str:
    E = ext_word_bytes(cfg)
    B = cfg.ext_bandwidth
    words = cfg.ext_size // E
    lg_e = E.bit_length() - 1
    cpw = E // 8                      # commands per external word
    lg_cpw = cpw.bit_length() - 1
    slots = VAR_SLOTS
    var_words = cfg.variable_sram // cfg.word_bytes
    var_randoms = ", ".join(["$random(garbage_seed)"] * max(1, cfg.word_bytes // 4))
    return f"""
// Simulation top of npu-bench (sim/rtl/sim_top.py): clock, external memory, bench back doors.
`timescale 1ns/1ps
module {TOP};
    reg clk /*verilator public_flat_rd*/ = 1'b0;
    always #{CLOCK_HALF_PERIOD_NS} clk = ~clk;

    // Reset, made here rather than driven by the bench: logic that reads a signal VPI may write is
    // re-evaluated by Verilator at every step, and rst reaches every register's next value. It
    // rises after time 0 (that change is what first evaluates Icarus' always @* blocks).
    reg rst = 1'b0;
    reg [2:0] boot = 3'd0;
    wire booted /*verilator public_flat_rd*/ = boot == 3'd7;
    always @(posedge clk)
        if (!booted) begin
            boot <= boot + 3'd1;
            rst <= boot >= 3'd1 && boot < 3'd4;
        end

    // The variable SRAM powers up holding garbage, as an SRAM does: the core's reset walk must
    // clear it (the golden model starts from zeros after a power-on reset).
    integer vi;
    integer garbage_seed = 1;
    always @(posedge clk)
        if (boot == 3'd0)
            for (vi = 0; vi < {var_words}; vi = vi + 1)
                core.variable_sram.mem[vi] <= {{{var_randoms}}};

    // What the bench drives, registered before the core for the same reason.
    reg start_in /*verilator public_flat_rw*/ = 1'b0;
    reg host_ack_in /*verilator public_flat_rw*/ = 1'b0;
    reg [31:0] prog_addr_in /*verilator public_flat_rw*/ = 32'd0;
    reg [31:0] prog_words_in /*verilator public_flat_rw*/ = 32'd0;
    reg start = 1'b0;
    reg host_ack = 1'b0;
    reg [31:0] prog_addr = 32'd0;
    reg [31:0] prog_words = 32'd0;
    always @(posedge clk) begin
        start <= start_in;
        host_ack <= host_ack_in;
        prog_addr <= prog_addr_in;
        prog_words <= prog_words_in;
    end

    // bench back doors, one per new value of bd_req (the bench counts; this side never writes
    // what the bench drives, so no request can be lost to a clearing write in the same step):
    // bd_op 1 loads memory bd_mem from its file ($readmemh), 2 dumps its words
    // bd_lo .. bd_hi to a file ($writememh); 3 sets the variable SRAM's written flags to bd_flags.
    reg [7:0] bd_req /*verilator public_flat_rw*/ = 8'd0;
    reg [7:0] bd_seen = 8'd0;
    reg [1:0] bd_op /*verilator public_flat_rw*/ = 2'd0;
    reg [1:0] bd_mem /*verilator public_flat_rw*/ = 2'd0;
    reg [31:0] bd_lo /*verilator public_flat_rw*/ = 32'd0;
    reg [31:0] bd_hi /*verilator public_flat_rw*/ = 32'd0;
    reg [{slots - 1}:0] bd_flags /*verilator public_flat_rw*/ = {slots}'d0;

    // the scoreboard's view of each tile: in the clock after a unit_event, output SRAM words
    // tile_lo .. tile_hi go to the tile file
    reg tile_dump /*verilator public_flat_rw*/ = 1'b0;
    reg [31:0] tile_lo /*verilator public_flat_rw*/ = 32'd0;
    reg [31:0] tile_hi /*verilator public_flat_rw*/ = 32'd0;

    wire ready /*verilator public_flat_rd*/;
    wire busy /*verilator public_flat_rd*/;
    wire done /*verilator public_flat_rd*/;
    wire unit_event /*verilator public_flat_rd*/;
    wire host_req /*verilator public_flat_rd*/;
    wire [7:0] status /*verilator public_flat_rd*/;
    wire [31:0] cycles /*verilator public_flat_rd*/;
    wire [31:0] mark /*verilator public_flat_rd*/;
    wire [31:0] pc /*verilator public_flat_rd*/;
    wire [31:0] unit_pc /*verilator public_flat_rd*/;
    wire [31:0] host_op /*verilator public_flat_rd*/;
    wire [{slots - 1}:0] var_written /*verilator public_flat_rd*/ = core.variable_sram.written;
    wire [31:0] cmd_addr;
    wire [63:0] cmd_data;
    wire [31:0] ext_addr;
    wire ext_ren;
    wire [{8 * B - 1}:0] ext_rdata;
    wire [{8 * B - 1}:0] ext_wdata;
    wire [{B - 1}:0] ext_wen;

    {EXT_MODULE} ext (
        .clk(clk), .cmd_addr(cmd_addr), .cmd_data(cmd_data),
        .ext_addr(ext_addr), .ext_ren(ext_ren), .ext_rdata(ext_rdata), .ext_wdata(ext_wdata), .ext_wen(ext_wen)
    );

    {CORE} core (
        .clk(clk), .rst(rst),
        .start(start), .prog_addr(prog_addr), .prog_words(prog_words),
        .ready(ready), .busy(busy), .done(done), .status(status), .cycles(cycles), .mark(mark), .pc(pc), .unit_pc(unit_pc),
        .unit_event(unit_event), .host_req(host_req), .host_op(host_op), .host_ack(host_ack),
        .cmd__addr(cmd_addr), .cmd__data(cmd_data),
        .ext__addr(ext_addr), .ext__ren(ext_ren), .ext__rdata(ext_rdata), .ext__wdata(ext_wdata), .ext__wen(ext_wen)
    );


    always @(posedge clk) begin
        if (bd_req != bd_seen && bd_op == 2'd1)
            case (bd_mem)
                2'd0: $readmemh("{LOAD_FILE}", ext.mem);
                2'd1: $readmemh("{LOAD_FILE}", core.output_sram);
                default: $readmemh("{LOAD_FILE}", core.variable_sram.mem);
            endcase
        if (bd_req != bd_seen && bd_op == 2'd2)
            case (bd_mem)
                2'd0: $writememh("{DUMP_FILE}", ext.mem, bd_lo, bd_hi);
                2'd1: $writememh("{DUMP_FILE}", core.output_sram, bd_lo, bd_hi);
                default: $writememh("{DUMP_FILE}", core.variable_sram.mem, bd_lo, bd_hi);
            endcase
        bd_seen <= bd_req;
        if (tile_dump && unit_event)
            $writememh("{TILE_FILE}", core.output_sram, tile_lo, tile_hi);
    end
    // op 3 on the falling edge: the variable SRAM writes its flags on the rising one, and two
    // writes of a register on the same edge would race (Icarus keeps either)
    reg [7:0] bd_seen_fall = 8'd0;
    always @(negedge clk) begin
        if (bd_req != bd_seen_fall && bd_op == 2'd3)
            core.variable_sram.written <= bd_flags;
        bd_seen_fall <= bd_req;
    end
endmodule

// The external memory: its own module, so that the top's scope holds no large array (Icarus
// searches a scope's items by name one by one, and a 64 MiB array made each bench signal's
// first lookup cost a quarter of a second).
module {EXT_MODULE} (
    input clk,
    input [31:0] cmd_addr,
    output reg [63:0] cmd_data,
    input [31:0] ext_addr,
    input ext_ren,
    output reg [{8 * B - 1}:0] ext_rdata,
    input [{8 * B - 1}:0] ext_wdata,
    input [{B - 1}:0] ext_wen
);
    reg [{8 * E - 1}:0] mem [0:{words - 1}];

    // command fetch: command cmd_addr (8 bytes) of the external memory
    always @(posedge clk)
        cmd_data <= mem[cmd_addr >> {lg_cpw}] >> (64 * (cmd_addr & {cpw - 1}));

    // DMA: `bandwidth` bytes at any byte address, in at most two external words
    wire [31:0] w0 = ext_addr >> {lg_e};
    wire [{lg_e - 1}:0] off = ext_addr[{lg_e - 1}:0];
    wire [{16 * E - 1}:0] pair = {{mem[w0 + 1], mem[w0]}};
    integer i;
    reg [31:0] a;
    always @(posedge clk) begin
        if (ext_ren)
            ext_rdata <= pair >> (8 * off);
        for (i = 0; i < {B}; i = i + 1) begin
            if (ext_wen[i]) begin
                a = ext_addr + i;
                mem[a >> {lg_e}][8 * (a & {E - 1}) +: 8] <= ext_wdata[8 * i +: 8];
            end
        end
    end
endmodule
"""
