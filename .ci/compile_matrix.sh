#!/usr/bin/env bash
# Compile matrix. Each line of the list below is one CUDA and one CCCL, each taken from one place:
#   - CCCL 3.0 … 3.5 (the nvidia-cuda-cccl wheels of CUDA 13.0–13.3, one per minor) and a snapshot
#     of CCCL's main branch (3.6, .ci/fetch_cccl_main.sh), over the installed CUDA 13 toolkit;
#   - CUDA 12.6 and 12.9 with their CCCL 2.5 and 2.8, from that CUDA's wheels (runtime, CCCL, the
#     crt headers of nvidia-cuda-nvcc-cu12, NVTX), compiled by the toolkit's nvcc (PyPI has no
#     CUDA 12 nvcc) and by g++;
#   - CUDA 13.5, all of it from its wheels (nvcc, runtime, crt, NVVM, NVTX, and CCCL 3.5), its own
#     nvcc included: CCCL refuses an nvcc whose version is not the runtime headers'.
# For every line, with g++ and with that line's nvcc, it
#   - checks that the compiler sees the line's CCCL, CUDA runtime and nvcc versions, and that every
#     header it reads comes from the line's own folders (not from the toolkit's, nor from copies of
#     it such as /usr/local/include) but the toolkit lines' runtime headers and nvcc's own crt,
#   - compiles every public header of rmm-next and tests/compat/instantiate.cpp: with g++ each
#     header alone (so each is self-contained with that line's CCCL), with nvcc all of them in one
#     translation unit (nvcc's front ends see every header's code at a ninth of the cost of one
#     nvcc per header, which was most of the matrix's time),
#   - expects tests/compile_fail/literal_zero_stream.cpp (a literal 0 for the stream) to fail
#     with the message that says to pass a stream, and
#   - builds and runs the CPU conformance tests (below: the refs, the adaptors over resources and
#     refs, the thread cache, cuda::mr::any_resource where CCCL has it, the owning setters of
#     per_device_resource_map, resource_cast / dynamic_resource_cast / shared_resource where CCCL
#     has them).
# It prints one line per CCCL x CUDA x compiler and exits non-zero on any failure. Before that it
# checks that README.md and docs/ name the CCCL and CUDA 12 ranges of the list.
#
#   .ci/compile_matrix.sh               the matrix
#   .ci/compile_matrix.sh --list        the list, one line each (no network)
#   .ci/compile_matrix.sh --check-docs  only the check of README.md and docs/ (no network)
#
# Environment: RMM_NEXT_WHEEL_DIR keeps the wheels, one folder per line (default
# ${TMPDIR:-/tmp}/rmm-next-wheels, kept across runs); RMM_NEXT_MATRIX_JOBS compiles that many at once
# (default 2); RMM_NEXT_MATRIX_LINES runs only the lines whose label (--list's first column)
# matches this extended regular expression; CUDA_HOME is the CUDA 13 toolkit.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cuda=${CUDA_HOME:-/usr/local/cuda}
wheel_dir=${RMM_NEXT_WHEEL_DIR:-${TMPDIR:-/tmp}/rmm-next-wheels}
jobs=${RMM_NEXT_MATRIX_JOBS:-2}

