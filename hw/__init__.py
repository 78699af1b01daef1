"""The NPU in Amaranth HDL: one unit per file, parametrised by the NPU configuration, executing
the ISA defined in firmware_model.arch.isa."""
