#!/usr/bin/env bash
# SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
# SPDX-License-Identifier: Apache-2.0
#
# plugin_footprint.sh PROGRAM LIBRARY - what one PyTorch allocation and free through the allocator
# plugin's segment cache costs the host, counted rather than timed (valgrind; any x86-64 machine,
# no GPU): instructions per pair (callgrind, warm) and the data cache lines a pair touches when the
# host's caches were cold before each call (cachegrind: first-level data misses per pair beyond
# those of the 8 MiB written in between). PROGRAM is the build's tests/plugin_footprint, LIBRARY a
# librmm_next_allocator.so: run it on two builds' libraries to compare them.
# RMM_NEXT_FOOTPRINT_STACKED=1 (passed on to PROGRAM) puts the thread cache in front of the
# segment cache.
set -euo pipefail
program=${1:?usage: plugin_footprint.sh PROGRAM LIBRARY}
library=${2:?usage: plugin_footprint.sh PROGRAM LIBRARY}
command -v valgrind >/dev/null || { echo "plugin_footprint.sh: valgrind is needed" >&2; exit 2; }
instructions() {  # total instructions of a run with $1 measured pairs
  valgrind --tool=callgrind --callgrind-out-file=/dev/null "$program" "$library" "$1" 2>&1 |
    awk '/Collected/ {print $4}'
}
misses() {  # first-level data misses of a cold run with $1 measured pairs
  valgrind --tool=cachegrind --cache-sim=yes --I1=32768,8,64 --D1=49152,12,64 --LL=2097152,16,64 \
    --cachegrind-out-file=/dev/null "$program" "$library" "$1" cold 2>&1 |
    awk '/D1  misses/ {gsub(",", "", $4); print $4}'
}
a=$(instructions 0)
b=$(instructions 10000)
c=$(misses 200)
d=$(misses 400)
evicted=$((2 * (8 << 20) / 64))  # lines the two writes of 8 MiB between a pair's calls miss
echo "instructions per pair: $(((b - a) / 10000))"
echo "cache lines a cold pair touches: $(((d - c) / 200 - evicted))"
