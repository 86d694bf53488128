#!/usr/bin/env bash
# SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
# SPDX-License-Identifier: Apache-2.0
#
# Runs the test programs that scripts/build_cuda12_suite.sh collected (copied next to them as
# run_tests.sh), as CTest would: exit status 77 is a skip, FAIL/PASS regular expressions apply.
# Needs only its own folder: tests.list and suite.tar.xz (the programs, libcudart.so.12 and the
# suite's libraries), which it unpacks into a temporary folder.
#
# Usage: run_tests.sh [REGEX]     run the tests whose name matches REGEX (grep -E), else all
# Environment:
#   RMM_NEXT_REQUIRE_GPU  1 (default): a missing device fails the GPU tests; 0: they skip
#   RMM_NEXT_TEST_LOGS    one log per test here (default: a new folder under ${TMPDIR:-/tmp})
#   RMM_NEXT_TEST_TIMEOUT seconds one test may run (default 600)
# Prints one line per test, the output of each failed test, and "N passed, N failed, N skipped";
# exits 1 when a test failed.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
filter=${1:-}
timeout_s=${RMM_NEXT_TEST_TIMEOUT:-600}
logs=${RMM_NEXT_TEST_LOGS:-$(mktemp -d "${TMPDIR:-/tmp}/rmm-next-cuda12.XXXXXX")}
mkdir -p "$logs"
export RMM_NEXT_SKIPPED_LOG=$logs/skipped.txt
: >"$RMM_NEXT_SKIPPED_LOG"

for file in tests.list suite.tar.xz; do
  [[ -f $here/$file ]] || { echo "run_tests.sh: $here/$file missing" >&2; exit 1; }
done
SUITE=$(mktemp -d "${TMPDIR:-/tmp}/rmm-next-cuda12-suite.XXXXXX")
trap 'rm -rf "$SUITE"' EXIT
if ! tar -xJf "$here/suite.tar.xz" -C "$SUITE" 2>/dev/null; then
  python3 -m tarfile -e "$here/suite.tar.xz" "$SUITE" ||
    { echo "run_tests.sh: cannot unpack $here/suite.tar.xz (needs xz or python3)" >&2; exit 1; }
fi
export LD_LIBRARY_PATH=$SUITE/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export RMM_NEXT_REQUIRE_GPU=${RMM_NEXT_REQUIRE_GPU:-1}

# ---- What runs: the CUDA 12 runtime of this folder, on this driver ----------------------------
echo "rmm-next CUDA $(cat "$here/cuda_version" 2>/dev/null || echo '12.x') suite from $here (logs: $logs)"
first=$(find "$SUITE/bin" -type f -name '*_test' | sort | head -n 1)
runtime=$(ldd "$first" | awk '/libcudart/ {print $3}')
if [[ $runtime != "$SUITE/lib/libcudart.so.12" ]]; then
  echo "run_tests.sh: $(basename "$first") loads '${runtime:-no libcudart}', not" \
       "$SUITE/lib/libcudart.so.12" >&2
  exit 1
fi
echo "runtime: libcudart.so.12 of the suite ($(basename "$(readlink -f "$runtime")"))"
if command -v nvidia-smi >/dev/null; then
  nvidia-smi --query-gpu=index,name,driver_version,compute_cap --format=csv,noheader |
    sed 's/^/gpu: /' || true
fi

passed=0
failed=0
skipped=0
failed_names=()

# suite_test NAME LABEL FAIL_REGEX PASS_REGEX [VAR=VALUE...] -- COMMAND...
suite_test() {
  local name=$1 label=$2 fail_regex=$3 pass_regex=$4
  shift 4
  local -a env=()
  while [[ $1 != -- ]]; do
    # RMM_NEXT_REQUIRE_GPU is this script's to set (see above).
    [[ $1 == RMM_NEXT_REQUIRE_GPU=* ]] || env+=("$1")
    shift
  done
  shift
  if [[ -n $filter ]] && ! grep -qE -- "$filter" <<<"$name"; then return; fi
  local log=$logs/$name.log status=0 verdict start=$SECONDS
  env ${env[@]+"${env[@]}"} timeout "$timeout_s" "$@" >"$log" 2>&1 </dev/null || status=$?
  if [[ $status -eq 77 ]]; then
    verdict=skipped
  elif [[ $status -eq 124 ]]; then
    verdict="failed (timed out after ${timeout_s}s)"
  elif [[ $status -ne 0 ]]; then
    verdict="failed (exit $status)"
  elif [[ -n $fail_regex ]] && grep -qE -- "$fail_regex" "$log"; then
    verdict="failed (output matches '$fail_regex')"
  elif [[ -n $pass_regex ]] && ! grep -qE -- "$pass_regex" "$log"; then
    verdict="failed (output lacks '$pass_regex')"
  else
    verdict=passed
  fi
  printf '%-45s %-4s %-8s %4ss\n' "$name" "$label" "${verdict%% *}" "$((SECONDS - start))"
  case $verdict in
    passed) passed=$((passed + 1)) ;;
    skipped)
      skipped=$((skipped + 1))
      grep -m1 '^SKIPPED' "$log" | sed 's/^/    /' || true
      ;;
    *)
      failed=$((failed + 1))
      failed_names+=("$name")
      echo "    $verdict; last lines of $log:"
      tail -n 60 "$log" | sed 's/^/    | /'
      ;;
  esac
}

# shellcheck source=/dev/null
source "$here/tests.list"

# GoogleTest's own skips (GTEST_SKIP: a second GPU, a feature this driver lacks) within passed
# programs, so that a test that checked nothing is visible.
if compgen -G "$logs/*.log" >/dev/null; then
  inner=$(grep -h '^\[  SKIPPED \] [^0-9]' "$logs"/*.log | sort -u || true)
  if [[ -n $inner ]]; then
    echo
    echo "Test cases skipped inside the programs:"
    sed 's/^/  /' <<<"$inner"
  fi
fi
if [[ -s $RMM_NEXT_SKIPPED_LOG ]]; then
  echo
  echo "Skip reasons:"
  sort -u "$RMM_NEXT_SKIPPED_LOG" | sed 's/^/  /'
fi
echo
[[ $failed -eq 0 ]] || echo "failed: ${failed_names[*]}"
[[ $((passed + failed + skipped)) -gt 0 ]] || { echo "run_tests.sh: no test matched '$filter'" >&2; exit 1; }
echo "$passed passed, $failed failed, $skipped skipped"
[[ $failed -eq 0 ]]
