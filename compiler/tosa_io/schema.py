"""Facts of the TOSA flatbuffer schema (tosa.fbs of tosa-tools 2026.8.0, TOSA 1.x, file version
1.1.0 draft), written down once for the reader and the writer.

A flatbuffer table keeps its fields in vtable slots numbered in declaration order; a union field
takes two slots (its type byte, then the offset to its table). The tuples below list the fields
of each table in that order, so a field's slot is its index. Enums are listed by value.

The element types (enum DType) are `firmware_model.tosa_ops.dtypes.DType`, whose values are the
schema's.
"""

from __future__ import annotations

from dataclasses import dataclass

from firmware_model.tosa_ops.dtypes import DType

FILE_IDENTIFIER = b"TOSA"
# The TOSA specification version the writer stamps by default (Graph.version keeps what was read).
DEFAULT_VERSION = (1, 1, 0, True)
SUPPORTED_MAJOR_VERSION = 1
# The schema release these facts come from. The writer records it as the file's
# software_version (the serialization schema the file follows); without it Arm's reference model
# warns that the file predates versioned serialization.
SCHEMA_RELEASE = (2026, 8, 0)


# ---------------------------------------------------------------------------------------------
# Enums (index = value, except where a dict gives explicit values)

# enum Op:uint32. "Every op must have an attribute in `union Attribute` and order must match":
# op value k carries ATTRIBUTES[k] (union value k).
OPS: tuple[str, ...] = (
    "UNKNOWN", "ARGMAX", "AVG_POOL2D", "CONV2D", "CONV3D", "DEPTHWISE_CONV2D", "FFT2D", "MATMUL",
    "MAX_POOL2D", "RFFT2D", "TRANSPOSE_CONV2D", "CLAMP", "ERF", "SIGMOID", "TANH", "ADD",
    "ARITHMETIC_RIGHT_SHIFT", "BITWISE_AND", "BITWISE_OR", "BITWISE_XOR", "INTDIV", "LOGICAL_AND",
    "LOGICAL_LEFT_SHIFT", "LOGICAL_RIGHT_SHIFT", "LOGICAL_OR", "LOGICAL_XOR", "MAXIMUM", "MINIMUM",
    "MUL", "POW", "SUB", "TABLE", "ABS", "BITWISE_NOT", "CEIL", "CLZ", "COS", "EXP", "FLOOR", "LOG",
    "LOGICAL_NOT", "NEGATE", "RECIPROCAL", "RSQRT", "SIN", "SELECT", "EQUAL", "GREATER",
    "GREATER_EQUAL", "REDUCE_ALL", "REDUCE_ANY", "REDUCE_MAX", "REDUCE_MIN", "REDUCE_PRODUCT",
    "REDUCE_SUM", "CONCAT", "PAD", "RESHAPE", "REVERSE", "SLICE", "TILE", "TRANSPOSE", "GATHER",
    "SCATTER", "RESIZE", "CAST", "RESCALE", "CONST", "IDENTITY", "CUSTOM", "COND_IF", "WHILE_LOOP",
    "VARIABLE", "VARIABLE_WRITE", "VARIABLE_READ", "CONST_SHAPE", "MATMUL_T_BLOCK_SCALED",
    "CAST_FROM_BLOCK_SCALED", "CAST_TO_BLOCK_SCALED", "DIM", "CONCAT_SHAPE", "ADD_SHAPE",
    "SUB_SHAPE", "MUL_SHAPE", "SLICE_SHAPE", "EXP2_SHAPE", "LOG2_CEIL_SHAPE", "LOG2_FLOOR_SHAPE",
    "MAX_SHAPE", "MIN_SHAPE", "MOD_SHAPE", "DIV_CEIL_SHAPE", "DIV_FLOOR_SHAPE",
    "ASSERT_EQUAL_SHAPE", "CONV2D_BLOCK_SCALED", "MAX_POOL2D_ADAPTIVE", "AVG_POOL2D_ADAPTIVE",
    "RESHAPE_BLOCK_SCALED", "ROW_GATHER_BLOCK_SCALED", "ROW_GATHER", "MATMUL_T",
)
OP_VALUE: dict[str, int] = {name: i for i, name in enumerate(OPS)}

