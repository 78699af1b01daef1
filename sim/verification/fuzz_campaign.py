"""The fuzz campaign: thousands of mutated `npu` invocations, each checked against the CLI's promise.

    python -m sim.verification.fuzz_campaign --cases N --seed S [--jobs J]      (make fuzz)

The promise (sim/cli/main.py): exit 0 on success; exit 1 only from `npu sim` when the RTL differs
from golden; every user error an NpuBenchError printed as one line `npu <cmd>: error: ...` on
stderr with exit 2. Anything else is a bug: an exception that escapes (a traceback), an error
on several lines or without the `npu <cmd>: error:` prefix, a hang, a memory blow-up, another
exit status, or a `--state` file changed by a run that did not succeed.

Cases come from sim/verification/fuzz_cases.py (hypothesis strategies, drawn in a thread of this
process under a fixed seed) and run in worker processes (2 by default), each case in its own
folder, in-process through `sim.cli.main.main(argv)` with stdout and stderr captured, under a
wall-clock alarm (a worker that does not answer in time is killed and replaced) and an address-
space limit (RLIMIT_AS), so that a runaway allocation fails as a MemoryError instead of taking
the machine.

At the end it prints a table of target x outcome, then each distinct failure signature (the
exception type and the innermost frame in the project's own code; or the kind of breach) with
the number of cases and a reproducer. Each new signature is minimised (hypothesis shrinks the
failing case: fewer edits, a smaller seed graph) and saved under tests/data/fuzz/<slug>/
(case.json and the files it needs), where tests/sim/verification/test_fuzz.py replays it.
The exit status is 1 if any case failed.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import hashlib
import io
import json
import multiprocessing
import os
import queue
import random
import re
import resource
import shutil
import signal
import stat
import sys
import threading
import time
import traceback
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait
from pathlib import Path

from sim.paths import BUILD_ROOT, REPO_ROOT, TEST_DATA

REPRODUCERS = TEST_DATA / "fuzz"
DEFAULT_MEMORY_LIMIT = 6 << 30
CASE_TIMEOUT = 30.0          # seconds; the slowest legitimate non-sim case takes a few
SIM_TIMEOUT = 240.0          # npu sim: compile, golden, a Verilator run (and the first core build)
KILL_GRACE = 20.0            # a worker silent this long after its case's alarm is killed
SHRINK_BUDGET = 45.0         # seconds of shrinking per new failure signature
# Share of each target among the cases. npu sim is slow (a Verilator run per case): a small share.
SHARES = {"inspect": 0.18, "run-interp": 0.29, "run-golden": 0.26, "compile": 0.255, "sim": 0.015}

OK, MISMATCH, USER_ERROR, USAGE = "ok", "mismatch", "user-error", "usage"
TRACEBACK, BAD_ERROR, HANG, MEMORY, WRONG_EXIT, STATE_CHANGED, CRASH = (
    "traceback", "bad-error", "hang", "memory", "wrong-exit", "state-changed", "crash")
HARNESS = "harness"          # the campaign's own code failed to build or run a case
PASSING = (OK, MISMATCH, USER_ERROR, USAGE)
FAILING = (TRACEBACK, BAD_ERROR, HANG, MEMORY, WRONG_EXIT, STATE_CHANGED, CRASH, HARNESS)
OUTCOMES = PASSING + FAILING

ERROR_LINE = re.compile(r"^npu (inspect|run|compile|sim): error: \S")
USAGE_LINE = re.compile(r"^npu( (inspect|run|compile|sim))?: error: \S")     # argparse names the parser it was in
TB_FILE = re.compile(r'^\s*File "([^"]+)", line (\d+), in (\S+)')
PROJECT_DIRS = ("compiler", "firmware_model", "sim", "hw")
_OWN_FILES = ("sim/verification/fuzz_campaign.py", "sim/verification/fuzz_cases.py")


@dataclass
class Outcome:
    """What one case did, as classified against the CLI's promise."""
    kind: str                     # one of OUTCOMES
    signature: str | None = None  # failures: what makes two failures the same bug
    detail: str = ""              # failures: the message, the frame with its line
    exit_status: int | None = None
    seconds: float = 0.0

    @property
    def failed(self) -> bool:
        return self.kind in FAILING


# ---------------------------------------------------------------------------------------------
# Running one case (in a worker)

class CaseTimeout(BaseException):
    """Raised by the alarm in the middle of a case that runs too long. A BaseException, so that
    the product's `except Exception` does not swallow it."""


