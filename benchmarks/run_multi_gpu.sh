#!/usr/bin/env bash
# SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
# SPDX-License-Identifier: Apache-2.0
#
# NCCL over rmm-next's memory on several GPUs of one host (two H200s: nvidia-h200-x2), three steps:
#   1. bandwidth/   nccl_allreduce_bench, one process per GPU: all-reduce bus bandwidth from 1 MiB
#                   to 1 GiB over cudaMalloc, ncclMemAlloc and vmm_resource buffers (CSV, JSON).
#   2. nccl_debug/  the same program with NCCL_DEBUG=INFO on 4 MiB ncclMemAlloc and vmm_resource
#                   buffers: nccl_debug.log whole, registered_path.log its lines about registration.
#   3. torch/       torch.distributed all-reduce (NCCL backend, torch.multiprocessing spawn, one
#                   rank per GPU) over rmm_next.torch.nccl_mem_pool() with register_mem_pool
#                   (python/tests/scenarios/torch_nccl_pool.py): each rank's JSON and the log,
#                   NCCL_DEBUG=INFO included.
#
# Usage: benchmarks/run_multi_gpu.sh BUILD_DIR [OUT_DIR]
#   BUILD_DIR  the CMake build with benchmarks/nccl_allreduce_bench and the plugin (build/gpu)
#   OUT_DIR    where the results go (default: $OUT, else multi_gpu_results)
# Environment:
#   GPUS                        ranks (default 2)
#   RMM_NEXT_ALLOCATOR_LIBRARY  the plugin (default BUILD_DIR/src/allocator_plugin/...)
#   PYTHON                      the interpreter with torch (default python3)
# Writes summary.json (each step's exit status) and exits non-zero when a step failed.
set -uo pipefail

if [[ $# -lt 1 || $# -gt 2 ]]; then
  sed -n '4,22p' "$0" >&2
  exit 64
fi
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=$(cd "$1" && pwd) || exit 1
out=${2:-${OUT:-multi_gpu_results}}
mkdir -p "$out"/bandwidth "$out"/nccl_debug "$out"/torch || exit 1
out=$(cd "$out" && pwd)
gpus=${GPUS:-2}
python=${PYTHON:-python3}
bench=$build/benchmarks/nccl_allreduce_bench
export RMM_NEXT_ALLOCATOR_LIBRARY=${RMM_NEXT_ALLOCATOR_LIBRARY:-$build/src/allocator_plugin/librmm_next_allocator.so}

nvidia-smi topo -m > "$out/topology.txt" 2>&1

echo "== 1. all-reduce bus bandwidth, $gpus processes"
"$bench" --gpus "$gpus" --out "$out/bandwidth" > "$out/bandwidth/bench.log" 2>&1
bandwidth=$?
tail -n 40 "$out/bandwidth/bench.log"

echo "== 2. NCCL_DEBUG=INFO: the registered path"
NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,REG,COLL,NVLS "$bench" --gpus "$gpus" \
  --min-bytes 4M --max-bytes 4M --iterations 2 --warmup 1 --kinds ncclMemAlloc,vmm_resource \
  --out "$out/nccl_debug" > "$out/nccl_debug/nccl_debug.log" 2>&1
debug=$?
grep -iE "regist|zero.?copy|UB |user buffer|NVLS" "$out/nccl_debug/nccl_debug.log" \
  > "$out/nccl_debug/registered_path.log"
head -n 40 "$out/nccl_debug/registered_path.log"

echo "== 3. torch.distributed all-reduce through nccl_mem_pool() and register_mem_pool"
PYTHONPATH="$root/python${PYTHONPATH:+:$PYTHONPATH}" NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,REG \
  "$python" "$root/python/tests/scenarios/torch_nccl_pool.py" distributed "$gpus" "$out/torch" \
  > "$out/torch/torch_distributed.log" 2>&1
torch_status=$?
grep '^{' "$out/torch/torch_distributed.log" | tail -n 1 > "$out/torch/result.json"  # NCCL logs to stdout
cat "$out/torch/result.json"
grep -iE "regist" "$out/torch/torch_distributed.log" > "$out/torch/registered_path.log"

printf '{"gpus": %s, "bandwidth": %s, "nccl_debug": %s, "torch": %s}\n' \
  "$gpus" "$bandwidth" "$debug" "$torch_status" > "$out/summary.json"
cat "$out/summary.json"
[[ $bandwidth -eq 0 && $debug -eq 0 && $torch_status -eq 0 ]]
