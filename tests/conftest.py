"""Shared pytest settings.

RTL builds are memoised per session by sim.rtl.core.cached_core (and reused across sessions from
build/ when the generated Verilog is unchanged). Random stimulus comes from sim.seeds: the run's
seed is printed in the header, and a failing test's report lists the seeds it drew
(NPU_BENCH_SEED=N replays or varies them).
"""

import pytest

from sim import seeds

SIMULATORS = ("verilator", "icarus")


@pytest.fixture(params=SIMULATORS)
def simulator(request) -> str:
    return request.param


def pytest_report_header(config):
    return seeds.describe_run_seed()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    if call.when == "setup":
        item._npu_seeds = []
    item._npu_seeds = getattr(item, "_npu_seeds", []) + seeds.take_drawn()
    if report.failed and item._npu_seeds:
        shown = ", ".join(f"{label}={seed}" for label, seed in item._npu_seeds[:20])
        report.sections.append(("seeds", f"{seeds.describe_run_seed()}\nthis test drew: {shown}"))
    return report