class _Pipe(io.TextIOBase):
    """stdout as a pipe whose reader stops after `limit` bytes (`npu inspect --ops | head`).

    Text is buffered as Python buffers a pipe (8 KiB). The kernel's pipe holds 64 KiB more than
    the reader took, so a write fails (BrokenPipeError) only once the output passes the limit by
    that much, as with a fast writer and a reader that has gone. The worker flushes once more
    after main() returns, as the interpreter does at exit."""

    BUFFER = 8192
    CAPACITY = 65536

    def __init__(self, limit: int | None):
        self.limit = limit
        self.text = io.StringIO()
        self.pending = 0
        self.delivered = 0
        self.fd_identity: tuple[int, int] | None = None    # fd 1 as the case started

    def _fd_moved(self) -> bool:
        """Whether fd 1 was pointed elsewhere (os.dup2 of /dev/null, the usual answer to EPIPE):
        then the bytes go there and no longer to the closed pipe."""
        st = os.fstat(1)
        return self.fd_identity is not None and (st.st_dev, st.st_ino) != self.fd_identity

    def writable(self) -> bool:
        return True

    def write(self, s: str) -> int:
        self.text.write(s)
        self.pending += len(s.encode("utf-8", "replace"))
        if self.pending >= self.BUFFER:
            self.flush()
        return len(s)

    def flush(self) -> None:
        self.delivered += self.pending
        self.pending = 0
        if self.limit is not None and self.delivered > self.limit + self.CAPACITY and not self._fd_moved():
            raise BrokenPipeError(errno.EPIPE, "Broken pipe")

    def fileno(self) -> int:
        return 1     # the worker's fd 1, which points at the case's log file while a case runs

    def isatty(self) -> bool:
        return False

    @property
    def encoding(self) -> str:
        return "utf-8"


def _alarm(signum, frame):
    raise CaseTimeout()


def _project_frame(tb) -> tuple[str, str, int] | None:
    """(path relative to the repository, function, line) of the innermost frame in the project's
    own code (not this campaign's), or None."""
    found = None
    for frame, lineno in traceback.walk_tb(tb):
        path = Path(frame.f_code.co_filename)
        try:
            rel = path.resolve().relative_to(REPO_ROOT).as_posix()
        except ValueError:
            continue
        if rel.split("/")[0] in PROJECT_DIRS and rel not in _OWN_FILES:
            found = (rel, frame.f_code.co_name, lineno)
    return found


def _where(exc: BaseException, command: str) -> tuple[str, str]:
    frame = _project_frame(exc.__traceback__)
    if frame is None:
        return f"npu {command}", f"npu {command}"
    rel, func, line = frame
    return f"{rel}:{func}", f"{rel}:{line} in {func}"


def _snapshot(path: Path | None):
    """What is at `path` now: its bytes, a folder marker, or None (nothing)."""
    if path is None:
        return None
    if path.is_dir():
        return ("folder", tuple(sorted(p.name for p in path.iterdir())))
    if path.exists():
        return path.read_bytes()
    return None


def _template(line: str) -> str:
    """An error line with its particulars (quoted names, paths, numbers) blanked, so that one bug
    printed about different files or tensors gives one signature."""
    t = re.sub(r"'[^']*'|\"[^\"]*\"", "'…'", line)
    t = re.sub(r"(/[^\s:,;'\"]+)+", "PATH", t)
    t = re.sub(r"-?\d+", "N", t)
    return t[:90]


def _printed_traceback(stderr: str) -> tuple[str, str, str] | None:
    """(exception type, innermost project frame, detail) of a traceback printed on stderr (the
    CLI's handler of internal errors prints one and exits 3), or None."""
    if "Traceback (most recent call last):" not in stderr:
        return None
    lines = stderr.splitlines()
    start = max(i for i, ln in enumerate(lines) if ln.startswith("Traceback (most recent call last):"))
    frame = None
    last = ""
    for ln in lines[start + 1:]:
        m = TB_FILE.match(ln)
        if m:
            try:
                rel = Path(m.group(1)).resolve().relative_to(REPO_ROOT).as_posix()
            except ValueError:
                continue
            if rel.split("/")[0] in PROJECT_DIRS and rel not in _OWN_FILES:
                frame = (rel, m.group(3), m.group(2))
        elif ln and not ln.startswith(" ") and not ERROR_LINE.match(ln) and not ln.startswith("npu "):
            last = ln
    name = last.split(":", 1)[0].strip() or "Exception"
    name = name.rsplit(".", 1)[-1]
    where = f"{frame[0]}:{frame[1]}" if frame else "?"
    detail = f"{frame[0]}:{frame[2]} in {frame[1]}: {last}" if frame else last
    return name, where, detail[:400]