# union Attribute: value 0 is NONE, value k the k-th table listed.
ATTRIBUTES: tuple[str, ...] = (
    "NONE", "ArgMaxAttribute", "AvgPool2dAttribute", "Conv2dAttribute", "Conv3dAttribute",
    "DepthwiseConv2dAttribute", "FFT2dAttribute", "MatMulAttribute", "MaxPool2dAttribute",
    "RFFT2dAttribute", "TransposeConv2dAttribute", "ClampAttribute", "ErfAttribute",
    "SigmoidAttribute", "TanhAttribute", "AddAttribute", "ArithmeticRightShiftAttribute",
    "BitwiseAndAttribute", "BitwiseOrAttribute", "BitwiseXorAttribute", "IntDivAttribute",
    "LogicalAndAttribute", "LogicalLeftShiftAttribute", "LogicalRightShiftAttribute",
    "LogicalOrAttribute", "LogicalXorAttribute", "MaximumAttribute", "MinimumAttribute",
    "MulAttribute", "PowAttribute", "SubAttribute", "TableAttribute", "AbsAttribute",
    "BitwiseNotAttribute", "CeilAttribute", "ClzAttribute", "CosAttribute", "ExpAttribute",
    "FloorAttribute", "LogAttribute", "LogicalNotAttribute", "NegateAttribute",
    "ReciprocalAttribute", "RsqrtAttribute", "SinAttribute", "SelectAttribute", "EqualAttribute",
    "GreaterAttribute", "GreaterEqualAttribute", "ReduceAllAttribute", "ReduceAnyAttribute",
    "ReduceMaxAttribute", "ReduceMinAttribute", "ReduceProductAttribute", "ReduceSumAttribute",
    "ConcatAttribute", "PadAttribute", "ReshapeAttribute", "ReverseAttribute", "SliceAttribute",
    "TileAttribute", "TransposeAttribute", "GatherAttribute", "ScatterAttribute",
    "ResizeAttribute", "CastAttribute", "RescaleAttribute", "ConstAttribute", "IdentityAttribute",
    "CustomAttribute", "CondIfAttribute", "WhileLoopAttribute", "VariableAttribute",
    "VariableWriteAttribute", "VariableReadAttribute", "ConstShapeAttribute",
    "MatMulTBlockScaledAttribute", "CastFromBlockScaledAttribute", "CastToBlockScaledAttribute",
    "DimAttribute", "ConcatShapeAttribute", "AddShapeAttribute", "SubShapeAttribute",
    "MulShapeAttribute", "SliceShapeAttribute", "Exp2ShapeAttribute", "Log2CeilShapeAttribute",
    "Log2FloorShapeAttribute", "MaxShapeAttribute", "MinShapeAttribute", "ModShapeAttribute",
    "DivCeilShapeAttribute", "DivFloorShapeAttribute", "AssertEqualShapeAttribute",
    "Conv2dBlockScaledAttribute", "MaxPool2dAdaptiveAttribute", "AvgPool2dAdaptiveAttribute",
    "ReshapeBlockScaledAttribute", "RowGatherBlockScaledAttribute", "RowGatherAttribute",
    "MatMulTAttribute",
)
ATTRIBUTE_VALUE: dict[str, int] = {name: i for i, name in enumerate(ATTRIBUTES)}

VARIABLE_READ_ATTRIBUTE = "VariableReadAttribute"
VARIABLE_WRITE_ATTRIBUTE = "VariableWriteAttribute"


def expected_attribute(op: str) -> str:
    """The attribute table the schema pairs with `op` (same position in both lists)."""
    return ATTRIBUTES[OP_VALUE[op]]


def allowed_attributes(op: str) -> tuple[str, ...]:
    """Attribute tables an op may carry: its own, and for IDENTITY also the variable read/write
    tables (the form tosa-opt writes for variable reads and writes)."""
    if op == "IDENTITY":
        return ("IdentityAttribute", VARIABLE_READ_ATTRIBUTE, VARIABLE_WRITE_ATTRIBUTE)
    return (expected_attribute(op),)


ENUMS: dict[str, dict[str, int]] = {
    "DType": {d.name: int(d) for d in DType},
    "ResizeMode": {"UNKNOWN": 0, "NEAREST": 1, "BILINEAR": 2},
    "NanPropagationMode": {"UNKNOWN": 0, "PROPAGATE": 1, "IGNORE": 2},
    "RoundingMode": {"UNKNOWN": 0, "SINGLE_ROUND": 1, "INEXACT_ROUND": 2, "DOUBLE_ROUND": 3},
    "BlockSize": {"UNKNOWN": 0, "BLOCK_SIZE_1": 1, "BLOCK_SIZE_32": 32},
    "BlockShape": {"UNKNOWN": 0, "BLOCK_SHAPE_32": 32},
    "CompatibilityFeature": {"NONE": 0, "MXFP": 1},
}
ENUM_NAMES: dict[str, dict[int, str]] = {e: {v: k for k, v in m.items()} for e, m in ENUMS.items()}


