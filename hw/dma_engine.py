"""DMA engine: DMA_LOAD, DMA_STORE and FILL (and the VAR unit's transfers) between the external
memory port and the on-chip SRAMs, from a queue, beside the compute units.

The command processor pushes a *descriptor* (the DMA registers as they were at the command, the
kind and the SRAM) into the engine's queue and moves on; the engine runs the queue in order. The
command processor waits for the engine (`idle`: queue empty, engine idle) before a compute
command, a VAR, HOST or END command and at BARRIER (docs/isa.md, "DMA and FILL").

A transfer moves LEN2 x LEN1 runs of LEN0 bytes (run (i2, i1) at DMA_EXT_ADDR + i2*EXT_STRIDE2 +
i1*EXT_STRIDE1 and DMA_SRAM_ADDR + i2*SRAM_STRIDE2 + i1*SRAM_STRIDE1), in *beats*: one per clock,
each moving the bytes of the run that lie in one SRAM word, at most `ext.bandwidth` of them

    n = min(bytes left in the run, word bytes - offset in the word, bandwidth)
                                                             (FILL: no bandwidth cap)

so a run costs, per SRAM word it touches, ceil(bytes in that word / bandwidth) beats
(firmware_model.arch.cycle_model.dma_beats). The external-memory side is byte-addressed: the
port reads or writes `bandwidth` bytes at any byte address (the simulated external memory in
sim/rtl/sim_top.py serves unaligned windows). SRAM words are `mac.cols` bytes (input, weight,
output, variable, LUT) or 11 bytes (a parameter record); writes carry byte enables.

Schedule of one transfer (cycle_model.dma_busy_cycles): popped from the queue in a clock the
engine is IDLE; `ext.latency` clocks of LATENCY (none for FILL); one clock per beat (BEATS: the
beat's read is issued, its write follows the next clock, pipelined); DRAIN (the last write);
IDLE again `latency + beats + 2` clocks after the pop. An empty transfer (a length of 0) takes
the pop clock only, from IDLE.

Transfers back to back (cycle_model.Timeline.dma): the external memory takes the request of
every queued transfer at once (as a memory with DMA_QUEUE_DEPTH outstanding requests), so each
transfer's latency counts down from the clock after its push, whatever runs before it. The
engine pops the next transfer in the DRAIN clock of the one in flight (or from IDLE): BEATS the
clock after if its latency is over, else LATENCY for the rest. A run of transfers queued
together pays the latency about once, and so do short transfers pushed a few clocks apart.

The VAR unit's transfers are descriptors too (`var` set): they reach the variable SRAM as slot
accesses (a store into the slot sets its written flag), where plain DMA to the variable SRAM is a
raw access (no flag).
"""

from amaranth import Const, Module, Mux, Signal, unsigned
from amaranth.lib import data, memory, stream, wiring
from amaranth.lib.wiring import In, Out

from firmware_model.arch.config import NpuConfig
from firmware_model.arch.cycle_model import DMA_QUEUE_DEPTH, sram_word_bytes
from firmware_model.arch.isa import Sram


class DmaKind:
    LOAD = 0      # external memory -> SRAM
    STORE = 1     # SRAM -> external memory
    FILL = 2      # SRAM := a byte


DESCRIPTOR = data.StructLayout({
    "kind": unsigned(2),
    "sram": unsigned(3),
    "value": unsigned(8),          # FILL's byte
    "var": unsigned(1),            # a VAR unit transfer (a slot access)
    "slot": unsigned(8),           # its slot
    "ext_addr": unsigned(32),
    "sram_addr": unsigned(32),
    "len0": unsigned(32),
    "len1": unsigned(32),
    "len2": unsigned(32),
    "ext_stride1": unsigned(32),
    "ext_stride2": unsigned(32),
    "sram_stride1": unsigned(32),
    "sram_stride2": unsigned(32),
})

SRAMS = (Sram.INPUT, Sram.WEIGHT, Sram.PARAM, Sram.OUTPUT, Sram.VARIABLE, Sram.LUT)


