"""NPU configurations: the named ones load, and a configuration that cannot work is refused with
a message naming the parameter and the reason."""

from __future__ import annotations

import re

import pytest

from firmware_model.errors import ConfigError
from firmware_model.arch.config import CONFIG_DIR, load_config, named_configs
from sim.cli import main as cli


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
