"""The unit-verification infrastructure itself: payload codec, vector harness (on amaranth.sim),
coverage model, mutations and the lint alias waivers. No simulator needed."""


import numpy as np
import pytest
from amaranth import Module, Signal, signed, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from sim import seeds
from sim.verification.gateware.vector_harness import PayloadCodec, VectorHarness
from sim.verification.coverage import CoverageModel, CoverPoint, Cross, close_coverage
from sim.verification.unit_bench import Mutation, MutationError, UnitBench, UnitSpec, VectorRun, alias_waivers


class Inner(data.Struct):
    a: signed(5)
    b: unsigned(3)


class Wide(data.Struct):
    x: unsigned(60)
    inner: Inner
    y: signed(64)
    lanes: data.ArrayLayout(signed(7), 3)


def test_codec_round_trip_wide_nested_signed():
    codec = PayloadCodec(Wide)
    assert codec.width == 60 + 8 + 64 + 21
    assert codec.names == ["x", "inner.a", "inner.b", "y", "lanes.0", "lanes.1", "lanes.2"]
    rng = seeds.rng(1)
    n = 100
    vals = {"x": rng.integers(0, 1 << 60, n), "inner.a": rng.integers(-16, 16, n), "inner.b": rng.integers(0, 8, n),
            "y": rng.integers(-(1 << 63), (1 << 63) - 1, n), "lanes.0": rng.integers(-64, 64, n),
            "lanes.1": np.full(n, -64), "lanes.2": np.full(n, 63)}
    words = codec.pack(vals)
    assert all(0 <= w < (1 << codec.width) for w in words)
    back = codec.unpack(words)
    for k, v in vals.items():
        assert np.array_equal(back[k], v), k
    # the packing agrees with Amaranth's own layout of the same value
    view = data.Const(Wide, words[0])
    assert view.inner.a == vals["inner.a"][0] and view.y == vals["y"][0] and view.lanes[1] == -64


def test_codec_truncates_to_field_width():
    codec = PayloadCodec(Inner)
    back = codec.unpack(codec.pack({"a": [16, -17], "b": [9, -1]}))
    assert np.array_equal(back["a"], [-16, 15]) and np.array_equal(back["b"], [1, 7])
    with pytest.raises(KeyError):
        codec.pack({"c": [1]})


class Adder(wiring.Component):
    """A stream unit with two phases' worth of inputs: `k` sets a constant, `i` adds it."""
    k: In(stream.Signature(signed(8)))
    i: In(stream.Signature(data.StructLayout({"v": signed(8), "tag": unsigned(8)})))
    o: Out(stream.Signature(data.StructLayout({"s": signed(9), "tag": unsigned(8)})))
    scale: In(2)

    def elaborate(self, platform):
        m = Module()
        const = Signal(signed(8))
        m.d.comb += [self.k.ready.eq(1), self.i.ready.eq(~self.o.valid | self.o.ready)]
        with m.If(self.k.valid):
            m.d.sync += const.eq(self.k.payload)
        with m.If(self.i.ready):
            m.d.sync += [self.o.valid.eq(self.i.valid),
                         self.o.payload.s.eq((self.i.payload.v + const) << self.scale),
                         self.o.payload.tag.eq(self.i.payload.tag)]
        return m


def _adder_bench():
    return UnitBench(UnitSpec("adder_bench", Adder, depth=64, phases=(("k",), ("i",))))


def test_harness_phases_static_ports_and_stalls():
    bench = _adder_bench()
    v = np.arange(-20, 20)
    runs = []
    for k, scale, vp, rp in ((5, 0, 0xFFFFFFFF, 0xFFFFFFFF), (-3, 1, 0x5A5A5A5B, 0x33CC33CD)):
        runs.append(VectorRun(inputs={"k": {"": [k]}, "i": {"v": v, "tag": np.arange(len(v))}}, n_out={"o": len(v)},
                              expected={"o": {"s": (v + k) * (1 << scale), "tag": np.arange(len(v))}},
                              static={"u_scale": scale}, valid_pattern=vp, ready_pattern=rp, label=f"k{k}"))
    results = bench.run_amaranth(runs)
    assert results.ok
    first = results.runs[0]
    # one clock for k, one to change phase, 40 payloads, latency 1
    assert first.cycles == 1 + 1 + 40 + 1 and first.first_out == 4
    assert results.runs[1].cycles > first.cycles


