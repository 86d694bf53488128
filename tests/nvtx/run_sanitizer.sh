#!/usr/bin/env bash
# SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
# SPDX-License-Identifier: Apache-2.0
#
# run_sanitizer.sh <compute-sanitizer (may be empty)> <program>
#
# Runs <program> under compute-sanitizer's memcheck and fails when the sanitizer reports an error
# or prints anything about NVTX (a rejected nvtxMemRegionsRegister, an invalid region name, ...).
# Exits 77 (skipped) when compute-sanitizer is not installed or the program finds no device; either
# reason goes to $RMM_NEXT_SKIPPED_LOG (the program writes its own), for the summary after the tests.
set -u
sanitizer=${1:-}
program=$2
if [[ -z $sanitizer || ! -x $sanitizer ]]; then
  sanitizer=$(command -v compute-sanitizer || true)
fi
if [[ -z $sanitizer ]]; then
  reason="nvtx_compute_sanitizer: compute-sanitizer not found (it comes with the CUDA toolkit)"
  echo "SKIPPED: $reason"
  # CTest shows a skipped test's output only with -V; after the tests it prints this file.
  if [[ -n ${RMM_NEXT_SKIPPED_LOG:-} ]]; then echo "$reason" >>"$RMM_NEXT_SKIPPED_LOG"; fi
  exit 77
fi
output=$("$sanitizer" --tool memcheck --error-exitcode 1 "$program" 2>&1)
status=$?
printf '%s\n' "$output"
if [[ $status -eq 77 ]]; then exit 77; fi
if grep -qi "nvtx" <<<"$output"; then
  echo "FAILED: compute-sanitizer printed NVTX warnings"
  exit 1
fi
exit "$status"
