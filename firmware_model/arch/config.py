"""NPU configuration: one TOML file describes one NPU instance.

This is the only definition of the NPU's parameters; the compiler tiles to it, the golden model
sizes its memories from it, the RTL generators take their widths and depths from it, and the
bench and the performance figures quote it. docs/configs.md explains each field.

Word widths (fixed by the architecture, derived from the MAC array):
- input, output and variable SRAM: words of `mac.cols` bytes (one MAC-array input vector);
- weight SRAM: words of `mac.cols` bytes; a weight block of `mac.rows` words feeds the array;
- parameter SRAM: 11-byte records (bias int48, multiplier int32, shift int8), one per output channel;
- accumulator SRAM: words of `mac.rows` int48 lanes (6 bytes each);
- LUT SRAM: 16-bit entries; an int8 table takes 256 entries, an int16 table 513.
"""

from __future__ import annotations

import dataclasses
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

from firmware_model.arch.isa import PARAM_RECORD_BYTES
from firmware_model.errors import ConfigError

CONFIG_DIR = Path(__file__).parent / "configs"

SRAM_MAX_BYTES = 1 << 24  # the range rules' saturation (arch/checks.SAT): every SRAM is smaller
ACC_LANE_BYTES = 6        # int48 accumulator lanes
ACC_BITS = 8 * ACC_LANE_BYTES
LUT_ENTRY_BYTES = 2       # 16-bit table entries
INT16_TABLE_ENTRIES = 513
INT8_TABLE_ENTRIES = 256


@dataclass(frozen=True)
class NpuConfig:
    name: str
    description: str
    clock_mhz: float
    mac_rows: int          # output channels computed in parallel
    mac_cols: int          # input channels consumed per cycle (the lanes of a word)
    input_sram: int        # sizes in bytes
    weight_sram: int
    param_sram: int
    accumulator_sram: int
    output_sram: int
    variable_sram: int
    lut_sram: int
    ext_size: int          # external memory, bytes
    ext_bandwidth: int     # bytes per cycle between external memory and the SRAMs
    ext_latency: int       # cycles before the first beat of a DMA transfer
    source: str = "<built-in>"

    # --- derived geometry -------------------------------------------------------------
    @property
    def word_bytes(self) -> int:
        """Bytes per word of the input, output, variable and weight SRAMs."""
        return self.mac_cols

    @property
    def input_words(self) -> int:
        return self.input_sram // self.word_bytes

    @property
    def weight_words(self) -> int:
        return self.weight_sram // self.word_bytes

    @property
    def output_words(self) -> int:
        return self.output_sram // self.word_bytes

    @property
    def variable_words(self) -> int:
        return self.variable_sram // self.word_bytes

    @property
    def param_records(self) -> int:
        return self.param_sram // PARAM_RECORD_BYTES

    @property
    def acc_word_bytes(self) -> int:
        return self.mac_rows * ACC_LANE_BYTES

    @property
    def acc_depth(self) -> int:
        """Accumulator words: the most output pixels one tile can hold."""
        return self.accumulator_sram // self.acc_word_bytes

    @property
    def lut_entries(self) -> int:
        return self.lut_sram // LUT_ENTRY_BYTES

    @property
    def macs(self) -> int:
        return self.mac_rows * self.mac_cols

    def summary(self) -> str:
        kib = lambda n: f"{n / 1024:g} KiB"  # noqa: E731
        return (f"{self.name}: {self.mac_rows}x{self.mac_cols} MACs @ {self.clock_mhz:g} MHz; "
                f"SRAM input {kib(self.input_sram)}, weight {kib(self.weight_sram)}, "
                f"param {self.param_records} ch, acc {self.acc_depth} px, "
                f"output {kib(self.output_sram)}, variable {kib(self.variable_sram)}, "
                f"LUT {self.lut_entries} entries; ext {self.ext_size // (1 << 20)} MiB "
                f"@ {self.ext_bandwidth} B/cycle")

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    def key(self) -> str:
        """A short string that identifies the hardware geometry (for RTL build caching)."""
        d = self.to_dict()
        d.pop("name"), d.pop("description"), d.pop("source")
        return "-".join(f"{v}" for v in d.values())


# TOML layout: section -> {toml key: dataclass field}
_LAYOUT = {
    "": {"name": "name", "description": "description", "clock_mhz": "clock_mhz"},
    "mac": {"rows": "mac_rows", "cols": "mac_cols"},
    "sram": {"input": "input_sram", "weight": "weight_sram", "param": "param_sram",
             "accumulator": "accumulator_sram", "output": "output_sram",
             "variable": "variable_sram", "lut": "lut_sram"},
    "external": {"size": "ext_size", "bandwidth": "ext_bandwidth", "latency": "ext_latency"},
}


