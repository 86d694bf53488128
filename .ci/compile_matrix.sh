#!/usr/bin/env bash
# Compile matrix: every public header of rmm-next (each alone) plus tests/compat/instantiate.cpp
# (when present) against several CUDA runtime / CCCL combinations:
#   cuda13.0+cccl3.0   the installed CUDA 13.0 toolkit and its CCCL 3.0.x      (g++)
#   cuda13.0+cccl3.5   CUDA 13.0 runtime headers, CCCL 3.5 (CUDA 13.3) first  (g++ and nvcc)
#   cuda12.9+cccl2.8   CUDA 12.9 runtime headers and its CCCL 2.8 only        (g++)
# The newer/older headers come from pip wheels installed into a scratch dir (cached across runs).
# Prints PASS/FAIL per TU x config and exits non-zero on any failure.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cuda=${CUDA_HOME:-/usr/local/cuda}
wheel_dir=${RMM_NEXT_WHEEL_DIR:-${TMPDIR:-/tmp}/rmm-next-wheels}
wheels=(
  "nvidia-cuda-cccl==${RMM_NEXT_CCCL3_WHEEL_VERSION:-13.3.*}"
  "nvidia-cuda-runtime-cu12==${RMM_NEXT_CU12_WHEEL_VERSION:-12.9.*}"
  "nvidia-cuda-cccl-cu12==${RMM_NEXT_CU12_WHEEL_VERSION:-12.9.*}"
)
work=$(mktemp -d "${TMPDIR:-/tmp}/rmm-next-matrix.XXXXXX")
trap 'rm -rf "$work"' EXIT
# Only what each config names may be on the include path.
unset CPATH CPLUS_INCLUDE_PATH C_INCLUDE_PATH

# ---- Headers from pip wheels ----------------------------------------------------------------
stamp="$wheel_dir/.rmm-next-$(printf '%s\n' "${wheels[@]}" | sha1sum | cut -c1-12)"
if [[ ! -e $stamp ]]; then
  echo "+ python3 -m pip install --no-deps --target $wheel_dir ${wheels[*]}"
  rm -rf "$wheel_dir"
  python3 -m pip install --quiet --no-deps --target "$wheel_dir" "${wheels[@]}"
  touch "$stamp"
fi
cccl35_inc=$wheel_dir/nvidia/cu13/include/cccl
cu12_rt_inc=$wheel_dir/nvidia/cuda_runtime/include
cu12_cccl_inc=$wheel_dir/nvidia/cuda_cccl/include
for dir in "$cuda/include/cccl" "$cccl35_inc" "$cu12_rt_inc" "$cu12_cccl_inc"; do
  [[ -d $dir ]] || { echo "FAIL: missing include dir $dir" >&2; exit 1; }
done

# ---- Configurations: name, compiler, expected CCCL major.minor, include flags ---------------
# No -D: the headers define what CCCL needs, as for any user with a plain include path.
common=(-std=c++20 -Wall -Wextra -Werror -I"$root/include")
declare -A compiler cccl_expect flags
compiler[cuda13.0+cccl3.0]=g++
cccl_expect[cuda13.0+cccl3.0]=3.0
flags[cuda13.0+cccl3.0]="-isystem $cuda/include -isystem $cuda/include/cccl"
compiler[cuda13.0+cccl3.5]=g++
cccl_expect[cuda13.0+cccl3.5]=3.5
flags[cuda13.0+cccl3.5]="-isystem $cccl35_inc -isystem $cuda/include -isystem $cuda/include/cccl"
compiler[cuda13.0+cccl3.5.nvcc]=nvcc
cccl_expect[cuda13.0+cccl3.5.nvcc]=3.5
flags[cuda13.0+cccl3.5.nvcc]="-I$cccl35_inc"  # -I: ahead of the toolkit's own CCCL dir
compiler[cuda12.9+cccl2.8]=g++
cccl_expect[cuda12.9+cccl2.8]=2.8
flags[cuda12.9+cccl2.8]="-isystem $cu12_rt_inc -isystem $cu12_cccl_inc"
configs=(cuda13.0+cccl3.0 cuda13.0+cccl3.5 cuda13.0+cccl3.5.nvcc cuda12.9+cccl2.8)

# compile <config> <mode> <source> [extra args...]; mode: syntax (check) or preprocess
compile() {
  local config=$1 mode=$2 source=$3
  shift 3
  local -a cmd
  read -ra extra <<<"${flags[$config]}"
  if [[ ${compiler[$config]} == nvcc ]]; then
    cmd=("$cuda/bin/nvcc" -std=c++20 -Werror=all-warnings -Xcompiler=-Wall,-Wextra,-Werror
         -I"$root/include" "${extra[@]}" -x cu)
    if [[ $mode == syntax ]]; then cmd+=(-c -o /dev/null); else cmd+=(-E -Xcompiler=-dM); fi
  else
    cmd=(g++ "${common[@]}" "${extra[@]}" -x c++)
    if [[ $mode == syntax ]]; then cmd+=(-fsyntax-only); else cmd+=(-E -dM); fi
  fi
  "${cmd[@]}" "$@" "$source"
}

# ---- Sanity: each config sees the CCCL it claims (and cuda12.9 nothing of /usr/local/cuda) ----
failed=0
passed=0
printf '#include <cuda/std/version>\n#include <cuda_runtime_api.h>\n' >"$work/probe.cpp"
for config in "${configs[@]}"; do
  version=$(compile "$config" preprocess "$work/probe.cpp" | awk '/#define CCCL_VERSION /{print $3}' || true)
  seen="$((version / 1000000)).$((version / 1000 % 1000))"
  if [[ $seen != "${cccl_expect[$config]}" ]]; then
    echo "FAIL  $config  sees CCCL $seen, expected ${cccl_expect[$config]}"
    failed=$((failed + 1))
  else
    echo "info  $config  CCCL $version"
  fi
done
if g++ -std=c++20 -M ${flags[cuda12.9+cccl2.8]} -x c++ "$work/probe.cpp" | grep -q "$(realpath "$cuda")\|$cuda/"; then
  echo "FAIL  cuda12.9+cccl2.8  includes headers from $cuda"
  failed=$((failed + 1))
fi

# ---- The matrix --------------------------------------------------------------------------------
sources=()
for header in "$root"/include/rmm_next/*.hpp; do
  name=$(basename "$header")
  printf '#include <rmm_next/%s>\n' "$name" >"$work/${name%.hpp}.cpp"
  sources+=("$work/${name%.hpp}.cpp")
done
[[ -f $root/tests/compat/instantiate.cpp ]] && sources+=("$root/tests/compat/instantiate.cpp")
if [[ ${#sources[@]} -eq 0 ]]; then
  echo "FAIL: no public headers under $root/include/rmm_next" >&2
  exit 1
fi

for config in "${configs[@]}"; do
  for source in "${sources[@]}"; do
    label=$(basename "$source")
    [[ $source == "$work"/* ]] && label="rmm_next/${label%.cpp}.hpp"
    if compile "$config" syntax "$source" >"$work/log" 2>&1; then
      echo "PASS  $config  $label"
      passed=$((passed + 1))
    else
      echo "FAIL  $config  $label"
      sed -n '1,60p' "$work/log" | sed 's/^/      /'
      failed=$((failed + 1))
    fi
  done
done

echo "compile matrix: $passed passed, $failed failed"
[[ $failed -eq 0 ]]
