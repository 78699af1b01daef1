"""NPU configurations: the named ones load, and a configuration that cannot work is refused with
a message naming the parameter and the reason."""

from __future__ import annotations

import re

import pytest

from firmware_model.errors import ConfigError
from firmware_model.arch.config import CONFIG_DIR, load_config, named_configs
from sim.cli import main as cli
from sim.cli.main import main
from sim.paths import MODELS_DIR as MODELS


def test_named_configs():
    assert {"tiny", "default", "large"} <= set(named_configs())
    tiny, default, large = load_config("tiny"), load_config("default"), load_config("large")
    assert (tiny.mac_rows, tiny.mac_cols) == (4, 4)
    assert (default.mac_rows, default.mac_cols) == (8, 8)
    assert large.macs == 256
    assert tiny.acc_depth < default.acc_depth < large.acc_depth


def variant(tmp_path, section: str, key: str, value) -> str:
    text = (CONFIG_DIR / "default.toml").read_text()
    header = f"[{section}]" if section else None
    lines, in_section, done = [], section == "", False
    for line in text.splitlines():
        if line.startswith("["):
            in_section = line.strip() == header
        if in_section and not done and re.match(rf"{key}\s*=", line):
            line = f"{key} = {value}"
            done = True
        lines.append(line)
    assert done, (section, key)
    path = tmp_path / "cfg.toml"
    path.write_text("\n".join(lines) + "\n")
    return str(path)


@pytest.mark.parametrize("section,key,value,words", [
    ("external", "bandwidth", 0, ["external.bandwidth", "at least 1 byte"]),
    ("sram", "weight", 32, ["sram.weight", "weight block"]),
    ("sram", "input", 4, ["sram.input", "multiple"]),
    ("sram", "accumulator", 10, ["sram.accumulator", "accumulator word"]),
    ("sram", "lut", 512, ["sram.lut", "int16 table"]),
    ("sram", "lut", 1030, ["sram.lut", "multiple of the 8-byte word"]),
    ("sram", "output", 16, ["sram.output", "output pixel"]),
    ("mac", "rows", 3, ["mac.rows", "power of two"]),
    ("mac", "cols", 2, ["mac.cols", "at least 4"]),
    ("", "clock_mhz", 0, ["clock_mhz", "positive"]),
    ("external", "size", 1024, ["external.size", "at least 64 KiB"]),
    ("", "name", 5, ["name must be a string"]),
    ("", "name", '"../../etc"', ["name = '../../etc'", "names build and report folders"]),
    ("", "description", "[1]", ["description must be a string"]),
])
def test_unworkable_configs_are_refused_naming_the_parameter(tmp_path, section, key, value, words):
    path = variant(tmp_path, section, key, value)
    with pytest.raises(ConfigError) as e:
        load_config(path)
    message = str(e.value)
    assert path in message
    for w in words:
        assert w in message, message


