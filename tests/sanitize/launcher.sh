#!/usr/bin/env bash
# SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
# SPDX-License-Identifier: Apache-2.0
#
# launcher.sh <program> [args...]
#
# The test launcher of the gpu-sanitize presets (CMAKE_TEST_LAUNCHER): runs a test program under
# compute-sanitizer with --error-exitcode 1, so that any error it reports fails the test.
#   RMM_NEXT_SANITIZER_TOOL      memcheck (default, with --leak-check full), initcheck or synccheck
#   RMM_NEXT_COMPUTE_SANITIZER   the compute-sanitizer to use; else the one on PATH, else the
#                                toolkit's (CUDA_HOME, /usr/local/cuda)
#   RMM_NEXT_SANITIZER_LOG       a file to which each run appends one line:
#                                tool<TAB>program<TAB>cases<TAB>exit status<TAB>errors reported
# exclusions.txt beside this file lists the cases run with a check relaxed, or not at all: those
# cases run in a pass of their own (a GoogleTest filter), the rest of the program in another.
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
tool=${RMM_NEXT_SANITIZER_TOOL:-memcheck}
program=$1
shift
name=$(basename "$program")
label="$name${*:+ $*}"

case $tool in
  memcheck | initcheck | synccheck) ;;
  *)
    echo "FAILED: RMM_NEXT_SANITIZER_TOOL=$tool is not a compute-sanitizer tool"
    exit 1
    ;;
esac

sanitizer=${RMM_NEXT_COMPUTE_SANITIZER:-}
if [[ -z $sanitizer || ! -x $sanitizer ]]; then
  sanitizer=$(command -v compute-sanitizer || true)
fi
if [[ -z $sanitizer ]]; then
  cuda=${CUDA_HOME:-/usr/local/cuda}
  for candidate in "$cuda/bin/compute-sanitizer" "$cuda/compute-sanitizer/compute-sanitizer"; do
    if [[ -x $candidate ]]; then
      sanitizer=$candidate
      break
    fi
  done
fi
if [[ -z $sanitizer ]]; then
  echo "FAILED: compute-sanitizer not found (set RMM_NEXT_COMPUTE_SANITIZER or put it on PATH)"
  exit 1
fi

# This program's entries: cases, relaxation and reason of each.
cases=()
relaxed=()
reasons=()
while read -r entry_program entry_cases entry_relaxed entry_reason; do
  [[ -z ${entry_program:-} || $entry_program == \#* ]] && continue
  [[ $entry_program == "$name" ]] || continue
  case $entry_relaxed in
    api-errors | leaks | api-errors+leaks | skip) ;;
    *)
      echo "FAILED: $here/exclusions.txt: '$entry_relaxed' (for $name) is not one of" \
        "api-errors, leaks, api-errors+leaks, skip"
      exit 1
      ;;
  esac
  cases+=("$entry_cases")
  relaxed+=("$entry_relaxed")
  reasons+=("$entry_reason")
done <"$here/exclusions.txt"

for i in "${!cases[@]}"; do
  if [[ ${relaxed[i]} == skip && ${cases[i]} != '*' ]]; then
    reason="$name ${cases[i]}: not run under compute-sanitizer: ${reasons[i]}"
    echo "SKIPPED: $reason"
    if [[ -n ${RMM_NEXT_SKIPPED_LOG:-} ]]; then echo "$reason" >>"$RMM_NEXT_SKIPPED_LOG"; fi
  elif [[ ${relaxed[i]} == skip ]]; then
    reason="$name: not run under compute-sanitizer: ${reasons[i]}"
    echo "SKIPPED: $reason"
    if [[ -n ${RMM_NEXT_SKIPPED_LOG:-} ]]; then echo "$reason" >>"$RMM_NEXT_SKIPPED_LOG"; fi
    exit 77
  fi
  if [[ ${cases[i]} != '*' ]]; then
    for arg in "$@"; do
      if [[ $arg == --gtest_filter* ]]; then
        echo "FAILED: $name is run with $arg; exclusions.txt needs the filter for itself"
        exit 1
      fi
    done
  fi
done

# Runs one pass: compute-sanitizer with the options for `relaxation` (none, api-errors, leaks or
# api-errors+leaks) over the program with `filter` (empty: none); `what` names the cases in the log.
output=$(mktemp)
trap 'rm -f "$output"' EXIT
run_pass() {
  local relaxation=$1 filter=$2 what=$3
  local options=(--tool "$tool" --error-exitcode 1)
  if [[ $tool == memcheck && $relaxation != *leaks ]]; then options+=(--leak-check full); fi
  if [[ $relaxation == api-errors* ]]; then options+=(--report-api-errors no); fi
  local args=("$@")
  args=("${args[@]:3}")
  if [[ -n $filter ]]; then args+=("--gtest_filter=$filter"); fi
  echo "==> $sanitizer ${options[*]} $program ${args[*]}"
  "$sanitizer" "${options[@]}" "$program" "${args[@]}" 2>&1 | tee "$output"
  local status=${PIPESTATUS[0]}
  local errors
  errors=$(sed -n 's/^========= ERROR SUMMARY: \([0-9]*\) error.*/\1/p' "$output" | tail -1)
  if [[ -n ${RMM_NEXT_SANITIZER_LOG:-} ]]; then
    printf '%s\t%s\t%s\t%s\t%s\n' "$tool" "$label" "$what" "$status" "${errors:-?}" \
      >>"$RMM_NEXT_SANITIZER_LOG"
  fi
  if [[ -n $filter && $filter != -* ]] && grep -q '^\[==========\] 0 tests from' "$output"; then
    echo "FAILED: exclusions.txt names cases of $name that do not exist: $filter"
    return 1
  fi
  return "$status"
}

# A whole-program entry is the only pass; else the cases listed run apart from the rest.
whole=""
listed=()
for i in "${!cases[@]}"; do
  if [[ ${cases[i]} == '*' ]]; then
    whole=${relaxed[i]}
  else
    listed+=("${cases[i]}")
  fi
done
if [[ -n $whole ]]; then
  run_pass "$whole" "" "all ($whole relaxed)" "$@"
  exit $?
fi

rest=""
if ((${#listed[@]})); then rest="-$(IFS=:; echo "${listed[*]}")"; fi
what=all
if [[ -n $rest ]]; then what="all but the listed cases"; fi
run_pass none "$rest" "$what" "$@"
status=$?
if ((status == 77)); then exit 77; fi
for i in "${!cases[@]}"; do
  [[ ${relaxed[i]} == skip ]] && continue  # left out of every pass (above)
  run_pass "${relaxed[i]}" "${cases[i]}" "${cases[i]} (${relaxed[i]} relaxed)" "$@" || status=1
done
exit "$status"
