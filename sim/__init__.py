"""The bench: simulator tool-chain set-up, RTL builds, cocotb benches, co-simulation against the
golden model, reports and the `npu` command line."""
