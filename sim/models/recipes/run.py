"""Entry point in env A: `python run.py NAME OUTDIR` trains, quantises and exports one network.

Called by `python -m sim.models.make_models` (project venv) with build/models-env's interpreter; this
folder is not a package of the project and never runs in the project venv (it needs tensorflow).
"""

import importlib
import sys
from pathlib import Path

RECIPES = ("cnn32", "mlp", "lstm", "resnet_pool", "gru", "blazeface")


def main() -> None:
    if len(sys.argv) != 3 or sys.argv[1] not in RECIPES:
        raise SystemExit(f"usage: run.py {{{'|'.join(RECIPES)}}} OUTDIR")
    import _common

    _common.run(importlib.import_module(sys.argv[1]), Path(sys.argv[2]))


if __name__ == "__main__":
    main()
