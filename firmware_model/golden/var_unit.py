"""The VAR command: TOSA variables in the persistent variable SRAM.

A variable lives in a *slot* the compiler assigns: VAR_BYTES bytes at byte address VAR_ADDR of
the variable SRAM (word-aligned: words are `mac.cols` bytes) and the written flag number VAR_SLOT
(`isa.VAR_SLOTS` flags). Contents and flags persist across invocations; only a power-on reset
clears them (`Memories.power_on_reset`). VAR_EXT_ADDR is the external-memory side:

    VAR INIT   if the slot's flag is clear: slot := VAR_BYTES bytes at VAR_EXT_ADDR (the variable's
               initial value in the constants image), flag := set. Otherwise nothing: the value
               written by an earlier invocation stays. (TOSA: the declaration allocates the
               variable with its initial value on the first invocation only.)
    VAR READ   external memory at VAR_EXT_ADDR := the slot; a clear flag is VAR_READ_BEFORE_WRITE
               (TOSA: REQUIRE(is_written)): the program stops, nothing is copied.
    VAR WRITE  slot := VAR_BYTES bytes at VAR_EXT_ADDR, flag := set.
    VAR CHECK  a clear flag is VAR_READ_BEFORE_WRITE; nothing moves.
    VAR MARK   flag := set; nothing moves.

CHECK and MARK serve a variable the compiler keeps in external memory (its *home*, in the constants
image, holding its initial value from program load): the DMA copies its bytes, these keep its flag.
Only VAR_SLOT matters to them (checked as for every mode).

Faults (the command processor stops with the status): a `sub` that is no VarOp is BAD_MODE; a
VAR_SLOT >= VAR_SLOTS, a VAR_ADDR that is not word-aligned, or bytes outside the variable SRAM
or the external memory are ADDRESS_RANGE.

`var_plan` checks a command's registers; `var_flags` applies the written-flag rules (which decide
whether INIT loads and whether READ faults) to any flag array: the golden model's memories here,
the timing-only model's own flags (timing_model.py).

`save_state` / `load_state` carry the variable SRAM across processes (`npu run --backend golden
--state FILE`): the SRAM image, the slot flags and the program's variable layout, plus each
written variable's value by name (the interpreter's state-file format, so either backend can read
what the other wrote).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Mapping

import numpy as np

from firmware_model.errors import GoldenModelError
from firmware_model.arch.isa import VAR_SLOTS, Sram, Status, VarOp
from firmware_model.arch.registers import Registers
from firmware_model.golden.memories import Memories, check_range
from firmware_model.arch.config import NpuConfig
from firmware_model.arch.cycle_model import var_busy_cycles
from firmware_model.tosa_ops.dtypes import DType, value_problem


@dataclass
class VarResult:
    op: VarOp
    cycles: int         # the DMA engine's busy clocks for the transfer (0: none)
    bytes: int          # bytes moved between the slot and external memory
    slot: int


@dataclass(slots=True)
class VarPlan:
    """A VAR command's registers, checked (var_plan): what it would move and what that costs.
    Whether it moves anything, or faults, depends on the slot's written flag (var_flags)."""
    op: VarOp
    slot: int
    addr: int
    nbytes: int
    ext: int
    cycles: int         # the DMA engine's busy clocks for a transfer (0 for CHECK and MARK)
    what: str           # how messages name the command and its variable


