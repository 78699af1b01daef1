"""The committed data beside a network (`models/<name>/io.json` and its .npy files), read in one place.

io.json (written by sim/models/make_models.py and sim/models/demo_model.py; its fields are
described in models/README.md):

    invocations   how many invocations the committed data covers (state carried between them)
    inputs        [{name, shape, dtype, files: [one .npy per invocation]}]
    outputs       [{name, ..., files: [Arm's reference model's output per invocation]}]
    variables     [{name, variable_name, shape, dtype, state_before: [per invocation],
                    state_after: [after the last]}]   (stateful networks)

`ModelData.of(path)` takes a model.tosa (or its folder) and returns None when there is no io.json.
"""

from __future__ import annotations

import json
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
            return None
        return ModelData(folder, json.loads(io.read_text()))

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
