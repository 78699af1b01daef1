"""Functional coverage for the unit benches: cover points with named bins, crosses, hit counts.

The model is cocotb-coverage's (a cover point is a set of bins, a cross is the product of the
bins of several points, some combinations may be ignored as impossible), but sampling is
vectorised: a sample is a dict of numpy arrays, one element per transaction, and a bin is a
predicate over that dict returning a boolean mask. Sampling a million transactions costs a few
numpy operations per bin.

    cov = CoverageModel("rescale", [
        CoverPoint("rounding", {"single": lambda s: s["double_round"] == 0,
                                "double": lambda s: s["double_round"] == 1}),
        CoverPoint.ranges("shift", "shift", {"2..15": (2, 15), "16..31": (16, 31), ...}),
    ], crosses=[Cross("rounding x shift", ["rounding", "shift"])])
    cov.sample({"double_round": dr, "shift": sh})
    print(cov.report())
    cov.assert_covered()                 # every bin and every (not ignored) cross bin hit

Bins a test must reach are "required" (all of them, by default); `missing()` lists the rest.
"""

from __future__ import annotations

import copy
import itertools
from dataclasses import dataclass, field
from typing import Callable, Iterable

import numpy as np

Predicate = Callable[[dict], np.ndarray]


@dataclass
class CoverPoint:
    name: str
    bins: dict[str, Predicate]
    at_least: int = 1                       # hits a bin needs to count as covered
    hits: dict[str, int] = field(default_factory=dict)

    def __post_init__(self):
        self.hits = {b: 0 for b in self.bins}

    # ---- constructors for the usual shapes of bins ----
    @classmethod
    def values(cls, name: str, key: str, values: dict[str, object], **kw) -> "CoverPoint":
        """One bin per value (or per list of values) of sample[key]."""
        def pred(v):
            vs = v if isinstance(v, (list, tuple, set, frozenset)) else [v]
            return lambda s: np.isin(np.asarray(s[key]), list(vs))
        return cls(name, {label: pred(v) for label, v in values.items()}, **kw)

    @classmethod
    def ranges(cls, name: str, key: str, ranges: dict[str, tuple[int, int]], **kw) -> "CoverPoint":
        """One bin per closed range [lo, hi] of sample[key]."""
        def pred(lo, hi):
            return lambda s: (np.asarray(s[key]) >= lo) & (np.asarray(s[key]) <= hi)
        return cls(name, {label: pred(lo, hi) for label, (lo, hi) in ranges.items()}, **kw)

    def masks(self, sample: dict, n: int) -> dict[str, np.ndarray]:
        return {b: np.broadcast_to(np.asarray(p(sample), dtype=bool), (n,)) for b, p in self.bins.items()}


@dataclass
class Cross:
    """The product of the bins of `points`; `ignore(combo)` (combo: a tuple of bin names, in the
    order of `points`) marks combinations that cannot or need not occur."""
    name: str
    points: list[str]
    ignore: Callable[[tuple], bool] | None = None
    at_least: int = 1
    hits: dict[tuple, int] = field(default_factory=dict)


