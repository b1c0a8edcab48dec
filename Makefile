# Two commands: `make run` (set up + run the pipeline), `make test` (set up + run the tests).
PYTHON ?= python3
VENV ?= .venv
CORES ?= 1
CONFIG ?= config/config.yaml
OUT ?= gpu-check-out
SMK_FILES := Snakefile $(wildcard workflow/rules/*.smk)

BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test lint bench-fidelity bench-overhead gpu-check gpu-wheels clean-venv

$(STAMP): requirements.txt requirements-dev.txt
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "error: Python 3.11 or newer is needed (snakemake 9); set PYTHON=python3.11")'
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -r requirements-dev.txt
	touch $@

run: $(STAMP)
	$(BIN)/snakemake --cores $(CORES) --configfile $(CONFIG)

test: $(STAMP)
	$(BIN)/python -m pytest

lint: $(STAMP)
	$(BIN)/snakemake --lint
	$(BIN)/snakefmt --check $(SMK_FILES)

# Benchmarks of the method (numbers, not tests): fidelity against torch.utils.benchmark,
# and the pipeline's own overhead.
bench-fidelity: $(STAMP)
	$(BIN)/python benchmarks/fidelity.py

bench-overhead: $(STAMP)
	$(BIN)/python benchmarks/overhead.py

# DESIGN.md section 7: GPU tests plus a small GPU grid through the real pipeline; results to $(OUT).
gpu-check:
	OUT=$(OUT) tools/gpu-check.sh

# Snakemake as wheels for the lent GPU machine, which has torch but no snakemake and no network.
gpu-wheels:
	$(PYTHON) -m pip wheel --no-deps -w .whl connection_pool==0.0.3
	$(PYTHON) -m pip download --only-binary=:all: --python-version 3.12 --implementation cp \
	  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
	  --platform any --find-links .whl -d .whl snakemake==$$(sed -n 's/^snakemake==//p' requirements.txt)

clean-venv:
	rm -rf $(VENV)
