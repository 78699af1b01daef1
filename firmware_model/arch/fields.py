"""Field tables: one description of a packed record, read by every layer that touches its bits.

A `FieldTable` lists a record's fields from bit 0 upwards. Bits are little-endian throughout the
NPU: bit 8k .. 8k+7 of a record is its byte k, in memory and in an RTL word alike. From the one
table come

- `pack` / `unpack`: one record as a Python int (the command word, `isa.Command`);
- `encode` / `decode`: many records as bytes, vectorised with numpy (parameter records in the
  compiler's constants image and the golden model's parameter SRAM);
- the Amaranth layout the RTL views the same bits through (`hw.layouts.struct_layout`, which
  reads `fields`): field order, offsets and signedness are the table's, so an RTL slice cannot
  disagree with the encoder.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Field:
    name: str
    width: int
    signed: bool
    offset: int           # bit offset from the record's bit 0

    @property
    def mask(self) -> int:
        return (1 << self.width) - 1

    @property
    def min(self) -> int:
        return -(1 << (self.width - 1)) if self.signed else 0

    @property
    def max(self) -> int:
        return (1 << (self.width - 1)) - 1 if self.signed else self.mask


class FieldTable:
    """`fields`: (name, width in bits, signed) from bit 0 upwards."""

    def __init__(self, name: str, fields: list[tuple[str, int, bool]]):
        self.name = name
        offset = 0
        self.fields: tuple[Field, ...] = ()
        for fname, width, signed in fields:
            self.fields += (Field(fname, width, signed, offset),)
            offset += width
        self.width = offset
        self._by_name = {f.name: f for f in self.fields}

    @property
    def nbytes(self) -> int:
        return -(-self.width // 8)

    def __getitem__(self, name: str) -> Field:
        return self._by_name[name]

    # --- one record as a Python int ----------------------------------------------------
    def pack(self, **values: int) -> int:
        """The record with these field values (missing fields 0). A value outside its field's
        range is an error (ValueError naming the record and the field)."""
        unknown = set(values) - set(self._by_name)
        if unknown:
            raise ValueError(f"{self.name}: no field(s) {', '.join(sorted(unknown))}")
        word = 0
        for f in self.fields:
            v = int(values.get(f.name, 0))
            if not f.min <= v <= f.max:
                raise ValueError(f"{self.name}: {f.name} = {v} does not fit {f.width} "
                                 f"{'signed' if f.signed else 'unsigned'} bits")
            word |= (v & f.mask) << f.offset
        return word

    def unpack(self, word: int) -> dict[str, int]:
        out = {}
        for f in self.fields:
            v = (word >> f.offset) & f.mask
            if f.signed and v >> (f.width - 1):
                v -= 1 << f.width
            out[f.name] = v
        return out

    # --- many records as bytes (numpy) ---------------------------------------------------
    def _byte_aligned(self, f: Field) -> tuple[int, int]:
        if f.offset % 8 or f.width % 8:
            raise ValueError(f"{self.name}: field {f.name} is not byte-aligned; encode/decode need whole bytes")
        return f.offset // 8, f.width // 8

    def decode(self, raw: np.ndarray) -> dict[str, np.ndarray]:
        """Field arrays (int64) of records held as bytes: `raw` is uint8, (..., nbytes) or a flat
        run of whole records."""
        raw = np.ascontiguousarray(raw, dtype=np.uint8)
        if raw.ndim == 1:
            raw = raw.reshape(-1, self.nbytes)
        out = {}
        for f in self.fields:
            b0, nb = self._byte_aligned(f)
            part = raw[..., b0:b0 + nb]
            if nb in (1, 2, 4, 8):
                v = np.ascontiguousarray(part).view(f"<{'i' if f.signed else 'u'}{nb}")[..., 0].astype(np.int64)
            else:
                v = np.zeros(part.shape[:-1], dtype=np.uint64)
                for k in range(nb):
                    v |= part[..., k].astype(np.uint64) << np.uint64(8 * k)
                v = v.astype(np.int64)
                if f.signed:
                    s = np.int64(64 - f.width)
                    v = (v << s) >> s
            out[f.name] = v
        return out

    def encode(self, **arrays) -> np.ndarray:
        """Records (uint8, n x nbytes) from field arrays of one length n (or scalars); values are
        stored in two's complement, truncated to their field's width."""
        sizes = {np.size(a) for a in arrays.values() if np.ndim(a)}
        n = sizes.pop() if sizes else 1
        if sizes:
            raise ValueError(f"{self.name}: field arrays of different lengths")
        rec = np.zeros((n, self.nbytes), dtype=np.uint8)
        for name, values in arrays.items():
            f = self._by_name[name]
            b0, nb = self._byte_aligned(f)
            v = np.broadcast_to(np.asarray(values, dtype=np.int64).reshape(-1), (n,)).astype(np.uint64)
            for k in range(nb):
                rec[:, b0 + k] = ((v >> np.uint64(8 * k)) & np.uint64(0xFF)).astype(np.uint8)
        return rec
