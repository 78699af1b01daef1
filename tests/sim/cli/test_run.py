"""`npu run` with the interpreter: inputs checked and named in errors, outputs in their exact
types, and --state carrying variables across runs (three runs with one state file equal three
invocations; a failed run leaves the state file as it was)."""

import json
import shutil

import numpy as np
import pytest

from sim.paths import TEST_DATA
from sim.cli.main import main
from sim.cli.state_file import StateFileError, load_state, save_state

SEQ_TEST = TEST_DATA / "conformance" / "variable" / "variable_accum_3_i32"


@pytest.fixture
def accum(tmp_path):
    d = tmp_path / "t"
    shutil.copytree(SEQ_TEST, d)
    return d


def test_three_runs_with_a_state_file_equal_three_invocations(accum, tmp_path, capsys):
    seq = json.loads((accum / "sequence.json").read_text())
    state = tmp_path / "state.npz"
    for k, step in enumerate(seq["steps"][:3]):
        out = tmp_path / f"out{k}"
        rc = main(["run", str(accum / "test.tosa"), "-i", f"input-0={accum / step['ifm_file'][0]}",
                   "-o", str(out), "--state", str(state)])
        assert rc == 0
        for i, f in enumerate(step["expected_ofm_file"]):
            got, exp = np.load(out / f"result-{i}.npy"), np.load(accum / f)
            assert got.dtype == exp.dtype and got.shape == exp.shape and np.array_equal(got, exp)
        saved = load_state(state)
        exp_state = np.load(accum / step["variable_state_after"]["acc"])
        assert set(saved) == {"acc"} and np.array_equal(saved["acc"], exp_state)


def test_failed_run_does_not_touch_the_state_file(accum, tmp_path, capsys):
    state = tmp_path / "state.npz"
    save_state(state, {"acc": np.array([2**31 - 1, 0, 0], np.int32)})
    before = state.read_bytes()
    x = tmp_path / "x.npy"
    np.save(x, np.array([1, 1, 1], np.int32))      # the ADD overflows: unpredictable
    rc = main(["run", str(accum / "test.tosa"), "-i", f"input-0={x}", "-o", str(tmp_path / "o"),
               "--state", str(state)])
    assert rc == 2 and "REQUIRE" in capsys.readouterr().err
    assert state.read_bytes() == before
    assert not list(tmp_path.glob(".state.npz.*"))


def test_input_errors_name_the_input(accum, tmp_path, capsys):
    bad = tmp_path / "bad.npy"
    np.save(bad, np.zeros(3, np.int8))
    assert main(["run", str(accum / "test.tosa"), "-i", f"input-0={bad}", "-o", str(tmp_path / "o")]) == 2
    assert "input 'input-0' is int8" in capsys.readouterr().err
    assert main(["run", str(accum / "test.tosa"), "-i", f"nope={bad}", "-o", str(tmp_path / "o")]) == 2
    assert "no input named 'nope'" in capsys.readouterr().err
    assert main(["run", str(accum / "test.tosa"), "-o", str(tmp_path / "o")]) == 2
    assert "no -i binding for graph input 'input-0'" in capsys.readouterr().err
    assert main(["run", str(accum / "test.tosa"), "-i", f"input-0={tmp_path / 'missing.npy'}",
                 "-o", str(tmp_path / "o")]) == 2
    assert "no such file" in capsys.readouterr().err
    assert main(["run", str(accum / "test.tosa"), "-i", f"input-0={bad}", "-o", str(tmp_path / "o"),
                 "--backend", "golden"]) == 2
    assert "input 'input-0' is int8" in capsys.readouterr().err


def test_state_file_errors(tmp_path, accum, capsys):
    junk = tmp_path / "junk.npz"
    junk.write_bytes(b"not a zip")
    with pytest.raises(StateFileError):
        load_state(junk)
    wrong = tmp_path / "wrong.npz"
    save_state(wrong, {"acc": np.zeros(4, np.int32)})
    x = tmp_path / "x.npy"
    np.save(x, np.zeros(3, np.int32))
    assert main(["run", str(accum / "test.tosa"), "-i", f"input-0={x}", "-o", str(tmp_path / "o"),
                 "--state", str(wrong)]) == 2
    assert "shape" in capsys.readouterr().err
    assert load_state(tmp_path / "absent.npz") is None
