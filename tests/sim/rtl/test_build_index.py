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


def test_the_cache_keeps_the_most_recently_used_builds(tmp_path):
    """prune_builds: beyond the limit the least recently used builds go, but never the one just
    made, one used within the minimum age, or a build without its stamp (still building)."""
    import json

    from sim.rtl.build import prune_builds

    now = time.time()
    made = []
    for k in range(6):
        d = tmp_path / f"core-{k}"
        d.mkdir()
        (d / "core.v").write_text("module m; endmodule\n")
        stamp = d / "built.json"
        stamp.write_text(json.dumps({"design": "core"}))
        used = now - 7200 - 100 * k                 # core-0 the most recently used
        os.utime(stamp, (used, used))
        made.append(d)
    os.utime(made[4] / "built.json", (now - 10, now - 10))      # used a moment ago
    building = tmp_path / "core-building"
    building.mkdir()
    gone = prune_builds(tmp_path, keep=made[5], limit=2, min_age=3600, now=now)
    # kept: core-4 (recent), core-0 (second by use), core-5 (kept explicitly), the build in progress
    assert sorted(p.name for p in gone) == ["core-1", "core-2", "core-3"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["core-0", "core-4", "core-5", "core-building"]
