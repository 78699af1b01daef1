"""A compiled NPU program: command stream, constants image and manifest, on disk and in memory.

Directory layout (what `npu compile -o OUTDIR` writes):
    commands.bin   64-bit little-endian command words (firmware_model/arch/isa.py)
    constants.bin  bytes loaded at manifest["memory"]["constants"]["addr"] in external memory
    manifest.json  everything else: configuration, tensor placements, variables, host ops,
                   layers and tiles (docs/program_format.md describes each field)
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from firmware_model.errors import NpuBenchError
from firmware_model.arch.isa import ISA_VERSION, Command, Opcode, pack, unpack
from firmware_model.tosa_ops.dtypes import DType

FORMAT = "npu-bench program"


class ProgramFormatError(NpuBenchError):
    """A program directory that is missing files or does not match this ISA version."""


@dataclass
class Placement:
    """A tensor in external memory: dense, row-major, little-endian DType storage elements."""
    name: str
    addr: int
    shape: list[int]
    dtype: DType

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) * self.dtype.size_bytes

    def to_json(self) -> dict:
        return {"name": self.name, "addr": self.addr, "shape": list(self.shape), "dtype": self.dtype.name}

    @staticmethod
    def from_json(d: dict) -> "Placement":
        return Placement(d["name"], int(d["addr"]), [int(x) for x in d["shape"]], DType[d["dtype"]])


@dataclass
class Program:
    commands: list[Command]
    constants: bytes
    manifest: dict = field(default_factory=dict)

    # --- views of the manifest ---------------------------------------------------------
    @property
    def constants_addr(self) -> int:
        return int(self.manifest["memory"]["constants"]["addr"])

    @property
    def inputs(self) -> list[Placement]:
        return [Placement.from_json(d) for d in self.manifest["graph"]["inputs"]]

    @property
    def outputs(self) -> list[Placement]:
        return [Placement.from_json(d) for d in self.manifest["graph"]["outputs"]]

    @property
    def tiles(self) -> list[dict]:
        return [t for layer in self.manifest.get("layers", []) for t in layer.get("tiles", [])]

    # --- views of the commands ----------------------------------------------------------
    def registers_at(self, opcode) -> list[tuple[Command, dict[int, int]]]:
        """Each command `opcode` with the register file as the stream leaves it when that command
        runs (the SETs before it, from an all-zero reset; register number -> value)."""
        regs: dict[int, int] = {}
        out = []
        for c in self.commands:
            if c.opcode == Opcode.SET:
                regs[c.sub] = c.value
            elif c.opcode == opcode:
                out.append((c, dict(regs)))
        return out

    # --- files -------------------------------------------------------------------------
    def save(self, outdir: str | Path) -> None:
        out = Path(outdir)
        manifest = dict(self.manifest)
        manifest["format"] = FORMAT
        manifest["isa_version"] = ISA_VERSION
        try:
            out.mkdir(parents=True, exist_ok=True)
            (out / "commands.bin").write_bytes(pack(self.commands))
            (out / "constants.bin").write_bytes(self.constants)
            (out / "manifest.json").write_text(json.dumps(manifest, indent=1))
        except OSError as e:
            raise ProgramFormatError(f"cannot write the program to {out}: {e.strerror or e}") from None

    @staticmethod
    def load(indir: str | Path) -> "Program":
        d = Path(indir)
        for name in ("commands.bin", "constants.bin", "manifest.json"):
            if not (d / name).is_file():
                raise ProgramFormatError(f"{d}: not a compiled program (no {name})")
        try:
            manifest = json.loads((d / "manifest.json").read_text())
        except json.JSONDecodeError as e:
            raise ProgramFormatError(f"{d / 'manifest.json'}: not valid JSON ({e})") from None
        if manifest.get("format") != FORMAT:
            raise ProgramFormatError(f"{d / 'manifest.json'}: not an npu-bench program manifest")
        if manifest.get("isa_version") != ISA_VERSION:
            raise ProgramFormatError(f"{d}: compiled for ISA version {manifest.get('isa_version')}, "
                                     f"this npu-bench executes version {ISA_VERSION}")
        return Program(unpack((d / "commands.bin").read_bytes()), (d / "constants.bin").read_bytes(), manifest)