def test_bad_config_files(tmp_path):
    with pytest.raises(ConfigError, match="no NPU configuration named 'huge'"):
        load_config("huge")
    with pytest.raises(ConfigError, match="no such configuration file"):
        load_config(str(tmp_path / "missing.toml"))
    bad = tmp_path / "bad.toml"
    bad.write_text("name = [\n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_config(str(bad))
    typo = variant(tmp_path, "mac", "rows", '"8"')
    with pytest.raises(ConfigError, match="mac.rows must be an integer"):
        load_config(typo)
    extra = tmp_path / "extra.toml"
    extra.write_text((CONFIG_DIR / "default.toml").read_text().replace("[mac]", "[mac]\nshape = 3"))
    with pytest.raises(ConfigError, match=r"unknown parameter\(s\) in \[mac\]: shape"):
        load_config(str(extra))


def test_cli_reports_a_bad_config_in_one_line(tmp_path, capsys):
    path = variant(tmp_path, "external", "bandwidth", 0)
    status = cli.main(["compile", "models/demo_conv/model.tosa", "--config", path, "-o", str(tmp_path / "out")])
    err = capsys.readouterr().err.strip().splitlines()
    assert status == 2 and len(err) == 1 and "external.bandwidth" in err[0]


def test_npu_compile_writes_a_program_and_prints_ir(tmp_path, capsys):
    out = tmp_path / "prog"
    status = cli.main(["compile", "models/demo_conv/model.tosa", "--config", "tiny", "-o", str(out),
                       "--print-after", "lowering", "--print-after", "tile_planner"])
    text = capsys.readouterr().out
    assert status == 0
    assert {p.name for p in out.iterdir()} == {"commands.bin", "constants.bin", "manifest.json"}
    assert "// ----- IR after lowering -----" in text and "// ----- IR after tile_planner -----" in text
    assert "NPU.conv" in text and "tiles:" in text
    assert "summary:" in text and "100.0% of" in text


def test_print_after_unknown_pass_is_an_error(tmp_path, capsys):
    status = cli.main(["compile", "models/demo_conv/model.tosa", "-o", str(tmp_path), "--print-after", "magic"])
    assert status == 2 and "no such pass" in capsys.readouterr().err


# ---- configurations that are easy to vary: extends, --set, the hash ---------------------------

def test_a_file_that_extends_states_only_what_differs(tmp_path):
    f = tmp_path / "wide.toml"
    f.write_text('extends = "default"\n[mac]\nrows = 16\n[external]\nbandwidth = 16\n')
    cfg, base = load_config(str(f)), load_config("default")
    assert cfg.name == "wide" and cfg.mac_rows == 16 and cfg.ext_bandwidth == 16
    assert (cfg.mac_cols, cfg.input_sram, cfg.ext_latency) == (base.mac_cols, base.input_sram, base.ext_latency)
    assert cfg.hash != base.hash
    g = tmp_path / "sub" / "wider.toml"           # a path is relative to the file that extends
    g.parent.mkdir()
    g.write_text('extends = "../wide.toml"\nname = "wider"\n[mac]\ncols = 16\n')
    wider = load_config(str(g))
    assert (wider.name, wider.mac_rows, wider.mac_cols, wider.ext_bandwidth) == ("wider", 16, 16, 16)


def test_a_copy_under_the_same_name_gets_its_own_hash(tmp_path):
    """The issue's trap: a copy of default.toml that keeps name = "default" but changes a value
    used to overwrite the real default's reports; the hash tells them apart."""
    f = tmp_path / "mine.toml"
    f.write_text((CONFIG_DIR / "default.toml").read_text().replace("latency = 24", "latency = 100"))
    mine, base = load_config(str(f)), load_config("default")
    assert mine.name == base.name and mine.hash != base.hash
    same = tmp_path / "same.toml"
    same.write_text((CONFIG_DIR / "default.toml").read_text().replace('name = "default"', 'name = "other"'))
    assert load_config(str(same)).hash == base.hash      # the same NPU under another name


def test_extends_errors_name_the_file(tmp_path):
    a, b = tmp_path / "a.toml", tmp_path / "b.toml"
    a.write_text('extends = "b.toml"\n')
    b.write_text('extends = "a.toml"\n')
    with pytest.raises(ConfigError, match=r"a.toml: extends 'b.toml' makes a cycle|b.toml: extends 'a.toml' makes a cycle"):
        load_config(str(a))
    c = tmp_path / "c.toml"
    c.write_text('extends = "nosuch"\n')
    with pytest.raises(ConfigError, match="no NPU configuration named 'nosuch'"):
        load_config(str(c))
    d = tmp_path / "d.toml"
    d.write_text("extends = 5\n")
    with pytest.raises(ConfigError, match=r"d.toml: extends must name a configuration"):
        load_config(str(d))
    e = tmp_path / "e.toml"
    e.write_text('extends = "default"\n[mac]\nrows = 3\n')
    with pytest.raises(ConfigError, match=r"e.toml: mac.rows = 3: must be a power of two"):
        load_config(str(e))


def test_set_overrides_parameters_and_renames_the_configuration():
    cfg = load_config("default", ["mac.rows=16", "clock_mhz=800", "external.bandwidth=32"])
    assert (cfg.mac_rows, cfg.clock_mhz, cfg.ext_bandwidth) == (16, 800, 32)
    assert cfg.name == f"default-{cfg.hash}" and cfg.overrides == ("mac.rows=16", "clock_mhz=800",
                                                                   "external.bandwidth=32")
    assert load_config("default", ["mac.rows=8"]).hash == load_config("default").hash
    from firmware_model.arch.config import NpuConfig
    assert NpuConfig.from_dict(cfg.to_dict()) == cfg        # how the RTL bench's process gets it


@pytest.mark.parametrize("item, words", [
    ("mac.rows", "expected SECTION.KEY=VALUE"),
    ("mac.rowz=16", "[mac] has no parameter 'rowz'"),
    ("macs.rows=16", "no section [macs]"),
    ("speed=3", "no parameter 'speed'"),
    ("a.b.c=1", "KEY (top level) or SECTION.KEY"),
    ("mac.rows=sixteen", "mac.rows must be an integer, got 'sixteen'"),
    ("mac.rows=12", "mac.rows = 12: must be a power of two"),
])
def test_bad_overrides_are_named(item, words):
    with pytest.raises(ConfigError) as e:
        load_config("default", [item])
    assert words in str(e.value)


def test_every_command_that_takes_config_takes_set(tmp_path, capsys):
    from sim.cli.main import build_parser

    sub = next(a for a in build_parser()._actions if a.dest == "command")
    for name, parser in sub.choices.items():
        opts = {o for a in parser._actions for o in a.option_strings}
        if "--config" in opts:
            assert "--set" in opts, name
    out = tmp_path / "p"
    assert main(["compile", str(MODELS / "mlp" / "model.tosa"), "-o", str(out), "--set", "mac.rows=16"]) == 0
    assert "(16x8 MACs)" in capsys.readouterr().out