# ---------------------------------------------------------------------------------------------
# Attribute tables. A field kind is one of:
#   "int32", "bool", "string", "[int32]", "[ubyte]" or "enum:<EnumName>" (stored as uint32).
# "[ubyte]" fields with `value=True` hold one element of the op's input type (ClampAttribute).

@dataclass(frozen=True)
class Field:
    name: str
    kind: str
    value: bool = False  # a [ubyte] holding a value of the input tensor's element type

    @property
    def enum(self) -> str | None:
        return self.kind[5:] if self.kind.startswith("enum:") else None


def _f(spec: str) -> Field:
    name, kind = spec.split(":", 1)
    if kind == "value":
        return Field(name, "[ubyte]", value=True)
    return Field(name, kind)


def _fields(*specs: str) -> tuple[Field, ...]:
    return tuple(_f(s) for s in specs)


_CONV = _fields("pad:[int32]", "stride:[int32]", "dilation:[int32]", "local_bound:bool",
                "acc_type:enum:DType")
_NAN = _fields("nan_mode:enum:NanPropagationMode")
_AXIS = _fields("axis:int32")
_AXIS_NAN = _fields("axis:int32", "nan_mode:enum:NanPropagationMode")
_BLOCK = _fields("block_size:enum:BlockSize")

ATTRIBUTE_FIELDS: dict[str, tuple[Field, ...]] = {
    "ArgMaxAttribute": _AXIS_NAN,
    "AvgPool2dAttribute": _fields("kernel:[int32]", "stride:[int32]", "pad:[int32]", "acc_type:enum:DType"),
    "AvgPool2dAdaptiveAttribute": _fields("acc_type:enum:DType"),
    "Conv2dAttribute": _CONV,
    "Conv3dAttribute": _CONV,
    "DepthwiseConv2dAttribute": _CONV,
    "FFT2dAttribute": _fields("inverse:bool", "local_bound:bool"),
    "MaxPool2dAttribute": _fields("kernel:[int32]", "stride:[int32]", "pad:[int32]",
                                  "nan_mode:enum:NanPropagationMode"),
    "MaxPool2dAdaptiveAttribute": _NAN,
    "RFFT2dAttribute": _fields("local_bound:bool"),
    "TransposeConv2dAttribute": _fields("out_pad:[int32]", "stride:[int32]", "local_bound:bool",
                                        "acc_type:enum:DType"),
    "ClampAttribute": _fields("min_val:value", "max_val:value", "nan_mode:enum:NanPropagationMode"),
    "ArithmeticRightShiftAttribute": _fields("round:bool"),
    "MaximumAttribute": _NAN,
    "MinimumAttribute": _NAN,
    "ReduceAllAttribute": _AXIS,
    "ReduceAnyAttribute": _AXIS,
    "ReduceMaxAttribute": _AXIS_NAN,
    "ReduceMinAttribute": _AXIS_NAN,
    "ReduceProductAttribute": _AXIS,
    "ReduceSumAttribute": _AXIS,
    "ConcatAttribute": _AXIS,
    "ReshapeBlockScaledAttribute": _BLOCK,
    "ReverseAttribute": _AXIS,
    "TransposeAttribute": _fields("perms:[int32]"),
    "RowGatherBlockScaledAttribute": _BLOCK,
    "ResizeAttribute": _fields("mode:enum:ResizeMode"),
    "RescaleAttribute": _fields("scale32:bool", "rounding_mode:enum:RoundingMode", "per_channel:bool",
                                "input_unsigned:bool", "output_unsigned:bool"),
    "CustomAttribute": _fields("operator_name:string", "domain_name:string", "implementation_attrs:[ubyte]"),
    "CondIfAttribute": _fields("then_graph:string", "else_graph:string"),
    "WhileLoopAttribute": _fields("cond_graph:string", "body_graph:string"),
    "MatMulTBlockScaledAttribute": _BLOCK,
    "CastFromBlockScaledAttribute": _BLOCK,
    "CastToBlockScaledAttribute": _BLOCK,
    "Conv2dBlockScaledAttribute": _BLOCK,
    "DimAttribute": _AXIS,
    "AssertEqualShapeAttribute": _fields("allow_broadcast:bool"),
}
# Every other attribute table of the union is empty.
for _name in ATTRIBUTES[1:]:
    ATTRIBUTE_FIELDS.setdefault(_name, ())