def classify(command: str, status, via_exit: bool, stderr: str, exc: BaseException | None,
             pipe_closed: bool) -> Outcome:
    """The outcome of one `npu` call, against the CLI's promise (module docstring). A traceback
    that escapes main() and one that main() prints itself (exit 3) are the same finding."""
    if isinstance(exc, CaseTimeout):
        where, detail = _where(exc, command)
        return Outcome(HANG, f"hang @ {where}", f"no answer within the time limit; interrupted at {detail}")
    if isinstance(exc, MemoryError):
        where, detail = _where(exc, command)
        return Outcome(MEMORY, f"MemoryError @ {where}", f"{detail}: {type(exc).__name__}: {str(exc)[:300]}")
    if exc is not None:
        where, detail = _where(exc, command)
        name = type(exc).__name__
        return Outcome(TRACEBACK, f"{name} @ {where}", f"{detail}: {name}: {str(exc)[:300]}")
    printed = _printed_traceback(stderr)
    if printed is not None:
        name, where, detail = printed
        kind = MEMORY if name.endswith("MemoryError") else TRACEBACK
        name = "MemoryError" if kind == MEMORY else name
        return Outcome(kind, f"{name} @ {where if where != '?' else 'npu ' + command}",
                       f"printed with exit status {status!r}: {detail}", status if isinstance(status, int) else None)
    lines = [ln for ln in stderr.splitlines() if ln.strip()]
    if status == 0:
        return Outcome(OK, exit_status=0)
    if status == 1 and command == "sim":
        return Outcome(MISMATCH, exit_status=1)
    if status == 2:
        match = [ERROR_LINE.match(ln) for ln in lines]
        if via_exit and lines and lines[0].startswith("usage:") and USAGE_LINE.match(lines[-1]):
            return Outcome(USAGE, exit_status=2)    # argparse's own rejection: usage, then the error line
        if len(lines) == 1 and match[0] and match[0].group(1) == command:
            return Outcome(USER_ERROR, exit_status=2)
        if not lines:
            return Outcome(BAD_ERROR, f"empty error @ {command}", "exit status 2 with nothing on stderr", 2)
        kind = "multi-line error" if len(lines) > 1 else "unnamed error"
        first = next((ln for ln in lines if ERROR_LINE.match(ln)), lines[0])
        # a name from the user's files with a line break in it, printed raw: one finding whatever
        # message carried the name
        from sim.verification.fuzz_cases import BROKEN_NAMES

        broken = len(lines) > 1 and (any(n in stderr for n in BROKEN_NAMES) or first.count("'") % 2)
        what = "a name from the model holds a line break, printed raw" if broken else _template(first)
        return Outcome(BAD_ERROR, f"{kind} @ {command}: {what}",
                       f"{len(lines)} stderr line(s): " + " | ".join(lines[:4])[:400], 2)
    if pipe_closed and status in (1, 141):
        return Outcome(OK, exit_status=status)      # stdout closed early: quiet exit is fine
    return Outcome(WRONG_EXIT, f"exit status {status!r} @ {command}",
                   f"exit status {status!r}; stderr: " + " | ".join(lines[:3])[:300], status)


def execute(case, case_dir: Path, timeout: float) -> Outcome:
    """Run `case` in `case_dir` in this process through sim.cli.main.main and classify it."""
    from sim.cli.main import main

    case.materialise(case_dir)
    state_path = case_dir / case.state if case.state else None
    before = _snapshot(state_path)
    argv = case.resolve(case_dir)
    out, err = _Pipe(case.stdout_limit), io.StringIO()
    status, via_exit, exc = None, False, None
    cwd = os.getcwd()
    log = os.open(case_dir / "fd.log", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    saved = (os.dup(1), os.dup(2))
    os.dup2(log, 1)              # what subprocesses (the simulator) print goes to the case's log
    os.dup2(log, 2)
    st = os.fstat(1)
    out.fd_identity = (st.st_dev, st.st_ino)
    old_handler = signal.signal(signal.SIGALRM, _alarm)
    t0 = time.monotonic()
    try:
        os.chdir(case_dir)
        signal.setitimer(signal.ITIMER_REAL, timeout)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                status = main(argv)
            except SystemExit as e:
                status, via_exit = e.code, True
            out.flush()          # what the interpreter does at exit: a closed pipe shows here too
    except BaseException as e:   # noqa: B902 - everything that escapes main is the finding
        exc = e
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old_handler)
        os.chdir(cwd)
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for fd in (*saved, log):
            os.close(fd)
    seconds = time.monotonic() - t0
    # what the command printed, beside the case (kept with the case folder when it fails)
    (case_dir / "stdout.txt").write_text(out.text.getvalue()[-20000:])
    (case_dir / "stderr.txt").write_text(err.getvalue()[-20000:])
    outcome = classify(case.command, status, via_exit, err.getvalue(), exc, case.stdout_limit is not None)
    if exc is not None and case.stdout_limit is not None and isinstance(exc, BrokenPipeError) and status is not None:
        outcome = Outcome(WRONG_EXIT, f"BrokenPipeError at exit @ {case.command}",
                          "stdout closed early: the flush at interpreter exit raises BrokenPipeError "
                          "(a real process prints 'Exception ignored' and exits 120)", 120)
    if state_path is not None and not outcome.failed:
        leftovers = sorted(p.name for p in state_path.parent.glob(f".{state_path.name}.*")) \
            if state_path.parent.is_dir() else []
        if outcome.kind != OK and _snapshot(state_path) != before:
            outcome = Outcome(STATE_CHANGED, f"state file changed by a failed run @ {case.command}",
                              f"exit status {status}, stderr: {err.getvalue().strip()[:300]}", status)
        elif leftovers:
            outcome = Outcome(STATE_CHANGED, f"temporary state file left behind @ {case.command}",
                              f"left: {', '.join(leftovers)}", status)
    outcome.exit_status = status if outcome.exit_status is None else outcome.exit_status
    outcome.seconds = seconds
    return outcome


