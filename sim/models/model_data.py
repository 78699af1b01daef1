"""The committed data beside a network (`models/<name>/io.json` and its .npy files), read in one place.

io.json (written by sim/models/make_models.py and sim/models/demo_model.py; its fields are
described in models/README.md):

    invocations   how many invocations the committed data covers (state carried between them)
    inputs        [{name, shape, dtype, files: [one .npy per invocation]}]
    outputs       [{name, ..., files: [Arm's reference model's output per invocation]}]
    variables     [{name, variable_name, shape, dtype, state_before: [per invocation],
                    state_after: [after the last]}]   (stateful networks)

`ModelData.of(path)` takes a model.tosa (or its folder) and returns None when there is no data.
A folder without io.json but with the file names Arm's TFLite-to-TOSA flow uses (`input_<i>.npy`
and `ref_output_<i>.npy`, or `input_<i>_inv<k>.npy` and `ref_output_<i>_inv<k>.npy` for
successive invocations, the tensors named `TosaInput_<i>` / `TosaOutput_<i>` as the converter
names them) is read from its names; the caller checks the names against the graph.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np


@dataclass
class ModelData:
    folder: Path
    meta: dict

    @staticmethod
    def of(path: str | Path) -> "ModelData | None":
        p = Path(path)
        folder = p if p.is_dir() else p.parent
        io = folder / "io.json"
        if not io.exists():
            meta = _meta_from_file_names(folder)
            return None if meta is None else ModelData(folder, meta)
        return ModelData(folder, json.loads(io.read_text()))

    @property
    def source(self) -> str:
        """Where the data was described: io.json, or the folder's file names."""
        return str(self.folder / "io.json") if "from_file_names" not in self.meta else f"{self.folder}/*.npy"

    @property
    def name(self) -> str:
        return self.meta.get("model", self.folder.name)

    @property
    def invocations(self) -> int:
        return int(self.meta.get("invocations", 1))

    @property
    def input_names(self) -> list[str]:
        return [t["name"] for t in self.meta["inputs"]]

    @property
    def output_names(self) -> list[str]:
        return [t["name"] for t in self.meta["outputs"]]

    def _arrays(self, entries: list[dict], key: str, k: int, name_key: str = "name") -> dict[str, np.ndarray]:
        return {t[name_key]: np.load(self.folder / t[key][k], allow_pickle=False) for t in entries}

    def inputs(self, k: int) -> dict[str, np.ndarray]:
        """The committed inputs of invocation k, by graph input name."""
        return self._arrays(self.meta["inputs"], "files", k)

    def reference_outputs(self, k: int) -> dict[str, np.ndarray]:
        """Arm's reference model's outputs of invocation k (state carried), by output name."""
        return self._arrays(self.meta["outputs"], "files", k)

    def all_inputs(self) -> list[dict[str, np.ndarray]]:
        return [self.inputs(k) for k in range(self.invocations)]

    def all_reference_outputs(self) -> list[dict[str, np.ndarray]]:
        return [self.reference_outputs(k) for k in range(self.invocations)]

    @property
    def variables(self) -> list[dict]:
        return list(self.meta.get("variables", []))

    def state_before(self, k: int) -> dict[str, np.ndarray]:
        """The variables before invocation k, by variable name (TOSA's `variable_name`)."""
        return self._arrays(self.variables, "state_before", k, "variable_name")

    def state_after_last(self) -> dict[str, np.ndarray]:
        return {v["variable_name"]: np.load(self.folder / v["state_after"][-1], allow_pickle=False)
                for v in self.variables if v.get("state_after")}


def _meta_from_file_names(folder: Path) -> dict | None:
    """io.json's fields from `input_<i>[_inv<k>].npy` / `ref_output_<i>[_inv<k>].npy`, or None
    when the folder has no such inputs or their invocation counts disagree."""

    def tensors(prefix: str, tosa_name: str) -> list[dict] | None:
        found: dict[int, dict[int, str]] = {}
        for f in folder.glob(f"{prefix}_*.npy"):
            m = re.fullmatch(rf"{prefix}_(\d+)(?:_inv(\d+))?\.npy", f.name)
            if m:
                found.setdefault(int(m[1]), {})[int(m[2]) if m[2] is not None else -1] = f.name
        out = []
        for i, files in sorted(found.items()):
            if -1 in files and len(files) > 1:
                return None                  # both kinds of name: ambiguous
            ks = sorted(files)
            if ks != [-1] and ks != list(range(len(ks))):
                return None                  # a gap in the invocations
            out.append({"name": f"{tosa_name}_{i}", "files": [files[k] for k in ks]})
        return out

    inputs, outputs = tensors("input", "TosaInput"), tensors("ref_output", "TosaOutput")
    if not inputs or outputs is None or not outputs:
        return None
    counts = {len(t["files"]) for t in inputs + outputs}
    if len(counts) != 1:
        return None
    return {"model": folder.name, "invocations": counts.pop(), "inputs": inputs, "outputs": outputs,
            "from_file_names": True}
