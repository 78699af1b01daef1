"""Pass 6 — emission.

Reads: the scheduled graph (ctx.schedule), ctx.cfg.
Writes: ctx.program (firmware_model.program.Program): the command stream, the constants image and
the manifest (graph I/O placements, host ops, layers with their tiles and command ranges), and
the compile report lines in ctx.report.

Registers keep their values between commands, so a SET is emitted only when a value changes.
Each MAC command is one tile; it is preceded by MARK <tile id> so the RTL and the waveform show
which tile is running.
"""

from __future__ import annotations

from compiler.npu_ops import NPU_CONV2D, NpuConv
from compiler.passes.scheduler import ConvSchedule, Schedule
from compiler.passes.tile_planner import ConvTile, ceil_div, geometry
from firmware_model.isa import Command, LutMode, MacMode, Opcode, OutMode, Reg, Sram, set_reg
from firmware_model.npu_config import PARAM_RECORD_BYTES, NpuConfig
from firmware_model.program import Program
from firmware_model.tosa_ops.dtypes import DType


class CommandWriter:
    def __init__(self):
        self.commands: list[Command] = []
        self.regs: dict[Reg, int] = {}

    def set(self, reg: Reg, value: int) -> None:
        value = int(value)
        if self.regs.get(reg) != value:
            self.commands.append(set_reg(reg, value))
            self.regs[reg] = value

    def emit(self, opcode: Opcode, sub: int = 0, value: int = 0) -> int:
        self.commands.append(Command(opcode, int(sub), 0, int(value) & 0xFFFFFFFF))
        return len(self.commands) - 1

    def dma(self, opcode: Opcode, sram: Sram, *, ext: int = 0, sram_addr: int, len0: int, len1: int = 1,
            len2: int = 1, ext_s1: int = 0, ext_s2: int = 0, sram_s1: int = 0, sram_s2: int = 0,
            value: int = 0) -> None:
        if opcode != Opcode.FILL:
            self.set(Reg.DMA_EXT_ADDR, ext)
            self.set(Reg.DMA_EXT_STRIDE1, ext_s1)
            self.set(Reg.DMA_EXT_STRIDE2, ext_s2)
        self.set(Reg.DMA_SRAM_ADDR, sram_addr)
        self.set(Reg.DMA_LEN0, len0)
        self.set(Reg.DMA_LEN1, len1)
        self.set(Reg.DMA_LEN2, len2)
        self.set(Reg.DMA_SRAM_STRIDE1, sram_s1)
        self.set(Reg.DMA_SRAM_STRIDE2, sram_s2)
        self.emit(opcode, sram, value)


def _out_mode(conv: NpuConv) -> int:
    mode = 0
    if conv.rescale is not None:
        r = conv.rescale
        mode |= OutMode.RESCALE
        mode |= OutMode.SCALE32 if r.scale32 else 0
        mode |= OutMode.DOUBLE_ROUND if r.double_round else 0
        mode |= OutMode.UNSIGNED_OUT if r.output_unsigned else 0
    return int(mode)


def _clamp(conv: NpuConv) -> tuple[int, int]:
    if conv.rescale is None:
        return DType.INT32.min, DType.INT32.max
    t = conv.rescale.out_dtype
    lo, hi = (0, t.umax) if conv.rescale.output_unsigned else (t.min, t.max)
    if conv.clamp is not None:
        lo, hi = max(lo, conv.clamp[0]), min(hi, conv.clamp[1])
    return lo, hi