del _name

# Attribute fields that name another region (checked by the reader).
GRAPH_REFERENCE_FIELDS = ("then_graph", "else_graph", "cond_graph", "body_graph")


# ---------------------------------------------------------------------------------------------
# Structure tables: vtable slot of each field.

class TosaGraphSlots:
    version = 0          # Version (required)
    regions = 1          # [TosaRegion]
    software_version = 2  # SoftwareVersion
    compatibility = 3    # SerializationCompatibility
    COUNT = 4


class VersionSlots:
    major = 0  # int32 = -1
    minor = 1  # int32 = -1
    patch = 2  # int32 = -1
    draft = 3  # bool = true
    COUNT = 4


class SoftwareVersionSlots:
    major = 0  # int32 = -1
    minor = 1
    micro = 2
    modifier = 3  # string
    COUNT = 4


class SerializationCompatibilitySlots:
    min_reader_version = 0  # SoftwareVersion
    features = 1            # uint64 = 0
    COUNT = 2


class TosaRegionSlots:
    name = 0    # string
    blocks = 1  # [TosaBasicBlock]
    COUNT = 2


class TosaBasicBlockSlots:
    name = 0       # string
    operators = 1  # [TosaOperator]
    tensors = 2    # [TosaTensor]
    inputs = 3     # [string]
    outputs = 4    # [string]
    shapes = 5     # [TosaShape]
    COUNT = 6


class TosaTensorSlots:
    name = 0           # string
    shape = 1          # [int32]
    type = 2           # DType (uint32)
    data = 3           # [ubyte] (force_align: 8)
    variable = 4       # bool
    is_unranked = 5    # bool
    variable_name = 6  # string
    offset = 7         # ulong: data outside the flatbuffer (models > 2 GB), valid if > 1
    size = 8           # ulong
    scale_type = 9     # DType: block-scaled (MX) tensors
    scale_data = 10    # [ubyte] (force_align: 8)
    block_shape = 11   # BlockShape
    scale_offset = 12  # ulong
    scale_size = 13    # ulong
    COUNT = 14


class TosaShapeSlots:
    name = 0  # string
    rank = 1  # uint32
    data = 2  # [ubyte] (force_align: 8): rank int64 values
    COUNT = 3


class TosaOperatorSlots:
    op = 0              # Op (uint32)
    attribute_type = 1  # union type (ubyte)
    attribute = 2       # union value (offset to the attribute table)
    inputs = 3          # [string]
    outputs = 4         # [string]
    location = 5        # OpLocation
    COUNT = 6


class OpLocationSlots:
    text = 0  # string
    COUNT = 1


# Constant data: bytes per element of each integer type in the file (INT4 packs two per byte,
# INT48 takes 6 bytes; SHAPE values are int64).
DATA_BYTES: dict[DType, int] = {
    DType.BOOL: 1,
    DType.INT8: 1,
    DType.INT16: 2,
    DType.INT32: 4,
    DType.INT48: 6,
    DType.INT64: 8,
    DType.SHAPE: 8,
    DType.FP32: 4,
    DType.FP16: 2,
    DType.BF16: 2,
    DType.FP8E4M3: 1,
    DType.FP8E5M2: 1,
    DType.FP8UE8M0: 1,
}
# (INT4 is handled separately: ceil(n / 2) bytes, low nibble first.)


def float_numpy_type(dtype: DType):
    """numpy scalar type holding constant data of a floating-point DType, or None (integer
    types, and the packed FP6/FP4/MXINT8 formats npu-bench does not decode)."""
    import numpy as np

    if dtype == DType.FP32:
        return np.float32
    if dtype == DType.FP16:
        return np.float16
    if dtype in (DType.BF16, DType.FP8E4M3, DType.FP8E5M2, DType.FP8UE8M0):
        import ml_dtypes  # a pinned dependency of npu-bench

        return {DType.BF16: ml_dtypes.bfloat16, DType.FP8E4M3: ml_dtypes.float8_e4m3fn,
                DType.FP8E5M2: ml_dtypes.float8_e5m2, DType.FP8UE8M0: ml_dtypes.float8_e8m0fnu}[dtype]
    return None
