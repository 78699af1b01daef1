"""A sweep's specification, SPEC.toml: which configurations, which networks, which engine.

    name = "mac_array"              # optional: the file's stem; names the output folder, titles the plots
    description = "..."             # optional, shown in the plots' titles' second line
    base = "default"                # the configuration every point starts from: a name or a .toml path
    set = ["clock_mhz=800"]         # optional: overrides applied to every point before its own
    networks = ["mlp", "cnn32", "path/to/model.tosa"]   # names in models/, or .tosa paths
    engine = "timing"               # optional: timing (the default) or golden
    output = "../build/sweeps/x"    # optional: default build/sweeps/<name>
    area = false                    # optional: the core's Yosys area per configuration (slow)

    [grid]                          # every combination of these values (a cartesian product) ...
    mac.rows = [4, 8, 16]
    mac.cols = [4, 8, 16]
    external.bandwidth = [4, 8]

    # ... or, instead of [grid], the points one by one:
    [[points]]
    mac.rows = 8
    mac.cols = 16

    [plots]
    layers_at = { mac.rows = 16, mac.cols = 16 }   # the point of the per-layer plot (default: the base)

Parameters are named as `--set` names them (clock_mhz, mac.rows, sram.input, external.bandwidth,
...); in TOML a dotted key such as `mac.rows` is a nested table, and a quoted "mac.rows" works as
well. Paths are relative to the spec file's folder, as `extends` in a configuration is. Neither
[grid] nor [[points]]: one point, the base configuration itself.

What the spec can get wrong is refused here, before anything runs, in one line naming the spec file
and the key. Whether a point's configuration is valid (mac.rows = 3) or whether a network fits it is
not the spec's error: such points are rows of the results with their error.
"""

from __future__ import annotations

import itertools
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from firmware_model.arch.config import load_config, parameter_names
from firmware_model.errors import ConfigError, NpuBenchError
from sim.paths import BUILD_ROOT, MODELS_DIR

ENGINES = ("timing", "golden")
TOP_KEYS = ("name", "description", "base", "set", "networks", "engine", "output", "area", "grid", "points", "plots")
PLOT_KEYS = ("layers_at",)
# a grid whose product is larger is a typo (a value list pasted twice) more often than a plan
MAX_POINTS = 20000
FLOAT_PARAMETERS = ("clock_mhz",)


class SweepSpecError(NpuBenchError):
    """A sweep specification that cannot be read or does not describe a sweep."""


@dataclass(frozen=True)
class Network:
    label: str                 # the name in the tables and plots: models/<label>/, or the file's stem
    path: Path


@dataclass(frozen=True)
class SweepPoint:
    index: int
    settings: tuple[tuple[str, int | float], ...]     # (parameter, value), in the spec's order

    @property
    def overrides(self) -> list[str]:
        """As load_config and --set take them."""
        return [f"{k}={v}" for k, v in self.settings]

    @property
    def label(self) -> str:
        return " ".join(self.overrides) or "(base)"


@dataclass(frozen=True)
class SweepSpec:
    path: Path
    name: str
    description: str
    base: str                         # as load_config takes it (a name, or a path resolved against the spec)
    base_overrides: tuple[str, ...]
    networks: tuple[Network, ...]
    points: tuple[SweepPoint, ...]
    engine: str
    output: Path
    area: bool
    layers_at: tuple[tuple[str, int | float], ...] = field(default=())
    varied: tuple[str, ...] = ()      # the parameters the points set, in order

    def layers_point(self, hashes: dict[int, str | None], base_hash: str) -> SweepPoint | None:
        """The point the per-layer plot shows: the first whose settings include `layers_at`; without
        layers_at, the point whose configuration is the base's, else the first point that loaded."""
        if self.layers_at:
            want = set(self.layers_at)
            return next((p for p in self.points if want <= set(p.settings)), None)
        for p in self.points:
            if hashes.get(p.index) == base_hash:
                return p
        return next((p for p in self.points if hashes.get(p.index)), None)