def var_plan(cfg: NpuConfig, regs, sub: int, names: Mapping[int, str] | None = None) -> VarPlan:
    """The checks of VAR `sub` that do not depend on the slot flags (the mode, the slot number,
    and for INIT, READ and WRITE the bytes on both sides), from the registers (a dict or a
    `Registers` view); `names` (slot -> variable name) only makes messages name the variable."""
    try:
        op = VarOp(sub)
    except ValueError:
        raise GoldenModelError(f"VAR mode {sub} does not exist", Status.BAD_MODE) from None
    r = regs if isinstance(regs, Registers) else Registers(regs)
    addr, nbytes, slot, ext = r.var_addr, r.var_bytes, r.var_slot, r.var_ext_addr
    what = f"VAR {op.name} slot {slot}" + (f" (variable '{names[slot]}')" if names and slot in names else "")
    if slot >= VAR_SLOTS:
        raise GoldenModelError(f"{what}: there are {VAR_SLOTS} variable slots", Status.ADDRESS_RANGE)
    if op in (VarOp.CHECK, VarOp.MARK):
        return VarPlan(op, slot, addr, nbytes, ext, 0, what)
    if nbytes == 0:
        raise GoldenModelError(f"{what}: VAR_BYTES is 0 (a slot holds at least one byte)", Status.ADDRESS_RANGE)
    if addr % cfg.word_bytes:
        raise GoldenModelError(f"{what}: VAR_ADDR {addr} is not a multiple of the {cfg.word_bytes}-byte word",
                               Status.ADDRESS_RANGE)
    check_range(cfg, Sram.VARIABLE, addr, addr + nbytes, what)
    check_range(cfg, "ext", ext, ext + nbytes, what)
    return VarPlan(op, slot, addr, nbytes, ext, var_busy_cycles(cfg, sram_addr=addr, nbytes=nbytes), what)


def var_flags(plan: VarPlan, slots) -> int:
    """The written-flag rules of a checked VAR command on `slots` (the flags, indexable by slot;
    updated in place): the bytes it moves (0: none), or VAR_READ_BEFORE_WRITE for READ and CHECK
    of a clear flag (nothing changes then). INIT moves only into a clear slot; INIT, WRITE and
    MARK set the flag."""
    op, slot = plan.op, plan.slot
    if op == VarOp.CHECK or op == VarOp.READ:
        if not slots[slot]:
            raise GoldenModelError(f"{plan.what}: the variable is read before it is written (REQUIRE is_written)",
                                   Status.VAR_READ_BEFORE_WRITE)
        return plan.nbytes if op == VarOp.READ else 0
    if op == VarOp.MARK:
        slots[slot] = True
        return 0
    if op == VarOp.INIT and slots[slot]:
        return 0
    slots[slot] = True
    return plan.nbytes


def execute_var(cfg: NpuConfig, mem: Memories, regs: dict[int, int], sub: int,
                names: Mapping[int, str] | None = None, plan: VarPlan | None = None) -> VarResult:
    """Execute VAR `sub` with the registers as they are (var_plan, var_flags on the memories'
    slot flags); `names` (slot -> variable name, from the program's manifest) only makes messages
    name the variable. `plan`: var_plan of these registers, made before."""
    if plan is None:
        plan = var_plan(cfg, regs, sub, names)
    moved = var_flags(plan, mem.variable_slots)
    if moved:
        addr, ext, n = plan.addr, plan.ext, plan.nbytes
        var = mem.sram[Sram.VARIABLE]
        if plan.op == VarOp.READ:
            mem.ext[ext:ext + n] = var[addr:addr + n]
        else:
            var[addr:addr + n] = mem.ext[ext:ext + n]
            mem.variable_written[addr:addr + n] = True
    return VarResult(plan.op, plan.cycles if moved else 0, moved, plan.slot)


def _mark_written(mem: Memories, slot: int, addr: int, nbytes: int) -> None:
    mem.variable_slots[slot] = True
    mem.variable_written[addr:addr + nbytes] = True


# --- persistent state across processes ---------------------------------------------------------

STATE_PREFIX = "__npu_"
SRAM_KEY, FLAGS_KEY, LAYOUT_KEY = STATE_PREFIX + "variable_sram", STATE_PREFIX + "slot_written", STATE_PREFIX + "layout"


