#!/usr/bin/env python3
# SPDX-FileCopyrightText: Copyright (c) 2026, rmm-next contributors.
# SPDX-License-Identifier: Apache-2.0
"""Checks that docs/design.md's layout tables give every file of include/ and src/ one row.

The "## Layout" section of docs/design.md has one subsection per folder, headed by the folder in
backticks (### `include/rmm_next/detail/`), with a table of two columns: the file's name in that
folder, in backticks, and what it owns. Every file of include/ and src/ (as git lists them,
untracked files not ignored included; without git, every file outside build folders) must have
exactly one row, with something in its second column; no row, and no heading, may name a file or
folder that does not exist. Each failure says which row to add or remove, and where.
"""
import pathlib
import re
import subprocess
import sys

root = pathlib.Path(sys.argv[1]).resolve()
design = root / "docs" / "design.md"
scanned = ("include", "src")
placeholder = "<what it owns>"

fence = re.compile(r"^\s*(```|~~~)")
section = re.compile(r"^##\s+(.*?)\s*$")
folder_heading = re.compile(r"^###\s+`([^`]+)/?`\s*$")
other_heading = re.compile(r"^#{1,6}\s")
table_row = re.compile(r"^\s*\|(.*)\|\s*$")
separator_cell = re.compile(r"^\s*:?-+:?\s*$")
file_cell = re.compile(r"^\s*`([^`]+)`\s*$")


def tree_files():
    """Paths of the files under include/ and src/, relative to the root, as POSIX strings."""
    try:
        listed = subprocess.run(
            ["git", "-C", str(root), "ls-files", "--cached", "--others", "--exclude-standard",
             "--", *scanned],
            check=True, capture_output=True, text=True).stdout.splitlines()
        # The index still lists a file deleted from the work tree until the deletion is staged.
        return sorted({p for p in listed if (root / p).is_file()})
    except (OSError, subprocess.CalledProcessError):
        found = set()
        for top in scanned:
            for path in (root / top).rglob("*"):
                parts = path.relative_to(root).parts
                if any(p.startswith(".") or p.startswith("build") for p in parts):
                    continue
                if path.is_file():
                    found.add(path.relative_to(root).as_posix())
        return sorted(found)


def layout_rows(failures):
    """{folder: {name: [line numbers]}} of the layout tables, and each folder's heading line."""
    rows, heading_lines = {}, {}
    in_layout = in_fence = False
    folder = None
    header_seen = False
    for number, line in enumerate(design.read_text().splitlines(), 1):
        if fence.match(line):
            in_fence = not in_fence
            continue
        if in_fence:
            continue
        if m := section.match(line):
            in_layout = m.group(1) == "Layout"
            folder = None
            continue
        if not in_layout:
            continue
        if m := folder_heading.match(line):
            folder = m.group(1).rstrip("/")
            heading_lines[folder] = number
            rows.setdefault(folder, {})
            header_seen = False
            continue
        if other_heading.match(line):
            folder = None
            continue
        if folder is None:
            continue
        m = table_row.match(line)
        if not m:
            header_seen = False  # a table ends at the first line that is not a row
            continue
        cells = m.group(1).split("|")
        if not header_seen:
            header_seen = True  # the column names
            continue
        if all(separator_cell.match(c) for c in cells):
            continue
        where = f"docs/design.md:{number}"
        if len(cells) != 2:
            failures.append(f"{where}: a row of {len(cells)} columns under '### `{folder}/`'; "
                            f"a layout row is | `file` | what it owns | (no other columns)")
            continue
        name_match = file_cell.match(cells[0])
        if not name_match:
            failures.append(f"{where}: the first column is not a file name in backticks: "
                            f"{cells[0].strip()}")
            continue
        owns = cells[1].strip()
        if not owns or owns == placeholder:
            failures.append(f"{where}: the row of {folder}/{name_match.group(1)} does not say "
                            f"what the file owns")
        rows[folder].setdefault(name_match.group(1), []).append(number)
    return rows, heading_lines


failures = []
files = tree_files()
rows, heading_lines = layout_rows(failures)
if not heading_lines:
    failures.append("docs/design.md: no '## Layout' section with '### `<folder>/`' tables")

for folder, line in sorted(heading_lines.items()):
    if not (root / folder).is_dir():
        failures.append(f"docs/design.md:{line}: heading '### `{folder}/`' names no folder of the "
                        f"tree; remove it and its table")

missing_by_folder = {}
for path in files:
    folder, _, name = path.rpartition("/")
    if name not in rows.get(folder, {}):
        missing_by_folder.setdefault(folder, []).append(name)
for folder, names in sorted(missing_by_folder.items()):
    for name in names:
        if folder in heading_lines:
            failures.append(f"{folder}/{name} has no row: add `| `{name}` | {placeholder} |` to "
                            f"the table under '### `{folder}/`' in docs/design.md")
        else:
            failures.append(f"{folder}/{name} has no row, and docs/design.md's Layout has no "
                            f"'### `{folder}/`' table: add that heading and a table "
                            f"'| file | owns |' with the row `| `{name}` | {placeholder} |`")

present = set(files)
for folder, names in sorted(rows.items()):
    for name, lines in sorted(names.items()):
        where = f"docs/design.md:{lines[0]}"
        if f"{folder}/{name}" not in present:
            failures.append(f"{where}: the row of {folder}/{name} names no file of the tree; "
                            f"remove it (or rename it to the file that took its place)")
        if len(lines) > 1:
            failures.append(f"{where}: {folder}/{name} has {len(lines)} rows (lines "
                            f"{', '.join(map(str, lines))}); keep one")

for f in failures:
    print("FAIL", f)
row_count = sum(len(names) for names in rows.values())
print(f"{len(files)} files of {' and '.join(scanned)}, {row_count} layout rows, "
      f"{len(failures)} failures")
sys.exit(1 if failures or not files else 0)