def _remove(folder: Path) -> None:
    """Remove a case folder, read-only sub-folders included."""
    if not folder.exists():
        return
    for p in folder.rglob("*"):
        if p.is_dir() and not p.is_symlink():
            with contextlib.suppress(OSError):
                p.chmod(p.stat().st_mode | stat.S_IWUSR | stat.S_IXUSR | stat.S_IRUSR)
    shutil.rmtree(folder, ignore_errors=True)


def _timeout_for(command: str, timeout: float) -> float:
    return SIM_TIMEOUT if command == "sim" else timeout


def run_case(case, folder: Path, timeout: float, keep: Path | None = None) -> Outcome:
    """`execute` in `folder`, which is removed afterwards (moved to `keep` when the case failed).
    The folder's name starts with "fuzz-": `npu sim` names its work folder under build/sim after
    it (the model is <folder>/model.tosa), and that folder is removed too."""
    try:
        outcome = execute(case, folder, _timeout_for(case.command, timeout))
    finally:
        if case.command == "sim":     # npu sim's work folder for this model (named after the case folder)
            for d in (BUILD_ROOT / "sim").glob(f"{folder.name}-*"):
                _remove(d)
    if keep is not None and outcome.failed:
        _remove(keep)
        keep.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(str(folder), keep)
    _remove(folder)
    return outcome


# ---------------------------------------------------------------------------------------------
# Shrinking (in a worker)

def minimise(spec, signature: str, folder: Path, timeout: float, budget: float):
    """The simplest variant of `spec` that still fails with `signature` (hypothesis.find over
    fuzz_cases.simplifications(spec)); `spec` itself when none is found within `budget` seconds."""
    from hypothesis import HealthCheck, Phase, find, settings
    from hypothesis.errors import NoSuchExample

    from sim.verification.fuzz_cases import build_case, simplifications

    deadline = time.monotonic() + budget
    tries = [0]

    def still_fails(candidate) -> bool:
        if time.monotonic() > deadline:
            return False
        tries[0] += 1
        try:
            case, _ = build_case(candidate)
        except Exception:
            return False
        return run_case(case, folder / f"fuzz-s{tries[0]}", timeout).signature == signature

    if not still_fails(spec):
        return spec, tries[0]      # not reproducible on its own (it depended on an earlier case): keep it whole
    try:
        found = find(simplifications(spec), still_fails,
                     settings=settings(max_examples=60, database=None, deadline=None, derandomize=True,
                                       phases=[Phase.generate, Phase.shrink],
                                       suppress_health_check=list(HealthCheck)))
    except NoSuchExample:
        return spec, tries[0]
    return found, tries[0]


# ---------------------------------------------------------------------------------------------
# Workers

def _worker_main(conn: Connection, root: str, memory_limit: int, timeout: float) -> None:
    """A worker: cases (and shrink jobs) from `conn`, outcomes back, until None arrives."""
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    if memory_limit:
        soft, hard = resource.getrlimit(resource.RLIMIT_AS)
        resource.setrlimit(resource.RLIMIT_AS, (memory_limit, hard))
    signal.signal(signal.SIGINT, signal.SIG_IGN)     # the parent stops the campaign
    from sim.verification.fuzz_cases import Case, build_case

    base = Path(root)
    while True:
        msg = conn.recv()
        if msg is None:
            return
        kind, key, payload = msg
        try:
            if kind == "case":
                spec = payload
                try:
                    case, _ = build_case(spec)
                except Exception:
                    conn.send((key, Outcome(HARNESS, f"case building failed: {traceback.format_exc(limit=-1).strip()}",
                                            traceback.format_exc()[-1500:])))
                    continue
                outcome = run_case(case, base / f"fuzz-c{key}", timeout, keep=base.parent / "failed" / f"c{key}")
                conn.send((key, outcome))
            elif kind == "replay":
                case = payload if isinstance(payload, Case) else Case.load(Path(payload))[0]
                conn.send((key, run_case(case, base / f"fuzz-r{key}", timeout)))
            elif kind == "shrink":
                spec, signature, budget = payload
                found, tries = minimise(spec, signature, base / f"m{key}", timeout, budget)
                conn.send((key, (found, tries)))
        except BaseException:
            conn.send((key, Outcome(HARNESS, "worker error: " + traceback.format_exc(limit=-1).strip()[-200:],
                                    traceback.format_exc()[-1500:])))


