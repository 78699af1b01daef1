"""Executable TOSA semantics for the integer profile: element types, numeric primitives and op
kernels. Shared by the interpreter (whole graphs) and the golden model (its units use the
primitives; its modelled host CPU runs ops the NPU cannot)."""
