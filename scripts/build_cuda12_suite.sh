#!/usr/bin/env bash
# SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
# SPDX-License-Identifier: Apache-2.0
#
# Builds rmm-next's C++/CUDA test programs as CUDA 12 programs, to run on a GPU machine whose
# driver runs CUDA 12 programs: there the CUDA 12 code paths (host pinned pools on a HostNuma
# location, no managed pools, every `not_supported` answer) meet a real driver.
#
# Usage: scripts/build_cuda12_suite.sh CUDA_VERSION OUT_DIR
#   CUDA_VERSION  12.6 or 12.9 (any 12.x from 12.6 on that PyPI has wheels for)
#   OUT_DIR       gets what the GPU machine needs, nothing else: run_tests.sh, suite.paths and
#                 suite.tar.xz (the build tree's stripped test programs, libraries and CTest
#                 files, the source tree the tests read, and libcudart.so.12). Run
#                 OUT_DIR/run_tests.sh there: it runs them with ctest (no network, no CUDA
#                 toolkit needed).
# Environment:
#   RMM_NEXT_CUDA12_WORK  wheels, the assembled toolkit and the build tree
#                         (default ${TMPDIR:-/tmp}/rmm-next-cuda12-CUDA_VERSION; kept, so a second
#                         run rebuilds only what changed)
#   RMM_NEXT_WHEEL_DIR    take the wheels from this folder instead of downloading them
#   CUDA_HOME             the CUDA 13 toolkit whose nvcc compiles the .cu files (/usr/local/cuda)
#   CMAKE_BUILD_PARALLEL_LEVEL  build jobs (default 2)
#
# The CUDA 12 side comes from PyPI: nvidia-cuda-runtime-cu12 (headers, libcudart.so.12) and
# nvidia-cuda-cccl-cu12 (the CCCL 2.x of that toolkit: 2.5 for 12.6, 2.8 for 12.9), the wheels
# .ci/compile_matrix.sh compiles the headers against. PyPI carries no nvcc for CUDA 12
# (nvidia-cuda-nvcc-cu12 holds ptxas and libNVVM, no compiler driver), so the installed CUDA 13
# nvcc compiles the .cu files, with the CUDA 12 headers and runtime in place of its own; g++
# compiles the .cpp files against the same headers. Every program sees CUDART_VERSION 12.x and
# links libcudart.so.12, nothing of CUDA 13 but the compiler. Device code: sm_90 only.
#
# Not built: benchmarks, examples, the Python suite, rmm_interop_gpu_test (RMM needs CCCL 3.4+)
# and the build-only tests (compile_fail.*, header_compile, consumer, docs_*).
set -euo pipefail

