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
import hashlib
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

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
    overrides: tuple[str, ...] = ()    # the --set settings applied on top of `source`

    @staticmethod
    def from_dict(d: dict) -> "NpuConfig":
        """The inverse of to_dict (a configuration sent to another process)."""
        d = dict(d)
        d["overrides"] = tuple(d.get("overrides", ()))
        return NpuConfig(**d)

    @property
    def hash(self) -> str:
        """8 hex digits identifying the hardware parameters (name and description aside): reports
        and caches are keyed by it, so two files that describe one NPU share them and two NPUs
        with one name do not."""
        return hashlib.sha256(self.key().encode()).hexdigest()[:8]

    @property
    def report_key(self) -> str:
        """The name and the hash, as report and build folders are named."""
        return self.name if self.name.endswith(self.hash) else f"{self.name}-{self.hash}"

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

    def parameters(self) -> dict[str, int | float]:
        """The hardware parameters by the names --set and TOML files give them ("mac.rows": 8, ...),
        in file order: the columns of a sweep's tables."""
        return {name: getattr(self, fld) for name, fld in _PARAMETER_FIELDS.items()}

    def key(self) -> str:
        """A short string that identifies the hardware geometry (for RTL build caching)."""
        d = self.to_dict()
        d.pop("name"), d.pop("description"), d.pop("source"), d.pop("overrides")
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


# "section.key" -> dataclass field, for every hardware parameter (name and description aside)
_PARAMETER_FIELDS = {(f"{section}.{key}" if section else key): fld
                     for section, keys in _LAYOUT.items() for key, fld in keys.items()
                     if fld not in ("name", "description")}


def parameter_names() -> list[str]:
    """Every hardware parameter as --set names it: clock_mhz, mac.rows, ..., external.latency."""
    return list(_PARAMETER_FIELDS)


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
        if fld in ("name", "description", "source", "overrides"):
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
    if cfg.lut_sram < INT16_TABLE_ENTRIES * LUT_ENTRY_BYTES:
        bad("lut_sram", f"must hold one int16 table ({INT16_TABLE_ENTRIES} entries x "
                        f"{LUT_ENTRY_BYTES} bytes = {INT16_TABLE_ENTRIES * LUT_ENTRY_BYTES} bytes)")
    if cfg.lut_sram % w:
        bad("lut_sram", f"must be a multiple of the {w}-byte word (mac.cols): the DMA writes the "
                        "LUT SRAM a word at a time")
    if cfg.ext_size < (1 << 16):
        bad("ext_size", "external memory must be at least 64 KiB")
    if cfg.ext_size > (1 << 32):
        bad("ext_size", "external addresses are 32 bits: at most 4 GiB")
    if cfg.ext_bandwidth < 1:
        bad("ext_bandwidth", "DMA bandwidth must be at least 1 byte per cycle")
    if cfg.ext_latency < 0:
        bad("ext_latency", "latency cannot be negative")


def load_config(name_or_path: str | Path, overrides: Sequence[str] = ()) -> NpuConfig:
    """Load a named configuration (tiny, default, large) or a TOML file by path, then apply
    `overrides` ("mac.rows=16", "clock_mhz=800": the command line's --set).

    A file may say `extends = "default"` (a name, or a path relative to the file) and give only
    the parameters that differ; without a `name` of its own it is named after its file. A
    configuration with overrides is named "<name>-<hash>", so that its reports never take the
    place of the unmodified configuration's.
    """
    path = _resolve(str(name_or_path), None)
    doc = _load_doc(path, ())
    if not overrides:
        return _parse(doc, str(path))
    applied = []
    for item in overrides:
        applied.append(_apply_override(doc, item, str(path)))
    base_name = doc.get("name")
    cfg = _parse(doc, str(path))
    settings = ", ".join(applied)
    return dataclasses.replace(cfg, name=f"{base_name}-{cfg.hash}", description=f"{cfg.description} (with {settings})",
                               overrides=tuple(applied))


