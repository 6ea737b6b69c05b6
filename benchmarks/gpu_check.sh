#!/usr/bin/env bash
# GPU check (see benchmarks/gpu_check.py): step time and peak memory of forked decoding, SFT and
# GRPO (seen, unseen) on Qwen3-0.6B/1.7B/4B-shaped NF4 models with random weights; JSON on the
# last line of stdout. Offline; under 8 minutes on one large GPU; a clean skip without CUDA.
#   bash benchmarks/gpu_check.sh [--models qwen3-0.6b,qwen3-4b] [--budget-s 400] [--out FILE]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
if [ -n "${PYTHON:-}" ]; then PY="$PYTHON"
elif [ -x .venv/bin/python ]; then PY=.venv/bin/python
else PY=python3; fi
export HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false PYTHONWARNINGS=ignore
# the script stops itself inside its budget; `timeout` (GNU coreutils) is the last-resort stop
if command -v timeout >/dev/null 2>&1; then
  exec timeout --signal=TERM --kill-after=10 470 "$PY" benchmarks/gpu_check.py "$@"
fi
exec "$PY" benchmarks/gpu_check.py "$@"
