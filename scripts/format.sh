#!/usr/bin/env bash
# Formats rmm-next's C++ and CUDA sources with the pinned clang-format (.clang-format at the root).
#   scripts/format.sh           rewrite the files in place
#   scripts/format.sh --check   list the files that differ and exit 1 if any does (CI)
# The pinned version comes from PyPI: python3 -m pip install clang-format==20.1.8
# (older ones, 14 among them, mangle `requires` clauses). CLANG_FORMAT names another binary.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

pinned=20.1.8
clang_format=${CLANG_FORMAT:-clang-format}
version=$("$clang_format" --version | grep -o '[0-9][0-9.]*' | head -1)
if [[ $version != "$pinned" ]]; then
  echo "scripts/format.sh: clang-format $pinned is needed, found $version ($clang_format);" \
    "install it with: python3 -m pip install clang-format==$pinned" >&2
  exit 2
fi

mapfile -t files < <(git ls-files -- '*.hpp' '*.cpp' '*.cu' '*.cuh' '*.h')
if [[ ${1:-} == --check ]]; then
  "$clang_format" --style=file --dry-run --Werror "${files[@]}"
  echo "scripts/format.sh: ${#files[@]} files match .clang-format"
else
  "$clang_format" --style=file -i "${files[@]}"
fi
