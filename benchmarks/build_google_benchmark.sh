#!/usr/bin/env bash
# SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
# SPDX-License-Identifier: Apache-2.0
#
# Builds a Release Google Benchmark (NDEBUG, -O3) from source and installs it into PREFIX.
#
# Debian's libbenchmark-dev is built without NDEBUG, so it reports library_build_type "debug" in
# every result (and keeps its assertions); benchmarks/run_all.sh refuses such results unless
# RMM_NEXT_BENCH_ALLOW_DEBUG=1. This script makes the Release library to build against instead.
#
# Usage: benchmarks/build_google_benchmark.sh PREFIX [SOURCE_TARBALL]
#   PREFIX          gets include/benchmark/, lib/libbenchmark.so* and lib/cmake/benchmark/
#   SOURCE_TARBALL  Google Benchmark's source (.tar.gz); default: Debian's source package
#                   (apt-get source --download-only benchmark, through a private apt
#                   configuration: the machine's apt sources are left as they are)
# Then configure rmm-next with -Dbenchmark_DIR=PREFIX/lib/cmake/benchmark. The benchmark build
# copies libbenchmark.so next to the programs, so the build folder runs on a machine without it.
# Environment: JOBS (parallel build jobs, default 2).
set -euo pipefail

if [[ $# -lt 1 || $# -gt 2 ]]; then
  sed -n '11,18p' "$0" >&2
  exit 64
fi
mkdir -p "$1"
prefix=$(cd "$1" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

if [[ $# -eq 2 ]]; then
  tarball=$(cd "$(dirname "$2")" && pwd)/$(basename "$2")
else
  # Debian's deb-src for this release, in a private apt state under $work.
  codename=$(. /etc/os-release && echo "${VERSION_CODENAME:-bookworm}")
  mkdir -p "$work/apt/parts" "$work/apt/lists/partial" "$work/apt/cache/archives/partial"
  cat >"$work/apt/parts/debian-src.sources" <<EOF
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: $codename
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
  apt_opts=(-o "Dir::Etc::SourceList=/dev/null" -o "Dir::Etc::SourceParts=$work/apt/parts"
            -o "Dir::State::Lists=$work/apt/lists" -o "Dir::Cache=$work/apt/cache"
            -o "APT::Sandbox::User=root")
  apt-get "${apt_opts[@]}" -qq update
  (cd "$work" && apt-get "${apt_opts[@]}" -qq source --download-only benchmark)
  tarball=$(ls "$work"/benchmark_*.orig.tar.* | head -n 1)
fi
echo "source: $tarball"

mkdir -p "$work/src"
tar -xf "$tarball" -C "$work/src" --strip-components=1
cmake -S "$work/src" -B "$work/build" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_INSTALL_PREFIX="$prefix" -DCMAKE_INSTALL_LIBDIR=lib -DBUILD_SHARED_LIBS=ON \
  -DBENCHMARK_ENABLE_TESTING=OFF -DBENCHMARK_ENABLE_GTEST_TESTS=OFF \
  -DBENCHMARK_ENABLE_WERROR=OFF -DBENCHMARK_ENABLE_LIBPFM=OFF >"$work/configure.log" ||
  { cat "$work/configure.log" >&2; exit 1; }
cmake --build "$work/build" -j "${JOBS:-2}"
cmake --install "$work/build" >/dev/null

echo
echo "Release Google Benchmark installed in $prefix. Configure rmm-next with:"
echo "  -Dbenchmark_DIR=$prefix/lib/cmake/benchmark"
