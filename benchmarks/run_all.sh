#!/usr/bin/env bash
# SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
# SPDX-License-Identifier: Apache-2.0
#
# Runs every rmm-next benchmark on the current GPU and turns the results into benchmarks.md and
# benchmarks.png.
#
# Usage: benchmarks/run_all.sh BENCH_DIR OUT_DIR [DOCS_DIR]
#   BENCH_DIR  where the *_bench programs were built (e.g. build/default/benchmarks)
#   OUT_DIR    gets <name>.json and <name>.log per benchmark, and context.json (GPU, driver, CUDA
#              version, date)
#   DOCS_DIR   where benchmarks/bench_report.py writes benchmarks.md and benchmarks.png
#              (default: the repository's docs/)
# Environment:
#   RMM_NEXT_BENCH_REPETITIONS  repetitions of each benchmark (default 5)
#   RMM_NEXT_BENCH_CHECK_REPETITIONS  repetitions of alloc_free and thread_scaling, at least
#                               RMM_NEXT_BENCH_REPETITIONS (default 10): their 1-thread check
#                               compares fastest repetitions, and a run catches the machine's
#                               fast periods only with enough of them
#   RMM_NEXT_BENCH_CHECK_ROUNDS  short runs (3 repetitions) of the 256 B loops of alloc_free and
#                               of one thread of thread_scaling, one after each program (default
#                               1, 0 for none): the machine's fast periods can outlast every
#                               repetition of one program, and rounds spread over the run catch
#                               them for both. Written to OUT_DIR/check/<name>.<round>.json;
#                               none with RMM_NEXT_BENCH_FILTER set
#   RMM_NEXT_BENCH_MIN_TIME     minimum seconds per repetition (default 0.05)
#   RMM_NEXT_BENCH_FILTER       --benchmark_filter regex (default: all)
#   RMM_NEXT_BENCH_ALLOW_DEBUG  1: run even when Google Benchmark is a debug build
#   RMM_NEXT_BENCH_COMMIT       the commit named in the report (default: git rev-parse HEAD)
# About three minutes with the defaults. Exits non-zero when a benchmark or the report failed;
# the report is made from whatever did run (a program that failed leaves no JSON).
#
# Google Benchmark must be a Release build: Debian's libbenchmark-dev is built without NDEBUG and
# reports library_build_type "debug", and this script stops before running anything (exit 3).
# benchmarks/build_google_benchmark.sh PREFIX builds a Release one; configure the benchmarks with
# -Dbenchmark_DIR=PREFIX/lib/cmake/benchmark. mixed_pattern_rmm_bench (RMM peers, built with
# -DRMM_NEXT_RMM_ROOT, see benchmarks/fetch_rmm.sh) runs instead of mixed_pattern_bench when
# built: it holds the same benchmarks and RMM's. Its librmm.so and librapids_logger.so, like
# libbenchmark.so, are copied next to the programs at build time and found through $ORIGIN.
set -uo pipefail

