#!/usr/bin/env bash
# Puts the headers of a snapshot of CCCL's main branch (CCCL 3.6.0, not yet in any CUDA toolkit or
# nvidia-cuda-cccl wheel) in DIR/include, for the compile matrix (.ci/compile_matrix.sh runs it).
#
#   .ci/fetch_cccl_main.sh DIR
#
# Only package registries are reachable from CI, so the snapshot comes from PyPI: the cuda-cccl
# Python package is released from CCCL's main branch and carries that branch's C++ headers
# (cuda/cccl/headers/include: cuda/, cub/, thrust/). Pinned, with the wheel's SHA-256, so that
# every run compiles against the same headers; a newer snapshot is a new pin here. Nothing of it is
# kept in the repository. DIR/.installed records the pin: a DIR made from it is not fetched again.
set -euo pipefail

# The pin: cuda-cccl 1.2.1 (2026-09-28), CCCL_VERSION 3006000. Its wheels differ only in their
# Python extension modules; the CPython 3.11 x86_64 one is fetched whatever python3 runs this.
spec=cuda-cccl==1.2.1
wheel=cuda_cccl-1.2.1-cp311-cp311-manylinux_2_26_x86_64.whl
sha256=c1b8293c1b9dedbc0b3877c1fbb8265db293c7945371791a3dc69ca99db4a541
want_version=3006000

[[ $# -eq 1 ]] || { sed -n '5p' "$0" >&2; exit 64; }
dir=$1
stamp="$spec $sha256"
[[ -e $dir/.installed && $(<"$dir/.installed") == "$stamp" ]] && exit 0

echo "+ CCCL main: $spec from PyPI, its headers into $dir/include"
rm -rf "$dir"
mkdir -p "$dir"
download=$dir/download
python3 -m pip download --quiet --disable-pip-version-check --no-deps --only-binary=:all: \
  --python-version 3.11 --implementation cp --abi cp311 --platform manylinux_2_26_x86_64 \
  --dest "$download" "$spec"
[[ -e $download/$wheel ]] || { echo "fetch_cccl_main.sh: pip did not bring $wheel" >&2; exit 1; }
got=$(sha256sum "$download/$wheel" | cut -d' ' -f1)
[[ $got == "$sha256" ]] || {
  echo "fetch_cccl_main.sh: $wheel has SHA-256 $got, not the pinned $sha256" >&2
  exit 1
}
python3 - "$download/$wheel" "$dir/include" <<'EOF'
import pathlib, sys, zipfile
prefix = "cuda/cccl/headers/include/"
out = pathlib.Path(sys.argv[2])
with zipfile.ZipFile(sys.argv[1]) as wheel:
    members = [m for m in wheel.infolist() if m.filename.startswith(prefix) and not m.is_dir()]
    if not members:
        sys.exit(f"fetch_cccl_main.sh: no {prefix} in {sys.argv[1]}")
    for member in members:
        target = out / member.filename[len(prefix):]
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(wheel.read(member))
EOF
rm -rf "$download"
version=$(sed -n 's/^#define CCCL_VERSION \([0-9]*\)$/\1/p' "$dir/include/cuda/std/__cccl/version.h")
[[ $version == "$want_version" ]] || {
  echo "fetch_cccl_main.sh: the headers say CCCL_VERSION ${version:-(none)}, not $want_version" >&2
  exit 1
}
echo "$stamp" >"$dir/.installed"
