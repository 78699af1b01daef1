"""The RTL build index (sim/rtl/build.py): a build is found by its sources' hash without
generating the Verilog again, but only while the sources are those this process imported."""

from __future__ import annotations

import os
import time

from sim.rtl.build import PROCESS_STARTED, RtlDesign


def _design(folder, text: str) -> RtlDesign:
    folder.mkdir(exist_ok=True)
    src = folder / "unit.py"
    src.write_text(text)
    old = PROCESS_STARTED - 60
    os.utime(src, (old, old))
    return RtlDesign(name="unit", elaborate=lambda: None, source_files=(src,))


def test_the_key_follows_the_sources(tmp_path):
    a = _design(tmp_path / "a", "x = 1\n")
    b = _design(tmp_path / "b", "x = 2\n")
    assert a.source_key("verilator", False) is not None
    assert a.source_key("verilator", False) != b.source_key("verilator", False)
    assert a.source_key("verilator", False) != a.source_key("icarus", False)


def test_no_key_for_a_source_changed_after_the_process_started(tmp_path):
    """The Verilog would come from the module as imported, not the edited file: filing it under
    the edited file's hash would hand a later process old RTL for new sources."""
    d = _design(tmp_path, "x = 1\n")
    assert d.source_key("verilator", False) is not None
    now = time.time()
    os.utime(d.source_files[0], (now, now))
    assert d.source_key("verilator", False) is None