def test_harness_detects_a_wrong_expectation():
    bench = _adder_bench()
    v = np.arange(8)
    run = VectorRun(inputs={"k": {"": [1]}, "i": {"v": v, "tag": v}}, n_out={"o": 8},
                    expected={"o": {"s": v + 2, "tag": v}})
    results = bench.run_amaranth([run])
    assert not results.ok and results.runs[0].mismatches["o"] == list(range(8))


def test_harness_rejects_bad_phases():
    with pytest.raises(ValueError, match="exactly once"):
        VectorHarness(Adder(), depth=8, phases=[["i"]])


def test_coverage_bins_crosses_ignore_merge():
    def model():
        return CoverageModel("t", [
            CoverPoint.values("mode", "m", {"a": 0, "b": 1}),
            CoverPoint.ranges("size", "s", {"small": (0, 9), "big": (10, 99)}),
        ], crosses=[Cross("mode x size", ["mode", "size"], ignore=lambda c: c == ("b", "big"))])
    cov = model()
    cov.sample({"m": np.array([0, 0, 1]), "s": np.array([1, 50, 2])})
    assert cov.points["mode"].hits == {"a": 2, "b": 1}
    assert cov.crosses["mode x size"].hits == {("a", "small"): 1, ("a", "big"): 1, ("b", "small"): 1}
    assert cov.missing() == [] and cov.coverage() == (7, 7)
    other = model()
    other.sample({"m": 1, "s": 3})
    cov.merge(other)
    assert cov.points["mode"].hits["b"] == 2 and cov.samples == 4
    empty = model()
    empty.sample({"m": np.array([0]), "s": np.array([1])})
    assert "mode: b" in empty.missing() and "mode x size: a x big" in empty.missing()
    with pytest.raises(AssertionError, match="never hit"):
        empty.assert_covered()
    empty.assert_covered(required=["mode x size"][:0])       # nothing required: passes
    assert "MISS" in empty.report()


def test_mutation_must_match_as_declared():
    text = "assign a = b + 1'h1;\nassign c = d;\n"
    m = Mutation("plus_two", "", r"\+ 1'h1;", "+ 2'h2;")
    assert m.apply(text) == "assign a = b + 2'h2;\nassign c = d;\n"
    with pytest.raises(MutationError):
        Mutation("stale", "", r"- 1'h1;", "+ 0;").apply(text)
    with pytest.raises(MutationError):
        Mutation("twice", "", r"assign", "assign", count=2).apply(text)


def test_alias_waivers_only_for_live_sources():
    text = "\n".join([
        "module t(input wire [3:0] i, output wire [3:0] o);",
        "  wire [4:0] \\$1 ;",
        "  wire [3:0] named;",
        "  wire [3:0] dead;",
        "  wire [3:0] \\$2 ;",
        "  assign \\$1 = i + 1'h1;",
        "  assign named = \\$1 [3:0];",
        "  assign o = \\$1 [3:0];",
        "  assign \\$2 = i - 1'h1;",
        "  assign dead = \\$2 ;",
        "endmodule",
    ])
    names = [w.match for w in alias_waivers(text)]
    assert names == ["*: 'named'*"]          # `dead` copies a value nothing else reads


def test_close_coverage_keeps_only_items_that_hit_missing_bins():
    """Directed closure: draws aimed at missing bins, kept only when they add a covered bin; a
    bin no draw can reach stops the loop at max_draws and stays missing."""
    def model():
        return CoverageModel("toy", [CoverPoint.values("v", "v", {str(i): i for i in range(6)})])

    rng = seeds.rng(0)
    cov = model()
    cov.sample({"v": np.array([0, 1])})
    draws = []

    def draw(target):                       # "v: 3" -> a value aimed at it half of the time
        draws.append(target)
        want = int(target.split(": ")[1])
        return want if rng.random() < 0.5 else 0

    kept = close_coverage(cov, draw, lambda v: {"v": np.array([v])}, rng, max_draws=200)
    assert sorted(kept) == [2, 3, 4, 5] and cov.missing() == []
    assert len(draws) > len(kept)           # the misses were drawn and dropped
    assert cov.samples == 2 + len(kept)

    stuck = model()
    n = []
    left = close_coverage(stuck, lambda t: n.append(t) or 0, lambda v: {"v": np.array([v])}, rng, max_draws=7)
    assert left == [0] and len(n) == 7 and len(stuck.missing()) == 5