class CoverageModel:
    def __init__(self, name: str, points: Iterable[CoverPoint], crosses: Iterable[Cross] = ()):
        self.name = name
        self.points = {p.name: p for p in points}
        self.crosses = {c.name: c for c in crosses}
        self.samples = 0
        for c in self.crosses.values():
            unknown = [p for p in c.points if p not in self.points]
            if unknown:
                raise ValueError(f"cross {c.name!r} names unknown cover points {unknown}")
            c.hits = {combo: 0 for combo in self._combos(c)}

    def _combos(self, c: Cross):
        for combo in itertools.product(*(list(self.points[p].bins) for p in c.points)):
            if c.ignore is None or not c.ignore(combo):
                yield combo

    def sample(self, sample: dict) -> None:
        """Count the transactions of `sample` (dict of equal-length arrays or scalars)."""
        sizes = {np.size(v) for v in sample.values() if np.ndim(v)}
        if len(sizes) > 1:
            raise ValueError(f"coverage sample arrays differ in length: {sorted(sizes)}")
        n = sizes.pop() if sizes else 1
        if n == 0:
            return
        self.samples += n
        masks = {}
        for p in self.points.values():
            masks[p.name] = p.masks(sample, n)
            for b, mk in masks[p.name].items():
                p.hits[b] += int(np.count_nonzero(mk))
        for c in self.crosses.values():
            for combo in c.hits:
                mk = masks[c.points[0]][combo[0]]
                for pname, b in zip(c.points[1:], combo[1:]):
                    mk = mk & masks[pname][b]
                c.hits[combo] += int(np.count_nonzero(mk))

    def merge_from_trial(self, trial: "CoverageModel") -> None:
        """Take over the hits of a deep copy of this model that sampled more."""
        self.samples = trial.samples
        for name, p in trial.points.items():
            self.points[name].hits = dict(p.hits)
        for name, c in trial.crosses.items():
            self.crosses[name].hits = dict(c.hits)

    def merge(self, other: "CoverageModel") -> None:
        """Add another model's hits (same points and crosses) to this one."""
        self.samples += other.samples
        for name, p in other.points.items():
            for b, h in p.hits.items():
                self.points[name].hits[b] += h
        for name, c in other.crosses.items():
            for combo, h in c.hits.items():
                self.crosses[name].hits[combo] += h

    # ---- results ----
    def bins(self) -> list[tuple[str, str, int, int]]:
        """(group, bin, hits, at_least) for every bin of every point and cross."""
        out = []
        for p in self.points.values():
            out += [(p.name, b, h, p.at_least) for b, h in p.hits.items()]
        for c in self.crosses.values():
            out += [(c.name, " x ".join(combo), h, c.at_least) for combo, h in c.hits.items()]
        return out

    def missing(self, required: Iterable[str] | None = None) -> list[str]:
        """Bins (as "group: bin") below their hit goal, among `required` groups (default: all)."""
        req = set(required) if required is not None else None
        if req is not None:
            unknown = req - set(self.points) - set(self.crosses)
            if unknown:
                raise ValueError(f"no cover points or crosses named {sorted(unknown)}")
        return [f"{g}: {b}" for g, b, h, goal in self.bins() if h < goal and (req is None or g in req)]

    def coverage(self) -> tuple[int, int]:
        """(bins covered, bins in total)."""
        all_bins = self.bins()
        return sum(h >= goal for _, _, h, goal in all_bins), len(all_bins)

    def assert_covered(self, required: Iterable[str] | None = None) -> None:
        miss = self.missing(required)
        if miss:
            raise AssertionError(f"coverage of {self.name}: {len(miss)} bin(s) never hit: " + "; ".join(miss[:40]))

    def save_and_check(self, unit: str, simulator: str) -> str:
        """A unit test's last step: the report printed and written to
        build/coverage/<unit>-<simulator>.txt, then assert_covered(). Returns the report."""
        from sim.paths import BUILD_ROOT

        report = self.report()
        out = BUILD_ROOT / "coverage" / f"{unit}-{simulator}.txt"
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(report + "\n")
        print(report)
        self.assert_covered()
        return report

    def report(self) -> str:
        covered, total = self.coverage()
        lines = [f"Functional coverage: {self.name} — {covered}/{total} bins hit, {self.samples} samples"]
        groups: dict[str, list] = {}
        for g, b, h, goal in self.bins():
            groups.setdefault(g, []).append((b, h, goal))
        for g, rows in groups.items():
            hit = sum(h >= goal for _, h, goal in rows)
            lines.append(f"  {g}  ({hit}/{len(rows)})")
            width = max(len(b) for b, _, _ in rows)
            for b, h, goal in rows:
                lines.append(f"    {'ok ' if h >= goal else 'MISS'} {b:<{width}}  {h}")
        return "\n".join(lines)

    def to_dict(self) -> dict:
        covered, total = self.coverage()
        return {"name": self.name, "samples": self.samples, "covered": covered, "total": total,
                "bins": [{"group": g, "bin": b, "hits": h, "goal": goal} for g, b, h, goal in self.bins()]}


def close_coverage(model: CoverageModel, draw: Callable[[str], object], sample: Callable[[object], dict],
                   rng: np.random.Generator, max_draws: int = 3000) -> list:
    """Coverage-directed stimulus: while `model` (already sampled with the earlier stimulus) has
    bins below their goal, pick one at random ("group: bin", as `missing()` names it), `draw` an
    item aimed at it, and keep the item when `sample(item)` raises the number of covered bins.
    Stops when every bin is covered or after `max_draws` draws (the coverage check then names what
    is still missing). Returns the kept items; `model` ends up sampled with them."""
    kept = []
    for _ in range(max_draws):
        missing = model.missing()
        if not missing:
            break
        item = draw(missing[int(rng.integers(0, len(missing)))])
        trial = copy.deepcopy(model)
        trial.sample(sample(item))
        if trial.coverage()[0] > model.coverage()[0]:
            model.merge_from_trial(trial)
            kept.append(item)
    return kept

