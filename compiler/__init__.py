"""The compiler: TOSA flatbuffers in, NPU command stream, constants image and manifest out.

Submodules: `ir` (the graph IR), `tosa_io` (reading and writing .tosa files), `interpreter`
(runs a graph exactly as the TOSA spec says), `passes` and `pipeline` (the compiler proper).
"""
