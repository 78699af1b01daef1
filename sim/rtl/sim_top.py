"""The simulated system around the core: clock, external memory, and the bench's back doors.

`npu_sim_top` (behavioural Verilog, simulation only; it is the bench's, not the NPU's) instantiates
the Amaranth core `npu_core` and

- generates the clock inside the HDL (`always #5 clk = ~clk`): the simulator runs free, with no
  Python callback per edge (Verilator builds with `--timing`);
- models the external memory of the configuration: `ext_mem`, words of EXT_WORD bytes (a power
  of two >= 16 and >= the DMA bandwidth) covering `external.size` bytes. The command port reads
  one 8-byte command per clock; the DMA port reads or writes `bandwidth` bytes at any byte
  address (two words at most), the data of a read arriving the clock after;
- marks what the bench reads and drives `/*verilator public_flat_rw*/`: Verilator builds without
  `--public-flat-rw` (every signal public keeps it from optimising the design), so only these,
  and the core's memories the scoreboard reads (sim/rtl/core.py's control file), are visible;
- loads and dumps the external memory in bulk for the bench: `load_req` reads `ext_load.hex`
  ($readmemh, words with @address lines: only what it names changes) in the clock it is seen;
  `dump_req` writes words `dump_lo` .. `dump_hi` to `ext_dump.hex` ($writememh). Files are in
  the simulator's working directory (the job folder).

The bench drives `rst`, `start`, `prog_addr`, `prog_words`, `host_ack`, `load_req`, `dump_req`,
`dump_lo`, `dump_hi` and reads the core's status through `core`.
"""

from __future__ import annotations

from firmware_model.arch.config import NpuConfig

TOP = "npu_sim_top"
CORE = "npu_core"
CLOCK_HALF_PERIOD_NS = 5
LOAD_FILE = "ext_load.hex"
DUMP_FILE = "ext_dump.hex"


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
    return f"""
// Simulation top of npu-bench (sim/rtl/sim_top.py): clock, external memory, bench back doors.
`timescale 1ns/1ps
module {TOP};
    localparam EXT_WORD = {E};
    localparam EXT_WORDS = {words};
    reg clk /*verilator public_flat_rw*/ = 1'b0;
    always #{CLOCK_HALF_PERIOD_NS} clk = ~clk;

    reg rst /*verilator public_flat_rw*/ = 1'b0;           // the bench raises it: the change itself starts Icarus' combinational blocks
    reg start /*verilator public_flat_rw*/ = 1'b0;
    reg [31:0] prog_addr /*verilator public_flat_rw*/ = 32'd0;
    reg [31:0] prog_words /*verilator public_flat_rw*/ = 32'd0;
    reg host_ack /*verilator public_flat_rw*/ = 1'b0;
    reg load_req /*verilator public_flat_rw*/ = 1'b0;
    reg dump_req /*verilator public_flat_rw*/ = 1'b0;
    reg [31:0] dump_lo /*verilator public_flat_rw*/ = 32'd0;
    reg [31:0] dump_hi /*verilator public_flat_rw*/ = 32'd0;

    wire ready /*verilator public_flat_rw*/;
    wire busy /*verilator public_flat_rw*/;
    wire done /*verilator public_flat_rw*/;
    wire unit_event /*verilator public_flat_rw*/;
    wire host_req /*verilator public_flat_rw*/;
    wire [7:0] status /*verilator public_flat_rw*/;
    wire [31:0] cycles /*verilator public_flat_rw*/;
    wire [31:0] mark /*verilator public_flat_rw*/;
    wire [31:0] pc /*verilator public_flat_rw*/;
    wire [31:0] host_op /*verilator public_flat_rw*/;
    wire [31:0] cmd_addr;
    reg [63:0] cmd_data;
    wire [31:0] ext_addr;
    wire ext_ren;
    reg [{8 * B - 1}:0] ext_rdata;
    wire [{8 * B - 1}:0] ext_wdata;
    wire [{B - 1}:0] ext_wen;

    reg [{8 * E - 1}:0] ext_mem [0:EXT_WORDS-1] /*verilator public_flat_rw*/;

    {CORE} core (
        .clk(clk), .rst(rst),
        .start(start), .prog_addr(prog_addr), .prog_words(prog_words),
        .ready(ready), .busy(busy), .done(done), .status(status), .cycles(cycles), .mark(mark), .pc(pc),
        .unit_event(unit_event), .host_req(host_req), .host_op(host_op), .host_ack(host_ack),
        .cmd__addr(cmd_addr), .cmd__data(cmd_data),
        .ext__addr(ext_addr), .ext__ren(ext_ren), .ext__rdata(ext_rdata), .ext__wdata(ext_wdata), .ext__wen(ext_wen)
    );

    // command fetch: command cmd_addr (8 bytes) of the external memory
    always @(posedge clk)
        cmd_data <= ext_mem[cmd_addr >> {lg_cpw}] >> (64 * (cmd_addr & {cpw - 1}));

    // DMA: `bandwidth` bytes at any byte address, in at most two external words
    wire [31:0] w0 = ext_addr >> {lg_e};
    wire [{lg_e - 1}:0] off = ext_addr[{lg_e - 1}:0];
    wire [{16 * E - 1}:0] pair = {{ext_mem[w0 + 1], ext_mem[w0]}};
    integer i;
    reg [31:0] a;
    always @(posedge clk) begin
        if (ext_ren)
            ext_rdata <= pair >> (8 * off);
        for (i = 0; i < {B}; i = i + 1) begin
            if (ext_wen[i]) begin
                a = ext_addr + i;
                ext_mem[a >> {lg_e}][8 * (a & {E - 1}) +: 8] <= ext_wdata[8 * i +: 8];
            end
        end
    end

    // bench back doors
    always @(posedge clk) begin
        if (load_req) begin
            $readmemh("{LOAD_FILE}", ext_mem);
            load_req <= 1'b0;
        end
        if (dump_req) begin
            $writememh("{DUMP_FILE}", ext_mem, dump_lo, dump_hi);
            dump_req <= 1'b0;
        end
    end
endmodule
"""