@dataclass
class _Worker:
    process: multiprocessing.Process
    conn: Connection
    task: tuple | None = None
    deadline: float = 0.0


class WorkerPool:
    """Worker processes that run tasks one at a time each, with a kill-and-replace for a worker
    that stays silent past its task's deadline or dies."""

    def __init__(self, jobs: int, root: Path, memory_limit: int = DEFAULT_MEMORY_LIMIT, timeout: float = CASE_TIMEOUT):
        self.ctx = multiprocessing.get_context("spawn")    # no fork of a process with threads
        self.root, self.memory_limit, self.timeout = root, memory_limit, timeout
        self.workers = [self._start(k) for k in range(jobs)]
        self.restarts = 0

    def _start(self, k: int) -> _Worker:
        parent, child = self.ctx.Pipe()
        folder = self.root / f"w{k}"
        folder.mkdir(parents=True, exist_ok=True)
        p = self.ctx.Process(target=_worker_main, args=(child, str(folder), self.memory_limit, self.timeout),
                             name=f"fuzz-worker-{k}", daemon=True)
        p.start()
        child.close()
        return _Worker(p, parent)

    def _replace(self, i: int) -> None:
        w = self.workers[i]
        if w.process.is_alive():
            w.process.kill()
        w.process.join(5)
        w.conn.close()
        self.workers[i] = self._start(i)
        self.restarts += 1

    def idle(self) -> list[int]:
        return [i for i, w in enumerate(self.workers) if w.task is None]

    def submit(self, i: int, task: tuple, seconds: float) -> None:
        w = self.workers[i]
        w.task, w.deadline = task, time.monotonic() + seconds + KILL_GRACE
        w.conn.send(task)

    def collect(self, wait_s: float = 0.2) -> list[tuple[tuple, object]]:
        """Finished (task, result) pairs; a dead or silent worker gives a CRASH/HANG outcome."""
        busy = [w for w in self.workers if w.task is not None]
        if not busy:
            return []
        ready = wait([w.conn for w in busy] + [w.process.sentinel for w in busy], timeout=wait_s)
        done = []
        for i, w in enumerate(self.workers):
            if w.task is None:
                continue
            task = w.task
            command = _task_command(task)
            if w.conn in ready:
                try:
                    _, result = w.conn.recv()
                except (EOFError, OSError):
                    result = None
                if result is not None:
                    w.task = None
                    done.append((task, result))
                    continue
            if w.process.sentinel in ready or not w.process.is_alive():
                code = w.process.exitcode
                if code is not None and code < 0 and -code == signal.SIGKILL:
                    result = Outcome(MEMORY, f"worker killed (SIGKILL) @ {command}",
                                     "the worker was killed, most likely by the kernel's OOM killer")
                else:
                    sig = f"signal {-code}" if code is not None and code < 0 else f"exit {code}"
                    result = Outcome(CRASH, f"worker died ({sig}) @ {command}", f"the worker process ended: {sig}")
                done.append((task, result))
                w.task = None
                self._replace(i)
            elif time.monotonic() > w.deadline:
                done.append((task, Outcome(HANG, f"hang (worker unresponsive) @ {command}",
                                           "the worker did not answer its alarm; killed")))
                w.task = None
                self._replace(i)
        return done

    def close(self) -> None:
        for w in self.workers:
            with contextlib.suppress(OSError, BrokenPipeError):
                w.conn.send(None)
        for w in self.workers:
            w.process.join(5)
            if w.process.is_alive():
                w.process.kill()


def _task_command(task: tuple) -> str:
    from sim.verification.fuzz_cases import COMMAND_OF, Case

    kind, _, payload = task
    if kind == "case":
        return COMMAND_OF[payload.target]
    if kind == "replay" and isinstance(payload, Case):
        return payload.command
    if kind == "shrink":
        return COMMAND_OF[payload[0].target]
    return "?"


# ---------------------------------------------------------------------------------------------
# The campaign

def schedule(n: int, seed: int, shares: dict[str, float] = SHARES) -> list[str]:
    """The target of each of the `n` cases: each target's share, in a seeded order."""
    counts = {t: int(round(s * n)) for t, s in shares.items()}
    biggest = max(shares, key=shares.get)
    counts[biggest] += n - sum(counts.values())
    targets = [t for t, c in counts.items() for _ in range(c)]
    random.Random(seed).shuffle(targets)
    return targets


