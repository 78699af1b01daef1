"""NPU operations: what the lowering pass turns groups of TOSA ops into.

In the graph IR an NPU operation is an `Operator` whose `op` is "NPU_CONV2D" (etc.) and whose
attrs["npu"] holds one of the dataclasses below: everything the NPU needs, with the constants
already in numpy form, and `sources` naming the TOSA ops it replaced (for reports and errors).
Later passes attach their results to the same Operator: annotations["tiles"] (tile_planner) and
annotations["schedule"] (scheduler).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from firmware_model.tosa_ops.dtypes import DType

NPU_CONV2D = "NPU_CONV2D"
HOST_OP = "HOST"   # annotation value of ops left to the host CPU


@dataclass
class RescaleSpec:
    """A RESCALE fused into the MAC output stage (per output channel)."""
    multiplier: np.ndarray      # int32 (int16 values when not scale32)
    shift: np.ndarray           # int8, 2..62
    output_zp: int
    scale32: bool
    double_round: bool
    out_dtype: DType            # int8 / int16 (the RESCALE's output type)
    output_unsigned: bool


@dataclass
class NpuConv:
    """CONV2D (or a fully connected / MATMUL shaped as a 1x1 convolution) with its output stage."""
    ifm: str                     # input tensor (N, H, W, C), int8
    ofm: str                     # final output tensor (after fused ops)
    weights: np.ndarray          # int8 (OC, KH, KW, IC)
    bias: np.ndarray             # int64 (OC,), the conv's int32 bias (or int48 for int16)
    input_zp: int
    weight_zp: int
    stride: tuple[int, int]
    pad: tuple[int, int, int, int]   # top, bottom, left, right
    dilation: tuple[int, int]
    in_shape: tuple[int, int, int, int]
    out_shape: tuple[int, int, int, int]
    acc_dtype: DType             # INT32 for int8 inputs
    rescale: RescaleSpec | None
    clamp: tuple[int, int] | None
    out_dtype: DType             # what is stored: the rescale's type, or the accumulator type
    sources: list[str] = field(default_factory=list)

    @property
    def kernel(self) -> tuple[int, int]:
        return self.weights.shape[1], self.weights.shape[2]

    @property
    def in_channels(self) -> int:
        return self.weights.shape[3]

    @property
    def out_channels(self) -> int:
        return self.weights.shape[0]

    @property
    def macs(self) -> int:
        n, oh, ow, oc = self.out_shape
        kh, kw = self.kernel
        return n * oh * ow * oc * kh * kw * self.in_channels

    def describe(self) -> str:
        kh, kw = self.kernel
        parts = [f"{kh}x{kw} conv {self.in_channels}->{self.out_channels}",
                 f"stride {self.stride[0]},{self.stride[1]}", f"pad {','.join(map(str, self.pad))}"]
        if self.dilation != (1, 1):
            parts.append(f"dilation {self.dilation[0]},{self.dilation[1]}")
        if self.rescale is not None:
            r = self.rescale
            parts.append(f"rescale->{'u' if r.output_unsigned else ''}{r.out_dtype.name.lower()}"
                         f"{' double-round' if r.double_round else ''}")
        if self.clamp is not None:
            parts.append(f"clamp [{self.clamp[0]}, {self.clamp[1]}]")
        return ", ".join(parts)
