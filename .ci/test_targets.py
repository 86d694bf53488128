#!/usr/bin/env python3
"""Prints the build targets that a test preset's tests run, one a line.

    .ci/test_targets.py BUILD_DIR TEST_PRESET

Reads the tests the preset selects (ctest --show-only=json-v1), the program each runs (the
CTestTestfile.cmake files: before the build CTest names no command) and the paths in their
environment, and maps each file of the build tree they name to the target that makes it (the
build tree's `help` target lists the targets). Exits 1, naming it, for a file that no target
makes: the caller then builds everything.
"""
import json
import pathlib
import re
import subprocess
import sys

build, preset = pathlib.Path(sys.argv[1]).resolve(), sys.argv[2]
selected = json.loads(
    subprocess.run(["ctest", "--preset", preset, "--show-only=json-v1"], check=True,
                   capture_output=True, text=True).stdout)["tests"]

# add_test([=[<name>]=] "<command>" ...) in every CTestTestfile.cmake of the tree.
commands = {}
for testfile in build.rglob("CTestTestfile.cmake"):
    for name, command in re.findall(r'^add_test\(\[=\[(.*?)\]=\] "([^"]*)"', testfile.read_text(),
                                    re.M):
        commands[name] = command

paths = []
for test in selected:
    paths.append(commands.get(test["name"], ""))
    for prop in test.get("properties", []):
        if prop["name"] == "ENVIRONMENT":
            paths += [value.split("=", 1)[1] for value in prop["value"] if "=" in value]
made = [pathlib.Path(p) for p in paths if p.startswith(str(build) + "/")]

help_text = subprocess.run(["cmake", "--build", str(build), "--target", "help"], check=True,
                           capture_output=True, text=True).stdout
targets = set(re.findall(r"^\.\.\. (\S+)", help_text, re.M))
wanted = []
for path in made:
    stem = re.sub(r"\.(so|a)(\.[0-9]+)*$", "", path.name)
    for name in (stem, stem.removeprefix("lib")):
        if name in targets:
            wanted.append(name)
            break
    else:
        sys.exit(f"test_targets.py: no target of {build} makes {path}")
print("\n".join(sorted(set(wanted))))
