"""The project's own TOSA flatbuffer reader and writer (TOSA 1.x, schema of tosa-tools 2026.8.0).

    read_tosa(path) -> Graph            read_tosa_bytes(data, source) -> Graph
    write_tosa(graph, path)             tosa_bytes(graph) -> bytes

Built on the `flatbuffers` runtime and the schema facts in `schema.py`; Arm's tosa-tools are not
used here (they are the test-time oracle). See docs/tosa_io.md.
"""

from compiler.tosa_io.reader import read_tosa, read_tosa_bytes
from compiler.tosa_io.writer import tosa_bytes, write_tosa

__all__ = ["read_tosa", "read_tosa_bytes", "write_tosa", "tosa_bytes"]
