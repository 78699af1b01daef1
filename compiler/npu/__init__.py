"""NPU operations: one module per kind (conv.py, ...), each with everything the compiler needs to
know about it — how TOSA ops are matched into it (lowering), how it is split into tiles, the
constants it puts in the image, and the commands it emits. The passes in compiler/passes are
generic and call these through `base.NpuOperation`.

`LOWERING_RULES` lists the match functions the lowering pass tries on each TOSA op, in order.
"""

from compiler.npu import conv, data_movement, eltwise, matmul, pool, variable

# variable.match first: it takes only the ops state legalization gave a slot (variable reads are
# IDENTITY ops, which no other kind may claim).
# pool before eltwise: a RESCALE feeding REDUCE_SUM belongs to the reduction's window; eltwise
# before data_movement: a RESHAPE inside an elementwise operand chain is absorbed, others alias.
LOWERING_RULES = [variable.match, conv.match, matmul.match, pool.match, eltwise.match, data_movement.match]
