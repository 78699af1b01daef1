"""The plots of a sweep, PNG and SVG, in its output folder's plots/ (docs/architects.md reads them).

- cycles_vs_macs: per network, the cycles of every point against its MAC count, coloured by the
  parameter that varies most besides the array (external bandwidth when it varies), with a line
  through the fastest point of each MAC count;
- utilisation_vs_macs: the same points' MAC utilisation (useful MACs / (cycles x MACs));
- layers_<network>: one bar per MAC layer at one point (the base configuration, or the spec's
  [plots] layers_at): useful utilisation, the lane slots behind it, compute- or memory-bound;
- roofline: one panel per MAC count, a ceiling per external bandwidth, every point at its
  arithmetic intensity (useful MACs per external byte) and achieved MACs per cycle;
- cycles_vs_area: cycles against the core's logic cells and memory bits (when area = true).

Only matplotlib's object API is used (no pyplot): no global state, no display, any thread.
"""

from __future__ import annotations

import math
import textwrap
from collections import defaultdict
from pathlib import Path

import matplotlib

from sim.perf.sweep import PointResult, SweepResult

matplotlib.rcParams["svg.hashsalt"] = "npu-bench"      # the same sweep gives byte-identical SVGs
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*", "<", ">")
DPI = 80
# the bound of a layer (sim/perf/layer_report.py) -> bar colour
BOUND_COLOURS = {"compute": "#3b6fb6", "memory": "#e08a2c", "host": "#888888", "-": "#bbbbbb"}


def write_plots(result: SweepResult) -> list[Path]:
    from matplotlib.figure import Figure  # noqa: F401 - fail here, before any file, if matplotlib is broken

    from sim.cli.files import output_dir

    folder = output_dir(result.output / "plots", "plots folder")
    ok = [r for r in result.points if r.status == "ok" and r.total and r.total["cycles"] > 0]
    written: list[Path] = []
    if not ok:
        return written
    written += _save(_versus_macs(result, ok, "cycles"), folder / "cycles_vs_macs")
    written += _save(_versus_macs(result, ok, "utilisation"), folder / "utilisation_vs_macs")
    written += _save(_roofline(result, ok), folder / "roofline")
    for net in result.spec.networks:
        fig = _layers(result, net)
        if fig is not None:
            written += _save(fig, folder / f"layers_{net.label}")
    if any(_area(result, r) for r in ok):
        written += _save(_versus_area(result, ok), folder / "cycles_vs_area")
    return written


def _save(fig, stem: Path) -> list[Path]:
    import io

    from PIL import Image

    from sim.cli.files import write_bytes_atomic

    out = []
    for ext in ("png", "svg"):
        path = stem.with_suffix(f".{ext}")
        buf = io.BytesIO()
        # no dates or software versions in the files: a sweep run again writes the same bytes
        meta = {"Date": None, "Creator": None} if ext == "svg" else {"Software": None}
        fig.savefig(buf, format=ext, dpi=DPI, metadata=meta)
        data = buf.getvalue()
        if ext == "png":
            # a palette of 256 colours: a third of the size, the same picture for flat-coloured plots
            img = Image.open(io.BytesIO(data)).convert("RGB").quantize(256, method=Image.Quantize.MEDIANCUT)
            buf = io.BytesIO()
            img.save(buf, format="png", optimize=True)
            data = buf.getvalue()
        write_bytes_atomic(path, data)
        out.append(path)
    return out


def _title(fig, result: SweepResult, what: str) -> None:
    """The sweep's name and what the figure shows, bold; under it, in small type, what was swept.
    The figure's layout keeps SUBTITLE_INCHES free at the top for the second line."""
    spec = result.spec
    n_cfg = len({r.config.hash for r in result.points if r.config})
    fig.suptitle(f"sweep '{spec.name}': {what}", fontsize=13, fontweight="bold")
    sub = f"{spec.description} ({n_cfg} configurations" if spec.description else \
        f"{n_cfg} configurations from '{result.base.name}'"
    sub += f", {result.engine} model)" if spec.description else f", {result.engine} model"
    h = fig.get_figheight()
    fig.text(0.5, 1 - 0.5 / h, sub, ha="center", va="top", fontsize=9, color="#444444")
    fig.get_layout_engine().set(rect=(0, 0, 1, 1 - SUBTITLE_INCHES / h))


SUBTITLE_INCHES = 0.55