# ---- The list ----------------------------------------------------------------------------------
# <CCCL> <CUDA> <kind> <what, installed into the line's own folder>
#   toolkit  the CCCL of one nvidia-cuda-cccl wheel (pip index versions nvidia-cuda-cccl: the
#            newest of each minor; the 13.3.x builds carry CCCL 3.3, 3.4 and 3.5), or "main" for
#            .ci/fetch_cccl_main.sh's snapshot, over the toolkit at $CUDA_HOME (its runtime
#            headers, libcudart and nvcc); <CUDA> is that toolkit's, checked.
#   cu12     the wheels of one CUDA 12 release: runtime, CCCL, and nvidia-cuda-nvcc-cu12 for the
#            crt headers that the runtime headers include (that wheel has no compiler driver). The
#            toolkit's nvcc compiles the .cu side, with its own crt. (nvidia-nvtx-cu12 has no
#            nvToolsExtMem.h: with these wheels rmm-next compiles NVTX out, as for g++ here.)
#   wheels   a whole CUDA 13 from its wheels, nvcc included, in one pip --target folder (they
#            share nvidia/cu13/{bin,include,lib}). nvidia-cuda-crt is needed: without it g++
#            would take the crt headers of whatever toolkit is on its default include path.
lines=(
  "3.0 13.0 toolkit nvidia-cuda-cccl==13.0.85"
  "3.1 13.0 toolkit nvidia-cuda-cccl==13.1.115"
  "3.2 13.0 toolkit nvidia-cuda-cccl==13.2.86"
  "3.3 13.0 toolkit nvidia-cuda-cccl==13.3.3.4.1"
  "3.4 13.0 toolkit nvidia-cuda-cccl==13.3.4.3.1"
  "3.5 13.0 toolkit nvidia-cuda-cccl==13.3.5.0.6"
  "3.6 13.0 toolkit main"
  "2.5 12.6 cu12 nvidia-cuda-runtime-cu12==12.6.77 nvidia-cuda-cccl-cu12==12.6.77 nvidia-cuda-nvcc-cu12==12.6.85"
  "2.8 12.9 cu12 nvidia-cuda-runtime-cu12==12.9.79 nvidia-cuda-cccl-cu12==12.9.27 nvidia-cuda-nvcc-cu12==12.9.86"
  "3.5 13.5 wheels nvidia-cuda-nvcc==13.5.37 nvidia-cuda-runtime==13.5.37 nvidia-cuda-crt==13.5.37 nvidia-nvvm==13.5.37 nvidia-nvtx==13.5.25 nvidia-cuda-cccl==13.3.5.0.6"
)
compilers=(g++ nvcc)
# The CPU conformance tests (GoogleTest programs that need no GPU).
tests=(tests/compat/conformance_test.cpp tests/resource_ref_test.cpp
       tests/statistics_adaptor_test.cpp tests/thread_cache_adaptor_test.cpp
       tests/any_resource_test.cpp tests/compat/cccl_interop_test.cpp)

# ---- The ranges the docs must name ----------------------------------------------------------------
# "CCCL <first> to <last>" over the released CCCL 3 minors (the main snapshot is no release),
# "CUDA <first>–<last>" over the CUDA 12 lines.
cccl_range() {
  local first='' last='' line cccl what
  for line in "${lines[@]}"; do
    read -r cccl _ _ what <<<"$line"
    [[ $cccl == 3.* && $what != main ]] || continue
    [[ -z $first ]] && first=$cccl
    [[ $(printf '%s\n' "$last" "$cccl" | sort -V | tail -1) == "$cccl" ]] && last=$cccl
  done
  echo "CCCL $first to $last"
}
cuda12_range() {
  local first='' last='' line version
  for line in "${lines[@]}"; do
    read -r _ version _ <<<"$line"
    [[ $version == 12.* ]] || continue
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

# The line's label: CCCL and CUDA, e.g. cccl3.5-cuda13.5.
label_of() {
  local cccl cuda
  read -r cccl cuda _ <<<"$1"
  echo "cccl$cccl-cuda$cuda"
}

list() {
  local line cccl version kind what
  for line in "${lines[@]}"; do
    read -r cccl version kind what <<<"$line"
    case $kind in
      toolkit)
        [[ $what == main ]] && what="CCCL main (.ci/fetch_cccl_main.sh)"
        what="$what over the toolkit's runtime and nvcc" ;;
      cu12) what="$what, the toolkit's nvcc" ;;
      wheels) what="$what, this nvcc" ;;
    esac
    printf '%-18s %s\n' "$(label_of "$line")" "$what"
  done
}

# ---- Wheels: one pip --target folder per line, kept; .installed says what is in it ----------------
line_dir() { echo "$wheel_dir/$(label_of "$1")"; }
install_line() {
  local line=$1 dir kind what
  read -r _ _ kind what <<<"$line"
  dir=$(line_dir "$line")
  if [[ $what == main ]]; then
    "$root/.ci/fetch_cccl_main.sh" "$dir"
    return
  fi
  [[ -e $dir/.installed && $(<"$dir/.installed") == "$what" ]] && return
  echo "+ python3 -m pip install --no-deps --target $dir $what"
  rm -rf "$dir"
  # shellcheck disable=SC2086 # $what: the wheels, one word each
  python3 -m pip install --quiet --disable-pip-version-check --root-user-action=ignore --no-deps \
    --target "$dir" $what
  echo "$what" >"$dir/.installed"
}