def emit_conv(w: CommandWriter, conv: NpuConv, tiles: list[ConvTile], cs: ConvSchedule, sched: Schedule,
              cfg: NpuConfig, layer: int, first_tile_id: int) -> list[dict]:
    L = cfg.mac_cols
    _, H, W, C = conv.in_shape
    _, OH, OW, OC = conv.out_shape
    kh, kw = conv.kernel
    sh, sw = conv.stride
    dh, dw = conv.dilation
    pt, _, pl, _ = conv.pad
    cb = ceil_div(C, L)
    pix = cb * L
    esize = conv.out_dtype.size_bytes
    ifm = sched.placements[conv.ifm]
    ofm = sched.placements[conv.ofm]
    base = sched.constants_addr
    resident_in: dict[int, tuple] = {}
    resident_w: dict[int, int] = {}
    n_in = n_w = 0
    records = []
    for k, t in enumerate(tiles):
        tile_id = first_tile_id + k
        start = len(w.commands)
        w.emit(Opcode.MARK, 0, tile_id)
        g = geometry(conv, cfg, t.th, t.tw, t.tc)
        iy0, ix0 = t.y0 * sh - pt, t.x0 * sw - pl
        # Input box (halo included); out-of-image rows/columns and missing channel lanes hold the
        # input zero point, which contributes nothing to the sums.
        key = (t.n, iy0, ix0, g.in_h, g.in_w)
        in_slot = next((s for s, v in resident_in.items() if v == key), None)
        if in_slot is None:
            in_slot = n_in % cs.buffers
            n_in += 1
            resident_in[in_slot] = key
            in_addr = cs.in_buf[in_slot]
            by0, by1 = max(iy0, 0), min(iy0 + g.in_h, H)
            bx0, bx1 = max(ix0, 0), min(ix0 + g.in_w, W)
            full = by0 == iy0 and by1 == iy0 + g.in_h and bx0 == ix0 and bx1 == ix0 + g.in_w and C == pix
            if not full:
                w.dma(Opcode.FILL, Sram.INPUT, sram_addr=in_addr, len0=g.in_bytes, value=conv.input_zp & 0xFF)
            if by1 > by0 and bx1 > bx0:
                w.dma(Opcode.DMA_LOAD, Sram.INPUT,
                      ext=ifm.addr + ((t.n * H + by0) * W + bx0) * C,
                      sram_addr=in_addr + ((by0 - iy0) * g.in_w + (bx0 - ix0)) * pix,
                      len0=C, len1=bx1 - bx0, len2=by1 - by0,
                      ext_s1=C, ext_s2=W * C, sram_s1=pix, sram_s2=g.in_w * pix)
        in_addr = cs.in_buf[in_slot]
        w_slot = next((s for s, c in resident_w.items() if c == t.c0), None)
        if w_slot is None:
            w_slot = n_w % cs.buffers
            n_w += 1
            resident_w[w_slot] = t.c0
            woff, wlen = cs.slice_weights[t.c0]
            w.dma(Opcode.DMA_LOAD, Sram.WEIGHT, ext=base + woff, sram_addr=cs.w_buf[w_slot], len0=wlen)
            poff, plen = cs.slice_params[t.c0]
            w.dma(Opcode.DMA_LOAD, Sram.PARAM, ext=base + poff,
                  sram_addr=cs.p_buf[w_slot] * PARAM_RECORD_BYTES, len0=plen)
        out_addr = cs.out_buf[k % cs.buffers]
        lo, hi = _clamp(conv)
        r = conv.rescale
        regs = {
            Reg.IFM_ADDR: in_addr, Reg.IFM_ROW_STRIDE: g.in_w * pix, Reg.IFM_PIX_STRIDE: pix,
            Reg.IFM_CBLOCKS: cb, Reg.IFM_ZP: conv.input_zp, Reg.IFM_DTYPE: int(DType.INT8),
            Reg.WGT_ADDR: cs.w_buf[w_slot], Reg.WGT_ZP: conv.weight_zp,
            Reg.KERNEL_H: kh, Reg.KERNEL_W: kw, Reg.STRIDE_H: sh, Reg.STRIDE_W: sw,
            Reg.DILATION_H: dh, Reg.DILATION_W: dw,
            Reg.OFM_ADDR: out_addr, Reg.OFM_ROW_STRIDE: t.tw * g.out_pix_bytes, Reg.OFM_PIX_STRIDE: g.out_pix_bytes,
            Reg.OFM_H: t.th, Reg.OFM_W: t.tw, Reg.OFM_C: t.tc, Reg.OFM_DTYPE: int(conv.out_dtype),
            Reg.OFM_ZP: r.output_zp if r else 0, Reg.PARAM_ADDR: cs.p_buf[w_slot],
            Reg.OUT_MODE: _out_mode(conv), Reg.CLAMP_MIN: lo, Reg.CLAMP_MAX: hi,
            Reg.LUT_MODE: int(LutMode.OFF), Reg.LUT_ADDR: 0,
            Reg.RESCALE_DTYPE: int(r.out_dtype if r else DType.INT32),
        }
        for reg, value in regs.items():
            w.set(reg, value)
        mac_index = w.emit(Opcode.MAC, MacMode.CONV2D)
        w.dma(Opcode.DMA_STORE, Sram.OUTPUT,
              ext=ofm.addr + (((t.n * OH + t.y0) * OW + t.x0) * OC + t.c0) * esize,
              sram_addr=out_addr, len0=t.tc * esize, len1=t.tw, len2=t.th,
              ext_s1=OC * esize, ext_s2=OW * OC * esize, sram_s1=g.out_pix_bytes, sram_s2=t.tw * g.out_pix_bytes)
        records.append({"id": tile_id, "layer": layer, "commands": [start, len(w.commands)],
                        "mac_command": mac_index, "n": t.n, "y0": t.y0, "th": t.th, "x0": t.x0, "tw": t.tw,
                        "c0": t.c0, "tc": t.tc, "output": conv.ofm})
    return records


