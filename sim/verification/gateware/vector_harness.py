"""Vector harness: runs a stream unit free over whole vectors held in on-chip memories.

The harness wraps one unit (any `wiring.Component` whose data ports are `amaranth.lib.stream`
members) and adds, per stream:

- input stream `s`  -> a stimulus memory `stim_<s>` (one payload per word) and a top-level port
  `count_<s>`: how many payloads to play;
- output stream `o` -> a response memory `resp_<o>` (one payload per word, in arrival order) and a
  port `count_<o>`: how many payloads to capture.

A bench writes the stimulus memories by backdoor (simulator memory access, no clocks), sets the
counts, pulses `start` for one clock and waits once for `done`. Between the two nothing happens in
Python: the RTL streams every payload into the unit at up to one per clock and writes every
result back, then raises `done` (a level, held until the next `start`) with

- `cycles`: the number of the clock that captured the last result, counting the first clock after
  `start` as clock 1 (a unit of latency L taking one payload per clock: N results in N + L);
- `first_out`: the number of the clock that captured the first result (L + 1 at full speed).

Input streams are played in *phases*: every stream of a phase plays concurrently (stream k reads
its word n at its n-th transfer); the next phase starts once all of them have played their count,
with no clock in between for a phase whose counts are all 0 (it is skipped).
A unit whose table must be written before it is used (the LUT engine) lists its write stream in
an earlier phase than its data stream. Results are captured whenever they arrive.

Back-pressure and gaps: `valid_pattern` and `ready_pattern` (32 bits each, loaded at `start`,
rotated left by one every clock) gate the inputs' `valid` (stream k looks at bit k mod 32) and the
outputs' `ready`. All ones runs at full speed; other patterns make the unit see gaps and stalls.
A payload once offered stays offered until taken, as `amaranth.lib.stream` requires. A pattern of
zero would never offer or take anything: benches pass a non-zero pattern.

Every other port of the unit (configuration, status) is brought out unchanged as `u_<path>`, so a
bench can set static configuration once before `start`.

`PayloadCodec` converts between numpy arrays of field values and the packed memory words of a
payload layout (`amaranth.lib.data`): the pytest side packs stimulus and unpacks results with it,
the simulator side only moves whole words. `describe()` gives the bench the memory and port names.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from amaranth import Cat, ClockSignal, Instance, Module, Mux, Shape, Signal
from amaranth.lib import data, memory, stream, wiring
from amaranth.lib.wiring import In, Out

PATTERN_BITS = 32

# The stimulus and response memories in generated Verilog: a plain array, no initial contents.
# (An amaranth.lib.memory always carries its initial contents into the netlist, one constant per
# word: for a 65536-deep vector memory that alone takes tens of seconds to convert and compile.
# Vector memories are bench storage, loaded by backdoor, so they need none.)
VECTOR_MEM_MODULE = "npu_bench_vector_mem"
VECTOR_MEM_VERILOG = f"""
// Vector memory of the unit-test harness (sim/verification/gateware/vector_harness.py): one synchronous read port,
// one write port, no initial contents; benches load and read `mem` by backdoor.
module {VECTOR_MEM_MODULE} #(
    parameter WIDTH = 8,
    parameter DEPTH = 16,
    parameter ABITS = 4
) (
    input wire clk,
    input wire [ABITS-1:0] raddr,
    output reg [WIDTH-1:0] rdata,
    input wire we,
    input wire [ABITS-1:0] waddr,
    input wire [WIDTH-1:0] wdata
);
    reg [WIDTH-1:0] mem [0:DEPTH-1];
    always @(posedge clk) begin
        rdata <= mem[raddr];
        if (we) mem[waddr] <= wdata;
    end
