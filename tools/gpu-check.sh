#!/usr/bin/env bash
# The GPU check: the tests marked `gpu`, then config/gpu-check.yaml through the real
# pipeline (every GPU cell in 2 processes). Prints a short table, with the spread between
# processes, and leaves everything under $OUT:
#   pytest-gpu.log, pipeline.log, summary.txt, gpu-check-results.tar.gz (results/<machine>/)
# On a machine without snakemake (the lent GPU machine), wheels carried in .whl/ are used.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:?usage: make gpu-check OUT=<dir>}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)

PY=${PYTHON:-python3}
[ -x .venv/bin/python ] && PY=$(pwd)/.venv/bin/python
if ls .whl/*.whl >/dev/null 2>&1; then
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
  export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
elif ! "$PY" -c "import snakemake" 2>/dev/null; then
  echo "error: snakemake is not installed; carry its wheels in .whl/ (see docs/running.md, 'The GPU check')" >&2
  exit 1
fi
# The rules run `python` from PATH: make it this interpreter (a script, not a link, so a
# venv's interpreter still finds its venv).
bin=$(mktemp -d)
printf '#!/bin/sh\nexec "%s" "$@"\n' "$(command -v "$PY")" > "$bin/python"
chmod +x "$bin/python"
export PATH="$bin:$PATH"
if ! "$PY" -c "import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)"; then
  if [ "${ALLOW_NO_GPU:-0}" != 1 ]; then
    echo "error: gpu-check needs a CUDA GPU visible to torch (ALLOW_NO_GPU=1 rehearses it on the CPU)" >&2
    exit 1
  fi
  echo "warning: no CUDA GPU: rehearsal only, GPU tests skip and GPU cells are skipped" >&2
fi
export PYTHONUNBUFFERED=1
status=0
"$PY" -c "import torch; print('GPU:', torch.cuda.get_device_name(0) if torch.cuda.is_available() else 'none', '| torch', torch.__version__)" | tee "$OUT/summary.txt"

echo "== GPU tests"
PYTHONPATH=workflow${PYTHONPATH:+:$PYTHONPATH} "$PY" -m pytest -m gpu -q -p no:cacheprovider tests 2>&1 | tee "$OUT/pytest-gpu.log"
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1

echo "== GPU grid through the pipeline"
work=$(mktemp -d)
"$PY" -m snakemake --cores all --configfile config/gpu-check.yaml --config results_dir="$work/results" 2>&1 | tee "$OUT/pipeline.log"
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1

machine_dir="$work/results/gpu-check"
if [ -f "$machine_dir/timings.csv" ]; then
  PYTHONPATH=workflow${PYTHONPATH:+:$PYTHONPATH} "$PY" -m offloadbench.report.text.summary "$machine_dir" --cells | tee -a "$OUT/summary.txt"
fi
tar -czf "$OUT/gpu-check-results.tar.gz" -C "$work/results" . && echo "results: $OUT/gpu-check-results.tar.gz"
exit $status
