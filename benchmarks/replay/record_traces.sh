#!/usr/bin/env bash
# SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
# SPDX-License-Identifier: Apache-2.0
#
# Records the replay traces through rmm-next's plugin (rmm_next.configure(log=...)): PyTorch
# training runs (an nn.TransformerEncoder, a HuggingFace transformers GPT-2, a torchvision
# ResNet-18) and a CuPy workload, each in its own process, each under a minute on one GPU.
#
# Usage: benchmarks/replay/record_traces.sh OUT_DIR
#   OUT_DIR gets torch_transformer.csv.gz, hf_gpt2.csv.gz, torchvision_resnet.csv.gz,
#   cupy_workload.csv.gz and a .json summary of each
#   (benchmarks/replay/traces/ holds the ones kept in the repository).
# Environment: RMM_NEXT_ALLOCATOR_LIBRARY (the plugin), RMM_NEXT_TORCH_STEPS (default 100),
# RMM_NEXT_MODEL_STEPS (the GPT-2 and ResNet runs, default 60), RMM_NEXT_CUPY_ITERATIONS
# (default 400).
# A framework that is not installed is skipped.
set -uo pipefail

if [[ $# -ne 1 ]]; then
  sed -n '9,15p' "$0" >&2
  exit 64
fi
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$1" || exit 1
status=0
if python3 -c "import torch" 2>/dev/null; then
  python3 "$here/record_torch_trace.py" "$1" --steps "${RMM_NEXT_TORCH_STEPS:-100}" || status=1
else
  echo "record_traces.sh: PyTorch is not installed: no torch trace" >&2
fi
for model in hf_gpt2:transformers torchvision_resnet:torchvision; do
  if python3 -c "import ${model#*:}" 2>/dev/null; then
    RMM_NEXT_TRACE_MODEL=${model%%:*} python3 "$here/record_model_trace.py" "$1" \
      --steps "${RMM_NEXT_MODEL_STEPS:-60}" || status=1
  else
    echo "record_traces.sh: ${model#*:} is not installed: no ${model%%:*} trace" >&2
  fi
done
if python3 -c "import cupy" 2>/dev/null; then
  python3 "$here/record_cupy_trace.py" "$1" --iterations "${RMM_NEXT_CUPY_ITERATIONS:-400}" ||
    status=1
else
  echo "record_traces.sh: CuPy is not installed: no CuPy trace" >&2
fi
exit $status
