"""JUnit XML of co-simulation runs (written with junitparser), and the merge of many runs into one file.

One run of `npu sim` (one graph x configuration x simulator) is one <testsuite>:

- name `npu-sim.<graph>.<configuration name>-<configuration hash>.<simulator>`, where <graph> is
  the file's path (relative to the working folder when inside it) with '/' as '.', so that
  models/cnn32/model.tosa and models/mlp/model.tosa do not collide when CI merges runs, and a
  configuration edited under the same name is another suite;
- `timestamp`: when the run started; `time`: its wall time in seconds, build and golden included;
- properties: the run's seed (NPU_BENCH_SEED or `--seed`; empty: the committed defaults) and each
  random stream's seed drawn from it (`seed.network inputs`, `seed.cocotb`), what the inputs were, the configuration's name and hash, the hash of the
  generated Verilog, the simulator and its version, the graph file's hash; enough to replay it;
- a test case per executed tile (classname `layer<i>.<name>`, name `inv<k>.tile_<n>`), failed with
  the first differing elements, or the done clock against the cycle model's. Its `time` is its
  share of the invocation's wall time, in proportion to its simulated time (the simulator does
  not time tiles apart);
- a test case per invocation: status, cycle count and variable SRAM against golden;
- a test case per output check (RTL against golden, the interpreter, Arm's reference model);
- skipped test cases, each with its reason: layers run by the host CPU model (their results are
  checked through the network's outputs, not as tiles), and tiles the run did not reach because it
  stopped at the first mismatch.

`merge()` puts the suites of many runs in one <testsuites> (npu regress); a run that crashed before
it could report is a suite with one errored case, so that nothing drops out of the merged file.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
from pathlib import Path

from junitparser import Error, Failure, JUnitXml, Skipped, TestCase, TestSuite


def graph_id(model: str | Path) -> str:
    p = Path(model)
    try:
        p = p.resolve().relative_to(Path.cwd().resolve())
    except ValueError:
        p = p.resolve()
    parts = [s for s in p.with_suffix("").parts if s not in ("/", "")]
    return ".".join(parts).replace(" ", "_")


def suite_name(model: str | Path, config_name: str, config_hash: str, simulator: str) -> str:
    return f"npu-sim.{graph_id(model)}.{config_name}-{config_hash}.{simulator}"


def file_hash(path: str | Path) -> str:
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()[:16]
    except OSError:
        return "unreadable"


def _timestamp(epoch: float) -> str:
    return _dt.datetime.fromtimestamp(epoch, _dt.timezone.utc).isoformat(timespec="seconds")


def sim_suite(rep) -> TestSuite:
    """The <testsuite> of one `npu sim` run (a sim.cosim.report.SimReport)."""
    cfg = rep.config
    suite = TestSuite(suite_name(rep.model, cfg.name, cfg.hash, rep.simulator))
    suite.timestamp = _timestamp(rep.started)
    props = {"seed": rep.run_seed, **{f"seed.{label}": str(v) for label, v in rep.seeds}, "inputs": rep.inputs,
             "config": cfg.name, "config_hash": cfg.hash, "config_summary": cfg.summary(),
             "rtl_hash": rep.rtl_hash, "simulator": rep.simulator, "simulator_version": rep.simulator_version,
             "graph": str(rep.model), "graph_hash": file_hash(rep.model)}
    for k, v in props.items():
        suite.add_property(k, v)

    sim_span: dict[int, float] = {}
    for t in rep.tiles:
        sim_span[t.invocation] = sim_span.get(t.invocation, 0.0) + max(t.sim_ns[1] - t.sim_ns[0], 0.0)
    wall = {i.index: i.wall_seconds for i in rep.invocations}
    for t in rep.tiles:
        share = (t.sim_ns[1] - t.sim_ns[0]) / sim_span[t.invocation] if sim_span[t.invocation] > 0 else 0.0
        case = TestCase(f"inv{t.invocation}.tile_{t.tile}", f"layer{t.layer}.{t.layer_name}",
                        round(wall.get(t.invocation, 0.0) * share, 6))
        if not t.ok:
            if t.rtl_end < 0:
                msg = f"tile {t.tile} ({t.unit}, {t.box}): the RTL never finished it"
            elif t.n_mismatch:
                first = "; ".join(f"at {m['coords']} expected {m['expected']}, actual {m['actual']}"
                                  for m in t.mismatches)
                msg = f"tile {t.tile} ({t.unit}, {t.box}): {t.n_mismatch} element(s) differ: {first}"
            else:
                msg = f"tile {t.tile} ({t.unit}, {t.box}): done at cycle {t.rtl_end}, the cycle model says {t.golden_end}"
            fail = Failure(msg, "mismatch")
            fail.text = f"look at cycles {t.cycle_window[0]}..{t.cycle_window[1]} of invocation {t.invocation}"
            case.result = [fail]
        suite.add_testcase(case)
    for k, (index, name, op, reason) in ((i.index, h) for i in rep.invocations for h in rep.host_layers):
        case = TestCase(f"inv{k}.host_layer_{index}", f"layer{index}.{name}", 0.0)
        case.result = [Skipped(f"{op} runs on the host CPU model ({reason or 'not an NPU op'}); "
                               "checked through the network's outputs, not as a tile", "host")]
        suite.add_testcase(case)
    for k, n in rep.not_run.items():
        case = TestCase(f"inv{k}.tiles_not_run", "run", 0.0)
        case.result = [Skipped(f"{n} tile(s) not run: the simulation stopped at the first mismatch", "not run")]
        suite.add_testcase(case)
    for i in rep.invocations:
        case = TestCase(f"inv{i.index}", "invocation", round(i.wall_seconds, 6))
        if not i.ok:
            what = []
            if i.status != i.golden_status:
                what.append(f"status {i.status}, golden {i.golden_status}")
            if i.model_cycles is not None and i.rtl_cycles != i.model_cycles:
                what.append(f"{i.rtl_cycles} cycles, the cycle model says {i.model_cycles}")
            if not i.outputs_match:
                what.append("the outputs differ from golden's")
            if not i.variables_match:
                what.append("the variable SRAM differs from golden's")
            if i.note:
                what.append(i.note)
            case.result = [Failure("; ".join(what) or "differs from golden", "mismatch")]
        suite.add_testcase(case)
    for name, ok in rep.output_checks.items():
        case = TestCase(name.replace(" ", "_"), "outputs", 0.0)
        if not ok:
            case.result = [Failure(f"{name} does not hold", "mismatch")]
        suite.add_testcase(case)
    suite.update_statistics()
    suite.time = round(rep.wall_seconds, 3)
    return suite


def crashed_suite(name: str, started: float, seconds: float, error: str, properties: dict[str, str]) -> TestSuite:
    """A run that ended without a report (a simulator crash, a bug): one errored case."""
    suite = TestSuite(name)
    suite.timestamp = _timestamp(started)
    for k, v in properties.items():
        suite.add_property(k, v)
    case = TestCase("run", "run", round(seconds, 3))
    head, _, _ = error.partition("\n")
    err = Error(head[:500], error.split(":", 1)[0] if ":" in head else "error")
    err.text = error
    case.result = [err]
    suite.add_testcase(case)
    suite.update_statistics()
    suite.time = round(seconds, 3)
    return suite


def _totals(xml: JUnitXml) -> None:
    """The <testsuites> counts from its suites' own. Not junitparser's update_statistics(), which
    would reset each suite's time to the sum of its cases' and lose the run's set-up (compile,
    golden model, RTL build, oracles)."""
    suites = list(xml)
    xml.tests = sum(s.tests for s in suites)
    xml.failures = sum(s.failures for s in suites)
    xml.errors = sum(s.errors for s in suites)
    xml.skipped = sum(s.skipped for s in suites)
    xml.time = round(sum(s.time or 0.0 for s in suites), 3)


def _text(xml: JUnitXml) -> str:
    text = xml.tostring()
    return text.decode() if isinstance(text, bytes) else text


def write_suite(suite: TestSuite, path: Path) -> Path:
    from sim.cli.files import write_text_atomic

    xml = JUnitXml()
    xml.add_testsuite(suite)
    _totals(xml)
    write_text_atomic(path, _text(xml))
    return path


def merge(suites: list[TestSuite], path: Path, name: str = "npu-regress") -> JUnitXml:
    """One <testsuites> of all the runs' suites; the names must be unique (they are per graph x
    configuration x simulator), or a merged report would hide one run behind another."""
    from sim.cli.files import write_text_atomic

    seen: set[str] = set()
    xml = JUnitXml(name)
    for s in suites:
        if s.name in seen:
            raise ValueError(f"two runs make the JUnit suite {s.name!r}")
        seen.add(s.name)
        xml.add_testsuite(s)
    _totals(xml)
    write_text_atomic(path, _text(xml))
    return xml
