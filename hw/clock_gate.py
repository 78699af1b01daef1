"""Clock gating: a clock domain that ticks only in the clocks its enable asks for.

`add_gated_domain(m, name, enable)` adds the local domain `name` to module `m`: its clock is the
parent domain's clock through an integrated clock-gating cell (ICG), its reset the parent's. As in
a library ICG, the enable is latched while the clock is low (here a register on the falling edge),
so the gated clock has no glitches: an edge of the parent clock reaches the domain when `enable`
was high in the clock before it. Reset always passes (the domain's registers take their reset
values with everyone else's).

Why the core gates its units: an idle unit's registers hold still anyway, so gating changes no
result and no cycle count, as on silicon, where gating idle units is how their clock power is saved.
Here it is also how a simulator saves time: Verilator evaluates a domain's logic (and the logic
fed only by it) in the steps its clock has an edge, so an idle unit costs nothing.

The rule for an enable: high in every clock after which the domain's state could change. A unit
that changes state only while it runs (from its start to its done, inclusive) is gated by
`start | running`. The golden model knows nothing of this; the co-simulation's exact tile
results and cycle counts are what check it.
"""

from __future__ import annotations

from amaranth import ClockDomain, ClockSignal, Module, ResetSignal, Signal


def add_gated_domain(m: Module, name: str, enable, *, parent: str = "sync") -> Signal:
    """Add local domain `name`, clocked by `parent` gated by `enable`; returns the latched enable."""
    latch = f"{name}_icg"
    m.domains += [ClockDomain(name, local=True),
                  ClockDomain(latch, clk_edge="neg", reset_less=True, local=True)]
    en_q = Signal(name=f"{name}_clock_enable")
    m.d.comb += [
        ClockSignal(latch).eq(ClockSignal(parent)),
        ClockSignal(name).eq(ClockSignal(parent) & en_q),
        ResetSignal(name).eq(ResetSignal(parent)),
    ]
    m.d[latch] += en_q.eq(enable | ResetSignal(parent))
    return en_q