def load_spec(path: str | Path) -> SweepSpec:
    path = Path(path)
    try:
        doc = tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise SweepSpecError(f"{path}: no such sweep specification") from None
    except IsADirectoryError:
        raise SweepSpecError(f"{path}: is a folder, not a sweep specification") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise SweepSpecError(f"{path}: not valid TOML: {e}") from None
    except OSError as e:
        raise SweepSpecError(f"{path}: cannot read the sweep specification: {e.strerror or e}") from None
    return parse_spec(doc, path)


def parse_spec(doc: dict, path: Path) -> SweepSpec:
    here = path.parent

    def bad(key: str, why: str) -> SweepSpecError:
        return SweepSpecError(f"{path}: {key}: {why}")

    unknown = [k for k in doc if k not in TOP_KEYS]
    if unknown:
        raise bad(unknown[0], f"unknown key (keys: {', '.join(TOP_KEYS)})")

    name = doc.get("name", path.stem)
    if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z0-9_.-]{1,64}", name) or name in (".", ".."):
        raise bad("name", f"{name!r}: use 1 to 64 letters, digits, '_', '-' or '.' (it names the output folder)")
    description = doc.get("description", "")
    if not isinstance(description, str):
        raise bad("description", f"must be a string, got {description!r}")

    base = doc.get("base", "default")
    if not isinstance(base, str) or not base:
        raise bad("base", f"must name a configuration (a name or a .toml path), got {base!r}")
    if base.endswith(".toml") or "/" in base:
        base = str(here / base) if not Path(base).is_absolute() else base
    base_overrides = doc.get("set", [])
    if not isinstance(base_overrides, list) or not all(isinstance(s, str) and "=" in s for s in base_overrides):
        raise bad("set", f"must be a list of \"SECTION.KEY=VALUE\" strings, got {base_overrides!r}")
    try:
        load_config(base, base_overrides)
    except ConfigError as e:
        raise bad("base" if not base_overrides else "set", str(e)) from None

    networks = _networks(doc.get("networks"), here, bad)

    engine = doc.get("engine", "timing")
    if engine not in ENGINES:
        raise bad("engine", f"{engine!r}: no such engine (engines: {', '.join(ENGINES)})")
    output = doc.get("output")
    if output is None:
        out = BUILD_ROOT / "sweeps" / name
    elif isinstance(output, str) and output:
        out = Path(output) if Path(output).is_absolute() else here / output
    else:
        raise bad("output", f"must be a folder path, got {output!r}")
    area = doc.get("area", False)
    if not isinstance(area, bool):
        raise bad("area", f"must be true or false, got {area!r}")

    if "grid" in doc and "points" in doc:
        raise bad("points", "give either [grid] or [[points]], not both")
    if "grid" in doc:
        points = _grid(doc["grid"], bad)
    elif "points" in doc:
        points = _points(doc["points"], bad)
    else:
        points = [()]
    varied = tuple(dict.fromkeys(k for settings in points for k, _ in settings))

    plots = doc.get("plots", {})
    if not isinstance(plots, dict):
        raise bad("plots", "must be a table")
    unknown = [k for k in plots if k not in PLOT_KEYS]
    if unknown:
        raise bad(f"plots.{unknown[0]}", f"unknown key (keys: {', '.join(PLOT_KEYS)})")
    layers_at: tuple = ()
    if "layers_at" in plots:
        table = plots["layers_at"]
        if not isinstance(table, dict) or not table:
            raise bad("plots.layers_at", "must be a table of parameter = value, e.g. { mac.rows = 16 }")
        layers_at = tuple((k, _scalar(v, f"plots.layers_at.{k}", k, bad))
                          for k, v in _flatten(table, "plots.layers_at", bad).items())
        if not any(set(layers_at) <= set(p) for p in points):
            shown = ", ".join(f"{k} = {v}" for k, v in layers_at)
            raise bad("plots.layers_at", f"no point of the sweep has {shown}")

    return SweepSpec(path=path, name=name, description=description, base=base,
                     base_overrides=tuple(base_overrides), networks=networks,
                     points=tuple(SweepPoint(i, tuple(s)) for i, s in enumerate(points)), engine=engine,
                     output=out, area=area, layers_at=layers_at, varied=varied)


