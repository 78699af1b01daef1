"""Arm's conformance tests on the RTL (backend=rtl): the committed slice's first positive test of
every op folder in-process on Verilator, a few on Icarus, a subset through Arm's own runner; a test
whose ops all run on the host is reported as such; a wrong RTL is caught, not passed."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from sim.oracles.conformance import ARM_SET_OPS, EXTRA_OPS, run_runner, where_it_ran
from sim.oracles.tosa_sut import OTHER, SUT_RECORD, VALID, execute_test
from sim.paths import TEST_DATA

pytestmark = pytest.mark.rtl

DATA = TEST_DATA / "conformance"
OPS = sorted(ARM_SET_OPS + EXTRA_OPS, key=len, reverse=True)


def family(name: str) -> str:
    """The op a slice folder tests (conv2d_1x1 and conv2d_3x3 are both conv2d)."""
    return next((op for op in OPS if name == op or name.startswith(op + "_")), name)


# one folder per op (the 3x3 kernels of the convolutions): one positive test per op keeps this
# under a minute
OP_DIRS = list({family(p.name): p for p in sorted(DATA.iterdir(), key=lambda p: (p.name.endswith("_3x3"), p.name))
                if p.is_dir() and p.name != "variable"}.values())


def first_positive(op_dir: Path) -> Path | None:
    for d in sorted(p.parent for p in op_dir.glob("*/desc.json")):
        if not json.loads((d / "desc.json").read_text())["expected_failure"]:
            return d
    return None


def run_copy(test: Path, tmp: Path, **kw):
    d = tmp / test.name
    shutil.copytree(test, d)
    desc = json.loads((d / "desc.json").read_text())
    code, message, outputs = execute_test(d, desc, backend="rtl", **kw)
    record = json.loads((d / SUT_RECORD).read_text()) if (d / SUT_RECORD).exists() else None
    return desc, code, message, outputs, record


def expected(test: Path, desc: dict) -> dict:
    return {n: np.load(test / f"expected_{f}") for n, f in zip(desc["ofm_name"], desc["ofm_file"])}


def test_first_positive_of_every_op_on_verilator(tmp_path):
    problems, npu, dma, host = [], [], [], []
    for op_dir in OP_DIRS:
        test = first_positive(op_dir)
        if test is None:
            continue
        desc, code, message, outputs, record = run_copy(test, tmp_path)
        if code != VALID:
            problems.append(f"{test.name}: {code} {message}")
            continue
        for name, exp in expected(test, desc).items():
            got = outputs[name]
            if got.dtype != exp.dtype or got.shape != exp.shape or not np.array_equal(got, exp):
                problems.append(f"{test.name}: output {name} differs from Arm's reference model")
        assert record["backend"] == "rtl" and record["simulator"] == "verilator"
        (npu if record["compute_tiles"] else dma if record["npu_tiles"] else host).append(family(op_dir.name))
        # every compute tile is checked on the RTL (DMA-only tiles through the outputs and cycles)
        assert record["rtl_tiles_checked"] == record["compute_tiles"]
    assert not problems, "\n".join(problems)
    # the NPU's units each take part; data movement goes to the DMA; the rest stays on the host and
    # is said so (the slice's depthwise tests have channel multiplier 2, which the MAC array's
    # depthwise mapping does not take: host)
    assert {"conv2d", "add", "mul", "rescale", "table", "avg_pool2d", "max_pool2d"} <= set(npu)
    assert "depthwise_conv2d" in host
    assert {"concat", "pad", "slice", "tile", "transpose"} <= set(dma)
    assert {"reshape", "clz"} <= set(host)


@pytest.mark.parametrize("op", ["conv2d_3x3", "table", "avg_pool2d"])
def test_icarus(op, tmp_path):
    test = first_positive(DATA / op)
    desc, code, message, outputs, record = run_copy(test, tmp_path, simulator="icarus")
    assert code == VALID, message
    assert all(np.array_equal(outputs[n], e) for n, e in expected(test, desc).items())
    assert record["simulator"] == "icarus" and record["rtl_tiles_checked"] > 0


def test_a_wrong_rtl_is_other_error_naming_the_tile(tmp_path):
    from compiler.tosa_io import read_tosa
    from sim.cosim.program_run import MismatchError
    from sim.oracles.backends import RtlSession

    test = next(t for t in sorted(p.parent for p in (DATA / "rescale").glob("*/desc.json"))
                if not json.loads((t / "desc.json").read_text())["expected_failure"] and "_i8_" in t.name)
    desc = json.loads((test / "desc.json").read_text())
    inputs = {n: np.load(test / f) for n, f in zip(desc["ifm_name"], desc["ifm_file"])}
    session = RtlSession(read_tosa(test / desc["tosa_file"]), "default", fault="rescale_rounding",
                         input_shapes={n: a.shape for n, a in inputs.items()})
    # rounding dropped shows only on inputs whose rounding bit is set: try the test's data, then
    # the same shapes with every element odd
    odd = {n: (a | 1).astype(a.dtype) for n, a in inputs.items()}
    with pytest.raises(MismatchError, match=r"differs from golden: .*tile"):
        session.run(inputs)
        session.run(odd)


def test_subset_through_arm_runner(tmp_path):
    subset = tmp_path / "tests"
    picks = [first_positive(DATA / "conv2d_3x3"), first_positive(DATA / "add"), first_positive(DATA / "reshape"),
             next(p.parent for p in sorted((DATA / "add").glob("*_ERRORIF_*/desc.json")))]
    for t in picks:
        shutil.copytree(t, subset / t.parent.name / t.name)
    res = run_runner(subset, backend="rtl", jobs=2, config="default", simulator="verilator")
    c = res["counts"]
    assert c.get("expected_pass") == 3 and c.get("expected_failure") == 1, res["totals"]
    assert not res["failures"] and c.get("unexpected_failure", 0) == 0 and c.get("internal_error", 0) == 0
    where = where_it_ran(subset)
    assert where["compute"] == 2 and where["host_only"] == 1 and where["host_only_tests"] == [picks[2].name]
    assert where["rtl_tiles_checked"] >= 2