def _parse(doc: dict, source: str) -> NpuConfig:
    values: dict = {}
    for section, keys in _LAYOUT.items():
        table = doc if section == "" else doc.get(section)
        if table is None:
            raise ConfigError(f"{source}: missing section [{section}]")
        if not isinstance(table, dict):
            raise ConfigError(f"{source}: [{section}] must be a table")
        for key, fld in keys.items():
            where = f"{section}.{key}" if section else key
            if key not in table:
                raise ConfigError(f"{source}: missing parameter {where}")
            values[fld] = table[key]
        if section:
            unknown = set(table) - set(keys)
            if unknown:
                raise ConfigError(f"{source}: unknown parameter(s) in [{section}]: {', '.join(sorted(unknown))}")
    unknown_top = {k for k in doc if k not in _LAYOUT[""] and k not in _LAYOUT}
    if unknown_top:
        raise ConfigError(f"{source}: unknown parameter(s): {', '.join(sorted(unknown_top))}")
    for fld in ("name", "description"):
        if not isinstance(values[fld], str):
            raise ConfigError(f"{source}: {fld} must be a string, got {values[fld]!r}")
    # the name becomes part of build and report folder names
    if not re.fullmatch(r"[A-Za-z0-9_.-]{1,64}", values["name"]) or values["name"] in (".", ".."):
        raise ConfigError(f"{source}: name = {values['name']!r}: use 1 to 64 letters, digits, '_', '-' or '.' "
                          "(it names build and report folders)")
    for fld in NpuConfig.__dataclass_fields__:
        if fld in ("name", "description", "source"):
            continue
        v = values[fld]
        if fld == "clock_mhz":
            if not isinstance(v, (int, float)) or isinstance(v, bool):
                raise ConfigError(f"{source}: clock_mhz must be a number, got {v!r}")
        elif not isinstance(v, int) or isinstance(v, bool):
            raise ConfigError(f"{source}: {_toml_name(fld)} must be an integer, got {v!r}")
    values["source"] = source
    cfg = NpuConfig(**values)
    validate(cfg)
    return cfg


def _toml_name(fld: str) -> str:
    for section, keys in _LAYOUT.items():
        for key, f in keys.items():
            if f == fld:
                return f"{section}.{key}" if section else key
    return fld


def validate(cfg: NpuConfig) -> None:
    """Refuse a configuration that cannot run even the smallest tile, naming the parameter."""
    src = cfg.source

    def bad(fld: str, why: str):
        raise ConfigError(f"{src}: {_toml_name(fld)} = {getattr(cfg, fld)}: {why}")

    if cfg.clock_mhz <= 0:
        bad("clock_mhz", "the clock must be positive")
    for fld in ("mac_rows", "mac_cols"):
        v = getattr(cfg, fld)
        if not 1 <= v <= 64:
            bad(fld, "the MAC array needs between 1 and 64 rows and columns")
        if fld == "mac_cols" and v < 4:
            bad(fld, "SRAM words are mac.cols bytes and must hold one int32 element: at least 4")
        if v & (v - 1):
            bad(fld, "must be a power of two (SRAM words and weight blocks are indexed by shifting)")
    w = cfg.word_bytes
    for fld in ("input_sram", "weight_sram", "param_sram", "accumulator_sram", "output_sram", "variable_sram",
                "lut_sram"):
        if getattr(cfg, fld) > SRAM_MAX_BYTES:
            bad(fld, f"an on-chip SRAM holds at most {SRAM_MAX_BYTES} bytes (16 MiB): the command checks "
                     "compare addresses with it in 24 bits")
    for fld in ("input_sram", "weight_sram", "output_sram", "variable_sram"):
        v = getattr(cfg, fld)
        if v < 0 or v % w:
            bad(fld, f"must be a non-negative multiple of the {w}-byte word (mac.cols)")
    if cfg.input_sram < w:
        bad("input_sram", f"smaller than one {w}-byte input vector: no tile fits")
    if cfg.weight_sram < cfg.mac_rows * w:
        bad("weight_sram", f"smaller than one {cfg.mac_rows}x{w} weight block "
                           f"({cfg.mac_rows * w} bytes): no tile fits")
    if cfg.param_sram < cfg.mac_rows * PARAM_RECORD_BYTES or cfg.param_sram % PARAM_RECORD_BYTES:
        bad("param_sram", f"must be a multiple of {PARAM_RECORD_BYTES}-byte records holding at least "
                          f"{cfg.mac_rows} (one per MAC row)")
    if cfg.accumulator_sram < cfg.acc_word_bytes or cfg.accumulator_sram % cfg.acc_word_bytes:
        bad("accumulator_sram", f"must be a positive multiple of one accumulator word "
                                f"({cfg.mac_rows} int48 lanes = {cfg.acc_word_bytes} bytes)")
    if cfg.output_sram < cfg.mac_rows * 8:
        bad("output_sram", f"smaller than one output pixel of {cfg.mac_rows} int48 channels "
                           f"({cfg.mac_rows * 8} bytes): no tile fits")
    if cfg.lut_sram < INT16_TABLE_ENTRIES * LUT_ENTRY_BYTES or cfg.lut_sram % LUT_ENTRY_BYTES:
        bad("lut_sram", f"must hold one int16 table ({INT16_TABLE_ENTRIES} entries x "
                        f"{LUT_ENTRY_BYTES} bytes = {INT16_TABLE_ENTRIES * LUT_ENTRY_BYTES} bytes)")
    if cfg.ext_size < (1 << 16):
        bad("ext_size", "external memory must be at least 64 KiB")
    if cfg.ext_size > (1 << 32):
        bad("ext_size", "external addresses are 32 bits: at most 4 GiB")
    if cfg.ext_bandwidth < 1:
        bad("ext_bandwidth", "DMA bandwidth must be at least 1 byte per cycle")
    if cfg.ext_latency < 0:
        bad("ext_latency", "latency cannot be negative")


def load_config(name_or_path: str | Path) -> NpuConfig:
    """Load a named configuration (tiny, default, large) or a TOML file by path."""
    text = str(name_or_path)
    path = Path(text)
    if not text.endswith(".toml") and "/" not in text:
        path = CONFIG_DIR / f"{text}.toml"
        if not path.exists():
            names = ", ".join(named_configs())
            raise ConfigError(f"no NPU configuration named '{text}' (named: {names}; or give a .toml path)")
    if not path.exists():
        raise ConfigError(f"{path}: no such configuration file")
    try:
        doc = tomllib.loads(path.read_text())
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise ConfigError(f"{path}: not valid TOML: {e}") from None
    return _parse(doc, str(path))


def named_configs() -> list[str]:
    return sorted(p.stem for p in CONFIG_DIR.glob("*.toml"))
