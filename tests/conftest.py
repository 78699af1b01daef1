"""Shared pytest settings. RTL builds are memoised per session by sim.rtl.core.cached_core (and
reused across sessions from build/ when the generated Verilog is unchanged)."""

import pytest

SIMULATORS = ("verilator", "icarus")


@pytest.fixture(params=SIMULATORS)
def simulator(request) -> str:
    return request.param
