"""Benchmark: npu-bench's TOSA kernels and interpreter against Arm's reference model.

    python -m sim.benchmarks.interpreter [--repeat N] [--no-cli] [--only kernels|conformance|models]
                                    [--conformance DIR_OR_TARBALL] [--models DIR]

Sections (each prints our time, the reference model's time and the ratio ours / reference;
below 1 means npu-bench is faster):

1. kernels: large single ops, among them the CONV2D 1x112x112x32 -> 64 channels 3x3 and the
   DEPTHWISE_CONV2D 1x112x112x64 3x3. "ours" is the kernel on in-memory arrays (best of N runs)
   and the same one-op graph through our reader and interpreter; the reference model runs the
   serialized graph in-process (`tosa_reference_model.run`, best of N) and from its command
   line (one process per run, best of N, start-up and .npy I/O included). Every result is
   checked bit for bit against the reference model first.
2. conformance: every positive test of Arm's conformance set (a folder of desc.json tests or a
   .tar.gz of one; default: the shared developer set when present). Ours = read + interpret each
   graph; the reference in-process on the tests it can take (no int48 graph inputs/outputs) and
   its command line on a sample (every Nth test: one process per test is slow). Our outputs are compared with the tests' expected files.
3. models: the real networks in models/ (first invocation), ours vs the reference model.

Not part of `make test`; tosa-tools must be installed (the `test` extra).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

import numpy as np

from sim.paths import REPO_ROOT
from firmware_model.tosa_ops.dtypes import DType
from firmware_model.tosa_ops.registry import TensorSpec, run_op
from sim.oracles.arm_oracle import (OpCase, Operand, build_graph, quiet_fds, refmodel_cli, run_cli_files,
                            run_reference)

ROOT = REPO_ROOT
BUILD = ROOT / "build" / "bench"
SHARED_DEV = Path(os.environ.get("NPU_SHARED", ROOT.parent / "shared")) / "conformance" / "cts-dev.tar.gz"

I8, I16, I32, I48 = DType.INT8, DType.INT16, DType.INT32, DType.INT48


def _best(fn, repeat: int) -> float:
    fn()  # warm-up (imports, caches, BLAS threads)
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def _ms(t: float | None) -> str:
    return "      -" if t is None else f"{t * 1e3:9.2f}"


def _ratio(ours: float | None, ref: float | None) -> str:
    return "      -" if not ours or not ref else f"{ours / ref:7.3f}"


# ----------------------------------------------------------------------------------------------
# 1. Large kernels

def _zp(v: int, t: DType) -> Operand:
    return Operand(np.array([v], t.storage), t, True)


def large_cases(rng) -> list[tuple[str, OpCase]]:
    r = lambda t, shape: rng.integers(t.min, t.max + 1, shape, dtype=np.int64).astype(t.storage)
    conv_attrs = dict(pad=[1, 1, 1, 1], stride=[1, 1], dilation=[1, 1], local_bound=False,
                      acc_type=int(I32))
    cases = [
        ("CONV2D 1x112x112x32 -> 64, 3x3, int8",
         OpCase("CONV2D", [Operand(r(I8, (1, 112, 112, 32)), I8), Operand(r(I8, (64, 3, 3, 32)), I8, True),
                           Operand(r(I32, (64,)), I32, True), _zp(-5, I8), _zp(3, I8)],
                [TensorSpec((1, 112, 112, 64), I32)], conv_attrs)),
        ("DEPTHWISE_CONV2D 1x112x112x64, 3x3, int8",
         OpCase("DEPTHWISE_CONV2D", [Operand(r(I8, (1, 112, 112, 64)), I8), Operand(r(I8, (3, 3, 64, 1)), I8, True),
                                     Operand(r(I32, (64,)), I32, True), _zp(-5, I8), _zp(3, I8)],
                [TensorSpec((1, 112, 112, 64), I32)], conv_attrs)),
        ("CONV2D 1x56x56x64 -> 128, 3x3 s2, int8",
         OpCase("CONV2D", [Operand(r(I8, (1, 56, 56, 64)), I8), Operand(r(I8, (128, 3, 3, 64)), I8, True),
                           Operand(r(I32, (128,)), I32, True), _zp(7, I8), _zp(0, I8)],
                [TensorSpec((1, 28, 28, 128), I32)],
                dict(conv_attrs, pad=[0, 1, 0, 1], stride=[2, 2]))),
        ("TRANSPOSE_CONV2D 1x28x28x64 -> 32, 3x3 s2, int8",
         OpCase("TRANSPOSE_CONV2D", [Operand(r(I8, (1, 28, 28, 64)), I8), Operand(r(I8, (32, 3, 3, 64)), I8, True),
                                     Operand(r(I32, (32,)), I32, True), _zp(1, I8), _zp(-2, I8)],
                [TensorSpec((1, 56, 56, 32), I32)],
                dict(out_pad=[0, -1, 0, -1], stride=[2, 2], local_bound=False, acc_type=int(I32)))),
        ("MATMUL 4x256x256 @ 4x256x256, int8",
         OpCase("MATMUL", [Operand(r(I8, (4, 256, 256)), I8), Operand(r(I8, (4, 256, 256)), I8),
                           _zp(3, I8), _zp(-9, I8)], [TensorSpec((4, 256, 256), I32)], {})),
        ("AVG_POOL2D 1x112x112x64, 3x3 s1 pad 1, int8",
         OpCase("AVG_POOL2D", [Operand(r(I8, (1, 112, 112, 64)), I8), _zp(-3, I8), _zp(4, I8)],
                [TensorSpec((1, 112, 112, 64), I8)],
                dict(kernel=[3, 3], stride=[1, 1], pad=[1, 1, 1, 1], acc_type=int(I32)))),
        ("MAX_POOL2D 1x112x112x64, 3x3 s2, int8",
         OpCase("MAX_POOL2D", [Operand(r(I8, (1, 112, 112, 64)), I8)], [TensorSpec((1, 56, 56, 64), I8)],
                dict(kernel=[3, 3], stride=[2, 2], pad=[0, 1, 0, 1], nan_mode=1))),
        ("RESCALE 1x112x112x64 int32 -> int8, per-channel, double round",
         OpCase("RESCALE", [Operand(r(I32, (1, 112, 112, 64)) >> 8, I32),
                            Operand(rng.integers(1 << 30, 1 << 31, 64).astype(np.int32), I32, True),
                            Operand(rng.integers(30, 40, 64).astype(np.int8), I8, True),
                            _zp(0, I32), _zp(-7, I8)], [TensorSpec((1, 112, 112, 64), I8)],
                dict(scale32=True, rounding_mode=3, per_channel=True, input_unsigned=False,
                     output_unsigned=False))),
        ("TABLE 1x112x112x64 int16 -> int32",
         OpCase("TABLE", [Operand(r(I16, (1, 112, 112, 64)), I16),
                          Operand(np.clip(np.cumsum(rng.integers(-200, 201, 513)), -32768, 32767)
                                  .astype(np.int16), I16, True)],
                [TensorSpec((1, 112, 112, 64), I32)], {})),
    ]
    return cases


def _interpreter_runner(graph_bytes: bytes, feeds: list[np.ndarray]):
    """Our reader + interpreter on a serialized graph (None when they are not available)."""
    try:
        from compiler.interpreter import Interpreter
        from compiler.tosa_io import read_tosa_bytes
    except ImportError:
        return None
    graph = read_tosa_bytes(graph_bytes, "<bench>")
    names = graph.main.inputs
    inputs = dict(zip(names, feeds))
    return lambda: Interpreter(graph).run(inputs)


def _cli_runner(graph_bytes: bytes, feeds: list[np.ndarray], n_out: int, workdir: Path):
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "test.tosa").write_bytes(graph_bytes)
    for i, a in enumerate(feeds):
        np.save(workdir / f"input-{i}.npy", a)

    def run():
        r = run_cli_files(workdir, len(feeds), n_out)
        if r.returncode != 0:
            raise RuntimeError(f"reference model command line failed ({r.returncode}): {r.stderr[-500:]}")
    return run


def bench_kernels(repeat: int, use_cli: bool) -> None:
    import tosa_reference_model as trm
    print("== 1. large kernels (ms, best of %d; ratio = ours / reference)" % repeat)
    print(f"{'case':<58}{'ours':>9}{'interp':>9}{'ref':>9}{'ref CLI':>9}{'ratio':>8}{'r(IR)':>8}{'r(CLI)':>8}")
    rng = np.random.default_rng(2026)
    with tempfile.TemporaryDirectory(prefix="npu-bench-") as tmp:
        for name, case in large_cases(rng):
            ref = run_reference(case)
            call = case.op_call()
            ours = run_op(call)
            if ref.status != "VALID" or not all(o.dtype == r.dtype and np.array_equal(o, r)
                                                for o, r in zip(ours, ref.outputs)):
                print(f"{name:<58} MISMATCH with the reference model ({ref.status}): not timed")
                continue
            t_ours = _best(lambda: run_op(call), repeat)
            graph, feeds = build_graph(case)
            interp = _interpreter_runner(graph, feeds)
            t_ir = _best(interp, repeat) if interp else None

            def ref_run():
                with quiet_fds():
                    trm.run(graph, feeds)
            t_ref = None if case.uses_int48 else _best(ref_run, repeat)
            t_cli = None
            if use_cli:
                t_cli = _best(_cli_runner(graph, feeds, len(case.outputs), Path(tmp) / name.split()[0]),
                              max(1, min(repeat, 3)))
            print(f"{name:<58}{_ms(t_ours)}{_ms(t_ir)}{_ms(t_ref)}{_ms(t_cli)}"
                  f"{_ratio(t_ours, t_ref)}{_ratio(t_ir, t_ref)}{_ratio(t_ir, t_cli)}")
    print("   ours = the kernel on arrays; interp = the one-op graph run by our interpreter;")
    print("   ref = tosa_reference_model.run in-process; ref CLI = one tosa_reference_model process")
    print("   ratio = ours/ref, r(IR) = interp/ref, r(CLI) = interp/ref CLI")


# ----------------------------------------------------------------------------------------------
# 2. Conformance set

def conformance_root(arg: str | None) -> Path | None:
    src = Path(arg) if arg else SHARED_DEV
    if not src.exists():
        return None
    if src.is_dir():
        return src
    dest = BUILD / "conformance"
    marker = dest / (src.name + ".unpacked")
    if not marker.exists():
        dest.mkdir(parents=True, exist_ok=True)
        with tarfile.open(src) as tf:
            tf.extractall(dest, filter="data")
        marker.touch()
    return dest


def bench_conformance(arg: str | None, use_cli: bool, cli_sample: int = 10) -> None:
    print("\n== 2. conformance set")
    root = conformance_root(arg)
    if root is None:
        print(f"   skipped: no conformance set (give --conformance DIR|TARBALL; default {SHARED_DEV})")
        return
    try:
        from compiler.interpreter import Interpreter
        from compiler.tosa_io import read_tosa
    except ImportError as e:
        print(f"   skipped: the reader or interpreter is not available ({e})")
        return
    import tosa_reference_model as trm
    from firmware_model.tosa_ops.registry import supported_ops
    # The kernel modules load on first use (~20 ms, once per process): loaded here, before the
    # timed loop, as Arm's model is loaded by the import above (its first call is ~0.3 ms).
    # Otherwise the first test carries our one-time import and Arm's does not.
    supported_ops()

    descs = sorted(p for p in root.rglob("desc.json"))
    n_tests = n_pos = n_inproc = mism = failed = 0
    t_ours = t_ours_sub = t_read = t_read_sub = t_ref = t_cli = t_ours_cli = 0.0
    n_cli = 0
    with tempfile.TemporaryDirectory(prefix="npu-bench-cts-") as tmp:
        for desc_path in descs:
            d = desc_path.parent
            desc = json.loads(desc_path.read_text())
            n_tests += 1
            if desc.get("expected_failure"):
                continue
            n_pos += 1
            t_read_start = time.perf_counter()
            graph = read_tosa(d / desc.get("tosa_file", "test.tosa"))
            t1 = time.perf_counter()
            t_read += t1 - t_read_start
            files = dict(zip(desc["ifm_name"], desc["ifm_file"]))
            inputs = {n: np.load(d / f) for n, f in files.items()}
            try:
                t0 = time.perf_counter()
                outs = Interpreter(graph).run(inputs)
                dt = time.perf_counter() - t0
            except Exception as e:  # noqa: BLE001 - counted and reported, not fatal
                failed += 1
                print(f"   ours failed on {d.relative_to(root)}: {type(e).__name__}: {e}")
                continue
            t_ours += dt
            for name, f in zip(desc["ofm_name"], desc["ofm_file"]):
                exp = d / f"expected_{f}"
                if not exp.exists():
                    exp = d / f.replace("ref-", "expected_ref-")
                if exp.exists():
                    e = np.load(exp)
                    o = outs.get(name)
                    if o is None or o.dtype != e.dtype or o.shape != e.shape or not np.array_equal(o, e):
                        mism += 1
            main = graph.main
            io_names = list(main.inputs) + list(main.outputs)
            if all(main.tensors[n].dtype != DType.INT48 for n in io_names):
                blob = (d / desc.get("tosa_file", "test.tosa")).read_bytes()
                feeds = [inputs[n] for n in main.inputs]
                with quiet_fds():
                    t0 = time.perf_counter()
                    trm.run(blob, feeds)
                    t_ref += time.perf_counter() - t0
                t_ours_sub += dt
                t_read_sub += t1 - t_read_start
                n_inproc += 1
            if use_cli and n_pos % cli_sample == 0:
                cmd = [refmodel_cli(), "--test_desc", str(desc_path), "--flatbuffer_dir", str(d),
                       "--output_dir", tmp]
                t0 = time.perf_counter()
                subprocess.run(cmd, capture_output=True)
                t_cli += time.perf_counter() - t0
                t_ours_cli += dt + (t1 - t_read_start)
                n_cli += 1
    print(f"   {root}: {n_tests} tests, {n_pos} positive; ours failed on {failed}, "
          f"{mism} outputs differ from the expected files")
    print(f"   ours (interpreter, all positive tests):     {t_ours:8.3f} s  (+ {t_read:.3f} s reading .tosa)")
    print(f"   ours on the {n_inproc} tests the in-process model takes: {t_ours_sub:8.3f} s")
    print(f"   reference in-process (same {n_inproc} tests):     {t_ref:8.3f} s   ratio {_ratio(t_ours_sub, t_ref)}")
    # Arm's time includes parsing the flatbuffer; ours above does not (read_tosa is timed apart)
    print(f"   ours with read_tosa on the same tests:       {t_ours_sub + t_read_sub:8.3f} s   ratio "
          f"{_ratio(t_ours_sub + t_read_sub, t_ref)} (the reference's time includes its parsing)")
    if use_cli and n_cli:
        print(f"   reference command line, every {cli_sample}th positive test ({n_cli} tests): "
              f"{t_cli:8.3f} s ({t_cli / n_cli * 1e3:.1f} ms/test, one process each); ours incl. "
              f"reading on the same tests {t_ours_cli:.3f} s, ratio {_ratio(t_ours_cli, t_cli)}")


# ----------------------------------------------------------------------------------------------
# 3. Real networks

def bench_models(models_dir: Path, repeat: int, use_cli: bool) -> None:
    print("\n== 3. real networks (first invocation; ms, best of %d)" % repeat)
    try:
        from compiler.interpreter import Interpreter
        from compiler.tosa_io import read_tosa
    except ImportError as e:
        print(f"   skipped: the reader or interpreter is not available ({e})")
        return
    import tosa_reference_model as trm
    dirs = sorted(p.parent for p in models_dir.glob("*/model.tosa"))
    if not dirs:
        print(f"   skipped: no models under {models_dir}")
        return
    print(f"{'model':<16}{'ours':>9}{'ref':>9}{'ref CLI':>9}{'ratio':>8}{'r(CLI)':>8}  output")
    for d in dirs:
        graph = read_tosa(d / "model.tosa")
        blob = (d / "model.tosa").read_bytes()
        name = graph.main.inputs[0]
        x_file = d / "input_0.npy" if (d / "input_0.npy").exists() else d / "input_0_inv0.npy"
        ref_file = d / "ref_output_0.npy" if (d / "ref_output_0.npy").exists() else d / "ref_output_0_inv0.npy"
        x = np.load(x_file)
        outs = Interpreter(graph).run({name: x})
        got = outs[graph.main.outputs[0]]
        want = np.load(ref_file)
        same = got.dtype == want.dtype and got.shape == want.shape and np.array_equal(got, want)
        t_ours = _best(lambda: Interpreter(graph).run({name: x}), repeat)

        def ref_run():
            with quiet_fds():
                trm.run(blob, [x])
        t_ref = _best(ref_run, repeat)
        t_cli = None
        if use_cli:
            def cli():
                with tempfile.TemporaryDirectory() as tmp:
                    subprocess.run([refmodel_cli(), "--tosa_file", "model.tosa", "--flatbuffer_dir", str(d),
                                    "--output_dir", tmp, "--ifm_name", name, "--ifm_file", str(x_file),
                                    "--ofm_name", graph.main.outputs[0], "--ofm_file", "out.npy"],
                                   capture_output=True, check=True)
            t_cli = _best(cli, max(1, min(repeat, 3)))
        print(f"{d.name:<16}{_ms(t_ours)}{_ms(t_ref)}{_ms(t_cli)}{_ratio(t_ours, t_ref)}"
              f"{_ratio(t_ours, t_cli)}  {'bit-exact' if same else 'DIFFERS from ref_output'}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m sim.benchmarks.interpreter", description=__doc__.split("\n\n")[0])
    p.add_argument("--repeat", type=int, default=5, help="timed runs per case (best is kept)")
    p.add_argument("--no-cli", action="store_true", help="skip the reference model's command line")
    p.add_argument("--only", choices=["kernels", "conformance", "models"], action="append")
    p.add_argument("--conformance", help="a conformance folder or .tar.gz (default: the shared dev set)")
    p.add_argument("--cli-sample", type=int, default=10,
                   help="run the reference model's command line on every Nth conformance test")
    p.add_argument("--models", default=str(ROOT / "models"), help="folder of real networks")
    args = p.parse_args(argv)
    only = set(args.only or ["kernels", "conformance", "models"])
    os.environ.setdefault("TOSA_MODEL_NO_BACKTRACE", "1")
    if "kernels" in only:
        bench_kernels(args.repeat, not args.no_cli)
    if "conformance" in only:
        bench_conformance(args.conformance, not args.no_cli, max(1, args.cli_sample))
    if "models" in only:
        bench_models(Path(args.models), args.repeat, not args.no_cli)
    return 0


if __name__ == "__main__":
    sys.exit(main())
