"""NPU operations: one module per kind (conv.py, ...), each with everything the compiler needs to
know about it — how TOSA ops are matched into it (lowering), how it is split into tiles, the
constants it puts in the image, and the commands it emits. The passes in compiler/passes are
generic and call these through `base.NpuOperation`.

`LOWERING_RULES` lists the match functions the lowering pass tries on each TOSA op, in order.
"""

from compiler.npu import conv, matmul

LOWERING_RULES = [conv.match, matmul.match]
