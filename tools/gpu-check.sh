#!/usr/bin/env bash
# The GPU check, one shot on a bare GPU host: the GPU tests, then config/gpu-check.yaml through
# the real pipeline (every op on cuda, both modes, compiled CPU cells and a kernel compiled
# from NumPy on cuda), then a one-screen verdict (offloadbench.report.text.gpu_check). Everything lands
# under $OUT: verdict.txt, answer.txt (the decisions and every cell), pytest-gpu.log and .xml,
# pipeline.log, gpu-check-results.tar.gz (results/gpu-check).
# STANDIN=1 rehearses it on any machine with the stand-in GPU (OFFLOADBENCH_STANDIN_GPU=1).
# On a machine without snakemake (the lent GPU machine), the wheels carried in .whl/ (make
# gpu-wheels) are installed for this Python first.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:?usage: make gpu-check OUT=<dir> [STANDIN=1]}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
# 8 minutes on an H200 host; the stand-in's device is this CPU, so its rehearsal gets longer
BUDGET_S=${BUDGET_S:-$([ "${STANDIN:-0}" = 1 ] && echo 1800 || echo 480)}
began=$(date +%s)

PY=${PYTHON:-python3}
[ -x .venv/bin/python ] && PY=$(pwd)/.venv/bin/python
if ls .whl/*.whl >/dev/null 2>&1 && ! "$PY" -c "import snakemake, pytest" 2>/dev/null; then
  # every carried package, each in the wheel that fits this Python (the folder holds several)
  names=$(ls .whl/*.whl | sed 's#.*/##; s/-.*//' | sort -u)
  site=$(mktemp -d)
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --find-links .whl --target "$site" $names \
    || { echo "error: the wheels in .whl/ do not fit $("$PY" -V 2>&1) (make gpu-wheels)" >&2; exit 1; }
  export PYTHONPATH=$site${PYTHONPATH:+:$PYTHONPATH}
fi
if ! "$PY" -c "import snakemake, pytest" 2>/dev/null; then
  echo "error: snakemake or pytest is missing; carry their wheels in .whl/ (make gpu-wheels; docs/running.md)" >&2
  exit 1
fi
# The rules run `python` from PATH: make it this interpreter (a script, not a link, so a
# venv's interpreter still finds its venv).
bin=$(mktemp -d)
printf '#!/bin/sh\nexec "%s" "$@"\n' "$(command -v "$PY")" > "$bin/python"
chmod +x "$bin/python"
export PATH="$bin:$PATH" PYTHONUNBUFFERED=1
export PYTHONPATH=$(pwd)/workflow${PYTHONPATH:+:$PYTHONPATH}
if [ "${STANDIN:-0}" = 1 ]; then
  export OFFLOADBENCH_STANDIN_GPU=1 CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-0}
elif ! "$PY" -c "import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)"; then
  echo "error: gpu-check needs a CUDA GPU visible to torch (STANDIN=1 rehearses it with the stand-in GPU)" >&2
  exit 1
fi

echo "== GPU tests"
# only the GPU tests' modules: a module importing what this host lacks cannot stop them
"$PY" -m pytest -m gpu -q -p no:cacheprovider --junitxml "$OUT/pytest-gpu.xml" tests/measure/test_gpu.py tests/measure/test_system.py \
  2>&1 | tee "$OUT/pytest-gpu.log"

echo "== GPU grid through the pipeline"
work=$(mktemp -d)
"$PY" -m snakemake --cores all --configfile config/gpu-check.yaml --config results_dir="$work/results" 2>&1 \
  | tee "$OUT/pipeline.log"
pipeline=${PIPESTATUS[0]}

took=$(( $(date +%s) - began ))
results="$work/results/gpu-check"
"$PY" -m offloadbench.report.text.gpu_check "$results" --tests "$OUT/pytest-gpu.xml" --took-s "$took" --budget-s "$BUDGET_S" \
  > "$OUT/verdict.txt" 2>&1
status=$?
if [ "$pipeline" -ne 0 ]; then
  echo "FAIL the pipeline ended with status $pipeline (pipeline.log)" >> "$OUT/verdict.txt"
  status=1
fi
[ -f "$results/decisions.csv" ] && "$PY" -m offloadbench.report.text.summary "$results" --cells > "$OUT/answer.txt" 2>&1
tar -czf "$OUT/gpu-check-results.tar.gz" -C "$work/results" . 2>/dev/null
echo
cat "$OUT/verdict.txt"
echo "the answer and every cell: $OUT/answer.txt; results: $OUT/gpu-check-results.tar.gz"
exit $status
