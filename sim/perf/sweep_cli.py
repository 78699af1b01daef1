"""`npu sweep SPEC.toml`: the arguments checked, the sweep run, its summary printed."""

from __future__ import annotations

import sys

from sim.perf.executor import ExecutorError, ExecutorOptions

EXIT_INTERNAL_ERROR = 3


def executor_options(args) -> ExecutorOptions:
    """--local, --jobs, --workers and --scheduler as one choice, or a one-line error."""
    workers, local = args.workers, args.local
    if args.jobs is not None:
        if args.jobs < 1:
            raise ExecutorError(f"--jobs {args.jobs}: must be at least 1")
        if workers is not None and args.jobs != workers:
            raise ExecutorError(f"--jobs {args.jobs} and --workers {workers}: give one of them")
        if args.jobs == 1:
            local = True
        else:
            workers = args.jobs
    if local and args.scheduler:
        raise ExecutorError("--local and --scheduler: give one of them (--local runs without Dask)")
    if args.scheduler and workers is not None:
        raise ExecutorError("--workers sizes the local cluster; with --scheduler the cluster has its own workers")
    options = ExecutorOptions(scheduler=args.scheduler, workers=workers, local=local)
    options.check()
    return options


def sweep_cli(args) -> int:
    from sim.perf.sweep import format_summary, run_sweep
    from sim.perf.sweep_spec import load_spec

    options = executor_options(args)
    spec = load_spec(args.spec)
    result = run_sweep(spec, output=args.output_dir, engine=args.engine, options=options, plots=not args.no_plots)
    print(format_summary(result))
    if result.internal:
        # a bug of npu-bench (or a worker that died): the sweep wrote everything else, then says so
        for text in result.internal[:3]:
            print(text, file=sys.stderr)
        print(f"npu sweep: internal error in {len(result.internal)} job(s) (the first ones above; they are not "
              "cached and run again next time): this is a bug in npu-bench; please report it", file=sys.stderr)
        return EXIT_INTERNAL_ERROR
    return 0
