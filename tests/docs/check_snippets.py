#!/usr/bin/env python3
# SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
# SPDX-License-Identifier: Apache-2.0
"""Checks that every C++ and Python code block in README.md and docs/ is quoted verbatim from an
example, and that the examples name nothing in rmm_next::detail (users never need to).

A C++ or Python block must follow a line `<!-- snippet: <path>#<name> -->`; the block's text must
equal the lines between `// [<name>]` and `// [<name> end]` of that file (`# [<name>]` and
`# [<name> end]` in Python), common indentation removed. With --fix, blocks that differ are
rewritten from their source instead.
"""
import pathlib
import re
import sys
import textwrap

root = pathlib.Path(sys.argv[1])
fix = "--fix" in sys.argv[2:]
marker = re.compile(r"<!-- snippet: (\S+)#(\S+) -->")
cxx_fence = re.compile(r"```(c|cc|cpp|c\+\+|cxx|cu|cuda|h|hpp)\s*")
python_fence = re.compile(r"```(python|py)\s*")
failures = []
checked = 0


def region(path, name):
    lines = (root / path).read_text().splitlines()
    comment = "#" if path.endswith(".py") else "//"
    try:
        start = next(i for i, l in enumerate(lines) if l.strip() == f"{comment} [{name}]")
        end = next(i for i, l in enumerate(lines) if l.strip() == f"{comment} [{name} end]")
    except StopIteration:
        return None
    return textwrap.dedent("\n".join(lines[start + 1 : end])).strip("\n")


for doc in [root / "README.md", *sorted((root / "docs").glob("*.md"))]:
    lines = doc.read_text().splitlines()
    fixed = False
    i = 0
    while i < len(lines):
        if cxx_fence.fullmatch(lines[i]) or python_fence.fullmatch(lines[i]):
            block_start = i
            j = i + 1
            while lines[j] != "```":
                j += 1
            block = "\n".join(lines[i + 1 : j])
            m = marker.fullmatch(lines[i - 1].strip()) if i > 0 else None
            where = f"{doc.relative_to(root)}:{block_start + 1}"
            if not m:
                failures.append(f"{where}: code block without a snippet marker")
            else:
                expected = region(m.group(1), m.group(2))
                if expected is None:
                    failures.append(f"{where}: no region {m.group(2)} in {m.group(1)}")
                elif expected != block and fix:
                    lines[i + 1 : j] = expected.splitlines()
                    j = i + 1 + len(expected.splitlines())
                    fixed = True
                elif expected != block:
                    failures.append(f"{where}: differs from {m.group(1)}#{m.group(2)}")
                checked += 1
            i = j
        i += 1
    if fixed:
        doc.write_text("\n".join(lines) + "\n")
        print(f"rewrote {doc.relative_to(root)}")

detail_name = re.compile(r"\brmm_next::detail::")
for example in sorted((root / "examples").rglob("*")):
    if example.suffix in (".cpp", ".cu", ".hpp", ".cuh"):
        for number, line in enumerate(example.read_text().splitlines(), 1):
            if detail_name.search(line):
                where = f"{example.relative_to(root)}:{number}"
                failures.append(f"{where}: names rmm_next::detail, which users cannot rely on")

for f in failures:
    print("FAIL", f)
print(f"{checked} snippets checked, {len(failures)} failures")
sys.exit(1 if failures or checked == 0 else 0)