def _grid(n: int) -> tuple[int, int]:
    cols = min(n, 4)
    return math.ceil(n / cols), cols


def _colour_parameter(result: SweepResult) -> str | None:
    """What colours the points: external bandwidth when the sweep varies it (the other half of
    the roofline), else the first varied parameter besides the array's shape."""
    varied = [k for k in result.spec.varied if k not in ("mac.rows", "mac.cols")]
    if "external.bandwidth" in varied:
        return "external.bandwidth"
    return varied[0] if varied else None


def _param(r: PointResult, name: str):
    return r.config.parameters()[name]


def _palette(values: list) -> dict:
    from matplotlib import colormaps

    cmap = colormaps["viridis"]
    n = len(values)
    return {v: cmap(0.92 * i / max(n - 1, 1)) for i, v in enumerate(values)}


def _label(param: str, value) -> str:
    if param == "external.bandwidth":
        return f"{value} B/cycle"
    if param.startswith("sram."):
        return f"{value / 1024:g} KiB"
    if param == "clock_mhz":
        return f"{value:g} MHz"
    return f"{value}"


def _mac_axis(ax, macs: list[int]) -> None:
    ax.set_xscale("log", base=2)
    ax.set_xticks(macs)
    ax.set_xticklabels([str(m) for m in macs], fontsize=8)
    ax.minorticks_off()
    ax.set_xlabel("MACs (mac.rows x mac.cols)")


def _versus_macs(result: SweepResult, ok: list[PointResult], what: str):
    from matplotlib.figure import Figure

    nets = [n for n in result.spec.networks if any(r.network == n for r in ok)]
    rows, cols = _grid(len(nets))
    fig = Figure(figsize=(4.2 * cols, 3.4 * rows + 1.0), layout="constrained")
    colour_by = _colour_parameter(result)
    values = sorted({_param(r, colour_by) for r in ok}) if colour_by else [None]
    palette = _palette(values)
    macs_all = sorted({r.config.macs for r in ok})
    for k, net in enumerate(nets):
        ax = fig.add_subplot(rows, cols, k + 1)
        mine = [r for r in ok if r.network == net]
        for v in values:
            pts = [r for r in mine if colour_by is None or _param(r, colour_by) == v]
            ys = [_metric(r, what) for r in pts]
            ax.scatter([r.config.macs for r in pts], ys, s=16, color=palette[v], alpha=0.8, edgecolors="none",
                       label=_label(colour_by, v) if colour_by else None)
        best: dict[int, float] = {}
        for r in mine:
            y = _metric(r, what)
            m = r.config.macs
            best[m] = min(best.get(m, y), y) if what == "cycles" else max(best.get(m, y), y)
        xs = sorted(best)
        ax.plot(xs, [best[x] for x in xs], color="#c0392b", lw=1.2, zorder=0,
                label="fastest at each size" if what == "cycles" else "best at each size")
        _mac_axis(ax, macs_all)
        if what == "cycles":
            _cycles_axis(ax)
        else:
            ax.set_ylabel("MAC utilisation (%)")
            ax.set_ylim(bottom=0)
        ax.set_title(net.label, fontsize=11)
        ax.grid(True, which="major", alpha=0.3)
    handles, labels = fig.axes[0].get_legend_handles_labels()
    legend_title = f"{colour_by}" if colour_by else None
    fig.legend(handles, labels, loc="outside lower center", ncol=min(len(labels), 6), fontsize=9,
               title=legend_title, title_fontsize=9, frameon=False)
    _title(fig, result, "cycles against MAC count" if what == "cycles" else "MAC utilisation against MAC count")
    return fig


def _cycles_axis(ax) -> None:
    """A log axis of cycles labelled 60k, 1.5M rather than 6x10^4; called after the data is plotted."""
    from matplotlib.ticker import EngFormatter, NullFormatter

    ax.set_yscale("log")
    ax.yaxis.set_major_formatter(EngFormatter(sep=""))
    lo, hi = ax.get_ylim()
    # between the decades only when there are few of them (else the labels run into each other)
    ax.yaxis.set_minor_formatter(EngFormatter(sep="") if hi / lo < 30 else NullFormatter())
    ax.tick_params(axis="y", which="minor", labelsize=7)
    ax.set_ylabel("cycles per run (log scale)")


def _metric(r: PointResult, what: str) -> float:
    t = r.total
    if what == "cycles":
        return t["cycles"]
    return 100 * t["useful_macs"] / (t["cycles"] * r.config.macs)