def _host_op_entry(op, block, sched: Schedule, where: str) -> dict:
    def place(name):
        return sched.placements[name].to_json()

    attrs = {}
    for k, v in op.attrs.items():
        attrs[k] = v.tolist() if hasattr(v, "tolist") else v
    return {"op": op.op, "attrs": attrs, "attr_kind": op.attr_kind, "where": where,
            "inputs": [place(n) if n else None for n in op.inputs],
            "outputs": [place(n) for n in op.outputs]}


def run(ctx) -> None:
    cfg: NpuConfig = ctx.cfg
    sched: Schedule = ctx.schedule
    block = ctx.block
    w = CommandWriter()
    layers, host_ops = [], []
    tile_id = 0
    npu_macs = host_macs = 0
    for i, op in enumerate(block.operators):
        if op.op in ("CONST", "CONST_SHAPE"):
            continue
        where = f"op %{i} {op.op} -> {', '.join(op.outputs)}"
        if op.op == NPU_CONV2D:
            conv: NpuConv = op.attrs["npu"]
            tiles = emit_conv(w, conv, op.annotations["tiles"], sched.conv[id(op)], sched, cfg,
                              len(layers), tile_id)
            tile_id += len(tiles)
            npu_macs += conv.macs
            layers.append({"index": len(layers), "kind": "npu", "unit": "MAC", "name": conv.ofm,
                           "op": conv.describe(), "sources": conv.sources, "macs": conv.macs,
                           "order": op.annotations["tile_order"], "tiles": tiles})
        else:
            entry = _host_op_entry(op, block, sched, where)
            w.emit(Opcode.HOST, 0, len(host_ops))
            host_ops.append(entry)
            macs = _op_macs(op, block)
            host_macs += macs
            layers.append({"index": len(layers), "kind": "host", "unit": "host CPU", "name": ", ".join(op.outputs),
                           "op": op.op, "reason": ctx.host_reasons.get(id(op), ""), "macs": macs, "tiles": []})
    w.emit(Opcode.END)
    manifest = {
        "config": cfg.to_dict(),
        "source": ctx.graph.source,
        "memory": {"constants": {"addr": sched.constants_addr, "size": sched.constants.size},
                   "ext_used": sched.ext_used},
        "graph": {"inputs": [sched.placements[n].to_json() for n in block.inputs],
                  "outputs": [sched.placements[n].to_json() for n in block.outputs]},
        "variables": ctx.variables,
        "host_ops": host_ops,
        "layers": layers,
        "stats": {"commands": len(w.commands), "tiles": tile_id, "npu_macs": npu_macs, "host_macs": host_macs},
    }
    ctx.program = Program(w.commands, sched.constants.bytes(), manifest)
    total = npu_macs + host_macs
    share = 100.0 * npu_macs / total if total else 100.0
    ctx.report.insert(0, f"compile: {ctx.graph.source} for '{cfg.name}' ({cfg.mac_rows}x{cfg.mac_cols} MACs)")
    for layer in layers:
        if layer["kind"] == "npu":
            ctx.report.append(f"  layer {layer['index']:3d} NPU  {layer['name']}: {layer['op']}; "
                              f"{len(layer['tiles'])} tile(s), {layer['macs']} MACs")
        else:
            ctx.report.append(f"  layer {layer['index']:3d} HOST {layer['op']} -> {layer['name']}: {layer['reason']}")
    ctx.report.append(f"summary: {len(layers)} layers, {tile_id} NPU tiles, {len(host_ops)} host ops, "
                      f"{share:.1f}% of {total} MACs on the NPU, {len(w.commands)} commands")


def _op_macs(op, block) -> int:
    """MACs of a tensor op left to the host (for the NPU share in the report)."""
    if op.op in ("CONV2D", "DEPTHWISE_CONV2D", "TRANSPOSE_CONV2D", "MATMUL"):
        out = block.tensors.get(op.outputs[0])
        wt = block.tensors.get(op.inputs[1])
        if out is None or wt is None or not out.is_static:
            return 0
        n_out = out.num_elements
        if op.op == "MATMUL":
            return n_out * block.tensors[op.inputs[0]].shape[-1]
        if op.op == "DEPTHWISE_CONV2D":
            return n_out * wt.shape[0] * wt.shape[1]
        return n_out * (wt.num_elements // wt.shape[0])
    return 0