endmodule
"""


# ---------------------------------------------------------------------------------------------
# Payload layouts <-> numpy

@dataclass(frozen=True)
class CodecField:
    name: str      # dotted path for nested layouts ("a.b"), index for arrays ("lanes.3")
    offset: int
    width: int
    signed: bool


class PayloadCodec:
    """Packs named integer arrays into payload words of a layout, and back.

    Leaf fields may be at most 64 bits wide. Packed words are Python ints (any width).
    """

    def __init__(self, shape):
        self.fields: list[CodecField] = []
        try:
            layout = data.Layout.cast(shape)
        except TypeError:
            layout = None
        if layout is None:
            s = Shape.cast(shape)
            self.width = s.width
            self.fields.append(CodecField("", 0, s.width, s.signed))
        else:
            self.width = layout.size
            self._flatten(layout, "", 0)
        for f in self.fields:
            if f.width > 64:
                raise ValueError(f"payload field {f.name!r} is {f.width} bits wide; the codec handles "
                                 "leaf fields up to 64 bits (split it into a struct)")
        self.limbs = max(1, -(-self.width // 64))

    def _flatten(self, layout: data.Layout, prefix: str, base: int) -> None:
        for name, fld in layout:
            path = f"{prefix}{name}"
            try:
                sub = data.Layout.cast(fld.shape)
            except TypeError:
                sub = None
            if sub is not None:
                self._flatten(sub, path + ".", base + fld.offset)
            else:
                s = Shape.cast(fld.shape)
                if s.width:
                    self.fields.append(CodecField(path, base + fld.offset, s.width, s.signed))

    @property
    def names(self) -> list[str]:
        return [f.name for f in self.fields]

    def pack(self, values: dict[str, object], n: int | None = None) -> list[int]:
        """Words for `n` payloads; `values[name]` is a scalar or an array of n integers (signed
        values are stored in two's complement, every value is truncated to its field's width).
        Fields not given are zero."""
        unknown = set(values) - set(self.names)
        if unknown:
            raise KeyError(f"no payload field(s) {sorted(unknown)}; fields: {self.names}")
        if n is None:
            sizes = {np.size(v) for v in values.values() if np.ndim(v)}
            if len(sizes) != 1:
                raise ValueError(f"cannot tell the vector length from field sizes {sorted(sizes)}")
            n = sizes.pop()
        limbs = np.zeros((n, self.limbs + 1), dtype=np.uint64)
        for f in self.fields:
            if f.name not in values:
                continue
            v = np.broadcast_to(np.asarray(values[f.name]), (n,))
            v = v.astype(np.int64).view(np.uint64) if v.dtype != np.uint64 else v
            if f.width < 64:
                v = v & np.uint64((1 << f.width) - 1)
            lo, bit = divmod(f.offset, 64)
            limbs[:, lo] |= v << np.uint64(bit)
            if bit and bit + f.width > 64:
                limbs[:, lo + 1] |= v >> np.uint64(64 - bit)
        raw = limbs[:, :self.limbs].astype("<u8").tobytes()
        step = 8 * self.limbs
        return [int.from_bytes(raw[i:i + step], "little") for i in range(0, len(raw), step)]

    def unpack(self, words) -> dict[str, np.ndarray]:
        """Field arrays (int64; uint64 for unsigned 64-bit fields) from payload words."""
        n = len(words)
        step = 8 * self.limbs
        mask = (1 << (64 * self.limbs)) - 1
        raw = b"".join((int(w) & mask).to_bytes(step, "little") for w in words)
        limbs = np.zeros((n, self.limbs + 1), dtype=np.uint64)
        if n:
            limbs[:, :self.limbs] = np.frombuffer(raw, dtype="<u8").reshape(n, self.limbs)
        out = {}
        for f in self.fields:
            lo, bit = divmod(f.offset, 64)
            v = limbs[:, lo] >> np.uint64(bit)
            if bit and bit + f.width > 64:
                v = v | (limbs[:, lo + 1] << np.uint64(64 - bit))
            if f.width < 64:
                v = v & np.uint64((1 << f.width) - 1)
            if f.signed:
                s = np.int64(64 - f.width)
                out[f.name] = (v.view(np.int64) << s) >> s
            elif f.width == 64:
                out[f.name] = v
            else:
                out[f.name] = v.astype(np.int64)
        return out


# ---------------------------------------------------------------------------------------------
# The harness

def _stream_signature(member) -> stream.Signature | None:
    if not member.is_signature:
        return None
    sig = member.signature
    if isinstance(sig, wiring.FlippedSignature):
        sig = sig.flip()
    return sig if isinstance(sig, stream.Signature) else None


class _VectorMemory:
    """One vector memory: an amaranth.lib.memory (amaranth.sim) or the Verilog module above."""

    def __init__(self, name: str, width: int, depth: int, verilog: bool):
        self.name, self.width, self.depth, self.verilog = name, width, depth, verilog
        self.abits = max(1, (depth - 1).bit_length())
        self.raddr = Signal(self.abits, name=f"{name}_raddr")
        self.rdata = Signal(width, name=f"{name}_rdata")
        self.we = Signal(name=f"{name}_we")
        self.waddr = Signal(self.abits, name=f"{name}_waddr")
        self.wdata = Signal(width, name=f"{name}_wdata")
        self.memory = None if verilog else memory.Memory(shape=width, depth=depth, init=[])

    def add_to(self, m: Module) -> None:
        if self.verilog:
            m.submodules[self.name] = Instance(
                VECTOR_MEM_MODULE, p_WIDTH=self.width, p_DEPTH=self.depth, p_ABITS=self.abits,
                i_clk=ClockSignal(), i_raddr=self.raddr, o_rdata=self.rdata,
                i_we=self.we, i_waddr=self.waddr, i_wdata=self.wdata)
        else:
            m.submodules[self.name] = self.memory
            rd = self.memory.read_port()
            wr = self.memory.write_port()
            m.d.comb += [rd.addr.eq(self.raddr), self.rdata.eq(rd.data),
                         wr.addr.eq(self.waddr), wr.data.eq(self.wdata), wr.en.eq(self.we)]


class VectorHarness(wiring.Component):
    """See the module docstring.

    `unit`: an (un-elaborated) component; `depth`: stimulus memory depth (`out_depth`: response
    memory depth, default the same); `phases`: the input streams in play order (default: all in
    one phase); `verilog_memories`: build the vector memories as the `VECTOR_MEM_VERILOG` module
    (for simulators; its text must be compiled with the design) instead of amaranth.lib.memory
    (for amaranth.sim, where a testbench reaches them as `harness.stim[name].data`).
    """

    def __init__(self, unit, *, depth: int, out_depth: int | None = None,
                 phases: list[list[str]] | None = None, counter_bits: int = 32,
                 verilog_memories: bool = False):
        self.unit = unit
        self.depth = depth
        self.out_depth = out_depth or depth
        self.counter_bits = counter_bits
        self.inputs: dict[str, stream.Signature] = {}
        self.outputs: dict[str, stream.Signature] = {}
        statics = {}
        for name, member in unit.signature.members.items():
            sig = _stream_signature(member)
            if sig is not None:
                (self.inputs if member.flow == In else self.outputs)[name] = sig
            else:
                statics[name] = member
        if not self.inputs or not self.outputs:
            self._refuse(f"{type(unit).__name__} needs at least one input and one output stream")
        self.phases = [list(p) for p in (phases or [list(self.inputs)])]
        flat = [s for p in self.phases for s in p]
        if sorted(flat) != sorted(self.inputs):
            self._refuse(f"phases {self.phases} must list each input stream "
                         f"({', '.join(self.inputs)}) exactly once")
        self.codecs = {n: PayloadCodec(s.members["payload"].shape)
                       for n, s in {**self.inputs, **self.outputs}.items()}
        self.static_ports: dict[str, tuple] = {}
        members = {
            "start": In(1), "busy": Out(1), "done": Out(1),
            "cycles": Out(counter_bits), "first_out": Out(counter_bits),
            "valid_pattern": In(PATTERN_BITS), "ready_pattern": In(PATTERN_BITS),
        }
        for n in self.inputs:
            members[f"count_{n}"] = In(range(depth + 1))
        for n in self.outputs:
            members[f"count_{n}"] = In(range(self.out_depth + 1))
        for name, member in statics.items():
            if member.is_signature:
                self._refuse(f"{type(unit).__name__}.{name}: only stream interfaces and plain "
                             "ports are supported")
            members[f"u_{name}"] = member
            self.static_ports[name] = (member.flow, Shape.cast(member.shape).width)
        super().__init__(members)
        self.stim = {n: _VectorMemory(f"stim_{n}", self.codecs[n].width, depth, verilog_memories)
                     for n in self.inputs}
        self.resp = {n: _VectorMemory(f"resp_{n}", self.codecs[n].width, self.out_depth, verilog_memories)
                     for n in self.outputs}

    def _refuse(self, message: str):
        # Neither this harness nor its unit will be elaborated: no "never used" warnings.
        self._MustUse__silence = True
        self.unit._MustUse__silence = True
        raise ValueError(message)

    def describe(self) -> dict:
        """Names and widths a bench needs (plain data: it crosses into the simulator process).
        In Verilog the memory arrays are `<memory>.mem`."""
        return {
            "inputs": {n: {"memory": f"stim_{n}", "count": f"count_{n}", "width": self.codecs[n].width}
                       for n in self.inputs},
            "outputs": {n: {"memory": f"resp_{n}", "count": f"count_{n}", "width": self.codecs[n].width}
                        for n in self.outputs},
            "phases": self.phases,
            "depth": self.depth,
            "out_depth": self.out_depth,
            "static_in": {f"u_{n}": w for n, (flow, w) in self.static_ports.items() if flow == In},
            "static_out": {f"u_{n}": w for n, (flow, w) in self.static_ports.items() if flow == Out},
        }

    def elaborate(self, platform):
        m = Module()
        m.submodules.unit = unit = self.unit
        for name, (flow, _) in self.static_ports.items():
            port, inner = getattr(self, f"u_{name}"), getattr(unit, name)
            m.d.comb += (inner.eq(port) if flow == In else port.eq(inner))

        busy = Signal()
        done = Signal()
        cycles = Signal(self.counter_bits)
        first_out = Signal(self.counter_bits)
        got_first = Signal()
        vpat = Signal(PATTERN_BITS)
        rpat = Signal(PATTERN_BITS)
        phase = Signal(range(len(self.phases) + 1))
        m.d.comb += [self.busy.eq(busy), self.done.eq(done), self.cycles.eq(cycles),
                     self.first_out.eq(first_out)]
        with m.If(busy):
            m.d.sync += [vpat.eq(vpat.rotate_left(1)), rpat.eq(rpat.rotate_left(1))]

        # ---- sources: stimulus memory -> unit input stream ----
        phase_done = {}
        for k, name in enumerate(self.inputs):
            mem = self.stim[name]
            mem.add_to(m)
            port = getattr(unit, name)
            count = getattr(self, f"count_{name}")
            idx = Signal(range(self.depth + 1), name=f"{name}_idx")
            held = Signal(name=f"{name}_held")      # offered last clock and not taken: keep valid
            p = next(i for i, ph in enumerate(self.phases) if name in ph)
            valid = Signal(name=f"{name}_valid")
            fire = Signal(name=f"{name}_fire")
            m.d.comb += [
                valid.eq(busy & (phase == p) & (idx < count) & (vpat[k % PATTERN_BITS] | held)),
                fire.eq(valid & port.ready),
                port.valid.eq(valid),
                port.payload.eq(mem.rdata),
                # The word at raddr arrives next clock: always the word of the next `idx`.
                mem.raddr.eq(Mux(self.start, 0, Mux(fire, idx + 1, idx))),
                mem.we.eq(0), mem.waddr.eq(0), mem.wdata.eq(0),
            ]
            m.d.sync += held.eq(valid & ~port.ready)
            with m.If(self.start):
                m.d.sync += [idx.eq(0), held.eq(0)]
            with m.Elif(fire):
                m.d.sync += idx.eq(idx + 1)
            phase_done[name] = idx == count

        # A phase with nothing to play (all its counts 0) is skipped and costs no clock, so a run
        # that writes no table times its data stream exactly as a unit without one would.
        n_phases = len(self.phases)
        nonempty = [Cat(*(getattr(self, f"count_{n}") != 0 for n in names)).any() for names in self.phases]
        first_from = [n_phases] * (n_phases + 1)        # first_from[p]: the first non-empty phase >= p
        for p in reversed(range(n_phases)):
            first_from[p] = Mux(nonempty[p], p, first_from[p + 1])
        with m.If(busy & (phase < n_phases)):
            for p, names in enumerate(self.phases):
                with m.If((phase == p) & Cat(*(phase_done[n] for n in names)).all()):
                    m.d.sync += phase.eq(first_from[p + 1])

        # ---- sinks: unit output stream -> response memory ----
        captured = []
        any_fire = []
        for k, name in enumerate(self.outputs):
            mem = self.resp[name]
            mem.add_to(m)
            port = getattr(unit, name)
            count = getattr(self, f"count_{name}")
            widx = Signal(range(self.out_depth + 1), name=f"{name}_widx")
            fire = Signal(name=f"{name}_fire")
            m.d.comb += [
                port.ready.eq(busy & (widx < count) & rpat[k % PATTERN_BITS]),
                fire.eq(port.valid & port.ready),
                mem.waddr.eq(widx), mem.wdata.eq(port.payload), mem.we.eq(fire),
                mem.raddr.eq(0),
            ]
            with m.If(self.start):
                m.d.sync += widx.eq(0)
            with m.Elif(fire):
                m.d.sync += widx.eq(widx + 1)
            captured.append(widx == count)
            any_fire.append(fire)

        with m.If(busy & ~got_first & Cat(*any_fire).any()):
            m.d.sync += [got_first.eq(1), first_out.eq(cycles + 1)]

        finished = (phase == len(self.phases)) & Cat(*captured).all()
        with m.If(busy & ~finished):
            m.d.sync += cycles.eq(cycles + 1)
        with m.If(self.start):
            m.d.sync += [busy.eq(1), done.eq(0), cycles.eq(0), first_out.eq(0), got_first.eq(0),
                         phase.eq(first_from[0]), vpat.eq(self.valid_pattern), rpat.eq(self.ready_pattern)]
        with m.Elif(busy & finished):
            m.d.sync += [busy.eq(0), done.eq(1)]
        return m