def _roofline(result: SweepResult, ok: list[PointResult]):
    import numpy as np
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D

    with_traffic = [r for r in ok if r.total["ext_read"] + r.total["ext_written"] > 0 and r.total["useful_macs"]]
    by_macs: dict[int, list[PointResult]] = defaultdict(list)
    for r in with_traffic:
        by_macs[r.config.macs].append(r)
    sizes = sorted(by_macs)
    rows, cols = _grid(max(len(sizes), 1))
    fig = Figure(figsize=(4.2 * cols, 3.6 * rows + 1.3), layout="constrained")
    bws = sorted({r.config.ext_bandwidth for r in with_traffic})
    nets = [n for n in result.spec.networks if any(r.network == n for r in with_traffic)]
    colour, marker = _network_styles(result)
    intensity = [_intensity(r) for r in with_traffic]
    lo, hi = min(intensity) / 2, max(intensity) * 4
    achieved = [r.total["useful_macs"] / r.total["cycles"] for r in with_traffic]
    xs = np.geomspace(lo, hi, 200)
    first = None
    for k, macs in enumerate(sizes):
        # one scale for every panel, so that the panels compare at a glance
        ax = fig.add_subplot(rows, cols, k + 1, sharex=first, sharey=first)
        first = first or ax
        for j, bw in enumerate(bws):
            # attainable MACs/cycle: the array's MACs, or what bw bytes a cycle can feed at that intensity
            grey = 0.25 + 0.5 * j / max(len(bws) - 1, 1)
            ax.plot(xs, np.minimum(macs, bw * xs), color=str(grey), lw=1, zorder=1)
            x_knee = macs / bw
            ax.text(min(x_knee, hi), macs * 1.12, f"{bw}", fontsize=7, color=str(grey),
                    ha="center" if x_knee < hi / 1.5 else "right", va="bottom")
        for r in by_macs[macs]:
            ax.scatter(_intensity(r), r.total["useful_macs"] / r.total["cycles"], marker=marker[r.network], s=30,
                       color=colour[r.network], edgecolors="black", linewidths=0.3, alpha=0.85, zorder=3)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlim(lo, hi)
        ax.set_ylim(min(achieved) / 2, max(sizes) * 3)
        ax.set_title(f"{macs} MACs", fontsize=11)
        ax.set_xlabel("arithmetic intensity (useful MACs per external byte)", fontsize=8)
        ax.set_ylabel("achieved useful MACs per cycle", fontsize=8)
        ax.grid(True, which="major", alpha=0.3)
    handles = [Line2D([], [], color="white", marker=marker[n], markerfacecolor=colour[n], markeredgecolor="black",
                      markersize=7, label=n.label) for n in nets]
    handles.append(Line2D([], [], color="0.5", lw=1, label=f"ceilings: MACs, and external bandwidth x intensity "
                                                             f"(labelled in B/cycle: {', '.join(map(str, bws))})"))
    fig.legend(handles=handles, loc="outside lower center", ncol=min(len(handles), 8), fontsize=8.5, frameon=False)
    _title(fig, result, "roofline per MAC count")
    return fig


def _network_styles(result: SweepResult) -> tuple[dict, dict]:
    """One colour and one marker per network, the same in every figure."""
    from matplotlib import colormaps

    nets = result.spec.networks
    return ({n: colormaps["tab10"](i % 10) for i, n in enumerate(nets)},
            {n: MARKERS[i % len(MARKERS)] for i, n in enumerate(nets)})


def _intensity(r: PointResult) -> float:
    return r.total["useful_macs"] / (r.total["ext_read"] + r.total["ext_written"])