def check_image(arrays: Mapping[str, np.ndarray]) -> None:
    """The SRAM image's three arrays must have the types save_state writes: a NaN or a float
    where a flag belongs would otherwise be read as "written"."""
    image, flags, layout = (np.asarray(arrays[k]) for k in (SRAM_KEY, FLAGS_KEY, LAYOUT_KEY))
    if image.dtype != np.uint8 or image.ndim != 1:
        raise GoldenModelError(f"the variable-SRAM image '{SRAM_KEY}' is {image.dtype}{list(image.shape)}, "
                               "not a row of bytes (uint8)")
    if flags.dtype != np.bool_ or flags.shape != (VAR_SLOTS,):
        raise GoldenModelError(f"the slot flags '{FLAGS_KEY}' are {flags.dtype}{list(flags.shape)}, not "
                               f"{VAR_SLOTS} booleans")
    if layout.ndim != 0 or layout.dtype.kind != "U":
        raise GoldenModelError(f"the variable layout '{LAYOUT_KEY}' is {layout.dtype}{list(layout.shape)}, not "
                               "one JSON string")


@dataclass(frozen=True)
class VariableSlot:
    """One entry of a program's variable layout (manifest["variables"])."""
    name: str
    shape: tuple[int, ...]
    dtype: DType
    addr: int                   # in the variable SRAM (placement "sram")
    nbytes: int
    slot: int
    placement: str = "sram"     # or "external": the bytes live at `home` in external memory
    home: int | None = None

    @staticmethod
    def from_json(d: dict) -> "VariableSlot":
        home = d.get("home")
        return VariableSlot(d["name"], tuple(int(x) for x in d["shape"]), DType[d["dtype"]], int(d["addr"]),
                            int(d["bytes"]), int(d["slot"]), d.get("placement", "sram"),
                            None if home is None else int(home))

    def to_json(self) -> dict:
        return {"name": self.name, "shape": list(self.shape), "dtype": self.dtype.name, "addr": self.addr,
                "bytes": self.nbytes, "slot": self.slot, "placement": self.placement, "home": self.home}

    @property
    def external(self) -> bool:
        return self.placement == "external"

    def read(self, mem: Memories) -> np.ndarray:
        """The variable's bytes where they live."""
        if self.external:
            return mem.ext[self.home:self.home + self.nbytes].copy()
        return mem.sram[Sram.VARIABLE][self.addr:self.addr + self.nbytes].copy()

    def write(self, mem: Memories, raw: np.ndarray) -> None:
        """Put the variable's bytes where they live and mark it written."""
        if self.external:
            mem.ext[self.home:self.home + self.nbytes] = raw
            mem.variable_slots[self.slot] = True
        else:
            mem.sram[Sram.VARIABLE][self.addr:self.addr + self.nbytes] = raw
            _mark_written(mem, self.slot, self.addr, self.nbytes)

    def decode(self, raw: np.ndarray) -> np.ndarray:
        st = self.dtype.storage
        return raw.view(st.newbyteorder("<")).astype(st).reshape(self.shape)

    def encode(self, value: np.ndarray) -> np.ndarray:
        st = self.dtype.storage
        return np.ascontiguousarray(value, dtype=st.newbyteorder("<")).view(np.uint8).reshape(-1)


def program_layout(manifest: dict) -> list[VariableSlot]:
    return [VariableSlot.from_json(d) for d in manifest.get("variables", [])]


def save_state(mem: Memories, layout: list[VariableSlot]) -> dict[str, np.ndarray]:
    """The variable SRAM as arrays for a state file: image, flags, layout, values by name."""
    var = mem.sram[Sram.VARIABLE]
    arrays: dict[str, np.ndarray] = {
        SRAM_KEY: var.copy(),
        FLAGS_KEY: mem.variable_slots.copy(),
        LAYOUT_KEY: np.array(json.dumps([v.to_json() for v in layout])),
    }
    for v in layout:
        if mem.variable_slots[v.slot]:
            arrays[v.name] = v.decode(v.read(mem))
    return arrays


