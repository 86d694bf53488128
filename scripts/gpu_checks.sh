#!/usr/bin/env bash
# SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
# SPDX-License-Identifier: Apache-2.0
#
# gpu_checks.sh STEP [LOG_DIR] - the GPU machine's checks, each sized for one call of about ten
# minutes. Logs go to LOG_DIR (default build/gpu-checks). Run from the repository root.
#
#   suite     configure and build the gpu preset for sm_90 (-lineinfo, so that memcheck can use the
#             same tree), then the C++ GPU tests and the Python GPU suite.
#             RMM_NEXT_TEST_CCCL_INCLUDE (a newer CCCL's include folder) also builds the newer-CCCL
#             tests; RMM_NEXT_BENCHMARK_DIR (a Release Google Benchmark's lib/cmake/benchmark, see
#             benchmarks/build_google_benchmark.sh) also builds the benchmarks.
#   memcheck  every GPU test under compute-sanitizer memcheck, on the tree `suite` built: the
#             sanitizer's launcher is added to it (no rebuild) and build/gpu-sanitize made a link
#             to it for tests/sanitize/run_all.sh --no-build.
#   replay    replay_bench on the committed traces, every rmm-next resource (RMM's too when
#             replay_rmm_bench was built), RMM_NEXT_REPLAY_REPETITIONS each (default 3).
# Environment: RMM_NEXT_GPU_ARCH (default 90), RMM_NEXT_CHECK_SECONDS (each step's time limit,
# default 560).
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root" || exit 1
step=${1:?usage: gpu_checks.sh suite|memcheck|replay [LOG_DIR]}
logs=${2:-build/gpu-checks}
mkdir -p "$logs" && logs=$(cd "$logs" && pwd)
limit=${RMM_NEXT_CHECK_SECONDS:-560}
start=$(date +%s)
left() { echo $((limit - ($(date +%s) - start))); }
say() { echo "[$(($(date +%s) - start)) s] $*"; }

case $step in
  suite)
    extra=()
    if [[ -n ${RMM_NEXT_TEST_CCCL_INCLUDE:-} ]]; then
      extra+=("-DRMM_NEXT_TEST_CCCL_INCLUDE=$RMM_NEXT_TEST_CCCL_INCLUDE")
    fi
    if [[ -n ${RMM_NEXT_BENCHMARK_DIR:-} ]]; then
      extra+=("-Dbenchmark_DIR=$RMM_NEXT_BENCHMARK_DIR")
    else
      extra+=(-DRMM_NEXT_BUILD_BENCHMARKS=OFF)
    fi
    say configure
    cmake --preset gpu -DCMAKE_CUDA_ARCHITECTURES="${RMM_NEXT_GPU_ARCH:-90}" \
      -DCMAKE_CUDA_FLAGS=-lineinfo -UCMAKE_TEST_LAUNCHER "${extra[@]}" >"$logs/build.log" 2>&1 ||
      { tail -40 "$logs/build.log"; exit 1; }
    say build
    cmake --build build/gpu -j "$(nproc)" >>"$logs/build.log" 2>&1 ||
      { grep -n -A8 'error' "$logs/build.log" | head -80; exit 1; }
    say "C++ GPU tests"
    timeout $(($(left) / 3)) ctest --test-dir build/gpu -L '^gpu$' \
      -LE '^python$' --timeout 200 --output-on-failure --output-junit "$logs/gpu.xml" \
      >"$logs/ctest_gpu.log" 2>&1
    echo "ctest exit status $?"
    grep -E 'tests passed|\*\*\*|Total Test' "$logs/ctest_gpu.log" | tail -30
    say "Python GPU suite"
    python3 -c 'import pytest_timeout' 2>/dev/null && per_test=--timeout=200 || per_test=
    RMM_NEXT_ALLOCATOR_LIBRARY=$root/build/gpu/src/allocator_plugin/librmm_next_allocator.so \
      PYTHONDONTWRITEBYTECODE=1 timeout $(($(left) - 5)) python3 -m pytest -q -p no:cacheprovider \
      -rs -m gpu $per_test --durations=10 python/tests >"$logs/python.log" 2>&1
    echo "pytest exit status $?"
    grep -E '^(FAILED|ERROR)|passed|failed' "$logs/python.log" | tail -20
    ;;
  memcheck)
    [[ -d build/gpu/tests ]] || { echo "run the suite step first"; exit 1; }
    cmake build/gpu "-DCMAKE_TEST_LAUNCHER=bash;$root/tests/sanitize/launcher.sh" >/dev/null ||
      exit 1
    ln -sfn gpu build/gpu-sanitize
    timeout $(($(left) - 5)) bash tests/sanitize/run_all.sh --no-build \
      --summary "$logs/memcheck_summary.txt" memcheck >"$logs/memcheck.log" 2>&1
    echo "memcheck exit status $?"
    sed -n '1,40p' "$logs/memcheck_summary.txt"
    cmake build/gpu -UCMAKE_TEST_LAUNCHER >/dev/null  # the plain suite again
    ;;
  replay)
    [[ -x build/gpu/benchmarks/replay_bench ]] || { echo "configure with benchmarks"; exit 1; }
    export RMM_NEXT_REPLAY_REPETITIONS=${RMM_NEXT_REPLAY_REPETITIONS:-3}
    for trace in benchmarks/replay/traces/*.csv.gz; do
      say "replay $(basename "$trace")"
      timeout $(($(left) - 5)) benchmarks/replay/run_replay.sh build/gpu/benchmarks "$trace" \
        "$logs/replay" >>"$logs/replay.log" 2>&1 || echo "replay of $trace: exit status $?"
    done
    ls "$logs/replay"
    ;;
  *)
    echo "gpu_checks.sh: unknown step '$step' (suite, memcheck or replay)" >&2
    exit 2
    ;;
esac
say done
