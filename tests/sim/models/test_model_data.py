"""ModelData: a network's committed data, from io.json or from the file names of Arm's
TFLite-to-TOSA flow (`input_<i>[_inv<k>].npy`, `ref_output_<i>[_inv<k>].npy`)."""

from __future__ import annotations

import shutil

import numpy as np

from compiler.tosa_io.reader import read_tosa
from sim.cosim.network import _reference, load_inputs
from sim.models.model_data import ModelData
from sim.paths import MODELS_DIR


def _conventional_copy(tmp_path, name: str):
    """models/<name> with its data under the flow's file names and no io.json."""
    src = ModelData.of(MODELS_DIR / name)
    d = tmp_path / name
    d.mkdir()
    shutil.copy(MODELS_DIR / name / "model.tosa", d / "model.tosa")
    n = src.invocations
    for i, key in enumerate(src.input_names):
        for k in range(n):
            suffix = f"_inv{k}" if n > 1 else ""
            np.save(d / f"input_{i}{suffix}.npy", src.inputs(k)[key])
    for i, key in enumerate(src.output_names):
        for k in range(n):
            suffix = f"_inv{k}" if n > 1 else ""
            np.save(d / f"ref_output_{i}{suffix}.npy", src.reference_outputs(k)[key])
    return src, d


def test_file_names_give_the_invocations_in_order(tmp_path):
    src, d = _conventional_copy(tmp_path, "lstm")
    data = ModelData.of(d / "model.tosa")
    assert data is not None and data.invocations == 3
    assert data.input_names == ["TosaInput_0"] and data.output_names == ["TosaOutput_0"]
    for k in range(3):
        np.testing.assert_array_equal(data.inputs(k)["TosaInput_0"], src.inputs(k)["TosaInput_0"])
        np.testing.assert_array_equal(data.reference_outputs(k)["TosaOutput_0"],
                                      src.reference_outputs(k)["TosaOutput_0"])
    assert data.source.endswith("*.npy")


def test_npu_sim_takes_them_as_committed_inputs_and_reference(tmp_path):
    """`npu sim folder/model.tosa` with no -i runs the flow's inputs and compares with its
    reference outputs, state carried over (checked here up to the RTL: the input and
    reference selection)."""
    src, d = _conventional_copy(tmp_path, "lstm")
    graph = read_tosa(d / "model.tosa")
    invs, text, seed = load_inputs(d / "model.tosa", graph, [], None)
    assert seed is None and len(invs) == 3 and "committed" in text
    notes: list[str] = []
    ref = _reference(d / "model.tosa", graph, invs, [], None, ["TosaOutput_0"], notes)
    assert ref is not None and not notes
    np.testing.assert_array_equal(ref[2]["TosaOutput_0"], src.reference_outputs(2)["TosaOutput_0"])


def test_inconsistent_file_names_are_not_data(tmp_path):
    d = tmp_path / "m"
    d.mkdir()
    assert ModelData.of(d) is None                                    # nothing
    np.save(d / "input_0_inv0.npy", np.zeros(3, np.int8))
    np.save(d / "input_0_inv2.npy", np.zeros(3, np.int8))
    np.save(d / "ref_output_0_inv0.npy", np.zeros(3, np.int8))
    assert ModelData.of(d) is None                                    # a gap in the invocations
    (d / "input_0_inv2.npy").rename(d / "input_0_inv1.npy")
    assert ModelData.of(d) is None                                    # 2 inputs, 1 reference output
    np.save(d / "ref_output_0_inv1.npy", np.zeros(3, np.int8))
    assert ModelData.of(d).invocations == 2
    np.save(d / "input_0.npy", np.zeros(3, np.int8))
    assert ModelData.of(d) is None                                    # both kinds of name
