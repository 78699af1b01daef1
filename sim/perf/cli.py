"""`npu perf MODEL --config C`: the per-layer report on the terminal, as CSV and as JSON."""

from __future__ import annotations

import json
from pathlib import Path

from firmware_model.arch.config import load_config
from sim.paths import BUILD_ROOT


def perf_cli(args) -> int:
    from compiler.pipeline import parse_binds
    from sim.cli.files import check_output_dir, commit_files, output_dir
    from sim.perf.layer_report import PerfError, perf_report

    cfg = load_config(args.config, args.set)
    model = Path(args.model)
    stem = model.parent.name if model.stem == "model" else model.stem
    out = Path(args.output_dir) if args.output_dir else BUILD_ROOT / "perf" / f"{stem}-{cfg.report_key}"
    check_output_dir(out)
    if args.invocations is not None and args.invocations < 1:
        raise PerfError(f"--invocations {args.invocations}: must be at least 1")
    rep = perf_report(model, cfg, engine=args.engine, binds=parse_binds(args.bind), invocations=args.invocations)
    print(rep.format_table(top=args.top or None))
    folder = output_dir(out)
    commit_files([(folder / "perf.csv", rep.csv_text().encode()),
                  (folder / "perf.json", (json.dumps(rep.to_json(), indent=1) + "\n").encode())])
    print(f"reports: {folder / 'perf.csv'} {folder / 'perf.json'}")
    return 0