def sram_depth(cfg: NpuConfig, sram: Sram) -> int:
    return {Sram.INPUT: cfg.input_words, Sram.WEIGHT: cfg.weight_words, Sram.PARAM: cfg.param_records,
            Sram.OUTPUT: cfg.output_words, Sram.VARIABLE: cfg.variable_words,
            Sram.LUT: cfg.lut_sram // sram_word_bytes(cfg, Sram.LUT)}[sram]


def bits_for(n: int) -> int:
    return max(1, (n - 1).bit_length())


def sram_port_signature(word_bytes: int, depth: int) -> wiring.Signature:
    """The engine's side of one SRAM: a write port with byte enables and a read port whose data
    arrives the clock after the address (`ren` marks a read the engine issues)."""
    return wiring.Signature({
        "waddr": Out(bits_for(depth)),
        "wdata": Out(8 * word_bytes),
        "wen": Out(word_bytes),
        "raddr": Out(bits_for(depth)),
        "ren": Out(1),
        "rdata": In(8 * word_bytes),
        "var": Out(1),              # (variable SRAM) a VAR slot access, not a raw DMA access
        "slot": Out(8),
    })


def ext_port_signature(bandwidth: int) -> wiring.Signature:
    """The external-memory port: `bandwidth` bytes at any byte address; read data the clock after
    `ren`, writes with byte enables."""
    return wiring.Signature({
        "addr": Out(32),
        "ren": Out(1),
        "rdata": In(8 * bandwidth),
        "wdata": Out(8 * bandwidth),
        "wen": Out(bandwidth),
    })


def _mask(n, width: int):
    """n ones from bit 0, for a Value n <= width."""
    return Const((1 << width) - 1, width) >> (width - n).as_unsigned()


class DmaEngine(wiring.Component):
    def __init__(self, cfg: NpuConfig, queue_depth: int = DMA_QUEUE_DEPTH, fault: str | None = None):
        self.cfg = cfg
        self.queue_depth = queue_depth
        self.fault = fault          # "dma_address": the core's self-check (hw/npu_core.CORE_FAULTS)
        members = {
            "push": In(stream.Signature(DESCRIPTOR)),
            "idle": Out(1),                 # the queue is empty and no transfer is in flight
            # descriptors pushed and not finished: queued and in flight (a compute command's
            # DMA slack is compared with it)
            "outstanding": Out(range(queue_depth + 2)),
            "ext": Out(ext_port_signature(cfg.ext_bandwidth)),
        }
        for s in SRAMS:
            members[s.name.lower()] = Out(sram_port_signature(sram_word_bytes(cfg, s), sram_depth(cfg, s)))
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        cfg = self.cfg
        B = cfg.ext_bandwidth
        Q = self.queue_depth

        # ---- the queue: a ring of descriptors; a push is seen by the engine the clock after ----
        m.submodules.queue = ring = memory.Memory(shape=DESCRIPTOR, depth=Q, init=[])
        ring_wr = ring.write_port()
        ring_rd = ring.read_port(domain="comb")
        head = Signal(range(Q))
        tail = Signal(range(Q))
        count = Signal(range(Q + 1))
        pop = Signal()
        m.d.comb += self.push.ready.eq(count < Q)
        push = Signal()
        m.d.comb += push.eq(self.push.valid & self.push.ready)
        m.d.comb += [ring_wr.addr.eq(tail), ring_wr.data.eq(self.push.payload), ring_wr.en.eq(push),
                     ring_rd.addr.eq(head)]
        with m.If(push):
            m.d.sync += tail.eq(Mux(tail == Q - 1, 0, tail + 1))
        with m.If(pop):
            m.d.sync += head.eq(Mux(head == Q - 1, 0, head + 1))
        m.d.sync += count.eq(count + push - pop)

        # ---- the transfer in flight ----
        d = Signal(DESCRIPTOR)
        lat = Signal(range(cfg.ext_latency + 1))
        ext_run, ext_plane = Signal(32), Signal(32)       # start of the current run / i2 plane
        sram_run, sram_plane = Signal(32), Signal(32)
        cur_ext, cur_sram = Signal(32), Signal(32)
        left = Signal(32)                                  # bytes left in the current run
        i1, i2 = Signal(32), Signal(32)

        front = ring_rd.data
        empty_xfer = Signal()
        m.d.comb += empty_xfer.eq((front.len0 == 0) | (front.len1 == 0) | (front.len2 == 0))

        # The beat: the bytes of the run in one SRAM word, at most `bandwidth` of them (not FILL).
        widest = max(sram_word_bytes(cfg, s) for s in SRAMS)
        word = Signal(32, name="beat_word")
        offset = Signal(range(widest), name="beat_offset")
        room = Signal(range(widest + 1), name="beat_room")
        with m.Switch(d.sram):
            for s in SRAMS:
                wb = sram_word_bytes(cfg, s)
                with m.Case(s):
                    if wb & (wb - 1) == 0:
                        lg = wb.bit_length() - 1
                        m.d.comb += [word.eq(cur_sram >> lg), offset.eq(cur_sram[:lg] if lg else 0)]
                    else:           # the 11-byte parameter record: SRAM addresses are small
                        m.d.comb += [word.eq(cur_sram[:20] // wb), offset.eq(cur_sram[:20] % wb)]
                    m.d.comb += room.eq(wb - offset)
            with m.Default():
                m.d.comb += [word.eq(0), offset.eq(0), room.eq(1)]
        n = Signal(range(widest + 1), name="beat_bytes")
        capped = Signal.like(n)
        m.d.comb += capped.eq(Mux(room < left, room, left))
        m.d.comb += n.eq(Mux((d.kind != DmaKind.FILL) & (capped > B), B, capped))

        issue = Signal(name="beat_issue")          # stage 1 of a beat this clock
        m.d.comb += issue.eq(0)

        # Each queued descriptor's latency counts down from its push (`qlat`, one counter per
        # ring entry: ext.latency + 1 the clock after the push, 0 for FILL): the external memory
        # takes every queued request at once and answers them in order. A transfer popped with v
        # on its counter starts its beats max(1, v) clocks later.
        qlat = [Signal(range(cfg.ext_latency + 2), name=f"queue_latency{i}") for i in range(Q)]
        for i, c in enumerate(qlat):
            with m.If(push & (tail == i)):
                m.d.sync += c.eq(Mux(self.push.payload.kind == DmaKind.FILL, 0, cfg.ext_latency + 1))
            with m.Elif(c != 0):
                m.d.sync += c.eq(c - 1)
        # the front's counter as a chain of multiplexers (continuous assignments in Verilog: a
        # process would wait for an input to change, and Icarus would leave it X until then)
        front_lat = Signal(range(cfg.ext_latency + 2), name="front_latency")
        pick = qlat[-1]
        for i in reversed(range(Q - 1)):
            pick = Mux(head == i, qlat[i], pick)
        m.d.comb += front_lat.eq(pick)

        def begin(src, latency):
            """The transfer `src` becomes the one in flight: its registers, and LATENCY for
            `latency` more clocks (0: BEATS next)."""
            m.d.sync += [
                d.eq(src),
                ext_run.eq(src.ext_addr), ext_plane.eq(src.ext_addr), cur_ext.eq(src.ext_addr),
                sram_run.eq(src.sram_addr), sram_plane.eq(src.sram_addr), cur_sram.eq(src.sram_addr),
                left.eq(src.len0), i1.eq(0), i2.eq(0), lat.eq(latency),
            ]

        def start_front():
            """Pop the front descriptor into flight: BEATS next when its latency is over (its
            counter at most 1), else LATENCY for the rest."""
            m.d.comb += pop.eq(1)
            with m.If(front_lat <= 1):
                begin(front, 0)
                m.next = "BEATS"
            with m.Else():
                begin(front, front_lat - 1)
                m.next = "LATENCY"

        with m.FSM(name="dma") as fsm:
            with m.State("IDLE"):
                with m.If(count != 0):
                    with m.If(empty_xfer):
                        m.d.comb += pop.eq(1)
                    with m.Else():
                        start_front()
            with m.State("LATENCY"):
                m.d.sync += lat.eq(lat - 1)
                with m.If(lat == 1):
                    m.next = "BEATS"
            with m.State("BEATS"):
                m.d.comb += issue.eq(1)
                with m.If(left != n):
                    m.d.sync += [cur_ext.eq(cur_ext + n), cur_sram.eq(cur_sram + n), left.eq(left - n)]
                with m.Elif(i1 + 1 < d.len1):
                    m.d.sync += [i1.eq(i1 + 1), left.eq(d.len0),
                                 ext_run.eq(ext_run + d.ext_stride1), cur_ext.eq(ext_run + d.ext_stride1),
                                 sram_run.eq(sram_run + d.sram_stride1), cur_sram.eq(sram_run + d.sram_stride1)]
                with m.Elif(i2 + 1 < d.len2):
                    m.d.sync += [i1.eq(0), i2.eq(i2 + 1), left.eq(d.len0),
                                 ext_plane.eq(ext_plane + d.ext_stride2), ext_run.eq(ext_plane + d.ext_stride2),
                                 cur_ext.eq(ext_plane + d.ext_stride2),
                                 sram_plane.eq(sram_plane + d.sram_stride2),
                                 sram_run.eq(sram_plane + d.sram_stride2), cur_sram.eq(sram_plane + d.sram_stride2)]
                with m.Else():
                    m.next = "DRAIN"
            with m.State("DRAIN"):
                # the queue's next transfer follows at once; an empty one waits for IDLE
                with m.If((count != 0) & ~empty_xfer):
                    start_front()
                with m.Else():
                    m.next = "IDLE"

        # ---- stage 2: the write of the beat issued the clock before ----
        s2_valid = Signal()
        s2_word = Signal(32)
        s2_offset = Signal.like(offset)
        s2_n = Signal.like(n)
        s2_ext = Signal(32)
        m.d.sync += [s2_valid.eq(issue), s2_word.eq(word), s2_offset.eq(offset), s2_n.eq(n), s2_ext.eq(cur_ext)]
        load = d.kind == DmaKind.LOAD
        store = d.kind == DmaKind.STORE
        fill = d.kind == DmaKind.FILL

        # external memory: a LOAD reads at the beat (stage 1), a STORE writes after it (stage 2)
        m.d.comb += [
            self.ext.addr.eq(Mux(store, s2_ext, cur_ext)),
            self.ext.ren.eq(issue & load),
            self.ext.wen.eq(Mux(s2_valid & store, _mask(s2_n, B), 0)),
        ]
        for s in SRAMS:
            port = getattr(self, s.name.lower())
            wb = sram_word_bytes(cfg, s)
            ours = d.sram == s
            fill_word = Signal(8 * wb, name=f"fill_{s.name.lower()}")
            m.d.comb += fill_word.eq(d.value.replicate(wb))
            m.d.comb += [
                port.raddr.eq(word),
                port.ren.eq(issue & store & ours),
                port.waddr.eq(s2_word + (1 if self.fault == "dma_address" and s == Sram.INPUT else 0)),
                port.wdata.eq(Mux(fill, fill_word, (self.ext.rdata << (s2_offset * 8))[:8 * wb])),
                port.wen.eq(Mux(s2_valid & ours & ~store, (_mask(s2_n, wb) << s2_offset)[:wb], 0)),
                port.var.eq(d.var),
                port.slot.eq(d.slot),
            ]
        # a STORE's data: the SRAM word read last clock, shifted down to the beat's first byte
        store_word = Signal(8 * widest, name="store_word")
        with m.Switch(d.sram):
            for s in SRAMS:
                with m.Case(s):
                    m.d.comb += store_word.eq(getattr(self, s.name.lower()).rdata)
        m.d.comb += self.ext.wdata.eq((store_word >> (s2_offset * 8))[:8 * B])
        m.d.comb += self.outstanding.eq(count + ~fsm.ongoing("IDLE"))
        # outside the FSM's process: a continuous assignment, which Icarus evaluates at time 0 (an
        # engine that stays idle never changes its state, so a process computing this might never
        # run, and the command processor would wait on an unknown value)
        m.d.comb += self.idle.eq(fsm.ongoing("IDLE") & (count == 0))
        return m
