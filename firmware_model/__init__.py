"""The NPU golden model: the NPU's architecture (configuration, ISA) and a bit-exact executor of
compiled command streams on modelled memories. Knows nothing of the compiler.

`tosa_ops` holds the executable TOSA semantics (numeric primitives and op kernels) that both the
interpreter and the golden model's units and host CPU use.
"""