def load_state(mem: Memories, layout: list[VariableSlot], arrays: Mapping[str, np.ndarray]) -> None:
    """Put a saved state into the variable SRAM of this program's layout.

    With an SRAM image (written by `save_state`), each variable's bytes and written flag move from
    its slot in the saved layout to its slot in this one; the saved variables must be this
    program's (names, shapes, types). Without one (the interpreter's format: values by name), the
    values are written into their slots and marked written. A mismatch changes nothing and is a
    GoldenModelError naming the variable.
    """
    by_name = {v.name: v for v in layout}
    known = ", ".join(sorted(by_name)) or "none"
    var = mem.sram[Sram.VARIABLE]
    if LAYOUT_KEY in arrays:
        try:
            check_image(arrays)
            saved = [VariableSlot.from_json(d) for d in json.loads(str(arrays[LAYOUT_KEY]))]
            image, flags = np.asarray(arrays[SRAM_KEY], np.uint8), np.asarray(arrays[FLAGS_KEY], bool)
        except (KeyError, ValueError, TypeError) as e:
            raise GoldenModelError(f"the variable-SRAM state is damaged ({type(e).__name__}: {e})") from None
        names = {s.name for s in saved}
        for s in saved:
            v = by_name.get(s.name)
            if v is None:
                raise GoldenModelError(f"the state holds variable '{s.name}', which the program does not have "
                                       f"(variables: {known})")
            if (s.shape, s.dtype) != (v.shape, v.dtype):
                raise GoldenModelError(f"the state's variable '{s.name}' is {s.dtype.name}{list(s.shape)}, the "
                                       f"program's is {v.dtype.name}{list(v.shape)}")
            if (not s.external and s.addr + s.nbytes > len(image)) or s.slot >= len(flags) or s.nbytes != v.nbytes:
                raise GoldenModelError(f"the state's slot of variable '{s.name}' lies outside its SRAM image")
            if s.external and flags[s.slot] and s.name not in arrays:
                raise GoldenModelError(f"the state's variable '{s.name}' (kept in external memory) is marked "
                                       f"written but its value is missing")
            if not s.external and s.name in arrays and not (
                    flags[s.slot] and np.array_equal(np.asarray(arrays[s.name]), s.decode(image[s.addr:s.addr + s.nbytes]))):
                # the value by name is what a user edits; one that disagrees with the image would be ignored
                raise GoldenModelError(f"the state's value of variable '{s.name}' disagrees with its variable-SRAM "
                                       f"image (edit the values of a file without the image, or neither)")
        missing = [v.name for v in layout if v.name not in names]
        if missing:
            raise GoldenModelError(f"the state has no slot for variable '{missing[0]}' of the program "
                                   f"(saved variables: {', '.join(sorted(names)) or 'none'})")
        for s in saved:
            v = by_name[s.name]
            written = bool(flags[s.slot])
            if s.external:       # its value is kept by name (when written); else the home's initial value stays
                if written:
                    v.write(mem, s.encode(np.asarray(arrays[s.name])))
                mem.variable_slots[v.slot] = written
                continue
            if v.external:
                if written:
                    v.write(mem, image[s.addr:s.addr + s.nbytes])
                mem.variable_slots[v.slot] = written
                continue
            var[v.addr:v.addr + v.nbytes] = image[s.addr:s.addr + s.nbytes]
            mem.variable_slots[v.slot] = written
            mem.variable_written[v.addr:v.addr + v.nbytes] = written
        return
    encoded = {}
    for name, value in arrays.items():
        if name.startswith(STATE_PREFIX):     # e.g. the list of variables with no value yet
            continue
        v = by_name.get(name)
        if v is None:
            raise GoldenModelError(f"the state has a value for '{name}', which is not a variable of the program "
                                   f"(variables: {known})")
        arr = np.asarray(value)
        problem = value_problem(arr, v.dtype, v.shape)
        if problem:
            raise GoldenModelError(f"the state of variable '{name}' {problem}")
        encoded[name] = v.encode(arr)
    for name, raw in encoded.items():
        by_name[name].write(mem, raw)
