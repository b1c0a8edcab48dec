#!/usr/bin/env bash
# The GPU check, one shot on a bare GPU host: the GPU tests, then config/gpu-check.yaml through
# the real pipeline (every op on cuda, both modes, compiled CPU cells and a kernel compiled
# from NumPy on cuda), then a one-screen verdict (offloadbench.report.text.gpu_check). Everything lands
# under $OUT: verdict.txt, answer.txt (the decisions and every cell), pytest-gpu.log and .xml,
# pipeline.log, phases.txt, gpu-check-results.tar.gz (results/gpu-check).
# STANDIN=1 rehearses it on any machine with the stand-in GPU (OFFLOADBENCH_STANDIN_GPU=1), under
# the host's constraints: the carried wheels installed into a clean folder, and a foreign pytest
# plugin that breaks collection where plugins autoload.
# On a machine without snakemake (the lent GPU machine), the wheels carried in .whl/ (make
# gpu-wheels) are installed first. Each phase's time is printed, and their sum; the phases only
# a real host has (CUDA's first import, cold Triton compiles) have budgets of their own.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:?usage: make gpu-check OUT=<dir> [STANDIN=1]}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
STANDIN=${STANDIN:-0}
# 8 minutes on a GPU host; the stand-in's device is this CPU, so its rehearsal gets longer
BUDGET_S=${BUDGET_S:-$([ "$STANDIN" = 1 ] && echo 1800 || echo 480)}
# What a real host spends that a rehearsal cannot time (seconds): CUDA's first import and
# context in the tests and the workers, and the cold Triton compiles of the compiled cuda cells.
REAL_ONLY="cuda-import:30 triton-compiles:90"
began=$(date +%s)
: > "$OUT/phases.txt"
phase_began=$began
phase() {  # the last phase's seconds into phases.txt, then the next phase: a name, its words
  local now; now=$(date +%s)
  [ -n "${current:-}" ] && echo "$current $((now - phase_began))" >> "$OUT/phases.txt"
  current=$1; phase_began=$now
  [ -n "${2:-}" ] && echo "== $2"
}

PY=${PYTHON:-python3}
[ -x .venv/bin/python ] && PY=$(pwd)/.venv/bin/python
# Inductor compiles in each process, never with a pool of one process per core; and pytest
# loads no plugin of the host's by itself (one that does not fit this pytest aborts collection).
export TORCHINDUCTOR_COMPILE_THREADS=1 PYTEST_DISABLE_PLUGIN_AUTOLOAD=1
if ls .whl/*.whl >/dev/null 2>&1 && { [ "$STANDIN" = 1 ] || ! "$PY" -c "import snakemake" 2>/dev/null; }; then
  phase wheels "the carried wheels installed"
  # every carried package into a folder of its own, first on the path
  site=$(mktemp -d)
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$site" .whl/*.whl \
    || { echo "error: the wheels in .whl/ do not fit $("$PY" -V 2>&1) (make gpu-wheels GPU_PYTHON=...)" >&2; exit 1; }
  export PYTHONPATH=$site${PYTHONPATH:+:$PYTHONPATH}
fi
if [ "$STANDIN" = 1 ]; then
  # a host's pytest plugin that does not fit: autoloaded, it would stop collection
  foreign=$(mktemp -d)
  mkdir -p "$foreign/foreign_plugin-1.0.dist-info"
  printf 'raise ImportError("a foreign pytest plugin that does not fit this pytest")\n' > "$foreign/foreign_plugin.py"
  printf 'Metadata-Version: 2.1\nName: foreign-plugin\nVersion: 1.0\n' > "$foreign/foreign_plugin-1.0.dist-info/METADATA"
  printf '[pytest11]\nforeign = foreign_plugin\n' > "$foreign/foreign_plugin-1.0.dist-info/entry_points.txt"
  export PYTHONPATH=$foreign${PYTHONPATH:+:$PYTHONPATH}
fi
if ! "$PY" -c "import snakemake, pytest" 2>/dev/null; then
  echo "error: snakemake or pytest is missing; carry snakemake's wheels in .whl/ (make gpu-wheels; docs/running.md)" >&2
  exit 1
fi
# The rules run `python` from PATH: make it this interpreter (a script, not a link, so a
# venv's interpreter still finds its venv).
bin=$(mktemp -d)
printf '#!/bin/sh\nexec "%s" "$@"\n' "$(command -v "$PY")" > "$bin/python"
chmod +x "$bin/python"
export PATH="$bin:$PATH" PYTHONUNBUFFERED=1
export PYTHONPATH=$(pwd)/workflow${PYTHONPATH:+:$PYTHONPATH}
if [ "$STANDIN" = 1 ]; then
  export OFFLOADBENCH_STANDIN_GPU=1 CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-0}
  export PYTHONPATH=$(pwd)/tests/standin:$PYTHONPATH  # the stand-in is test equipment, outside the package
elif ! "$PY" -c "import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)"; then
  echo "error: gpu-check needs a CUDA GPU visible to torch (STANDIN=1 rehearses it with the stand-in GPU)" >&2
  exit 1
fi

phase tests "GPU tests"
# only the GPU tests' modules: a module importing what this host lacks cannot stop them
"$PY" -m pytest -m gpu -q -p no:cacheprovider --junitxml "$OUT/pytest-gpu.xml" tests/measure/test_gpu.py tests/measure/test_cupy.py tests/measure/test_jax.py tests/measure/test_system.py \
  2>&1 | tee "$OUT/pytest-gpu.log"

phase pipeline "GPU grid through the pipeline"
work=$(mktemp -d)
"$PY" -m snakemake --cores all --configfile config/gpu-check.yaml --config results_dir="$work/results" 2>&1 \
  | tee "$OUT/pipeline.log"
pipeline=${PIPESTATUS[0]}

phase verdict
took=$(( $(date +%s) - began ))
results="$work/results/gpu-check"
"$PY" -m offloadbench.report.text.gpu_check "$results" --tests "$OUT/pytest-gpu.xml" --took-s "$took" --budget-s "$BUDGET_S" \
  --phases "$OUT/phases.txt" $([ "$STANDIN" = 1 ] && echo "--real-only $REAL_ONLY") > "$OUT/verdict.txt" 2>&1
status=$?
if [ "$pipeline" -ne 0 ]; then
  echo "FAIL the pipeline ended with status $pipeline (pipeline.log)" >> "$OUT/verdict.txt"
  status=1
fi
[ -f "$results/decisions.csv" ] && "$PY" -m offloadbench.report.text.summary "$results" --cells > "$OUT/answer.txt" 2>&1
tar -czf "$OUT/gpu-check-results.tar.gz" -C "$work/results" . 2>/dev/null
phase end
echo
cat "$OUT/verdict.txt"
echo "phases (seconds):"
total=0
while read -r name seconds; do echo "  $name: $seconds"; total=$((total + seconds)); done < "$OUT/phases.txt"
echo "  all: $total"
echo "the answer and every cell: $OUT/answer.txt; results: $OUT/gpu-check-results.tar.gz"
exit $status