def _resolve(text: str, relative_to: Path | None) -> Path:
    if not text.endswith(".toml") and "/" not in text:
        path = CONFIG_DIR / f"{text}.toml"
        if not path.exists():
            names = ", ".join(named_configs())
            raise ConfigError(f"no NPU configuration named '{text}' (named: {names}; or give a .toml path)")
        return path
    path = Path(text)
    if relative_to is not None and not path.is_absolute():
        path = relative_to / path
    if not path.exists():
        raise ConfigError(f"{path}: no such configuration file")
    if path.is_dir():
        raise ConfigError(f"{path}: is a folder, not a configuration file")
    return path


MAX_EXTENDS = 8


def _load_doc(path: Path, chain: tuple[Path, ...]) -> dict:
    """The TOML document of `path` with its `extends` chain merged in (the file's keys win)."""
    try:
        doc = tomllib.loads(path.read_text())
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise ConfigError(f"{path}: not valid TOML: {e}") from None
    except OSError as e:
        raise ConfigError(f"{path}: cannot read the configuration: {e.strerror or e}") from None
    base = doc.pop("extends", None)
    if base is None:
        return doc
    if not isinstance(base, str) or not base:
        raise ConfigError(f"{path}: extends must name a configuration (a name or a .toml path), got {base!r}")
    here = path.resolve()
    if here in chain:
        raise ConfigError(f"{path}: extends '{base}' makes a cycle ({' -> '.join(p.name for p in chain + (here,))})")
    if len(chain) >= MAX_EXTENDS:
        raise ConfigError(f"{path}: more than {MAX_EXTENDS} configurations extend one another")
    base_path = _resolve(base, path.parent)
    merged = _load_doc(base_path, chain + (here,))
    for key, value in doc.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = {**merged[key], **value}
        else:
            merged[key] = value
    if "name" not in doc:
        merged["name"] = path.stem
    if "description" not in doc and isinstance(merged.get("description"), str):
        merged["description"] = f"{merged['description']} (extended by {path.name})"
    return merged


def _apply_override(doc: dict, item: str, source: str) -> str:
    """Apply one "section.key=value" to the document; the value is read as TOML (16, 0.5, "x",
    true), or as a string when it is not TOML. Returns the setting as applied."""
    where, sep, text = item.partition("=")
    where = where.strip()
    if not sep or not where:
        raise ConfigError(f"--set {item!r}: expected SECTION.KEY=VALUE, e.g. --set mac.rows=16")
    try:
        value = tomllib.loads(f"v = {text.strip()}")["v"]
    except tomllib.TOMLDecodeError:
        value = text.strip()
    parts = where.split(".")
    if len(parts) > 2 or not all(parts):
        raise ConfigError(f"--set {item!r}: parameters are KEY (top level) or SECTION.KEY, e.g. mac.rows")
    if len(parts) == 2:
        section, key = parts
        if section not in _LAYOUT or section == "":
            raise ConfigError(f"--set {item!r}: no section [{section}] (sections: "
                              f"{', '.join(s for s in _LAYOUT if s)})")
        if key not in _LAYOUT[section]:
            raise ConfigError(f"--set {item!r}: [{section}] has no parameter '{key}' "
                              f"(parameters: {', '.join(_LAYOUT[section])})")
        table = doc.setdefault(section, {})
        if not isinstance(table, dict):
            raise ConfigError(f"{source}: [{section}] must be a table")
        table[key] = value
    else:
        if parts[0] not in _LAYOUT[""]:
            known = ", ".join(list(_LAYOUT[""]) + [f"{s}.{k}" for s in _LAYOUT if s for k in _LAYOUT[s]])
            raise ConfigError(f"--set {item!r}: no parameter '{parts[0]}' (parameters: {known})")
        doc[parts[0]] = value
    return f"{where}={value if not isinstance(value, str) else repr(value)}"


def named_configs() -> list[str]:
    return sorted(p.stem for p in CONFIG_DIR.glob("*.toml"))