# ---- One configuration: line index and compiler --------------------------------------------------
# g++'s own include folders without /usr/local's: there an image may keep links to (or copies of)
# a toolkit's headers, which g++ would read after the -isystem folders (crt/, nvtx3/, nccl.h).
# The lines that are not over the toolkit get these with -nostdinc.
std_dirs=()
while IFS= read -r dir; do
  [[ $dir == /usr/local/* ]] || std_dirs+=(-isystem "$dir")
done < <(g++ -x c++ -E -v - </dev/null 2>&1 |
         sed -n '/^#include <...> search starts here:$/,/^End of search list\.$/{s/^ //p}')

# Sets cccl, version (CUDA), kind, dir, compiler, nvcc, flags (include paths), link (libcudart),
# own (the line's include folders), allowed (where else a header may come from; realpath'd) and
# label.
configure() {
  local line=${lines[$1]} what inc runtime
  compiler=$2
  read -r cccl version kind what <<<"$line"
  dir=$(line_dir "$line")
  label=$(label_of "$line").$compiler
  nvcc=$cuda/bin/nvcc
  # The compiler's own C++ and C library headers.
  allowed=(/usr/include/ /usr/lib/gcc/)
  case $kind in
    toolkit)
      inc=$dir/nvidia/cu13/include/cccl
      [[ $what == main ]] && inc=$dir/include
      own=("$inc")
      if [[ $compiler == nvcc ]]; then
        flags=(-I"$inc")  # -I: ahead of the toolkit's own CCCL
      else
        flags=(-isystem "$inc" -isystem "$cuda/include")
      fi
      allowed+=("$(realpath "$cuda")/")  # its runtime headers (its CCCL is shadowed: checked)
      link=(-L"$cuda/lib64" -lcudart -Wl,-rpath,"$cuda/lib64")
      ;;
    cu12)
      runtime=$dir/nvidia/cuda_runtime
      own=("$runtime/include" "$dir/nvidia/cuda_cccl/include")
      if [[ $compiler == nvcc ]]; then
        flags=(-I"$dir/nvidia/cuda_cccl/include" -I"$runtime/include")
        # The toolkit's nvcc reads its own include folder after these: its crt/ and what the line
        # has no copy of (nvtx3/, nccl.h), never what the line has (checked).
        allowed+=("$(realpath "$cuda")/")
      else
        own+=("$dir/nvidia/cuda_nvcc/include")  # crt/, which the runtime headers include
        flags=(-isystem "$runtime/include" -isystem "$dir/nvidia/cuda_cccl/include"
               -isystem "$dir/nvidia/cuda_nvcc/include" -nostdinc "${std_dirs[@]}")
      fi
      link=(-L"$runtime/lib" -l:libcudart.so.12 -Wl,-rpath,"$runtime/lib")
      ;;
    wheels)
      own=("$dir/nvidia/cu13/include" "$dir/nvidia/cu13/include/cccl")
      if [[ $compiler == nvcc ]]; then
        nvcc=$dir/nvidia/cu13/bin/nvcc
        # Its nvcc.profile names its include/ and include/cccl.
        flags=(-Xcompiler=-nostdinc "${std_dirs[@]}")
      else
        flags=(-isystem "$dir/nvidia/cu13/include/cccl" -isystem "$dir/nvidia/cu13/include"
               -nostdinc "${std_dirs[@]}")
      fi
      link=(-L"$dir/nvidia/cu13/lib" -l:libcudart.so.13 -Wl,-rpath,"$dir/nvidia/cu13/lib")
      ;;
  esac
}

# compile <mode> <source> <output>; mode: syntax, object, preprocess (macros to stdout) or depend
# (the headers read, one a line, to stdout)
compile() {
  local mode=$1 source=$2 output=$3
  local -a cmd
  if [[ $compiler == nvcc ]]; then
    cmd=("$nvcc" -std=c++20 -Werror=all-warnings -Xcompiler=-Wall,-Wextra,-Werror
         -I"$root/include" -I"$root/tests" "${flags[@]}" -x cu)
    case $mode in
      syntax) cmd+=(-c -o /dev/null) ;;
      # The test programs are .cpp files: nvcc's front end takes their hidden friends, found only
      # by ADL inside CCCL's concepts, for unused functions (#177).
      object) cmd+=(-diag-suppress=177 -c -o "$output") ;;
      preprocess) cmd+=(-E -Xcompiler=-dM) ;;
      depend) cmd+=(-M) ;;
    esac
  else
    cmd=(g++ -std=c++20 -Wall -Wextra -Werror -I"$root/include" -I"$root/tests" "${flags[@]}"
         -x c++)
    case $mode in
      syntax) cmd+=(-fsyntax-only) ;;
      object) cmd+=(-c -o "$output") ;;
      preprocess) cmd+=(-E -dM) ;;
      depend) cmd+=(-M) ;;
    esac
  fi
  if [[ $mode == depend ]]; then
    # make's rule: "<target> : <headers…>" over continued lines; nvcc writes " : ".
    "${cmd[@]}" "$source" | tr -d '\\\n' | sed 's/^[^:]*://' | tr ' ' '\n' | grep -v '^$' | sort -u
  else
    "${cmd[@]}" "$source"
  fi
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
  *) sed -n '2,29p' "$0" >&2; exit 64 ;;
esac

start=$SECONDS
failed=0
check_docs || failed=1
list

# The lines to run.
selected=()
for index in "${!lines[@]}"; do
  [[ $(label_of "${lines[$index]}") =~ ${RMM_NEXT_MATRIX_LINES:-.} ]] && selected+=("$index")
done
((${#selected[@]})) || { echo "FAIL  no line matches RMM_NEXT_MATRIX_LINES"; exit 1; }

# Only what each configuration names may be on the include path.
unset CPATH CPLUS_INCLUDE_PATH C_INCLUDE_PATH
for index in "${selected[@]}"; do
  install_line "${lines[$index]}"
done

work=$(mktemp -d "${TMPDIR:-/tmp}/rmm-next-matrix.XXXXXX")
trap 'rm -rf "$work"' EXIT
export RMM_NEXT_MATRIX_WORK=$work

headers=()
for header in "$root"/include/rmm_next/*.hpp; do
  name=$(basename "$header" .hpp)
  printf '#include <rmm_next/%s.hpp>\n' "$name" >"$work/$name.cpp"
  headers+=("$work/$name.cpp")
done
# Every public header in one translation unit: the sanity probe's, and what nvcc compiles.
cat "${headers[@]}" >"$work/all_headers.cpp"

# ---- Sanity: each configuration sees the CCCL, CUDA and nvcc it claims, and nothing else -----------
# The versions from the macros of a small probe; the headers read from one that includes every
# public header, so that every header any of them includes is checked.
printf '#include <cuda/std/version>\n#include <cuda_runtime_api.h>\n' >"$work/versions.cpp"
declare -A version_of nvcc_of
macro() { awk -v name="$1" '$1 == "#define" && $2 == name {print $3; exit}' "$work/macros"; }
for index in "${selected[@]}"; do
  for compiler in "${compilers[@]}"; do
    configure "$index" "$compiler"
    compile preprocess "$work/versions.cpp" - >"$work/macros" 2>"$work/probe.log" || true
    v=$(macro CCCL_VERSION)
    v=${v:-0}
    version_of[$label]="$((v / 1000000)).$((v / 1000 % 1000)).$((v % 1000))"
    if [[ ${version_of[$label]%.*} != "$cccl" ]]; then
      echo "FAIL  $label: $compiler sees CCCL ${version_of[$label]}, expected $cccl"
      sed -n '1,5p' "$work/probe.log"
      failed=1
    fi
    v=$(macro CUDART_VERSION)
    v=${v:-0}
    if [[ "$((v / 1000)).$((v % 1000 / 10))" != "$version" ]]; then
      echo "FAIL  $label: $compiler sees CUDART_VERSION $v, expected CUDA $version"
      failed=1
    fi
    if [[ $compiler == nvcc ]]; then
      nvcc_of[$label]="$(macro __CUDACC_VER_MAJOR__).$(macro __CUDACC_VER_MINOR__)"
      want=$version
      [[ $kind == wheels ]] || want=$("$cuda/bin/nvcc" --version | sed -n 's/.*release \([0-9.]*\),.*/\1/p')
      if [[ ${nvcc_of[$label]} != "$want" ]]; then
        echo "FAIL  $label: the compiler is nvcc ${nvcc_of[$label]}, expected $want"
        failed=1
      fi
    fi
    # Every header read (realpath'd) is the line's, the compiler's own, or an allowed one that
    # the line has no copy of.
    compile depend "$work/all_headers.cpp" - 2>"$work/probe.log" | xargs -r realpath -e >"$work/deps" ||
      { echo "FAIL  $label: $compiler -M on every public header failed"; sed -n '1,5p' "$work/probe.log"; failed=1; }
    own_real=()
    for inc in "${own[@]}"; do own_real+=("$(realpath "$inc")/"); done
    foreign=()
    while IFS= read -r dep; do
      ok=0
      for prefix in "${own_real[@]}" "$root/" "$(realpath "$work")/"; do
        [[ $dep == "$prefix"* ]] && { ok=2; break; }
      done
      if ((ok == 0)); then
        for prefix in "${allowed[@]}"; do
          [[ $dep == "$prefix"* ]] && { ok=1; break; }
        done
        # Taken from elsewhere though the line has its own copy (as the toolkit's CCCL would be).
        rel=${dep#*/include/}
        if [[ $ok == 1 && $rel != "$dep" ]]; then
          for inc in "${own[@]}"; do
            [[ -e $inc/$rel || -e $inc/${rel#cccl/} ]] && ok=0
          done
        fi
      fi
      ((ok)) || foreign+=("$dep")
    done <"$work/deps"
    if ((${#foreign[@]})); then
      echo "FAIL  $label: $compiler reads ${#foreign[@]} header(s) not of this line:"
      printf '        %s\n' "${foreign[@]:0:10}"
      failed=1
    fi
  done
done

# ---- The matrix, $jobs compilations at a time ------------------------------------------------------
# A literal 0 for the stream must not compile (tests/compile_fail/literal_zero_stream.cpp; its
# CMake tests cover every type and call with this toolkit's CCCL): allocate(0, 256) on a resource
# and on a stream-ordered ref, deallocate(0, p, 256) on an adaptor.
literal0=(literal0:1:1 literal0:5:3 literal0:6:1)
# The slowest first over all lines (the test programs, nvcc before g++), so that the queues end
# together.
{
  for source in "${tests[@]}"; do
    for compiler in nvcc g++; do
      for index in "${selected[@]}"; do echo "$index $compiler $source"; done
    done
  done
  for compiler in nvcc g++; do
    units=("${headers[@]}")
    [[ $compiler == nvcc ]] && units=("$work/all_headers.cpp")
    for source in "$root/tests/compat/instantiate.cpp" "${literal0[@]}" "${units[@]}"; do
      for index in "${selected[@]}"; do echo "$index $compiler $source"; done
    done
  done
} | (cd "$root" && xargs -P "$jobs" -L 1 "$0" --job)

gxx_version="g++ $(g++ -dumpfullversion)"
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
for index in "${selected[@]}"; do
  for compiler in "${compilers[@]}"; do
    configure "$index" "$compiler"
    out=$work/$label
    if [[ $compiler == nvcc ]]; then  # every header in one unit: all pass or none
      shown="nvcc ${nvcc_of[$label]}"
      [[ -e $out/all_headers.cpp.pass ]] && header_count=${#headers[@]} || header_count=0
      header_count+="/${#headers[@]}"
    else
      shown=$gxx_version
      header_count=$(summary "$out" "${headers[@]}")
    fi
    cases=$(cat "$out"/*.log 2>/dev/null | awk '/^\[  PASSED  \] [0-9]+ test/{n += $4} END{print n+0}')
    line=$(printf 'CCCL %-6s CUDA %-4s %-10s headers %s  instantiate %s  tests %s (%s cases)  literal 0 refused %s' \
      "${version_of[$label]}" "$version" "$shown" "$header_count" \
      "$(summary "$out" instantiate.cpp)" "$(summary "$out" "${tests[@]}")" "$cases" \
      "$(summary "$out" "${literal0[@]}")")
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