def _generate(targets: list[str], seed: int, out: queue.Queue, stop: threading.Event) -> None:
    """Draw one spec per target with hypothesis (seeded), in order, into `out`; None at the end."""
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import seed as hseed
    from hypothesis import strategies as st

    from sim.verification.fuzz_cases import drawn_cases, fit

    made = [0]
    round_ = 0
    try:
        while made[0] < len(targets) and not stop.is_set() and round_ < 20:
            @settings(max_examples=len(targets) - made[0], database=None, deadline=None, phases=[Phase.generate],
                      suppress_health_check=list(HealthCheck))
            @hseed(seed * 1000 + round_)
            @given(st.data())
            def draw(data):
                if made[0] >= len(targets) or stop.is_set():
                    return
                i = made[0]
                spec = fit(data.draw(drawn_cases()), targets[i])
                while not stop.is_set():
                    try:
                        out.put((i, spec), timeout=0.5)
                        break
                    except queue.Full:
                        continue
                made[0] += 1

            draw()
            round_ += 1
    finally:
        out.put(None)


@dataclass
class FailureGroup:
    signature: str
    kind: str
    first: int                   # index of the first case that showed it
    spec: object
    outcome: Outcome
    count: int = 0
    targets: Counter = field(default_factory=Counter)
    reproducer: Path | None = None
    shrunk: bool = False


@dataclass
class CampaignResult:
    cases: int
    seconds: float
    counts: dict[str, Counter]           # target -> outcome -> cases
    failures: dict[str, FailureGroup]    # signature -> group
    restarts: int = 0
    # `npu sim` cases whose RTL differed from golden: no breach of the CLI's promise, but a
    # finding of the bench itself; the first few are listed
    mismatches: list = field(default_factory=list)

    @property
    def failed(self) -> int:
        return sum(g.count for g in self.failures.values())

    @property
    def rate(self) -> float:
        return self.cases / self.seconds if self.seconds else 0.0


def known_reproducers(folder: Path = REPRODUCERS) -> dict[str, Path]:
    """signature -> reproducer folder, for the ones already saved."""
    found = {}
    for p in sorted(folder.glob("*/case.json")) if folder.is_dir() else []:
        with contextlib.suppress(ValueError, KeyError):
            found[json.loads(p.read_text())["signature"]] = p.parent
    return found


def slug(signature: str, taken: set[str]) -> str:
    """A short folder name for a signature: kind, exception, module and function."""
    m = re.match(r"(\w+) @ (?:[\w/]*/)?(\w+)\.py:<?(\w+)>?", signature)
    if m:
        base = f"{m.group(1)}-{m.group(2)}-{m.group(3)}"
    else:   # "multi-line error @ run: npu run: error: input '…': PATH is not ..." -> multi-line-error-run-input-...
        kind, _, rest = signature.partition(" @ ")
        cmd, _, text = rest.partition(":")
        words = [w for w in re.findall(r"[a-z_]{3,}", text.partition("error:")[2].lower() or text.lower())
                 if w not in ("path", "npu", "the", "not", "error")][:3]
        base = "-".join([kind, cmd] + words)
    base = re.sub(r"[^a-z0-9]+", "-", base.lower()).strip("-")[:48]
    name = base
    if name in taken:
        name = f"{base}-{hashlib.sha1(signature.encode()).hexdigest()[:6]}"
    return name


