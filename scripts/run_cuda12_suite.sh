#!/usr/bin/env bash
# SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
# SPDX-License-Identifier: Apache-2.0
#
# Runs, with CTest, the tests that scripts/build_cuda12_suite.sh packed (this script is copied next
# to them as run_tests.sh): the build tree's test programs and CTest files, and the source tree the
# tests read, in suite.tar.xz. It unpacks them into a temporary folder, points CTest's files there,
# and runs `ctest -L '^(cpu|gpu)$' -LE '^(build|python)$'`: every test but those that need the
# build tree's compilers or the Python suite. Needs ctest (CMake 3.25 or newer) and its own folder.
#
# Usage: run_tests.sh [REGEX]     run the tests whose name matches REGEX (ctest -R), else all
# Environment:
#   RMM_NEXT_REQUIRE_GPU  1 (default): a missing device fails the GPU tests; 0: they skip
#   RMM_NEXT_TEST_LOGS    the tests' output (LastTest.log) and results (results.xml) go here
#                         (default: a new folder under ${TMPDIR:-/tmp})
#   RMM_NEXT_TEST_TIMEOUT seconds one test may run (default 600)
# Prints CTest's line per test, the output of each failed test, the test cases skipped inside the
# programs, the skip reasons, and "N passed, N failed, N skipped"; exits 1 when a test failed.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
filter=${1:-}
timeout_s=${RMM_NEXT_TEST_TIMEOUT:-600}
logs=${RMM_NEXT_TEST_LOGS:-$(mktemp -d "${TMPDIR:-/tmp}/rmm-next-cuda12.XXXXXX")}
mkdir -p "$logs"

for file in suite.paths suite.tar.xz; do
  [[ -f $here/$file ]] || { echo "run_tests.sh: $here/$file missing" >&2; exit 1; }
done
ctest=$(command -v ctest) || { echo "run_tests.sh: needs ctest (CMake 3.25 or newer)" >&2; exit 1; }
SUITE=$(mktemp -d "${TMPDIR:-/tmp}/rmm-next-cuda12-suite.XXXXXX")
trap 'rm -rf "$SUITE"' EXIT
if ! tar -xJf "$here/suite.tar.xz" -C "$SUITE" 2>/dev/null; then
  python3 -m tarfile -e "$here/suite.tar.xz" "$SUITE" ||
    { echo "run_tests.sh: cannot unpack $here/suite.tar.xz (needs xz or python3)" >&2; exit 1; }
fi

# CTest's files name the folders and the cmake of the machine that built the suite (suite.paths:
# build=, source=, cmake=): here they are $SUITE/build, $SUITE/source and this machine's cmake.
# The build tree first: it may lie inside the source tree.
paths=$(<"$here/suite.paths")
value() { sed -n "s/^$1=//p" <<<"$paths"; }
cmake_here=$(dirname "$ctest")/cmake
find "$SUITE/build" \( -name CTestTestfile.cmake -o -name CTestCustom.cmake \) -print0 |
  xargs -0 sed -i -e "s|$(value build)|$SUITE/build|g" -e "s|$(value source)|$SUITE/source|g" \
    -e "s|$(value cmake)|$cmake_here|g"

# The programs' run paths name the build machine: the suite's libraries are found from here.
libdirs=$(find "$SUITE/build" -name '*.so' -printf '%h\n' | sort -u | paste -sd:)
export LD_LIBRARY_PATH=$SUITE/lib${libdirs:+:$libdirs}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
# Read by every GPU test program (the suite is configured without a value of its own).
export RMM_NEXT_REQUIRE_GPU=${RMM_NEXT_REQUIRE_GPU:-1}

# ---- What runs: the CUDA 12 runtime of this folder, on this driver ----------------------------
echo "rmm-next CUDA $(cat "$here/cuda_version" 2>/dev/null || echo '12.x') suite from $here (logs: $logs)"
first=$(find "$SUITE/build" -path '*/CMakeFiles' -prune -o -type f -name '*_test' -print | sort |
  head -n 1)
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

status=0
"$ctest" --test-dir "$SUITE/build" -L '^(cpu|gpu)$' -LE '^(build|python)$' --no-tests=error \
  --timeout "$timeout_s" --output-on-failure --output-junit "$logs/results.xml" \
  ${filter:+-R "$filter"} || status=$?
cp "$SUITE/build/Testing/Temporary/LastTest.log" "$logs/" 2>/dev/null || true

# GoogleTest's own skips (GTEST_SKIP: a second GPU, a feature this driver lacks) within passed
# programs, so that a test that checked nothing is visible.
inner=$(grep -h '^\[  SKIPPED \] [^0-9]' "$logs/LastTest.log" 2>/dev/null | sort -u || true)
if [[ -n $inner ]]; then
  echo
  echo "Test cases skipped inside the programs:"
  sed 's/^/  /' <<<"$inner"
fi
if [[ -f $logs/results.xml ]]; then
  count() { grep -c "<testcase [^>]*status=\"$1\"" "$logs/results.xml" || true; }
  passed=$(count run)
  failed=$(count fail)
  skipped=$(count notrun)
  echo
  echo "$passed passed, $failed failed, $skipped skipped"
fi
[[ $status -eq 0 ]] || exit 1
