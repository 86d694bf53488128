#!/usr/bin/env bash
# SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
# SPDX-License-Identifier: Apache-2.0
#
# Fetches RMM 26.10 for the peer benchmark (mixed_pattern_rmm_bench): the PyPI wheels librmm-cu13
# (headers, librmm.so, the CCCL 3.5 RMM is built with) and rapids-logger, unpacked into DEST.
#
# Usage: benchmarks/fetch_rmm.sh DEST [WHEEL_DIR]
#   DEST       gets librmm/ and rapids_logger/ (give it to CMake: -DRMM_NEXT_RMM_ROOT=DEST)
#   WHEEL_DIR  take the two wheels from this folder instead of downloading them
# Environment: RMM_NEXT_RMM_VERSION (default 26.10.0), RMM_NEXT_RAPIDS_LOGGER_VERSION (0.3.0).
#
# DEST holds no absolute path: copy it to a machine without network (same x86_64 Linux) and
# configure there. The benchmark build copies librmm.so and librapids_logger.so next to the
# program, so the build folder runs wherever it is carried too.
set -euo pipefail

if [[ $# -lt 1 || $# -gt 2 ]]; then
  sed -n '8,15p' "$0" >&2
  exit 64
fi
mkdir -p "$1"
dest=$(cd "$1" && pwd)
rmm_version=${RMM_NEXT_RMM_VERSION:-26.10.0}
logger_version=${RMM_NEXT_RAPIDS_LOGGER_VERSION:-0.3.0}

if [[ $# -eq 2 ]]; then
  wheels=$(cd "$2" && pwd)
else
  wheels=$dest/wheels
  mkdir -p "$wheels"
  # Wheels for the manylinux x86_64 platforms, whatever this machine's Python is (both are
  # py3-none: no Python extension inside).
  python3 -m pip download --no-deps --only-binary=:all: --dest "$wheels" \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
    --platform manylinux_2_24_x86_64 --platform manylinux_2_17_x86_64 \
    "librmm-cu13==$rmm_version" "rapids-logger==$logger_version"
fi

shopt -s nullglob
rmm_wheels=("$wheels"/librmm_cu13-"$rmm_version"-*.whl)
logger_wheels=("$wheels"/rapids_logger-"$logger_version"-*.whl)
if [[ ${#rmm_wheels[@]} -ne 1 || ${#logger_wheels[@]} -ne 1 ]]; then
  echo "fetch_rmm.sh: expected one librmm_cu13-$rmm_version and one rapids_logger-$logger_version" \
       "wheel in $wheels; found: ${rmm_wheels[*]:-none} ${logger_wheels[*]:-none}" >&2
  exit 1
fi

for wheel in "${rmm_wheels[0]}" "${logger_wheels[0]}"; do
  echo "unpacking $(basename "$wheel")"
  if command -v unzip >/dev/null; then
    unzip -q -o "$wheel" -d "$dest"
  else
    python3 -m zipfile -e "$wheel" "$dest"
  fi
done

for file in librmm/include/rmm/mr/arena_memory_resource.hpp librmm/include/rapids/cuda/std/version \
            librmm/lib64/librmm.so rapids_logger/include/rapids_logger/logger.hpp \
            rapids_logger/lib64/librapids_logger.so; do
  if [[ ! -f $dest/$file ]]; then
    echo "fetch_rmm.sh: $dest/$file missing: the wheels' layout changed" >&2
    exit 1
  fi
done

echo
version=$(cat "$dest/librmm/VERSION" 2>/dev/null || echo "$rmm_version")
echo "RMM $version is in $dest. Configure with:"
echo "  -DRMM_NEXT_RMM_ROOT=$dest"
echo "(RMM's own CMake package, which needs CMake >= 4.0, is under the prefixes"
echo "  $dest/librmm;$dest/rapids_logger)"
