"""The committed conformance slice (tests/data/conformance, made by `python -m sim.oracles.conformance
slice` from Arm's generator with fixed seeds, answers from Arm's reference model): every test
through the SUT logic in-process, bit for bit, every sequence.json step through the interpreter,
and a subset through Arm's actual runner (`tosa_verif_run_tests --sut-module sim.oracles.tosa_sut`)."""

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from sim.paths import TEST_DATA
from sim.oracles.conformance import ARM_SET_OPS, EXTRA_OPS, check_sequences, run_runner
from sim.oracles.tosa_sut import ERROR, VALID, execute_test

DATA = TEST_DATA / "conformance"
OP_DIRS = sorted(p for p in DATA.iterdir() if p.is_dir()) if DATA.is_dir() else []


def _tests(op_dir: Path) -> list[Path]:
    return sorted(p.parent for p in op_dir.glob("*/desc.json"))


def test_slice_covers_every_op_positive_and_negative():
    names = {p.name for p in OP_DIRS}
    total = sum(len(_tests(d)) for d in OP_DIRS)
    assert 300 <= total <= 1500, total
    for op in ARM_SET_OPS + EXTRA_OPS:
        dirs = [d for d in OP_DIRS if d.name == op or d.name.startswith(op + "_")]
        assert dirs, f"no tests for {op} in the slice"
        kinds = [json.loads((t / "desc.json").read_text())["expected_failure"] for d in dirs for t in _tests(d)]
        assert False in kinds, f"no positive test for {op}"
    negatives = sum("_ERRORIF_" in t.name for d in OP_DIRS for t in _tests(d))
    assert negatives >= 100 and "variable" in names
    for token in ("_i8", "_i16", "_i32"):
        assert any(token in t.name for d in OP_DIRS for t in _tests(d))


@pytest.mark.parametrize("op_dir", OP_DIRS, ids=lambda p: p.name)
def test_slice_op_in_process(op_dir):
    problems = []
    for t in _tests(op_dir):
        desc = json.loads((t / "desc.json").read_text())
        code, message, outputs = execute_test(t, desc, write=False)
        if desc["expected_failure"]:
            if code != ERROR:
                problems.append(f"{t.name}: expected TOSA_ERROR, got {code} {message or ''}")
            continue
        if code != VALID:
            problems.append(f"{t.name}: {code}: {message}")
            continue
        for name, f in zip(desc["ofm_name"], desc["ofm_file"]):
            exp = np.load(t / f"expected_{f}")
            got = outputs[name]
            if got.dtype != exp.dtype or got.shape != exp.shape or not np.array_equal(got, exp):
                problems.append(f"{t.name}: output {name} differs from the reference model "
                                f"({got.dtype}{got.shape} vs {exp.dtype}{exp.shape})")
    assert not problems, "\n".join(problems)


def test_slice_sequences_step_by_step():
    checked, problems = check_sequences(DATA / "variable")
    assert checked >= 40 and not problems, problems


def test_slice_subset_through_arm_runner(tmp_path):
    """One positive and one negative test per op folder (and the variable tests) through Arm's
    runner, which runs the reference model too and compares with tosa_verify (EXACT)."""
    subset = tmp_path / "tests"
    n = 0
    for d in OP_DIRS:
        tests = _tests(d)
        pos = [t for t in tests if "_ERRORIF_" not in t.name][:1]
        neg = [t for t in tests if "_ERRORIF_" in t.name][:1]
        if d.name == "variable":
            pos = [t for t in tests if "_ERRORIF_" not in t.name][:2]
        for t in pos + neg:
            shutil.copytree(t, subset / d.name / t.name)
            n += 1
    res = run_runner(subset, jobs=2)
    counts = res["counts"]
    assert counts, res
    assert counts.get("unexpected_failure", 0) == 0 and counts.get("unexpected_pass", 0) == 0, res["failures"]
    assert counts.get("internal_error", 0) == 0, res["failures"]
    assert counts.get("expected_pass", 0) + counts.get("expected_failure", 0) == n