def run_campaign(cases: int, seed: int, jobs: int = 2, *, shares: dict[str, float] = SHARES,
                 root: Path | None = None, save_to: Path | None = REPRODUCERS, shrink: bool = True,
                 memory_limit: int = DEFAULT_MEMORY_LIMIT, timeout: float = CASE_TIMEOUT,
                 shrink_budget: float = SHRINK_BUDGET, progress: bool = True) -> CampaignResult:
    """Run `cases` cases drawn under `seed` on `jobs` workers; minimise and save new failures."""
    from tqdm import tqdm

    targets = schedule(cases, seed, shares)
    root = Path(root or BUILD_ROOT / "fuzz" / f"seed{seed}-{os.getpid()}")
    _remove(root)
    root.mkdir(parents=True, exist_ok=True)
    if "sim" in targets:
        _build_core_once()
    t0 = time.monotonic()
    specs: queue.Queue = queue.Queue(maxsize=8 * jobs)
    stop = threading.Event()
    gen = threading.Thread(target=_generate, args=(targets, seed, specs, stop), name="fuzz-generator", daemon=True)
    gen.start()
    pool = WorkerPool(jobs, root, memory_limit, timeout)
    counts: dict[str, Counter] = defaultdict(Counter)
    failures: dict[str, FailureGroup] = {}
    mismatches: list[tuple[int, object]] = []
    bar = tqdm(total=cases, unit="case", disable=not progress, dynamic_ncols=True, file=sys.stderr,
               mininterval=0.5 if sys.stderr.isatty() else 30)
    finished, exhausted = 0, False
    try:
        while finished < cases:
            for i in pool.idle():
                if exhausted:
                    break
                try:
                    item = specs.get(timeout=0.05)
                except queue.Empty:
                    break
                if item is None:
                    exhausted = True
                    break
                index, spec = item
                pool.submit(i, ("case", index, spec), _timeout_for(_task_command(("case", index, spec)), timeout))
            for task, outcome in pool.collect():
                _, index, spec = task
                counts[spec.target][outcome.kind] += 1
                finished += 1
                bar.update(1)
                if outcome.kind == MISMATCH and len(mismatches) < 10:
                    mismatches.append((index, spec))
                if outcome.failed:
                    g = failures.get(outcome.signature)
                    if g is None or index < g.first:
                        failures[outcome.signature] = g = FailureGroup(
                            outcome.signature, outcome.kind, index, spec, outcome,
                            g.count if g else 0, g.targets if g else Counter())
                    g.count += 1
                    g.targets[spec.target] += 1
                    bar.set_postfix(failures=sum(f.count for f in failures.values()), signatures=len(failures),
                                    refresh=False)
            if exhausted and not any(w.task for w in pool.workers):
                break
        seconds = time.monotonic() - t0
        bar.close()
        if failures and save_to is not None:
            _reproduce(pool, failures, save_to, shrink, shrink_budget, progress)
    finally:
        stop.set()
        pool.close()
    _prune_failed(root / "failed", failures)
    return CampaignResult(finished, seconds, counts, failures, pool.restarts, sorted(mismatches, key=lambda m: m[0]))


def _prune_failed(folder: Path, failures: dict[str, FailureGroup]) -> None:
    """Keep the first failing case folder of each signature (build/fuzz/.../failed/c<N>)."""
    if not folder.is_dir():
        return
    keep = {f"c{g.first}" for g in failures.values()}
    for d in folder.iterdir():
        if d.name not in keep:
            _remove(d)


def _build_core_once() -> None:
    """Build (or find) the tiny core before the clock starts, so no sim case waits minutes for it."""
    from firmware_model.arch.config import load_config
    from sim.rtl.core import cached_core
    from sim.rtl.toolchain import ensure_simulator_env

    ensure_simulator_env()
    with contextlib.redirect_stdout(io.StringIO()):
        cached_core(load_config("tiny"), "verilator")


def _reproduce(pool: WorkerPool, failures: dict[str, FailureGroup], save_to: Path, shrink: bool,
               budget: float, progress: bool) -> None:
    """Minimise each new signature's first case on the workers and save it under `save_to`."""
    from sim.verification.fuzz_cases import build_case

    known = known_reproducers(save_to)
    new = []
    for g in failures.values():
        if g.signature in known:
            g.reproducer = known[g.signature]
        else:
            new.append(g)
    if not new:
        return
    # crashes and unresponsive workers cannot be shrunk in-process: they are saved as drawn
    todo = [g for g in new if shrink and g.kind not in (CRASH, HARNESS) and "unresponsive" not in g.signature
            and "killed" not in g.signature]
    if progress and todo:
        print(f"minimising {len(todo)} new failure signature(s) (up to {budget:.0f} s each) ...", file=sys.stderr)
    pending = list(enumerate(todo))
    while pending or any(w.task for w in pool.workers):
        for i in pool.idle():
            if not pending:
                break
            k, g = pending.pop(0)
            pool.submit(i, ("shrink", k, (g.spec, g.signature, budget)), budget + 2 * SIM_TIMEOUT)
        for task, result in pool.collect():
            g = todo[task[1]]
            if isinstance(result, tuple):
                g.spec, g.shrunk = result[0], True
    taken = {p.name for p in save_to.glob("*")} if save_to.is_dir() else set()
    for g in new:
        name = slug(g.signature, taken)
        try:
            case, _ = build_case(g.spec)
        except Exception as e:   # noqa: BLE001 - the report says why this one has no reproducer
            g.outcome.detail += f" (no reproducer: building the case failed: {type(e).__name__}: {e})"
            continue
        taken.add(name)
        case.save(save_to / name, g.signature, f"{g.outcome.detail}")
        g.reproducer = save_to / name


# ---------------------------------------------------------------------------------------------
# Replaying saved reproducers (the regression tests)

