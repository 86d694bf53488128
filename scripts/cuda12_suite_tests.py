#!/usr/bin/env python3
# SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
# SPDX-License-Identifier: Apache-2.0
"""The tests of a build tree that scripts/build_cuda12_suite.sh carries to a GPU machine.

  cuda12_suite_tests.py select BUILD_DIR
      Prints the CMake targets that build the programs of the carried tests: label cpu or gpu,
      not build (they need the build tree) nor python. CTest names a test's program only once it
      is built: the programs are read from the CTestTestfile.cmake files.
  cuda12_suite_tests.py collect BUILD_DIR SOURCE_DIR OUT_DIR
      Copies each carried test's programs (and scripts) into OUT_DIR/bin, the libraries its
      environment names into OUT_DIR/lib, and writes OUT_DIR/tests.list for run_tests.sh: one
      line per test, `suite_test NAME LABEL FAIL_REGEX PASS_REGEX [VAR=VALUE...] -- COMMAND...`,
      shell words in which "$SUITE" stands for OUT_DIR wherever it is carried.
"""

import json
import os
import re
import shlex
import shutil
import subprocess
import sys


def carried_tests(build):
    listing = subprocess.run(["ctest", "--show-only=json-v1"], cwd=build, capture_output=True,
                             text=True, check=True).stdout
    for test in json.loads(listing)["tests"]:
        props = {p["name"]: p["value"] for p in test.get("properties", [])}
        labels = set(props.get("LABELS", []))
        if {"cpu", "gpu"} & labels and not {"build", "python"} & labels:
            yield test, props, "gpu" if "gpu" in labels else "cpu"


def declared_programs(build):
    """Test name -> the program its add_test names (CTestTestfile.cmake), built or not."""
    programs = {}
    for folder, _, files in os.walk(build):
        if "CTestTestfile.cmake" in files:
            with open(os.path.join(folder, "CTestTestfile.cmake")) as testfile:
                for match in re.finditer(r'^add_test\(\[=\[(.+?)\]=\] "([^"]+)"', testfile.read(),
                                         re.MULTILINE):
                    programs[match.group(1)] = match.group(2)
    return programs


def select(build):
    help_text = subprocess.run(["cmake", "--build", build, "--target", "help"],
                               capture_output=True, text=True, check=True).stdout
    known = {line.split(":")[0].strip(". ") for line in help_text.splitlines()}
    programs = declared_programs(build)
    wanted = set()
    for test, _, _ in carried_tests(build):
        program = programs.get(test["name"], "")
        if program.startswith(build + "/"):
            wanted.add(os.path.basename(program))
        for word in test.get("command", [])[1:]:
            if word.startswith(build + "/"):
                wanted.add(os.path.basename(word))
    unknown = sorted(wanted - known)
    if unknown:
        sys.exit("cuda12_suite_tests.py: no target builds " + " ".join(unknown))
    print(" ".join(sorted(wanted)))


def collect(build, source, out):
    def carry(path):
        folder = "lib" if ".so" in os.path.basename(path) else "bin"
        dest = os.path.join(out, folder, os.path.basename(path))
        if not os.path.exists(dest):
            shutil.copy2(path, dest)
        return "$SUITE/" + folder + "/" + os.path.basename(path)

    def rewrite(word):
        for tree in (build, source):
            head, sep, tail = word.partition(tree + "/")
            if sep and os.path.isfile(os.path.join(tree, tail)):
                return head + carry(os.path.join(tree, tail))
        return word

    def quote(word):
        if not word:
            return "''"
        return '"$SUITE"'.join(shlex.quote(p) if p else "" for p in word.split("$SUITE"))

    lines = []
    for test, props, label in carried_tests(build):
        if "command" not in test:
            sys.exit(f"cuda12_suite_tests.py: test {test['name']} has no program after the build")
        words = [test["name"], label, "|".join(props.get("FAIL_REGULAR_EXPRESSION", [])),
                 "|".join(props.get("PASS_REGULAR_EXPRESSION", []))]
        words = [quote(w) for w in words]
        words += [quote(rewrite(e)) for e in props.get("ENVIRONMENT", [])] + ["--"]
        words += [quote(rewrite(a)) for a in test["command"]]
        lines.append("suite_test " + " ".join(words))
    with open(os.path.join(out, "tests.list"), "w") as listing:
        listing.write("# Sourced by run_tests.sh: suite_test NAME LABEL FAIL_REGEX PASS_REGEX "
                      "[VAR=VALUE...] -- COMMAND...\n")
        listing.write("\n".join(lines) + "\n")
    print(f"{len(lines)} tests")


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "select":
        select(sys.argv[2])
    elif len(sys.argv) == 5 and sys.argv[1] == "collect":
        collect(*sys.argv[2:])
    else:
        sys.exit(__doc__)
