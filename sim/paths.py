"""Where things are: the repository, its build folder, its committed networks and test data.

Every module that needs a path takes it from here (no module imports the RTL builder or the
conformance runner just to find the repository).
"""

from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
BUILD_ROOT = Path(os.environ.get("NPU_BENCH_BUILD", REPO_ROOT / "build"))
MODELS_DIR = REPO_ROOT / "models"
TEST_DATA = REPO_ROOT / "tests" / "data"