def replay(folders: list[Path], jobs: int = 1, timeout: float = CASE_TIMEOUT,
           root: Path | None = None) -> dict[Path, Outcome]:
    """Run saved reproducers (tests/data/fuzz/<slug>/) on workers; their outcomes by folder."""
    from sim.verification.fuzz_cases import Case

    root = Path(root or BUILD_ROOT / "fuzz" / f"replay-{os.getpid()}")
    _remove(root)
    pool = WorkerPool(max(1, min(jobs, len(folders))), root, timeout=timeout)
    results: dict[Path, Outcome] = {}
    pending = list(enumerate(folders))
    try:
        while pending or any(w.task for w in pool.workers):
            for i in pool.idle():
                if not pending:
                    break
                k, folder = pending.pop(0)
                case, _ = Case.load(folder)
                pool.submit(i, ("replay", k, case), _timeout_for(case.command, timeout))
            for task, outcome in pool.collect():
                results[folders[task[1]]] = outcome
    finally:
        pool.close()
        _remove(root)
    return results


# ---------------------------------------------------------------------------------------------
# Report

def format_table(result: CampaignResult) -> str:
    from sim.verification.fuzz_cases import TARGETS

    shown = [o for o in OUTCOMES if any(result.counts[t][o] for t in result.counts)]
    shown = list(PASSING) + [o for o in FAILING if o in shown]
    width = max(len(o) for o in shown) + 2
    head = f"{'target':<12}" + "".join(f"{o:>{width}}" for o in shown) + f"{'total':>{width}}"
    lines = [head, "-" * len(head)]
    total = Counter()
    for t in TARGETS:
        c = result.counts.get(t, Counter())
        total.update(c)
        lines.append(f"{t:<12}" + "".join(f"{c[o]:>{width}}" for o in shown) + f"{sum(c.values()):>{width}}")
    lines.append("-" * len(head))
    lines.append(f"{'all':<12}" + "".join(f"{total[o]:>{width}}" for o in shown) + f"{sum(total.values()):>{width}}")
    return "\n".join(lines)


def format_failures(result: CampaignResult) -> str:
    lines = []
    if result.mismatches:
        lines.append(f"npu sim found the RTL differing from golden ({len(result.mismatches)} listed):")
        lines += [f"  case {i}: {spec.describe()[:300]}" for i, spec in result.mismatches]
    if not result.failures:
        return "\n".join(lines + ["no failures"])
    lines.append(f"{len(result.failures)} distinct failure signature(s):")
    for g in sorted(result.failures.values(), key=lambda g: (-g.count, g.signature)):
        where = g.reproducer.relative_to(REPO_ROOT) if g.reproducer and g.reproducer.is_relative_to(REPO_ROOT) \
            else g.reproducer or "(not saved)"
        targets = ", ".join(f"{t} {n}" for t, n in g.targets.most_common())
        lines.append(f"  [{g.kind}] {g.signature}")
        lines.append(f"      {g.count} case(s) ({targets}); first: case {g.first}; reproducer: {where}"
                     f"{' (minimised)' if g.shrunk else ''}")
        lines.append(f"      {g.outcome.detail[:300]}")
        lines.append(f"      input: {g.spec.describe()[:300]}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m sim.verification.fuzz_campaign", description=__doc__.splitlines()[0])
    ap.add_argument("--cases", type=int, default=10000, help="number of cases (default 10000)")
    ap.add_argument("--seed", type=int, default=1, help="the campaign's seed: the same seed draws the same cases")
    ap.add_argument("--jobs", type=int, default=2, help="worker processes (default 2)")
    ap.add_argument("--sim-share", type=float, default=SHARES["sim"], help="share of npu sim cases (default 0.015)")
    ap.add_argument("--timeout", type=float, default=CASE_TIMEOUT, help="seconds per case before it is a hang")
    ap.add_argument("--memory-gib", type=float, default=DEFAULT_MEMORY_LIMIT / (1 << 30),
                    help="address-space limit per worker, GiB (default 6)")
    ap.add_argument("--save-to", type=Path, default=REPRODUCERS, help="where new reproducers go (tests/data/fuzz)")
    ap.add_argument("--no-save", action="store_true", help="do not minimise or save reproducers")
    ap.add_argument("--shrink-budget", type=float, default=SHRINK_BUDGET, help="seconds of shrinking per signature")
    args = ap.parse_args(argv)

    shares = dict(SHARES)
    shares["sim"] = args.sim_share
    scale = (1 - args.sim_share) / (1 - SHARES["sim"])
    for t in shares:
        if t != "sim":
            shares[t] = SHARES[t] * scale
    result = run_campaign(args.cases, args.seed, args.jobs, shares=shares,
                          save_to=None if args.no_save else args.save_to, memory_limit=int(args.memory_gib * (1 << 30)),
                          timeout=args.timeout, shrink_budget=args.shrink_budget)
    print()
    print(f"fuzz: {result.cases} cases in {result.seconds:.0f} s ({result.rate:.1f} cases/s, {args.jobs} workers, "
          f"seed {args.seed}); {result.restarts} worker restart(s)")
    print(format_table(result))
    print()
    print(format_failures(result))
    return 1 if result.failures else 0


if __name__ == "__main__":
    sys.exit(main())
