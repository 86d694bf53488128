#!/usr/bin/env bash
# Compile matrix: against every CCCL minor that PyPI's nvidia-cuda-cccl offers (3.0 … 3.5, the
# wheels of CUDA 13.0–13.3, with the CUDA 13 runtime headers of the installed toolkit) and the
# CCCL 2.x of CUDA 12.6 and 12.9 (nvidia-cuda-cccl-cu12, with that CUDA's nvidia-cuda-runtime-cu12
# headers and libcudart.so.12), with g++ and with nvcc, it
#   - compiles every public header of rmm-next alone and tests/compat/instantiate.cpp,
#   - expects tests/compile_fail/literal_zero_stream.cpp (a literal 0 for the stream) to fail
#     with the message that says to pass a stream, and
#   - builds and runs the CPU conformance tests (below: the refs, the adaptors over resources and
#     refs, the thread cache, cuda::mr::any_resource where CCCL has it, the owning setters of
#     per_device_resource_map, resource_cast / dynamic_resource_cast / shared_resource where CCCL
#     has them).
# It prints one line per CCCL x compiler and exits non-zero on any failure. Before that it checks
# that README.md and docs/ name the CCCL and CUDA 12 ranges of the list below.
#
#   .ci/compile_matrix.sh               the matrix
#   .ci/compile_matrix.sh --list        the list, one CCCL a line (no network)
#   .ci/compile_matrix.sh --check-docs  only the check of README.md and docs/ (no network)
#
# Environment: RMM_NEXT_WHEEL_DIR caches the unpacked wheels (default
# ${TMPDIR:-/tmp}/rmm-next-wheels, one folder per wheel, kept across runs); RMM_NEXT_MATRIX_JOBS
# compiles that many at once (default 2); CUDA_HOME is the CUDA 13 toolkit (its nvcc and libcudart).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cuda=${CUDA_HOME:-/usr/local/cuda}
wheel_dir=${RMM_NEXT_WHEEL_DIR:-${TMPDIR:-/tmp}/rmm-next-wheels}
jobs=${RMM_NEXT_MATRIX_JOBS:-2}

# ---- The list: CCCL major.minor, the wheel that carries it, the CUDA runtime it goes with -------
# One wheel per CCCL minor, the newest of each (pip index versions nvidia-cuda-cccl; the 13.3.x
# builds carry CCCL 3.3, 3.4 and 3.5). "toolkit": the CUDA 13 runtime headers of $cuda.
cccls=(
  "3.0 nvidia-cuda-cccl==13.0.85 toolkit"
  "3.1 nvidia-cuda-cccl==13.1.115 toolkit"
  "3.2 nvidia-cuda-cccl==13.2.86 toolkit"
  "3.3 nvidia-cuda-cccl==13.3.3.4.1 toolkit"
  "3.4 nvidia-cuda-cccl==13.3.4.3.1 toolkit"
  "3.5 nvidia-cuda-cccl==13.3.5.0.6 toolkit"
  "2.5 nvidia-cuda-cccl-cu12==12.6.77 nvidia-cuda-runtime-cu12==12.6.77"
  "2.8 nvidia-cuda-cccl-cu12==12.9.27 nvidia-cuda-runtime-cu12==12.9.79"
)
compilers=(g++ nvcc)
# The CPU conformance tests (GoogleTest programs that need no GPU).
tests=(tests/compat/conformance_test.cpp tests/resource_ref_test.cpp
       tests/statistics_adaptor_test.cpp tests/thread_cache_adaptor_test.cpp
       tests/any_resource_test.cpp tests/compat/cccl_interop_test.cpp)

# ---- The ranges the docs must name ----------------------------------------------------------------
# "CCCL <first> to <last>" over the CCCL 3 entries, "CUDA <first>–<last>" over the CUDA 12 runtimes.
cccl_range() {
  local first='' last='' entry cccl
  for entry in "${cccls[@]}"; do
    read -r cccl _ <<<"$entry"
    [[ $cccl == 3.* ]] || continue
    [[ -z $first ]] && first=$cccl
    last=$cccl
  done
  echo "CCCL $first to $last"
}
cuda12_range() {
  local first='' last='' entry runtime version
  for entry in "${cccls[@]}"; do
    read -r _ _ runtime <<<"$entry"
    [[ $runtime == toolkit ]] && continue
    version=$(cut -d. -f1,2 <<<"${runtime#*==}")
    [[ -z $first ]] && first=$version
    last=$version
  done
  echo "CUDA $first–$last"
}