usage() {
  sed -n '9,22p' "$0" >&2
  exit 64
}
[[ $# -eq 2 ]] || usage
version=$1
[[ $version =~ ^12\.([6-9])$ ]] || {
  echo "build_cuda12_suite.sh: CUDA_VERSION must be 12.6 ... 12.9, not '$version'" >&2
  exit 64
}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
mkdir -p "$2"
out=$(cd "$2" && pwd)
work=${RMM_NEXT_CUDA12_WORK:-${TMPDIR:-/tmp}/rmm-next-cuda12-$version}
cuda=${CUDA_HOME:-/usr/local/cuda}
export CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-2}
mkdir -p "$work"
log=$work/build.log
: >"$log"
echo "CUDA $version suite: work dir $work, output $out (log: $log)"

step() { echo "== $*"; }
fail() {
  echo "build_cuda12_suite.sh: $*" >&2
  exit 1
}
# Runs a command with its output in the log; on failure shows the log's end.
logged() {
  echo "+ $*" >>"$log"
  if ! "$@" >>"$log" 2>&1; then
    tail -n 60 "$log" >&2
    fail "failed: $*"
  fi
}

[[ -x $cuda/bin/nvcc ]] || fail "no nvcc at $cuda/bin/nvcc (set CUDA_HOME)"

# ---- Wheels -------------------------------------------------------------------------------------
wheels=("nvidia-cuda-runtime-cu12==$version.*" "nvidia-cuda-cccl-cu12==$version.*")
wheel_dir=${RMM_NEXT_WHEEL_DIR:-$work/wheels}
unpacked=$work/unpacked
stamp=$unpacked/.rmm-next-$(printf '%s\n' "${wheels[@]}" | sha1sum | cut -c1-12)
if [[ ! -e $stamp ]]; then
  if [[ -z ${RMM_NEXT_WHEEL_DIR:-} ]]; then
    step "pip download ${wheels[*]}"
    mkdir -p "$wheel_dir"
    # All three are py3-none manylinux wheels: no Python extension inside.
    logged python3 -m pip download --no-deps --only-binary=:all: --dest "$wheel_dir" \
      --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
      --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
      --platform manylinux1_x86_64 "${wheels[@]}"
  fi
  rm -rf "$unpacked"
  mkdir -p "$unpacked"
  shopt -s nullglob
  for name in nvidia_cuda_runtime_cu12 nvidia_cuda_cccl_cu12; do
    found=("$wheel_dir/$name-$version".*.whl)
    [[ ${#found[@]} -ge 1 ]] || fail "no $name-$version.* wheel in $wheel_dir"
    # The newest patch release when several are there.
    wheel=$(printf '%s\n' "${found[@]}" | sort -V | tail -n 1)
    step "unpack $(basename "$wheel")"
    logged python3 -m zipfile -e "$wheel" "$unpacked"
  done
  shopt -u nullglob
  touch "$stamp"
fi
runtime=$unpacked/nvidia/cuda_runtime
cccl=$unpacked/nvidia/cuda_cccl
for file in "$runtime/include/cuda_runtime_api.h" "$runtime/lib/libcudart.so.12" \
            "$cccl/include/cuda/std/version" "$cccl/lib/cmake/cccl/cccl-config.cmake"; do
  [[ -f $file ]] || fail "$file missing: the wheels' layout changed"
done

# ---- A toolkit folder: CUDA 12 headers and runtime, the CUDA 13 compiler ---------------------
# nvcc reads nvcc.profile next to the path it was started by, so a link to the real nvcc in a
# folder of our own takes its include and library dirs from here.
step "assemble the CUDA $version toolkit folder"
tk=$work/toolkit
rm -rf "$tk"
mkdir -p "$tk/bin" "$tk/include" "$tk/lib64"
for tool in nvcc cudafe++ fatbinary nvlink ptxas bin2c; do
  ln -s "$(realpath "$cuda/bin/$tool")" "$tk/bin/$tool"
done
ln -s "$(realpath "$cuda/bin/crt")" "$tk/bin/crt"
ln -s "$(realpath "$cuda/nvvm")" "$tk/nvvm"
cat >"$tk/bin/nvcc.profile" <<'EOF'
TOP              = $(_HERE_)/..
CICC_PATH        = $(TOP)/nvvm/bin
NVVMIR_LIBRARY_DIR = $(TOP)/nvvm/libdevice
PATH            += $(CICC_PATH):$(_HERE_):
INCLUDES        +=  "-I$(TOP)/include" $(_SPACE_)
SYSTEM_INCLUDES +=  "-isystem" "$(TOP)/include/cccl" $(_SPACE_)
LIBRARIES        =+ $(_SPACE_) "-L$(TOP)/lib64"
CUDAFE_FLAGS    +=
PTXAS_FLAGS     +=
EOF
# The runtime's headers; the compiler's own headers (crt/) come with the compiler.
cp -rp "$runtime/include/." "$tk/include/"
ln -s "$(realpath "$cuda/include/crt")" "$tk/include/crt"
for header in fatbinary_section.h nvPTXCompiler.h; do
  [[ -f $cuda/include/$header ]] && ln -s "$(realpath "$cuda/include/$header")" "$tk/include/$header"
done
# NVTX3 is header-only and independent of the CUDA version; the CUDA 12 wheels' copy
# (nvidia-nvtx-cu12) lacks the memory extension (nvToolsExtMem.h), so the complete set of the CUDA
# 13 toolkit is used, ahead of any other NVTX3 copy on the include path.
ln -s "$(realpath "$cuda/include/nvtx3")" "$tk/include/nvtx3"
ln -s "$cccl/include" "$tk/include/cccl"
cp -p "$runtime/lib/libcudart.so.12" "$tk/lib64/"
ln -s libcudart.so.12 "$tk/lib64/libcudart.so"
# nvlink's device runtime goes with the compiler. Every program links the shared CUDA 12 runtime
# (CMAKE_CUDA_RUNTIME_LIBRARY=Shared, CUDA::cudart); CMake's own compiler checks link the static
# one, which 12.6's wheel lacks: here that name is a linker script that reads the shared library.
ln -s "$(realpath "$cuda/lib64/libcudadevrt.a")" "$tk/lib64/libcudadevrt.a"
printf 'INPUT(%s)\n' "$tk/lib64/libcudart.so.12" >"$tk/lib64/libcudart_static.a"
printf 'CUDA Version %s (runtime and headers from nvidia-cuda-runtime-cu12)\n' "$version" \
  >"$tk/version.txt"

# ---- Configure and build the test programs -----------------------------------------------------
build=$work/build
step "configure ($build)"
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
[[ -f $build/CMakeCache.txt ]] && ! grep -q "^CMAKE_CUDA_COMPILER:.*=$tk/bin/nvcc$" \
  "$build/CMakeCache.txt" && rm -rf "$build"
# Only the toolkit folder may provide CUDA headers.
unset CPATH CPLUS_INCLUDE_PATH C_INCLUDE_PATH
logged cmake -S "$root" -B "$build" "${generator[@]}" \
  -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_CUDA_COMPILER="$tk/bin/nvcc" \
  -DCUDAToolkit_ROOT="$tk" \
  -DCCCL_DIR="$cccl/lib/cmake/cccl" \
  -DCMAKE_CUDA_ARCHITECTURES=90 \
  -DCMAKE_CUDA_RUNTIME_LIBRARY=Shared -DCMAKE_CUDA_FLAGS=-cudart=shared \
  -DRMM_NEXT_REQUIRE_GPU=OFF \
  -DRMM_NEXT_BUILD_TESTS=ON -DRMM_NEXT_BUILD_BENCHMARKS=OFF -DRMM_NEXT_BUILD_EXAMPLES=OFF

# RMM_NEXT_REQUIRE_GPU is left to run_tests.sh, which exports it: no test carries a value of its own.
# The default target builds every test program and nothing the build-only tests compile.
step "build the test programs with $CMAKE_BUILD_PARALLEL_LEVEL jobs"
logged cmake --build "$build"

# ---- The output folder: run_tests.sh, suite.paths and the packed trees -------------------------
# build/ (CTest's files, the stripped programs and libraries, in their places), source/ (the tracked
# files, which some tests read) and lib/ (libcudart.so.12) travel packed: suite.tar.xz, unpacked by
# run_tests.sh into a temporary folder, where it points CTest's files with suite.paths.
step "collect into $out"
stage=$work/stage
rm -rf "$stage" "$out/tests.list" "$out/suite.paths" "$out/run_tests.sh" "$out/suite.tar.xz"
mkdir -p "$stage/build" "$stage/source" "$stage/lib"
while IFS= read -r -d '' file; do
  mkdir -p "$stage/build/$(dirname "$file")"
  cp -p "$build/$file" "$stage/build/$file"
done < <(cd "$build" && find . \( -path '*/CMakeFiles' -o -path ./Testing -o -path ./tests/consumer \
  -o -path ./tests/docs_recipes \) -prune -o -type f \( -name CTestTestfile.cmake \
  -o -name CTestCustom.cmake -o -name '*.so' -o -perm -u+x \) -print0)
git -C "$root" ls-files -z | (cd "$root" && xargs -0 cp --parents -t "$stage/source") ||
  fail "cannot copy the tracked files of $root (needs a git checkout)"
cp "$runtime/lib/libcudart.so.12" "$stage/lib/"
while IFS= read -r -d '' program; do
  if file "$program" | grep -q ELF; then strip --strip-unneeded "$program"; fi
done < <(find "$stage/build" "$stage/lib" -type f -print0)

# Checks: CUDA 12 inside, nothing of CUDA 13.
while IFS= read -r -d '' program; do
  file "$program" | grep -q ELF || continue
  if readelf -d "$program" | grep -q 'NEEDED.*libcudart\.so\.13'; then
    fail "$(basename "$program") needs libcudart.so.13"
  fi
done < <(find "$stage/build" -type f -print0)

printf 'build=%s\nsource=%s\ncmake=%s\n' "$build" "$root" \
  "$(sed -n 's/^CMAKE_COMMAND:INTERNAL=//p' "$build/CMakeCache.txt")" >"$out/suite.paths"
tar -C "$stage" -cJf "$out/suite.tar.xz" build source lib
cp "$root/scripts/run_cuda12_suite.sh" "$out/run_tests.sh"
chmod +x "$out/run_tests.sh"
printf '%s\n' "$version" >"$out/cuda_version"

echo
du -sh "$out"
echo "Run on the GPU machine: $out/run_tests.sh   (from any directory; it needs only $out)"