def _layers(result: SweepResult, net):
    """Bars of the MAC layers of `net` at the layers point; None when it did not run there."""
    from matplotlib.figure import Figure
    from matplotlib.patches import Patch

    hashes = {i: (c.hash if c else None) for i, c in result.configs.items()}
    point = result.spec.layers_point(hashes, result.base.hash)
    if point is None:
        return None
    r = next((r for r in result.points if r.point == point and r.network == net), None)
    if r is None or r.status != "ok":
        return None
    cfg = r.config
    layers = [row for row in r.rows[:-1] if row["useful_macs"] > 0]
    if not layers:
        return None
    total_cycles = max(r.total["cycles"], 1)
    mac_share = 100 * sum(row["cycles"] for row in layers) / total_cycles
    n = len(layers)
    fig = Figure(figsize=(8.5, 2.6 + 0.22 * n), layout="constrained")
    ax = fig.add_subplot()
    ys = list(range(n))[::-1]
    util = [100 * row["useful_macs"] / (row["cycles"] * cfg.macs) if row["cycles"] else 0 for row in layers]
    slots = [100 * row["mac_slots"] / (row["cycles"] * cfg.macs) if row["cycles"] else 0 for row in layers]
    ax.barh(ys, slots, height=0.8, color="none", edgecolor="#777777", linewidth=0.8, hatch="///")
    ax.barh(ys, util, height=0.8, color=[BOUND_COLOURS.get(row["bound"], "#bbbbbb") for row in layers])
    top = max(max(slots), 1.0)
    for y, row, s in zip(ys, layers, slots):
        ax.text(s + top * 0.01, y, f"{100 * row['cycles'] / total_cycles:.1f}% of cycles", va="center", fontsize=7,
                color="#333333")
    ax.set_yticks(ys)
    ax.set_yticklabels([f"{row['layer'][:22]} ({row['ops'].split('->')[0]})" for row in layers], fontsize=7)
    ax.set_xlim(0, top * 1.3)                  # room for the share of cycles beside the longest bar
    ax.set_ylim(-0.7, n - 0.3)
    ax.set_xlabel("MAC utilisation during the layer (% of the array's MACs x the layer's cycles)")
    ax.grid(True, axis="x", alpha=0.3)
    fig.legend(handles=[Patch(color=BOUND_COLOURS["compute"], label="useful MACs, compute-bound layer"),
                        Patch(color=BOUND_COLOURS["memory"], label="useful MACs, memory-bound layer"),
                        Patch(facecolor="none", edgecolor="#777777", hatch="///",
                              label="MAC lane slots (padding lanes included)")],
               loc="outside lower center", ncol=3, fontsize=8, frameon=False)
    fig.suptitle(f"sweep '{result.spec.name}': layers of {net.label}", fontsize=13, fontweight="bold")
    where = textwrap.fill(f"at {point.label} (config {cfg.hash}), {result.engine} model", 100)
    ax.set_title(f"{where}\n{n} MAC layers: {mac_share:.0f}% of {r.total['cycles']:,} cycles; the other "
                 f"{len(r.rows) - 1 - n} rows (elementwise, pooling, host, ...) are in results.csv",
                 fontsize=8.5, color="#444444")
    return fig


def _area(result: SweepResult, r: PointResult) -> dict | None:
    a = result.area.get(r.config.hash)
    return a if a and a.get("status") == "ok" else None


def _versus_area(result: SweepResult, ok: list[PointResult]):
    """Per network: cycles against the core's logic cells, coloured by MAC count, with the Pareto
    front (the points no smaller core beats)."""
    from matplotlib.figure import Figure

    pts_all = [r for r in ok if _area(result, r)]
    nets = [n for n in result.spec.networks if any(r.network == n for r in pts_all)]
    rows, cols = _grid(len(nets))
    fig = Figure(figsize=(4.2 * cols, 3.4 * rows + 1.0), layout="constrained")
    sizes = sorted({r.config.macs for r in pts_all})
    palette = _palette(sizes)
    for k, net in enumerate(nets):
        ax = fig.add_subplot(rows, cols, k + 1)
        mine = sorted((r for r in pts_all if r.network == net), key=lambda r: (_area(result, r)["cells"],
                                                                               r.total["cycles"]))
        for m in sizes:
            pts = [r for r in mine if r.config.macs == m]
            ax.scatter([_area(result, r)["cells"] for r in pts], [r.total["cycles"] for r in pts], s=20,
                       color=palette[m], alpha=0.85, edgecolors="none", label=f"{m} MACs")
        front, best = [], math.inf
        for r in mine:
            if r.total["cycles"] < best:
                best = r.total["cycles"]
                front.append(r)
        ax.step([_area(result, r)["cells"] for r in front], [r.total["cycles"] for r in front], where="post",
                color="#c0392b", lw=1.1, zorder=0, label="Pareto front (no smaller core is faster)")
        ax.set_xlabel("core area (Yosys coarse cells, memories aside)")
        ax.set_title(net.label, fontsize=11)
        ax.grid(True, alpha=0.3)
        _cycles_axis(ax)
    handles, labels = fig.axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncol=min(len(labels), 8), fontsize=9, frameon=False)
    _title(fig, result, "cycles against core area")
    return fig