if [[ $# -lt 2 || $# -gt 3 ]]; then
  sed -n '8,30p' "$0" >&2
  exit 64
fi
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bench_dir=$(cd "$1" && pwd) || exit 1
mkdir -p "$2" || exit 1
out_dir=$(cd "$2" && pwd)
docs_dir=${3:-$root/docs}
repetitions=${RMM_NEXT_BENCH_REPETITIONS:-5}
check_repetitions=${RMM_NEXT_BENCH_CHECK_REPETITIONS:-10}
[[ $check_repetitions -lt $repetitions ]] && check_repetitions=$repetitions
export RMM_NEXT_BENCH_MIN_TIME=${RMM_NEXT_BENCH_MIN_TIME:-0.05}
filter=${RMM_NEXT_BENCH_FILTER:-.}
check_rounds=${RMM_NEXT_BENCH_CHECK_ROUNDS:-1}
[[ $filter == . ]] || check_rounds=0  # a filtered run is not a whole report
benchmarks=(alloc_free thread_scaling random_allocations allocate_sync per_device_resource_map
            nvtx mixed_pattern mixed_pattern_rmm adaptor_overhead)
if [[ -x $bench_dir/mixed_pattern_rmm_bench ]]; then  # it runs the same benchmarks and more
  benchmarks=(alloc_free thread_scaling random_allocations allocate_sync per_device_resource_map
              nvtx mixed_pattern_rmm adaptor_overhead)
fi

# ---- Google Benchmark must be a Release build ----------------------------------------------------
# One short CPU-only benchmark, only for the library_build_type of the JSON context.
probe=$bench_dir/per_device_resource_map_bench
gbench_build=unknown
if [[ -x $probe ]]; then
  "$probe" --benchmark_filter='^map_read/.*threads:1$' --benchmark_repetitions=1 \
    --benchmark_out="$out_dir/probe.json.tmp" --benchmark_out_format=json >/dev/null 2>&1
  gbench_build=$(python3 -c 'import json, sys
print(json.load(open(sys.argv[1]))["context"].get("library_build_type", "unknown"))' \
                 "$out_dir/probe.json.tmp" 2>/dev/null || echo unknown)
  rm -f "$out_dir/probe.json.tmp"
fi
echo "Google Benchmark: $gbench_build build"
if [[ $gbench_build == debug && ${RMM_NEXT_BENCH_ALLOW_DEBUG:-0} != 1 ]]; then
  echo "refusing to run: the Google Benchmark these programs use is a debug build (Debian's" \
       "libbenchmark is built without NDEBUG). Build a Release one with" \
       "benchmarks/build_google_benchmark.sh PREFIX, reconfigure with" \
       "-Dbenchmark_DIR=PREFIX/lib/cmake/benchmark and rebuild; or set" \
       "RMM_NEXT_BENCH_ALLOW_DEBUG=1 to run anyway (the report then says so)." >&2
  exit 3
fi

# ---- Context: GPU, driver, CUDA version, date ---------------------------------------------------
gpu_csv=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -n 1)
smi_cuda=$(nvidia-smi 2>/dev/null | sed -n 's/.*CUDA Version: *\([0-9.]*\).*/\1/p' | head -n 1)
nvcc_version=$(nvcc --version 2>/dev/null | sed -n 's/.*release \([0-9.]*\), \(V[0-9.]*\).*/\1 (\2)/p')
commit=${RMM_NEXT_BENCH_COMMIT:-$(git -C "$root" rev-parse --short HEAD 2>/dev/null || true)}
GPU_CSV=$gpu_csv SMI_CUDA=$smi_cuda NVCC_VERSION=$nvcc_version COMMIT=$commit \
REPETITIONS=$repetitions CHECK_REPETITIONS=$check_repetitions GBENCH_BUILD=$gbench_build \
python3 - "$out_dir/context.json" <<'EOF' || exit 1
import datetime, json, os, sys
name, _, driver = os.environ["GPU_CSV"].partition(",")
ctx = {
    "gpu_name": name.strip() or "unknown (nvidia-smi gave nothing)",
    "driver_version": driver.strip() or "unknown",
    "cuda_version": os.environ["NVCC_VERSION"] or os.environ["SMI_CUDA"] or "unknown",
    "driver_cuda_version": os.environ["SMI_CUDA"] or "unknown",
    "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
    "repetitions": int(os.environ["REPETITIONS"]),
    "check_repetitions": int(os.environ["CHECK_REPETITIONS"]),
    "min_time": float(os.environ["RMM_NEXT_BENCH_MIN_TIME"]),
    "git_commit": os.environ["COMMIT"],
    "google_benchmark_build_type": os.environ["GBENCH_BUILD"],
}
with open(sys.argv[1], "w") as f:
    json.dump(ctx, f, indent=2)
print("context:", json.dumps(ctx))
EOF

# ---- Benchmarks --------------------------------------------------------------------------------
status=0
start=$SECONDS
rm -rf "$out_dir/check"
round=0
# One short run of each loop of the 1-thread check; a failed one leaves no JSON and fails the run.
check_round() {
  local name exe pattern
  round=$((round + 1))
  for name in alloc_free thread_scaling; do
    exe=$bench_dir/${name}_bench
    [[ -x $exe ]] || continue
    pattern='^alloc_free/[a-z]+/(raw|resource)/256/'
    [[ $name == thread_scaling ]] && pattern='^thread_scaling/[a-z]+/(raw|resource)/256/.*threads:1$'
    mkdir -p "$out_dir/check"
    if ! "$exe" --benchmark_out="$out_dir/check/$name.$round.json" --benchmark_out_format=json \
         --benchmark_repetitions=3 --benchmark_report_aggregates_only=true \
         --benchmark_filter="$pattern" >"$out_dir/check/$name.$round.log" 2>&1; then
      echo "check round $round ($name) failed: $out_dir/check/$name.$round.log"
      rm -f "$out_dir/check/$name.$round.json"
      status=1
    fi
  done
}
for name in "${benchmarks[@]}"; do
  exe=$bench_dir/${name}_bench
  if [[ ! -x $exe ]]; then
    echo "skip $name: $exe not built"
    continue
  fi
  echo "== $name"
  t0=$SECONDS
  reps=$repetitions
  [[ $name == alloc_free || $name == thread_scaling ]] && reps=$check_repetitions
  "$exe" --benchmark_out="$out_dir/$name.json" --benchmark_out_format=json \
    --benchmark_repetitions="$reps" --benchmark_report_aggregates_only=true \
    --benchmark_enable_random_interleaving=true --benchmark_filter="$filter" \
    >"$out_dir/$name.log" 2>&1
  rc=$?
  grep -E '_median|ERROR|needs a CUDA device|note:' "$out_dir/$name.log"
  echo "== $name: exit $rc after $((SECONDS - t0)) s"
  if [[ $rc -ne 0 ]]; then
    status=1
    rm -f "$out_dir/$name.json"  # never report a run that failed
  fi
  for ((i = 0; i < check_rounds; i++)); do check_round; done
done
echo "benchmarks took $((SECONDS - start)) s"

# ---- Report ------------------------------------------------------------------------------------
results=$(find "$out_dir" -maxdepth 1 -name '*.json' ! -name context.json | wc -l)
if [[ $results -gt 0 ]]; then
  python3 "$root/benchmarks/bench_report.py" --results "$out_dir" --docs "$docs_dir" || status=1
else
  echo "no results; no report written"
  status=1
fi
exit $status
