#!/usr/bin/env bash
# SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
# SPDX-License-Identifier: Apache-2.0
#
# gpu_checks.sh STEP [LOG_DIR] - the GPU machine's checks, each sized for one call of about ten
# minutes. Logs go to LOG_DIR (default build/gpu-checks). Run from the repository root.
#
#   suite     configure and build the gpu preset for sm_90 (-lineinfo, so that memcheck can use the
#             same tree), then the C++ tests, CPU ones included (a machine with a driver is the
#             one where a CPU test's made-up stream handles would reach the driver), and the Python
#             GPU suite. The build-only tests (label build) run on CI.
#             RMM_NEXT_TEST_CCCL_INCLUDE (a newer CCCL's include folder) also builds the newer-CCCL
#             tests; RMM_NEXT_BENCHMARK_DIR (a Release Google Benchmark's lib/cmake/benchmark, see
#             benchmarks/build_google_benchmark.sh) also builds the benchmarks.
#   memcheck  every GPU test under compute-sanitizer memcheck, on the tree `suite` built: the
#             sanitizer's launcher is added to it (no rebuild) and build/gpu-sanitize made a link
#             to it for tests/sanitize/run_all.sh --no-build.
#   replay    replay_bench on the committed traces, every rmm-next resource (RMM's too when
#             replay_rmm_bench was built), RMM_NEXT_REPLAY_REPETITIONS each (default 3).
#   tests     for a call that must stay short: configure the gpu preset as `suite` does, build only
#             the programs of the tests whose names match the regular expression RMM_NEXT_TESTS,
#             and run those tests.
#   hotpaths  on the tree `suite` built with benchmarks: hit_path_bench and plugin_path_bench, then
#             the resources' alloc_free and the thread cache's mixed pattern against a base
#             build, paired by benchmarks/compare_builds.py over RMM_NEXT_COMPARE_ROUNDS rounds
#             (default 9), the one-thread programs pinned to two cores; plugin_path_bench too
#             when the base has it. RMM_NEXT_BASE_SOURCE
#             names the base's source tree (`git archive REV` unpacked), built here with the same
#             Google Benchmark.
# Environment: RMM_NEXT_RMM_ROOT (benchmarks/fetch_rmm.sh's folder) makes `suite` build RMM's
# peers too (replay_rmm_bench, mixed_pattern_rmm_bench).
# Environment: RMM_NEXT_GPU_ARCH (default 90), RMM_NEXT_CHECK_SECONDS (each step's time limit,
# default 560).
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root" || exit 1
step=${1:?usage: gpu_checks.sh suite|tests|memcheck|replay|hotpaths [LOG_DIR]}
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
    if [[ -n ${RMM_NEXT_RMM_ROOT:-} ]]; then
      extra+=("-DRMM_NEXT_RMM_ROOT=$RMM_NEXT_RMM_ROOT")
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
    say "C++ tests"
    # GPU tests hold the resource lock rmm_next_gpu (one at a time); CPU tests run beside them.
    timeout $(($(left) / 3)) ctest --test-dir build/gpu -LE '^(python|build)$' -j "$(nproc)" --timeout 200 \
      --output-on-failure --output-junit "$logs/gpu.xml" \
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
  tests)
    pattern=${RMM_NEXT_TESTS:?set RMM_NEXT_TESTS to a regular expression of test names}
    say configure
    cmake --preset gpu -DCMAKE_CUDA_ARCHITECTURES="${RMM_NEXT_GPU_ARCH:-90}" \
      -DCMAKE_CUDA_FLAGS=-lineinfo -UCMAKE_TEST_LAUNCHER -DRMM_NEXT_BUILD_BENCHMARKS=OFF \
      >"$logs/build.log" 2>&1 || { tail -40 "$logs/build.log"; exit 1; }
    # A test runs the program of its name, or of the name before its first dot (its modes). The
    # targets as Makefiles ("... name") or Ninja ("name: phony") list them.
    targets=$(cmake --build build/gpu --target help |
      sed -n 's/^\.\.\. \([^ ]*\).*/\1/p; s/^\([A-Za-z0-9_.+-]*\): .*/\1/p' | sort -u)
    wanted=$(ctest --test-dir build/gpu -N -R "$pattern" | sed -n 's/^ *Test *#[0-9]*: \([^ ]*\).*/\1/p' |
      sed 's/\..*//' | sort -u | comm -12 - <(echo "$targets"))
    [[ -n $wanted ]] || { echo "no test program matches '$pattern'"; exit 1; }
    say "build $(echo $wanted | wc -w) programs"
    # shellcheck disable=SC2086  # one target a word
    cmake --build build/gpu -j "$(nproc)" --target $wanted >>"$logs/build.log" 2>&1 ||
      { grep -n -A8 'error' "$logs/build.log" | head -80; exit 1; }
    say tests
    timeout $(($(left) - 5)) ctest --test-dir build/gpu -R "$pattern" -j "$(nproc)" --timeout 200 \
      --output-on-failure --output-junit "$logs/tests.xml" >"$logs/ctest_tests.log" 2>&1
    echo "ctest exit status $?"
    grep -E 'tests passed|\*\*\*|Total Test' "$logs/ctest_tests.log" | tail -30
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
  hotpaths)
    bench=build/gpu/benchmarks
    [[ -x $bench/hit_path_bench ]] || { echo "configure with benchmarks"; exit 1; }
    base_src=${RMM_NEXT_BASE_SOURCE:?set RMM_NEXT_BASE_SOURCE to the source tree of the base build}
    gbench=$(sed -n 's/^benchmark_DIR:PATH=//p' build/gpu/CMakeCache.txt)
    say "base build"
    cmake -S "$base_src" -B build/gpu-base -DCMAKE_BUILD_TYPE=Release -DRMM_NEXT_BUILD_TESTS=OFF \
      -DRMM_NEXT_BUILD_EXAMPLES=OFF -DCMAKE_CUDA_ARCHITECTURES="${RMM_NEXT_GPU_ARCH:-90}" \
      "-Dbenchmark_DIR=$gbench" >"$logs/base_build.log" 2>&1 &&
      cmake --build build/gpu-base -j "$(nproc)" --target alloc_free_bench mixed_pattern_bench \
        >>"$logs/base_build.log" 2>&1 || { tail -20 "$logs/base_build.log"; exit 1; }
    plugin=()  # the plugin's path too, where both builds have it
    if [[ -x $bench/plugin_path_bench && -f $base_src/benchmarks/plugin_path_bench.cpp ]] &&
      cmake --build build/gpu-base -j "$(nproc)" --target plugin_path_bench \
        >>"$logs/base_build.log" 2>&1; then
      plugin=(--pinned 'plugin_path=^plugin_path/torch_pair/')
    fi
    say "hit path"
    timeout 90 "$bench/hit_path_bench" --benchmark_repetitions=5 \
      --benchmark_report_aggregates_only=true >"$logs/hit_path.txt" 2>&1
    grep -E '_median ' "$logs/hit_path.txt"
    if [[ -x $bench/plugin_path_bench ]]; then
      timeout 60 "$bench/plugin_path_bench" --benchmark_repetitions=3 \
        --benchmark_report_aggregates_only=true >"$logs/plugin_path.txt" 2>&1
      grep -E '_median ' "$logs/plugin_path.txt"
    fi
    say "paired against the base"
    timeout $(($(left) - 5)) python3 benchmarks/compare_builds.py build/gpu-base/benchmarks "$bench" \
      "$logs/compare" --rounds "${RMM_NEXT_COMPARE_ROUNDS:-9}" --seconds $(($(left) - 15)) \
      --pinned 'alloc_free=^alloc_free(_paired)?/device/' \
      --pinned 'mixed_pattern=mixed_pattern/(own_stream|four_streams)/thread_cache/.*threads:1$' \
      --program 'mixed_pattern=mixed_pattern/(own_stream|four_streams)/thread_cache/.*threads:16$' \
      "${plugin[@]}" 2>/dev/null | tee "$logs/compare.txt" | grep -v '^Running\|^Run on\|^CPU\|^  L\|^Load\|^cuda_\|^gpu_\|^20'
    ;;
  *)
    echo "gpu_checks.sh: unknown step '$step' (suite, tests, memcheck, replay or hotpaths)" >&2
    exit 2
    ;;
esac
say done