def _networks(value, here: Path, bad) -> tuple[Network, ...]:
    if not isinstance(value, list) or not value:
        raise bad("networks", "must be a non-empty list of network names (models/<name>) or .tosa paths")
    shipped = sorted(p.parent.name for p in MODELS_DIR.glob("*/model.tosa"))
    out: list[Network] = []
    for item in value:
        if not isinstance(item, str) or not item:
            raise bad("networks", f"{item!r}: expected a network name or a .tosa path")
        if "/" not in item and not item.endswith(".tosa"):
            p = MODELS_DIR / item / "model.tosa"
            if not p.is_file():
                raise bad("networks", f"no network named '{item}' in models/ (named: {', '.join(shipped)}; "
                                      "or give a .tosa path)")
            label = item
        else:
            p = Path(item) if Path(item).is_absolute() else here / item
            if not p.is_file():
                raise bad("networks", f"{p}: no such .tosa file")
            label = p.parent.name if p.stem == "model" else p.stem
        if any(n.label == label for n in out):
            raise bad("networks", f"'{label}' is listed twice (networks are told apart by their folder or file name)")
        out.append(Network(label, p.resolve()))
    return tuple(out)


def _flatten(table: dict, where: str, bad) -> dict:
    """{"mac": {"rows": v}} (a dotted TOML key) and {"mac.rows": v} (a quoted one) alike -> {"mac.rows": v}."""
    known = parameter_names()
    out = {}
    for key, value in table.items():
        if isinstance(value, dict):
            for sub, v in value.items():
                if isinstance(v, dict):
                    raise bad(f"{where}.{key}.{sub}", "parameters are KEY or SECTION.KEY, e.g. mac.rows")
                out[f"{key}.{sub}"] = v
        else:
            out[key] = value
    for key in out:
        if key not in known:
            raise bad(f"{where}.{key}", f"no such parameter (parameters: {', '.join(known)})")
    return out


def _scalar(v, where: str, param: str, bad):
    ok = isinstance(v, int) or (param in FLOAT_PARAMETERS and isinstance(v, float))
    if isinstance(v, bool) or not ok:
        kind = "a number" if param in FLOAT_PARAMETERS else "an integer"
        raise bad(where, f"{v!r}: must be {kind}")
    return v


def _grid(grid, bad) -> list[tuple]:
    if not isinstance(grid, dict) or not grid:
        raise bad("grid", "must be a table of parameter = [values], e.g. mac.rows = [4, 8, 16]")
    axes = _flatten(grid, "grid", bad)
    for key, values in axes.items():
        if not isinstance(values, list) or not values:
            raise bad(f"grid.{key}", f"must be a non-empty list of values, got {values!r}")
        for v in values:
            _scalar(v, f"grid.{key}", key, bad)
        if len(set(values)) != len(values):
            raise bad(f"grid.{key}", f"{values}: a value is listed twice")
    n = 1
    for values in axes.values():
        n *= len(values)
    if n > MAX_POINTS:
        raise bad("grid", f"{n} points: more than {MAX_POINTS} configurations (split the sweep)")
    return [tuple(zip(axes, combo)) for combo in itertools.product(*axes.values())]


def _points(points, bad) -> list[tuple]:
    if not isinstance(points, list) or not points:
        raise bad("points", "must be a list of tables ([[points]] mac.rows = 8 ...)")
    if len(points) > MAX_POINTS:
        raise bad("points", f"{len(points)} points: more than {MAX_POINTS} configurations (split the sweep)")
    out, seen = [], {}
    for i, table in enumerate(points):
        where = f"points[{i}]"
        if not isinstance(table, dict):
            raise bad(where, "must be a table of parameter = value")
        settings = tuple((k, _scalar(v, f"{where}.{k}", k, bad)) for k, v in _flatten(table, where, bad).items())
        if frozenset(settings) in seen:
            raise bad(where, f"the same point as points[{seen[frozenset(settings)]}]")
        seen[frozenset(settings)] = i
        out.append(settings)
    return out