check_docs() {
  local -a docs=("$root/README.md" "$root"/docs/*.md)
  local want_cccl want_cuda12 failed=0 found
  want_cccl=$(cccl_range)
  want_cuda12=$(cuda12_range)
  # Every range the docs state is the list's.
  while IFS= read -r found; do
    echo "FAIL  docs: '${found#*:}' in ${found%%:*}; the compile matrix covers $want_cccl"
    failed=1
  done < <(grep -oE 'CCCL 3\.[0-9]+ to [0-9]+\.[0-9]+' "${docs[@]}" | grep -vF ":$want_cccl" || true)
  while IFS= read -r found; do
    echo "FAIL  docs: '${found#*:}' in ${found%%:*}; the compile matrix covers $want_cuda12"
    failed=1
  done < <(grep -oE 'CUDA 12\.[0-9]+–12\.[0-9]+' "${docs[@]}" | grep -vF ":$want_cuda12" || true)
  # The support statements name it: README's requirements and its matrix sentence, and the
  # migration guide.
  if (($(grep -oF "$want_cccl" "$root/README.md" | wc -l) < 2)); then
    echo "FAIL  docs: README.md says '$want_cccl' less than twice (requirements, compile matrix)"
    failed=1
  fi
  grep -qF "$want_cccl" "$root/docs/migration_from_rmm.md" || {
    echo "FAIL  docs: docs/migration_from_rmm.md does not say '$want_cccl'"
    failed=1
  }
  grep -qF "$want_cuda12" "$root/README.md" || {
    echo "FAIL  docs: README.md does not say '$want_cuda12'"
    failed=1
  }
  [[ $failed -eq 0 ]] && echo "docs  name $want_cccl and $want_cuda12, as the list"
  return "$failed"
}

list() {
  local entry cccl wheel runtime
  for entry in "${cccls[@]}"; do
    read -r cccl wheel runtime <<<"$entry"
    [[ $runtime == toolkit ]] && runtime="CUDA 13 runtime headers of the toolkit"
    printf 'CCCL %-4s %-34s %s\n' "$cccl" "$wheel" "$runtime"
  done
}

# ---- Wheels: pip install --no-deps --target, one folder per wheel, kept ---------------------------
wheel_path() { echo "$wheel_dir/${1/==/-}"; }
install_wheel() {
  local spec=$1 dir
  dir=$(wheel_path "$spec")
  [[ -e $dir/.installed ]] && return
  echo "+ python3 -m pip install --no-deps --target $dir $spec"
  rm -rf "$dir"
  python3 -m pip install --quiet --disable-pip-version-check --root-user-action=ignore --no-deps \
    --target "$dir" "$spec"
  touch "$dir/.installed"
}

# ---- One configuration: entry index and compiler ------------------------------------------------
# Sets cccl, wheel, runtime, compiler, flags (include paths), link (libcudart), label.
configure() {
  local index=$1 inc rt_dir
  compiler=$2
  read -r cccl wheel runtime <<<"${cccls[$index]}"
  if [[ $runtime == toolkit ]]; then
    inc=$(wheel_path "$wheel")/nvidia/cu13/include/cccl
    if [[ $compiler == nvcc ]]; then
      flags=(-I"$inc")  # -I: ahead of the toolkit's own CCCL
    else
      flags=(-isystem "$inc" -isystem "$cuda/include")
    fi
    link=(-L"$cuda/lib64" -lcudart -Wl,-rpath,"$cuda/lib64")
  else
    inc=$(wheel_path "$wheel")/nvidia/cuda_cccl/include
    rt_dir=$(wheel_path "$runtime")/nvidia/cuda_runtime
    if [[ $compiler == nvcc ]]; then
      flags=(-I"$inc" -I"$rt_dir/include")
    else
      flags=(-isystem "$rt_dir/include" -isystem "$inc")
    fi
    link=(-L"$rt_dir/lib" -l:libcudart.so.12 -Wl,-rpath,"$rt_dir/lib")
  fi
  label=$index.$compiler
}

# compile <mode> <source> <output>; mode: syntax, object or preprocess (macros to stdout)
compile() {
  local mode=$1 source=$2 output=$3
  local -a cmd
  if [[ $compiler == nvcc ]]; then
    cmd=("$cuda/bin/nvcc" -std=c++20 -Werror=all-warnings -Xcompiler=-Wall,-Wextra,-Werror
         -I"$root/include" -I"$root/tests" "${flags[@]}" -x cu)
    case $mode in
      syntax) cmd+=(-c -o /dev/null) ;;
      # The test programs are .cpp files: nvcc's front end takes their hidden friends, found only
      # by ADL inside CCCL's concepts, for unused functions (#177).
      object) cmd+=(-diag-suppress=177 -c -o "$output") ;;
      preprocess) cmd+=(-E -Xcompiler=-dM) ;;
    esac
  else
    cmd=(g++ -std=c++20 -Wall -Wextra -Werror -I"$root/include" -I"$root/tests" "${flags[@]}"
         -x c++)
    case $mode in
      syntax) cmd+=(-fsyntax-only) ;;
      object) cmd+=(-c -o "$output") ;;
      preprocess) cmd+=(-E -dM) ;;
    esac
  fi
  "${cmd[@]}" "$source"
}

# One job of the matrix (run by xargs): --job <index> <compiler> <source>. Leaves
# $work/<label>/<name>.pass or .fail, and the output in <name>.log.
run_job() {
  local source=$3 name out type call
  configure "$1" "$2"
  name=$(basename "$source")
  out=$work/$label
  mkdir -p "$out"
  case $source in
    tests/*)
      name=${name%.cpp}
      if compile object "$root/$source" "$out/$name.o" >"$out/$name.log" 2>&1 &&
        g++ "$out/$name.o" -o "$out/$name" -lgtest -lgtest_main -pthread "${link[@]}" \
          >>"$out/$name.log" 2>&1 &&
        "$out/$name" >>"$out/$name.log" 2>&1; then
        touch "$out/$name.pass"
      else
        touch "$out/$name.fail"
      fi
      ;;
    literal0:*)  # literal0:<type>:<call> of tests/compile_fail/literal_zero_stream.cpp: must fail
      IFS=: read -r _ type call <<<"$source"
      flags+=(-DRMM_NEXT_TYPE="$type" -DRMM_NEXT_CALL="$call")
      if compile syntax "$root/tests/compile_fail/literal_zero_stream.cpp" /dev/null \
        >"$out/$name.log" 2>&1; then
        touch "$out/$name.fail"  # it compiled
      elif grep -q "takes the stream first: pass a cudaStream_t or cuda::stream_ref" \
        "$out/$name.log" || { ((type >= 6 && type <= 11)) &&
        grep -Eq "stream_ref::stream_ref\((int|.*nullptr_t)\)|no member.*allocate" "$out/$name.log"; }; then
        touch "$out/$name.pass"  # rmm-next's message, or CCCL's own refusal for CCCL's refs
      else
        touch "$out/$name.fail"
      fi
      ;;
    *)
      if compile syntax "$source" /dev/null >"$out/$name.log" 2>&1; then
        touch "$out/$name.pass"
      else
        touch "$out/$name.fail"
      fi
      ;;
  esac
}

case ${1:-} in
  --list) list; exit 0 ;;
  --check-docs) check_docs; exit ;;
  --job) work=$RMM_NEXT_MATRIX_WORK; run_job "$2" "$3" "$4"; exit 0 ;;
  '') ;;
  *) sed -n '2,18p' "$0" >&2; exit 64 ;;
esac

start=$SECONDS
failed=0
check_docs || failed=1
list

# Only what each configuration names may be on the include path.
unset CPATH CPLUS_INCLUDE_PATH C_INCLUDE_PATH
for entry in "${cccls[@]}"; do
  read -r _ wheel runtime <<<"$entry"
  install_wheel "$wheel"
  [[ $runtime == toolkit ]] || install_wheel "$runtime"
done

work=$(mktemp -d "${TMPDIR:-/tmp}/rmm-next-matrix.XXXXXX")
trap 'rm -rf "$work"' EXIT
export RMM_NEXT_MATRIX_WORK=$work

# ---- Sanity: each configuration sees the CCCL it claims, CUDA 12 ones nothing of $cuda for g++ ----
printf '#include <cuda/std/version>\n#include <cuda_runtime_api.h>\n' >"$work/probe.cpp"
declare -A version_of
for index in "${!cccls[@]}"; do
  for compiler in "${compilers[@]}"; do
    configure "$index" "$compiler"
    version=$(compile preprocess "$work/probe.cpp" - | awk '/#define CCCL_VERSION /{print $3}' || true)
    version_of[$label]="$((version / 1000000)).$((version / 1000 % 1000)).$((version % 1000))"
    if [[ ${version_of[$label]%.*} != "$cccl" ]]; then
      echo "FAIL  $compiler sees CCCL ${version_of[$label]}, expected $cccl ($wheel)"
      failed=1
    fi
    if [[ $runtime != toolkit && $compiler == g++ ]] &&
      g++ -std=c++20 -M "${flags[@]}" -x c++ "$work/probe.cpp" |
      grep -q "$(realpath "$cuda")\|$cuda/"; then
      echo "FAIL  g++ with $wheel includes headers from $cuda"
      failed=1
    fi
  done
done

# ---- The matrix, $jobs compilations at a time ------------------------------------------------------
headers=()
for header in "$root"/include/rmm_next/*.hpp; do
  name=$(basename "$header" .hpp)
  printf '#include <rmm_next/%s.hpp>\n' "$name" >"$work/$name.cpp"
  headers+=("$work/$name.cpp")
done
# A literal 0 for the stream must not compile (tests/compile_fail/literal_zero_stream.cpp; its
# CMake tests cover every type and call with this toolkit's CCCL): allocate(0, 256) on a resource
# and on a stream-ordered ref, deallocate(0, p, 256) on an adaptor.
literal0=(literal0:1:1 literal0:5:3 literal0:6:1)
for index in "${!cccls[@]}"; do
  for compiler in "${compilers[@]}"; do
    # The slowest first, so that the two queues end together.
    for source in "${tests[@]}" "$root/tests/compat/instantiate.cpp" "${literal0[@]}" \
      "${headers[@]}"; do
      echo "$index $compiler $source"
    done
  done
done | (cd "$root" && xargs -P "$jobs" -L 1 "$0" --job)

gxx_version="g++ $(g++ -dumpfullversion)"
nvcc_version="nvcc $("$cuda/bin/nvcc" --version | sed -n 's/.*release \([0-9.]*\).*/\1/p')"
summary() {  # summary <out dir> <sources...>: passed/total
  local out=$1 passed=0 total=0 source name
  shift
  for source in "$@"; do
    name=$(basename "$source")
    [[ $source == tests/* ]] && name=${name%.cpp}
    total=$((total + 1))
    [[ -e $out/$name.pass ]] && passed=$((passed + 1))
  done
  echo "$passed/$total"
}
echo
for index in "${!cccls[@]}"; do
  for compiler in "${compilers[@]}"; do
    configure "$index" "$compiler"
    out=$work/$label
    [[ $compiler == nvcc ]] && shown=$nvcc_version || shown=$gxx_version
    cases=$(cat "$out"/*.log 2>/dev/null | awk '/^\[  PASSED  \] [0-9]+ test/{n += $4} END{print n+0}')
    [[ $runtime == toolkit ]] && with="CUDA 13 runtime" || with="CUDA ${runtime#*==}"
    line=$(printf 'CCCL %-7s %-12s headers %s  instantiate %s  tests %s (%s cases)  literal 0 refused %s  [%s, %s]' \
      "${version_of[$label]}" "$shown" "$(summary "$out" "${headers[@]}")" \
      "$(summary "$out" instantiate.cpp)" "$(summary "$out" "${tests[@]}")" "$cases" \
      "$(summary "$out" "${literal0[@]}")" "$wheel" "${with%.*}")
    if compgen -G "$out/*.fail" >/dev/null; then
      echo "FAIL  $line"
      failed=1
    else
      echo "PASS  $line"
    fi
  done
done
# The first failures in full.
shown=0
for fail in "$work"/*/*.fail; do
  [[ -e $fail && $shown -lt 3 ]] || break
  echo
  echo "---- ${fail#"$work"/} ----"
  sed -n '1,40p' "${fail%.fail}.log" | sed 's/^/      /'
  shown=$((shown + 1))
done
echo "compile matrix: $(( (SECONDS - start) / 60 )) min $(( (SECONDS - start) % 60 )) s"
[[ $failed -eq 0 ]]
