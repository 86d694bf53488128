#!/usr/bin/env bash
# SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
# SPDX-License-Identifier: Apache-2.0
#
# run_all.sh [--summary FILE] [--no-build] [memcheck] [initcheck] [synccheck]
#
# Builds the gpu-sanitize preset (CMake 3.29 or newer) and runs its test presets
# gpu-sanitize-<tool> for the tools named (default: all three), each test under compute-sanitizer
# (launcher.sh). Then writes a summary: per tool the tests run, passed, failed and skipped, the
# errors compute-sanitizer reported and the minutes taken; the runs that reported errors; the
# cases exclusions.txt relaxes. The summary goes to FILE, else to $RMM_NEXT_SANITIZE_SUMMARY, else
# to build/gpu-sanitize/sanitize/summary.txt, and to standard output. Logs of each tool lie beside
# it. Exits 1 if a test failed.
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root" || exit 1

summary=${RMM_NEXT_SANITIZE_SUMMARY:-}
build=1
tools=()
while (($#)); do
  case $1 in
    --summary) summary=$2; shift 2 ;;
    --summary=*) summary=${1#--summary=}; shift ;;
    --no-build) build=0; shift ;;
    memcheck | initcheck | synccheck) tools+=("$1"); shift ;;
    *)
      echo "usage: $0 [--summary FILE] [--no-build] [memcheck] [initcheck] [synccheck]" >&2
      exit 2
      ;;
  esac
done
((${#tools[@]})) || tools=(memcheck initcheck synccheck)

die() {
  echo "ERROR: $*" >&2
  exit 1
}

version=$(cmake --version | awk 'NR==1{print $3}')
[[ $(printf '3.29\n%s\n' "$version" | sort -V | head -1) == 3.29 ]] ||
  die "the gpu-sanitize preset needs CMake 3.29 or newer (CMAKE_TEST_LAUNCHER); found $version"

sanitizer=${RMM_NEXT_COMPUTE_SANITIZER:-$(command -v compute-sanitizer || true)}
[[ -n $sanitizer ]] || sanitizer=${CUDA_HOME:-/usr/local/cuda}/bin/compute-sanitizer
[[ -x $sanitizer ]] || die "compute-sanitizer not found (set RMM_NEXT_COMPUTE_SANITIZER or PATH)"
export RMM_NEXT_COMPUTE_SANITIZER=$sanitizer

if ((build)); then
  cmake --preset gpu-sanitize || die "cmake --preset gpu-sanitize failed"
  cmake --build --preset gpu-sanitize || die "cmake --build --preset gpu-sanitize failed"
fi

logs=$root/build/gpu-sanitize/sanitize
mkdir -p "$logs"
summary=${summary:-$logs/summary.txt}
status=0
for tool in "${tools[@]}"; do
  rm -f "$logs/$tool.runs" "$logs/$tool.xml"
  start=$(date +%s)
  RMM_NEXT_SANITIZER_LOG=$logs/$tool.runs ctest --preset "gpu-sanitize-$tool" \
    --output-junit "$logs/$tool.xml" 2>&1 | tee "$logs/$tool.log"
  ((PIPESTATUS[0] == 0)) || status=1
  echo $(($(date +%s) - start)) >"$logs/$tool.seconds"
done

exclusions=$root/tests/sanitize/exclusions.txt
python3 - "$logs" "$summary" "$sanitizer" "$exclusions" "${tools[@]}" <<'EOF'
import pathlib
import subprocess
import sys
import xml.etree.ElementTree as ET

logs, summary, sanitizer, exclusions, *tools = sys.argv[1:]
logs = pathlib.Path(logs)
version = subprocess.run([sanitizer, "--version"], capture_output=True, text=True).stdout
version = (version.strip().splitlines() or ["unknown version"])[-1]
lines = [f"rmm-next GPU tests under compute-sanitizer ({version})", ""]
row = "{:<10} {:>5} {:>6} {:>6} {:>7} {:>6} {:>7}"
lines.append(row.format("tool", "tests", "passed", "failed", "skipped", "errors", "minutes"))
reported, failed = [], []
for tool in tools:
    tests = passed = skipped = 0
    xml = logs / f"{tool}.xml"
    if xml.exists():
        for case in ET.parse(xml).getroot().iter("testcase"):
            tests += 1
            if case.find("failure") is not None or case.get("status") == "fail":
                failed.append(f"{tool}: {case.get('name')}")
            elif case.find("skipped") is not None or case.get("status") == "notrun":
                skipped += 1
            else:
                passed += 1
    errors, unknown = 0, 0
    runs = logs / f"{tool}.runs"
    for record in runs.read_text().splitlines() if runs.exists() else []:
        _, program, cases, code, count = record.split("\t")
        if count.isdigit():
            errors += int(count)
            if int(count):
                reported.append(f"{tool}: {program} [{cases}]: {count} errors")
        else:
            unknown += 1
            reported.append(f"{tool}: {program} [{cases}]: no error summary (exit status {code})")
    seconds = logs / f"{tool}.seconds"
    minutes = int(seconds.read_text()) / 60 if seconds.exists() else 0
    nfailed = sum(1 for f in failed if f.startswith(tool + ":"))
    shown = f"{errors}{'+?' if unknown else ''}"
    lines.append(row.format(tool, tests, passed, nfailed, skipped, shown, f"{minutes:.1f}"))
lines += ["", "Failed tests:"] + [f"  {f}" for f in failed or ["none"]]
lines += ["", "Runs with errors reported:"] + [f"  {r}" for r in reported or ["none"]]
relaxed = [l.split(None, 3) for l in pathlib.Path(exclusions).read_text().splitlines()
           if l.strip() and not l.startswith("#")]
lines += ["", f"Relaxed by tests/sanitize/exclusions.txt ({len(relaxed)} entries):"]
lines += [f"  {e[0]} {e[1]}: {e[2]}" for e in relaxed]
text = "\n".join(lines) + "\n"
pathlib.Path(summary).parent.mkdir(parents=True, exist_ok=True)
pathlib.Path(summary).write_text(text)
print("\n" + text + f"(written to {summary})")
EOF
exit "$status"
