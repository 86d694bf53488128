#!/usr/bin/env bash
# SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
# SPDX-License-Identifier: Apache-2.0
#
# Replays one allocation log on every resource, one process per resource, and writes Google
# Benchmark JSON. Builds nothing: give it the folder where replay_bench (and replay_rmm_bench,
# built with -DRMM_NEXT_RMM_ROOT, for RMM's resources) were built.
#
# Usage: benchmarks/replay/run_replay.sh BENCH_DIR LOG OUT_DIR
#   BENCH_DIR  e.g. build/default/benchmarks
#   LOG        a log in RMM's logging_resource_adaptor format (a .gz is unpacked to OUT_DIR first)
#   OUT_DIR    gets replay_<log>_<resource>.json and .log per resource (.json.failed: a replay
#              that failed, its error_message inside)
# Environment:
#   RMM_NEXT_REPLAY_ORDER        log (default) or free_after_allocate
#   RMM_NEXT_REPLAY_REPETITIONS  replays of the log per resource (default 5)
#   RMM_NEXT_REPLAY_RESOURCE     comma-separated resources (default: all the programs have)
# Exits 0 when every resource ran or the programs skipped (no CUDA device), non-zero when one
# failed.
set -uo pipefail

if [[ $# -ne 3 ]]; then
  sed -n '9,20p' "$0" >&2
  exit 64
fi
bench_dir=$(cd "$1" && pwd) || exit 1
log=$2
mkdir -p "$3" || exit 1
out_dir=$(cd "$3" && pwd)
repetitions=${RMM_NEXT_REPLAY_REPETITIONS:-5}
order=${RMM_NEXT_REPLAY_ORDER:-log}
if [[ ! -r $log ]]; then
  echo "run_replay.sh: cannot read the log $log" >&2
  exit 1
fi
name=$(basename "$log")
name=${name%.gz}
name=${name%.csv}
if [[ $log == *.gz ]]; then
  gunzip -c "$log" >"$out_dir/$name.csv" || exit 1
  log=$out_dir/$name.csv
fi

plain=$bench_dir/replay_bench
with_rmm=$bench_dir/replay_rmm_bench
if [[ ! -x $plain ]]; then
  echo "run_replay.sh: no $plain (configure with -DRMM_NEXT_BUILD_BENCHMARKS=ON and build" \
    "replay_bench)" >&2
  exit 1
fi

# resource -> program: rmm-next's from replay_bench, RMM's from replay_rmm_bench.
declare -A program_of
for r in $("$plain" --list-resources | awk '{print $1}'); do program_of[$r]=$plain; done
if [[ -x $with_rmm ]]; then
  for r in $("$with_rmm" --list-resources | awk '{print $1}'); do
    [[ -n ${program_of[$r]:-} ]] || program_of[$r]=$with_rmm
  done
else
  echo "run_replay.sh: no replay_rmm_bench in $bench_dir: RMM's resources are not replayed" >&2
fi
if [[ -n ${RMM_NEXT_REPLAY_RESOURCE:-} ]]; then
  IFS=, read -r -a resources <<<"$RMM_NEXT_REPLAY_RESOURCE"
else
  resources=(async_device_current async_device_owned thread_cache_current thread_cache_owned
             segment_cache_current segment_cache_owned thread_over_segment_cache
             segment_cache_idle64
             segment_cache_idle16_f50 segment_cache_idle32_f50
             segment_cache_idle32_f100 segment_cache_idle256
             segment_cache_idle1024 rmm_pool rmm_arena rmm_cuda_async)
fi

status=0
for r in "${resources[@]}"; do
  program=${program_of[$r]:-}
  if [[ -z $program ]]; then
    echo "run_replay.sh: $r: no program here has it, skipped" >&2
    continue
  fi
  json=$out_dir/replay_${name}_$r.json
  rm -f "$json"
  echo "run_replay.sh: $r ($(basename "$program"))"
  RMM_NEXT_REPLAY_RESOURCE= RMM_NEXT_REPLAY_LOG= RMM_NEXT_REPLAY_ORDER= \
    "$program" --log="$log" --resource="$r" --order="$order" \
    --benchmark_repetitions="$repetitions" --benchmark_report_aggregates_only=false \
    --benchmark_out="$json.tmp" --benchmark_out_format=json >"$out_dir/replay_${name}_$r.log" 2>&1
  rc=$?
  if [[ $rc -ne 0 ]]; then
    echo "run_replay.sh: $r failed (exit $rc): see $out_dir/replay_${name}_$r.log" >&2
    rm -f "$json.tmp"
    status=1
  elif grep -q '"error_occurred": true' "$json.tmp" 2>/dev/null; then
    echo "run_replay.sh: $r failed: $(grep -m1 '"error_message"' "$json.tmp")" >&2
    mv "$json.tmp" "$json.failed"
    status=1
  elif [[ -s $json.tmp ]]; then
    mv "$json.tmp" "$json"
    # Unlike run_all.sh, a debug Google Benchmark is accepted: it runs one iteration per replay.
    if grep -q '"library_build_type": "debug"' "$json"; then
      echo "run_replay.sh: note: $r ran with a debug build of Google Benchmark" >&2
    fi
  else  # exit 0 without results: the program skipped (no device); its log says why
    rm -f "$json.tmp"
    echo "run_replay.sh: $r skipped: $(tail -1 "$out_dir/replay_${name}_$r.log")" >&2
  fi
done
exit $status
