"""The fuzz campaign in `make test`: a seeded slice of it finds no failure, and every reproducer
it saved under tests/data/fuzz/ no longer fails.

The slice is a few hundred cases of every target but `npu sim` (whose cases each run Verilator;
`make fuzz` gives them their share), drawn under a fixed seed, on two workers. A reproducer is a
minimised case the campaign saved for a failure signature (docs/verification.md, "The fuzz
campaign"); it passes when its outcome is one the CLI promises (exit 0, or exit 2 with one
`npu <cmd>: error:` line) and its --state file is as it was.
"""

from pathlib import Path

import pytest

from sim.verification.fuzz_campaign import (BAD_ERROR, MISMATCH, OK, PASSING, REPRODUCERS, SHARES, TRACEBACK,
                                            USAGE, USER_ERROR, WRONG_EXIT, classify, format_failures,
                                            format_table, replay, run_campaign)
from sim.verification.fuzz_cases import CaseSpec, ConfigChoice, NpyEdit, StateChoice, build_case

SLICE_CASES = 300
SLICE_SEED = 20261124
SLICE_SHARES = {t: s for t, s in SHARES.items() if t != "sim"}


def test_a_seeded_slice_of_the_campaign_finds_no_failure(tmp_path):
    result = run_campaign(SLICE_CASES, SLICE_SEED, jobs=2, shares=SLICE_SHARES, root=tmp_path / "fuzz",
                          save_to=None, progress=False)
    assert result.cases == SLICE_CASES
    assert sum(result.counts[t][o] for t in result.counts for o in PASSING) + result.failed == SLICE_CASES
    failed = result.failed
    assert failed == 0, "\n" + format_table(result) + "\n" + format_failures(result)


SAVED = sorted(p.parent for p in REPRODUCERS.glob("*/case.json"))


@pytest.fixture(scope="module")
def replayed(tmp_path_factory) -> dict:
    return replay(SAVED, jobs=2, root=tmp_path_factory.mktemp("fuzz-replay"))


@pytest.mark.parametrize("folder", SAVED, ids=[p.name for p in SAVED])
def test_a_saved_reproducer_no_longer_fails(folder: Path, replayed):
    outcome = replayed[folder]
    assert outcome.kind in PASSING, f"{folder.name}: [{outcome.kind}] {outcome.signature}: {outcome.detail}"


def test_reproducers_are_small():
    """A reproducer is a minimised case: a few small files, not a copy of a network."""
    for folder in SAVED:
        size = sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())
        assert size < 256 * 1024, f"{folder.name}: {size} bytes"


# ---- the classification itself --------------------------------------------------------------

def test_the_cli_promise_as_classified():
    assert classify("run", 0, False, "", None, False).kind == OK
    assert classify("sim", 1, False, "", None, False).kind == MISMATCH
    assert classify("run", 1, False, "", None, False).kind == WRONG_EXIT
    assert classify("run", 2, False, "npu run: error: x.npy: no such file\n", None, False).kind == USER_ERROR
    assert classify("run", 2, False, "npu compile: error: wrong command\n", None, False).kind == BAD_ERROR
    two = classify("run", 2, False, "npu run: error: tensor 'a\nb' is bad\n", None, False)
    assert two.kind == BAD_ERROR and two.signature.startswith("multi-line error @ run")
    numpy = classify("run", 2, False, "npu run: error: x.npy: header too large.\nTo allow loading, adjust it\n", None,
                     False)
    assert numpy.kind == BAD_ERROR and numpy.signature != two.signature
    usage = "usage: npu run [-h] model\nnpu: error: unrecognized arguments: --frobnicate\n"
    assert classify("run", 2, True, usage, None, False).kind == USAGE
    assert classify("inspect", 141, False, "", None, True).kind == OK          # stdout closed early
    printed = ('Traceback (most recent call last):\n  File "/x/y.py", line 3, in f\n'
               f'  File "{Path(__file__).resolve().parents[3] / "sim/cli/run.py"}", line 9, in load_input\n'
               "EOFError: No data left in file\nnpu run: internal error: this is a bug\n")
    out = classify("run", 3, False, printed, None, False)
    assert (out.kind, out.signature) == (TRACEBACK, "EOFError @ sim/cli/run.py:load_input")
    try:
        {}["missing"]
    except KeyError as e:
        raised = classify("compile", None, False, "", e, False)
    assert raised.kind == TRACEBACK and raised.signature.startswith("KeyError @ ")


def test_a_case_is_built_from_a_spec():
    """A spec names what is broken; its case carries the files and the argv that break it."""
    case, graph = build_case(CaseSpec("run-golden", "accumulator", inputs=(NpyEdit("empty_file", 0),),
                                      config=ConfigChoice("named", "tiny"), state=StateChoice("good", 0, 0)))
    assert case.command == "run" and case.files["in0_0.npy"] == b"" and case.state == "state.npz"
    assert case.argv[:2] == ["run", "{case}/model.tosa"]
    assert ["--backend", "golden"] == case.argv[case.argv.index("--backend"):][:2]
    assert "--state" in case.argv and "tiny" in case.argv
    assert graph.main.inputs == ["x"]
