# Two commands: `make run` (set up + run the pipeline), `make test` (set up + run the tests).
PYTHON ?= python3
VENV ?= .venv
CORES ?= all
CONFIG ?= config/config.yaml
OUT ?= gpu-check-out
SMK_FILES := Snakefile $(wildcard workflow/rules/*.smk)

BIN := $(abspath $(VENV))/bin
STAMP := $(VENV)/.installed
RUN_STAMP := $(VENV)/.installed-runtime
# The rules and the tests run `python` and `snakemake` from PATH, as under --sdm conda; the venv's come first.
export PATH := $(BIN):$(PATH)
SNAKEMAKE := $(BIN)/snakemake
# Byte-compiled at install (pip's default): where PYTHONDONTWRITEBYTECODE is set, as on our
# VM and CI, nothing compiled later is kept, and every process would compile torch afresh (4-5 s).
PIP_FLAGS := --quiet --disable-pip-version-check

.PHONY: setup run test test-bench browser summary example test-slurm lint compare bundle estimate bench-fidelity bench-pyperf bench-overhead bench-alone bench-restore bench-fits bench-reproducibility bench-compile bench-coverage bench-paired gpu-check gpu-wheels clean-venv

# The runtime pins for running the pipeline; the test and lint tools on top for the rest.
$(RUN_STAMP): requirements.txt
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "error: Python 3.11 or newer is needed (snakemake 9); set PYTHON=python3.11")'
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install $(PIP_FLAGS) -r requirements.txt
	touch $@

$(STAMP): $(RUN_STAMP) requirements-dev.txt requirements-jax.txt
	$(BIN)/python -m pip install $(PIP_FLAGS) -r requirements-dev.txt
	touch $@

# The environment alone, for running your own grids with snakemake.
setup: $(RUN_STAMP)

# A grid that names an extra library (jax) gets it installed first (tools/extras.py says which).
run: $(RUN_STAMP)
	@for req in $$($(BIN)/python tools/extras.py $(CONFIG)); do \
	  $(BIN)/python -m pip install $(PIP_FLAGS) -r $$req || \
	  { echo "error: $(CONFIG) names a library of $$req, which pip could not install here: install it with pip install -r $$req"; exit 1; }; \
	done
	$(SNAKEMAKE) --cores $(CORES) --configfile $(CONFIG)

# This machine against the shipped H200 results (or WITH=<folder or bundle>).
WITH ?= tests/data/h200
compare: $(RUN_STAMP)
	$(SNAKEMAKE) compare --cores $(CORES) --configfile $(CONFIG) --config compare='[auto, $(WITH)]'

# results/<machine>.tar.gz: this machine's records, environment and tables, to carry elsewhere.
bundle: $(RUN_STAMP)
	$(SNAKEMAKE) bundle --cores $(CORES) --configfile $(CONFIG)

# The benchmarks' smoke runs take minutes of their own: `make test-bench` (CI runs both).
# The tests run on every core (at most 4 workers; the tests of the tiny pipeline run share one
# worker, which runs it once); then, one at a time, the GPU tests and the stand-in GPU's own, in
# processes whose torch has the stand-in GPU, and those that need the machine to themselves.
# The suite keeps the byte code of the repository's modules and pytest's rewritten test modules
# (in __pycache__/, which git ignores) where PYTHONDONTWRITEBYTECODE is set, as on our VM and CI:
# its hundreds of processes would compile them afresh, each pytest process for about 4 s.
TEST_WORKERS ?= auto
test: export PYTHONDONTWRITEBYTECODE :=
test: $(STAMP)
	$(BIN)/python -m pytest -m "not bench and not alone and not gpu and not standin" -n $(TEST_WORKERS) --maxprocesses 4 --dist loadgroup
	OFFLOADBENCH_STANDIN_GPU=1 $(BIN)/python -m pytest -m "(gpu or standin or alone) and not bench"

test-bench: $(STAMP)
	$(BIN)/python -m pytest -m bench

# Chromium for the browser test of report.html (Debian's, with apt-get as root; elsewhere one
# line says how to get it, and the test skips with that line).
browser:
	@tools/browser.sh

# The decision table of a results folder or bundle (FROM=..., default this machine's results).
FROM ?=
summary: $(RUN_STAMP)
	@PYTHONPATH=workflow $(BIN)/python -m offloadbench.report.text.summary $(FROM)

# docs/example/: the answer of the shipped H200 results, as a page readable on GitHub (a test
# checks that the committed page is current).
example: $(RUN_STAMP)
	$(BIN)/python tools/example-page.py tests/data/h200 docs/example

# The SLURM profile against a local one-node cluster (as root; skipped with one line elsewhere).
test-slurm: $(STAMP)
	@SLURM_FAKE_GPUS=1 tools/slurm-cluster.sh up; status=$$?; \
	if [ $$status -eq 3 ]; then exit 0; elif [ $$status -ne 0 ]; then exit $$status; fi; \
	$(BIN)/python -m pytest -m slurm -v -s tests/jobs/test_slurm.py; rc=$$?; \
	tools/slurm-cluster.sh down; exit $$rc

lint: $(STAMP)
	$(SNAKEMAKE) --lint
	$(BIN)/snakefmt --check $(SMK_FILES)
	$(BIN)/ruff check workflow tests benchmarks tools

# Benchmarks of the method (numbers, not tests): fidelity against torch.utils.benchmark,
# the rounds' time split, and the cells against their functions timed alone.
# PIPELINE=1: the pipeline's one-thread CPU matmul cells against torch.utils.benchmark before and after.
PIPELINE ?=
bench-fidelity: $(STAMP)
	$(BIN)/python benchmarks/fidelity.py $(if $(PIPELINE),--pipeline)

# pyperf as a second reference on single-thread cells, its workers given this environment.
bench-pyperf: $(STAMP)
	$(BIN)/python benchmarks/pyperf_reference.py

# Where the rounds of the last `make run` (or FROM=<results folder>) spent their time.
bench-overhead: $(STAMP)
	$(BIN)/python benchmarks/overhead.py --config $(CONFIG) $(if $(FROM),--results $(FROM))

# Every one-thread eager CPU cell of the last `make run` (or FROM=<results folder>) against its
# function timed alone, in fresh processes of its own taking turns A B A B.
bench-alone: $(STAMP)
	$(BIN)/python benchmarks/alone.py --config $(CONFIG) $(if $(FROM),--results $(FROM))

# Ops that update nothing timed in blocks of calls and each call alone (as a kernel that updates
# its arguments is timed, its inputs put back between calls), fresh processes A B A B.
bench-restore: $(STAMP)
	$(BIN)/python benchmarks/restore.py

# "Fits up to n" against the largest size that really fits under a memory limit (a cgroup, as root).
MEMORY ?= 3GiB
bench-fits: $(STAMP)
	$(BIN)/python benchmarks/fits.py --memory $(MEMORY)

# Bouts (cells taking turns) against cells sampled alone: ratios, half-widths and seconds.
bench-paired: $(STAMP)
	$(BIN)/python benchmarks/paired.py

# How often the ratio intervals hold the true ratio on a simulated drifting machine, paired and not.
bench-coverage: $(STAMP)
	$(BIN)/python benchmarks/coverage.py

# NumPy, torch eager, torch compiled and numpy compiled for the example kernels and two ops.
bench-compile: $(STAMP)
	$(BIN)/python benchmarks/compile.py

# How long CONFIG's grid takes, on the machine of results folder ROOFS (GPU=1: with a CUDA GPU).
ROOFS ?=
estimate: $(RUN_STAMP)
	PYTHONPATH=workflow $(BIN)/python -m offloadbench.estimate --configfile $(CONFIG) \
	  $(if $(ROOFS),--roofs $(ROOFS)) $(if $(GPU),--gpu)

# The same grid run twice (two labels), compared cell by cell; CONFIG picks the grid, and
# DISTURB=1 runs the second run beside a one-core busy loop switched on and off; KEEP=<folder>
# keeps both runs' results there (else they go with their temporary folder).
DISTURB ?=
KEEP ?=
bench-reproducibility: $(STAMP)
	$(BIN)/python benchmarks/reproducibility.py --config $(CONFIG) $(if $(DISTURB),--disturb) $(if $(KEEP),--keep $(KEEP))

# The GPU check: the GPU tests, a small GPU grid through the real pipeline, a one-screen verdict;
# results to $(OUT). STANDIN=1 rehearses it anywhere with the stand-in GPU.
STANDIN ?= 0
gpu-check:
	OUT=$(OUT) STANDIN=$(STANDIN) tools/gpu-check.sh

# Wheels for the lent GPU machine, which has no network: what the check needs and that host
# lacks (snakemake and what it needs, a few pins), for its Python; held under 60 MiB, what a call
# to it carries beside the project (GPU_PYTHON for another Python).
GPU_PYTHON ?= 3.12
gpu-wheels:
	$(PYTHON) tools/gpu-wheels.py --python $(GPU_PYTHON)

clean-venv:
	rm -rf $(VENV)
