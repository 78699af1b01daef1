"""Run many independent jobs, here or on a Dask cluster, and hand back each result as it ends.

    for outcome in run_jobs(jobs, ExecutorOptions(workers=2), desc="sweep", unit="point"):
        ...   # outcome.job, outcome.value or outcome.error

A job is a module-level function and one picklable argument, so that a worker process (or another
machine) can run it knowing only the function's import path. The caller keeps what it needs to
resume: results come back in the parent, which writes them where it likes as they arrive, so
stopping a run loses only the jobs still running.

Where the jobs run:
- by default a `LocalCluster` on this machine: one single-threaded worker process per core
  (the compiler and the models are pure Python, so threads would share one interpreter lock);
- `scheduler="tcp://host:8786"`: an existing Dask cluster (a SLURM or LSF allocation made with
  dask-jobqueue, or `dask scheduler` / `dask worker` started by hand); its workers must run the same
  npu-bench and see the same files;
- `local=True`: one after the other in this process, without Dask (for a debugger or a profiler).

A job that raises does not stop the others: its outcome carries the exception (one line) and its
traceback. `npu sweep` uses this; `npu regress` (issue 15) is meant to.
"""

from __future__ import annotations

import logging
import os
import sys
import traceback
import uuid
from dataclasses import dataclass
from typing import Any, Callable, Iterator

from firmware_model.errors import NpuBenchError


class ExecutorError(NpuBenchError):
    """A cluster that cannot be started or reached."""


@dataclass(frozen=True)
class Job:
    fn: Callable[[Any], Any]      # a module-level function: workers import it by name
    arg: Any                      # picklable
    label: str = ""               # names the job in errors and in Dask's task keys


@dataclass
class Outcome:
    index: int                    # the job's place in the list given to run_jobs
    job: Job
    value: Any = None
    error: str | None = None      # "Type: message" when the job raised (or its worker died)
    traceback: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


@dataclass(frozen=True)
class ExecutorOptions:
    scheduler: str | None = None  # address of an existing cluster's scheduler
    workers: int | None = None    # worker processes of the local cluster (default: the cores)
    local: bool = False           # in this process, no Dask

    def check(self) -> None:
        """What can be refused before anything starts: a worker count, an address's form."""
        if self.workers is not None and self.workers < 1:
            raise ExecutorError(f"--workers {self.workers}: must be at least 1")
        if self.scheduler:
            from distributed.comm import get_address_host_port

            try:
                # here, not in Client(), which retries a malformed address until its timeout
                get_address_host_port(self.scheduler)
            except ValueError as e:
                raise ExecutorError(f"--scheduler {self.scheduler}: not a scheduler address "
                                    f"(e.g. tcp://10.0.0.5:8786): {e}") from None

    def describe(self) -> str:
        if self.local:
            return "in this process (--local)"
        if self.scheduler:
            return f"on the Dask cluster at {self.scheduler}"
        return f"on a local Dask cluster of {self.workers or cores()} worker processes"


def cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:        # not Linux
        return os.cpu_count() or 1


def run_jobs(jobs: list[Job], options: ExecutorOptions = ExecutorOptions(), *, desc: str = "",
             unit: str = "job", progress: bool | None = None) -> Iterator[Outcome]:
    """Yield one Outcome per job, in the order they finish. `progress`: a tqdm bar on stderr
    (None: when stderr is a terminal)."""
    from tqdm import tqdm

    if not jobs:
        return
    bar = tqdm(total=len(jobs), desc=desc, unit=unit, file=sys.stderr, dynamic_ncols=True,
               disable=(not sys.stderr.isatty()) if progress is None else not progress)
    failed = 0
    try:
        source = _run_local(jobs) if options.local else _run_dask(jobs, options)
        for outcome in source:
            failed += not outcome.ok
            bar.update(1)
            if failed:
                bar.set_postfix(raised=failed, refresh=False)
            yield outcome
    finally:
        bar.close()


def _run_local(jobs: list[Job]) -> Iterator[Outcome]:
    for i, job in enumerate(jobs):
        try:
            yield Outcome(i, job, value=job.fn(job.arg))
        except Exception as e:  # noqa: BLE001 - one job's bug must not stop the others
            yield Outcome(i, job, error=_one_line(e), traceback=traceback.format_exc())


def _run_dask(jobs: list[Job], options: ExecutorOptions) -> Iterator[Outcome]:
    from distributed import Client, LocalCluster, as_completed

    cluster = None
    try:
        options.check()
        if options.scheduler:
            try:
                client = Client(options.scheduler, timeout="15s", set_as_default=False)
            except (OSError, TimeoutError) as e:
                raise ExecutorError(f"--scheduler {options.scheduler}: cannot reach the Dask scheduler: "
                                    f"{_one_line(e)}") from None
        else:
            n = options.workers or cores()
            # processes, one thread each: pure Python work, so threads would only share the GIL;
            # only on loopback, without the dashboard (it needs bokeh, and a port per run)
            cluster = LocalCluster(n_workers=n, threads_per_worker=1, processes=True, host="127.0.0.1",
                                   dashboard_address=None, silence_logs=logging.ERROR)
            client = Client(cluster, set_as_default=False)
    except ExecutorError:
        if cluster is not None:
            cluster.close()
        raise
    try:
        run = uuid.uuid4().hex[:8]
        futures, which = [], {}
        for i, job in enumerate(jobs):
            # pure=False: equal arguments are still distinct jobs; the key makes Dask's logs readable
            f = client.submit(job.fn, job.arg, pure=False, key=f"{job.label or 'job'}-{i}-{run}")
            futures.append(f)
            which[f.key] = (i, job)
        for f in as_completed(futures, loop=client.loop):
            i, job = which[f.key]
            try:
                value = f.result()
            except Exception as e:  # noqa: BLE001 - a job that raised, or a worker that died under it
                tb = "".join(traceback.format_tb(f.traceback())) if f.status == "error" else ""
                yield Outcome(i, job, error=_one_line(e), traceback=tb + _one_line(e))
            else:
                yield Outcome(i, job, value=value)
            f.release()
    finally:
        client.close()
        if cluster is not None:
            cluster.close()


def _one_line(e: BaseException) -> str:
    text = str(e).replace("\r", "\\r").replace("\n", "\\n")
    return f"{type(e).__name__}: {text}" if text else type(e).__name__
