"""TOSA element types: the schema's enum values, their widths and how numpy stores them.

The enum values are those of the TOSA flatbuffer schema (``DType``), so a reader can map the
file's integers straight onto this enum. INT48 has no numpy type: it travels as int64 (as in Arm's
reference model and runner) and every operation that produces it wraps or saturates to 48 bits
explicitly.
"""

from __future__ import annotations

import enum

import numpy as np

from firmware_model.errors import TosaUnsupported


class UnsupportedDType(TosaUnsupported, ValueError):
    """A type outside the integer profile where a value of it must be stored. Also a ValueError,
    for callers that only ask whether a type has a storage."""


class DType(enum.IntEnum):
    UNKNOWN = 0
    BOOL = 1
    INT4 = 2
    INT8 = 3
    INT16 = 4
    INT32 = 5
    INT48 = 6
    FP32 = 7
    FP16 = 8
    BF16 = 9
    SHAPE = 10
    FP8E4M3 = 11
    FP8E5M2 = 12
    FP6E2M3 = 13
    FP6E3M2 = 14
    FP4E2M1 = 15
    FP8UE8M0 = 16
    INT64 = 17
    MXINT8 = 18

    @property
    def is_integer(self) -> bool:
        return self in _INT_BITS

    @property
    def has_storage(self) -> bool:
        """Whether npu-bench can hold values of this type (the integer profile, bool, shape)."""
        return self in _STORAGE

    # Each type that has them carries, as plain attributes set below (kernels read them in every
    # prepare, and an attribute is read without a call):
    #   bits     width of the TOSA type in bits (the value range, not the storage)
    #   min      -(1 << (bits - 1))
    #   max      (1 << (bits - 1)) - 1
    #   umax     (1 << bits) - 1, the largest value of the unsigned reading (uint8/uint16 in RESCALE)
    #   storage  the numpy dtype that holds its values (int48 in int64, shape in int64)
    # The other types say why they have none:
    def __getattr__(self, name: str):
        if name in ("bits", "min", "max", "umax"):
            raise ValueError(f"{self.name} has no integer width")
        if name == "storage":
            raise UnsupportedDType(f"{self.name} is not supported by npu-bench (integer profile only)")
        raise AttributeError(f"{type(self).__name__} has no attribute '{name}'")

    @property
    def size_bytes(self) -> int:
        """Bytes one element takes in memory (npu-bench stores int48 in 8 bytes)."""
        return self.storage.itemsize


_INT_BITS = {
    DType.INT4: 4,
    DType.INT8: 8,
    DType.INT16: 16,
    DType.INT32: 32,
    DType.INT48: 48,
    DType.INT64: 64,
    DType.SHAPE: 64,
}

# bits of every type that has a width (BOOL 1)
_BITS = {**_INT_BITS, DType.BOOL: 1}

_STORAGE = {
    DType.BOOL: np.bool_,
    DType.INT4: np.int8,
    DType.INT8: np.int8,
    DType.INT16: np.int16,
    DType.INT32: np.int32,
    DType.INT48: np.int64,
    DType.INT64: np.int64,
    DType.SHAPE: np.int64,
}
_STORAGE_DTYPES = {t: np.dtype(v) for t, v in _STORAGE.items()}    # made once: DType.storage is asked often

for _t, _b in _BITS.items():           # DType's bits / min / max / umax (see the class)
    _t.bits, _t.min, _t.max, _t.umax = _b, -(1 << (_b - 1)), (1 << (_b - 1)) - 1, (1 << _b) - 1
for _t, _d in _STORAGE_DTYPES.items():  # and storage
    _t.storage = _d
del _t, _b, _d


def wrap(values: np.ndarray, bits: int) -> np.ndarray:
    """Two's-complement wrap of int64 values to `bits` bits, returned as int64."""
    v = np.asarray(values, dtype=np.int64)
    if bits >= 64:
        return v
    shift = 64 - bits
    return (v << np.int64(shift)) >> np.int64(shift)


def to_storage(values: np.ndarray, dtype: DType) -> np.ndarray:
    """Store integer values (already in range) in the numpy type of `dtype`."""
    return np.asarray(values).astype(dtype.storage, copy=False)


def value_problem(value, dtype: DType, shape) -> str | None:
    """What makes `value` unfit to be a tensor of `dtype` and `shape` (a variable's state, read
    from a file), as a phrase after the value's name; None when it fits. The interpreter, the
    golden model's variable SRAM and the state-file check all ask this one question."""
    arr = np.asarray(value)
    if arr.dtype != dtype.storage:
        return f"is stored as {arr.dtype}; the variable is {dtype.name} (stored as {dtype.storage})"
    if len(arr.shape) != len(shape) or any(d >= 0 and d != a for d, a in zip(shape, arr.shape)):
        return f"has shape {list(arr.shape)}; the variable's is {list(shape)}"
    if dtype.is_integer and dtype.bits < 64 and arr.size and (
            int(arr.min()) < dtype.min or int(arr.max()) > dtype.max):
        return f"has values outside the range of {dtype.name}"
    return None
